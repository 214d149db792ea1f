"""BART (Lewis et al., 2020): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.bart.model import (POSITION_OFFSET, BartConfig, bart_base, bart_large, SIZES,
                                       BartLayer, BartStack, BartModel,
                                       BartForConditionalGeneration)
