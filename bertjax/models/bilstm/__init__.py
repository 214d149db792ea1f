"""The BiLSTM student of Tang et al. (2019): config, sizes and modules (model.py), and its
LSTM layer (lstm.py). No Hugging Face counterpart: it is trained here, by distillation
(bertjax.distill.student)."""
from bertjax.models.bilstm.lstm import LSTM
from bertjax.models.bilstm.model import (BiLSTMClassifier, BiLSTMConfig, BiLSTMEncoder, POOLINGS,
                                         tang_et_al)
