"""DistilBERT (Sanh et al., 2019): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.distilbert.model import (DistilBertConfig, distilbert_base, student_config,
                                             DistilBertModel, DistilBertForMaskedLM,
                                             every_other_layer, student_params_from_teacher)
