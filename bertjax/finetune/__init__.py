"""Fine-tuning and evaluation on downstream tasks (GLUE, SQuAD, CoNLL-2003 NER, SWAG).

One module per task family: a reader of the official files, a feature converter
(WordPiece examples -> padded arrays), a head that wraps any bertjax encoder, and the
leaderboard's metric. `python -m bertjax.finetune.run --gin_file=finetune/<task>.gin
--checkpoint=DIR --output_dir=OUT` runs one: dev evaluation after every epoch, the best
epoch kept (`selection`), predictions in the benchmark's submission format (`submission`).
"""
