"""BERT (Devlin et al., 2019): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.bert.model import (BertConfig, bert_tiny, bert_mini, bert_small, bert_medium,
                                       bert_base, bert_large, SIZES, BertModel, gather_positions,
                                       MlmHead, BertForPreTraining, BertForMaskedLM, init_params)
