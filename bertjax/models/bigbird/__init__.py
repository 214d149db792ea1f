"""BigBird (Zaheer et al., 2020): config, sizes and modules (model.py), HF table (hf.py)."""
from bertjax.models.bigbird.model import (BigBirdConfig, bigbird_roberta_base,
                                          bigbird_roberta_large, SIZES, BigBirdModel,
                                          BigBirdForMaskedLM, BigBirdForPreTraining)
