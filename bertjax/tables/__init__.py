"""The papers' comparisons as tables: arms pretrained under equal compute, then fine-tuned
on the same tasks with several seeds (`python -m bertjax.tables TABLE --scale=cpu`).

  spec.py     a table as data: arms, tasks, scales
  scales.py   the tiny / cpu / paper sizes the tables share
  corpus.py   the CPU-scale pretraining corpus and its WordPiece vocabulary
  grid.py     the table's cells (one subprocess command each) and what each leaves behind
  runner.py   runs them once, resumably, side by side on their own cores
  ledger.py   the committed record of finished cells, restored on a fresh machine
  report.py   results.md (mean ± std over seeds, pretraining FLOPs and wall time) + plot
  catalog.py  the tables: bert.py, ...
"""
