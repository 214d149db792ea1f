"""RoBERTa (Liu et al., 2019): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.roberta.model import (RobertaConfig, roberta_base, roberta_large, SIZES,
                                          position_ids_from_input_ids, offset_position_ids,
                                          RobertaModel, RobertaForMaskedLM)
