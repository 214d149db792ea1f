"""Longformer (Beltagy et al., 2020): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.longformer.model import (LongformerConfig, longformer_base, longformer_large,
                                             SIZES, LongformerModel, LongformerForMaskedLM)
