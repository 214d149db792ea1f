"""Fine-tuning and evaluation on downstream tasks (GLUE, SQuAD, CoNLL-2003 NER, SWAG).

One module per task family turns the examples that bertjax.evaluation reads into padded
arrays for any encoder, laid out as its own tokenizer lays out inputs (`tokenization`,
`features`), and, for SQuAD and NER, model outputs back into answers and tags; the heads
wrap any bertjax encoder, and bertjax.evaluation scores the predictions with the
leaderboard's metric. `python -m bertjax.finetune.run --gin_file=finetune/<task>.gin
--checkpoint=DIR --output_dir=OUT` runs one: dev evaluation after every epoch, the best
epoch kept (`selection`), predictions in the benchmark's submission format (`submission`).
"""
