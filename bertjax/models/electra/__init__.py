"""ELECTRA (Clark et al., 2020): config, sizes and modules (model.py), the Table 5 MLM
ablations (replaced_mlm.py), HF table (hf.py)."""
from bertjax.models.electra.model import (ElectraConfig, electra_small, electra_base,
                                          electra_large, SIZES, text_embeddings, ElectraModel,
                                          DiscriminatorHead, generator_head,
                                          ElectraForPreTraining, ElectraForMaskedLM,
                                          sample_replacements, ElectraGeneratorDiscriminator,
                                          discriminator_params, generator_params,
                                          discriminator_from_generator)
from bertjax.models.electra.replaced_mlm import (ElectraReplacedMLM, ElectraAllTokensMLM,
                                                 mlm_params)
