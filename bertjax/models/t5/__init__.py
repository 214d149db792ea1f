"""T5 v1.0 / v1.1 (Raffel et al., 2020): config, sizes and modules (model.py), HF table (hf.py), and
the layers only it uses (relative.py)."""
from bertjax.models.t5.model import (T5Config, t5_small, t5_base, t5_large, t5_v1_1_small,
                                     t5_v1_1_base, t5_v1_1_large, t5_v1_1_xl, t5_v1_1_xxl, SIZES,
                                     T5EncoderLayer, T5DecoderLayer, T5Stack, T5Model,
                                     T5ForConditionalGeneration)
