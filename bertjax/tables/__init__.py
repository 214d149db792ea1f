"""The papers' comparisons as tables: arms pretrained under equal compute, then fine-tuned
on the same tasks with several seeds (`python -m bertjax.tables TABLE --scale=cpu`).

  spec.py     a table as data: arms, tasks, scales
  scales.py   the tiny / cpu / paper sizes the tables share
  corpus.py   the CPU-scale pretraining corpus and its WordPiece vocabulary
  grid.py     the table's cells (one subprocess command each), run once, resumably
  report.py   results.md (mean ± std over seeds, pretraining FLOPs and wall time) + plot
  catalog.py  the tables: bert.py, ...
"""
