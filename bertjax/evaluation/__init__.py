"""Task readers and the leaderboards' metrics: GLUE, SQuAD, CoNLL-2003, SWAG and STS.

One module per benchmark reads its official files (bad rows reported through
`readers.SkipLog`) and scores predictions as its leaderboard does; `metrics` holds the
shared classification / regression metrics. Nothing here tokenizes or runs a model:
fine-tuning (bertjax.finetune) and the text-to-text recipes (bertjax.data) build on it.
"""
