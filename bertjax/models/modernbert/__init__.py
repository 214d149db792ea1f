"""ModernBERT (Warner et al., 2024): config, sizes and modules (model.py), task classes
(tasks.py), HF table (hf.py)."""
from bertjax.models.modernbert.model import (ModernBertConfig, modernbert_tiny, modernbert_base,
                                             modernbert_large, SIZES,
                                             ModernBertEmbeddings, ModernBertLayer,
                                             ModernBertModel, prediction_transform, MlmHead,
                                             ModernBertForMaskedLM)
