"""ELECTRA's joint pretraining model as the two networks transformers ships:
`bertjax.to_hf(export_discriminator(cfg, params), dir)`.

(A run's model itself opens with `bertjax.open_model(model_dir)`, from the run's model
record: bertjax.checkpoints.record.)
"""
from bertjax.checkpoints.model import HFModel
from bertjax.hf import registry
from bertjax.models import electra


def export_discriminator(config: electra.ElectraConfig, params: dict) -> HFModel:
  """The discriminator of an ElectraGeneratorDiscriminator as an ElectraForPreTraining
  HFModel, ready for `bertjax.to_hf` (and for fine-tuning)."""
  return HFModel(registry.family_for("electra"), "ElectraForPreTraining", config,
                 electra.ElectraForPreTraining(config), electra.discriminator_params(params))


def export_generator(config: electra.ElectraConfig, params: dict) -> HFModel:
  """The generator of an ElectraGeneratorDiscriminator as an ElectraForMaskedLM HFModel."""
  gen_config = config.generator_config()
  return HFModel(registry.family_for("electra"), "ElectraForMaskedLM", gen_config,
                 electra.ElectraForMaskedLM(gen_config), electra.generator_params(params))
