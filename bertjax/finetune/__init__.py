"""Fine-tuning and evaluation on downstream tasks (GLUE, SQuAD, CoNLL-2003 NER, SWAG).

One module per task family: a reader of the official files, a feature converter
(WordPiece examples -> padded arrays), a head that wraps any bertjax encoder, and the
leaderboard's metric. `python -m bertjax.finetune.run --task=NAME ...` runs one.
"""
