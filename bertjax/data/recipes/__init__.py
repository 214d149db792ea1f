"""Pretraining data recipes: what the trainer names as `train_task`.

  from bertjax.data import recipes
  ds = recipes.get_dataset('roberta_mlm', split='train', sequence_length=512, batch_size=256)

Importing this package registers every recipe (encoder.py, seq2seq.py, xlnet.py,
causal_lm.py, bilm.py); text_to_text.py registers GLUE / SQuAD as T5 writes them, in seqio.
"""
from bertjax.data.recipes import bilm, causal_lm, encoder, seq2seq, xlnet  # noqa: F401 (registers)
from bertjax.data.recipes.registry import (Recipe, default_source, default_vocabulary,
                                           get_dataset, get_task, lookup, register, registered,
                                           unregister)
