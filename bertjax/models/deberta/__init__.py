"""DeBERTa v1 / v2-v3 (He et al., 2021): config, sizes and modules (model.py), HF table (hf.py), and
the layers only it uses (disentangled.py, relative.py)."""
from bertjax.models.deberta.model import (DebertaConfig, deberta_v3_xsmall, deberta_v3_small,
                                          deberta_v3_base, deberta_v3_large, deberta_base,
                                          deberta_large, SIZES, attention_mask_2d,
                                          DebertaEmbeddings, default_positions, relative_index,
                                          DebertaEncoder, DebertaModel, EnhancedMaskDecoder,
                                          DebertaForMaskedLM)
