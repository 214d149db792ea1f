"""ALBERT (Lan et al., 2020): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.albert.model import (AlbertConfig, albert_base, albert_large, albert_xlarge,
                                         albert_xxlarge, SIZES, AlbertModel, AlbertForPreTraining,
                                         AlbertForMaskedLM)
