"""GPT (Radford et al., 2018) and GPT-2: config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.gpt.model import (GPTConfig, openai_gpt, gpt2, gpt2_medium, gpt2_large,
                                      gpt2_xl, ltr_base, SIZES, GPTModel, GPTLMHeadModel)
