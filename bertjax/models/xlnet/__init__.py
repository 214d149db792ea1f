"""XLNet (Yang et al., 2019): config, sizes and modules (model.py), HF table (hf.py), and the layers
only it uses (two_stream.py)."""
from bertjax.models.xlnet.model import (XLNetConfig, xlnet_tiny, xlnet_base, xlnet_large, SIZES,
                                        XLNetLayer, attention_masks, next_memory, XLNetModel,
                                        XLNetLMHeadModel)
