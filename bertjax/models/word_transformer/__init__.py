"""A small Transformer student over word ids (model.py): the BiLSTM student's inputs and
training (bertjax.distill.student --architecture=transformer), a BERT encoder trained from
scratch in place of the LSTM. No Hugging Face counterpart."""
from bertjax.models.word_transformer.model import (WordTransformerClassifier,
                                                   WordTransformerConfig)
