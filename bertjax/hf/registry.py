"""model_type (from config.json) -> the family adapter that handles it.

Families are imported lazily: `import bertjax` stays cheap, and a family's own
dependencies load only when a checkpoint of that family is opened. Add one line per family.
"""
import importlib

from bertjax.hf.family import Family

FAMILIES: dict[str, str] = {
    "bert": "bertjax.models.bert.hf:BertFamily",
    "big_bird": "bertjax.models.bigbird.hf:BigBirdFamily",
    "longformer": "bertjax.models.longformer.hf:LongformerFamily",
    "electra": "bertjax.models.electra.hf:ElectraFamily",
    "deberta": "bertjax.models.deberta.hf:DebertaFamily",
    "deberta-v2": "bertjax.models.deberta.hf:DebertaV2Family",
    "roberta": "bertjax.models.roberta.hf:RobertaFamily",
    "albert": "bertjax.models.albert.hf:AlbertFamily",
    "distilbert": "bertjax.models.distilbert.hf:DistilBertFamily",
    "t5": "bertjax.models.t5.hf:T5Family",
    "bart": "bertjax.models.bart.hf:BartFamily",
    "xlnet": "bertjax.models.xlnet.hf:XLNetFamily",
    "gpt2": "bertjax.models.gpt.hf:GPT2Family",
    "openai-gpt": "bertjax.models.gpt.hf:OpenAIGPTFamily",
    "modernbert": "bertjax.models.modernbert.hf:ModernBertFamily",
}


def family_for(model_type: str, source: str = "config.json") -> Family:
  if model_type not in FAMILIES:
    raise ValueError(f"{source}: model_type {model_type!r} is not supported; bertjax handles "
                     f"{sorted(FAMILIES)}.")
  module_name, attr = FAMILIES[model_type].split(":")
  return getattr(importlib.import_module(module_name), attr)()


def family_by_name(name: str) -> Family:
  """The family whose adapter `.name` is `name` (as stored in converted checkpoints)."""
  for model_type in FAMILIES:
    family = family_for(model_type)
    if family.name == name:
      return family
  raise ValueError(f"Unknown model family {name!r}; known: "
                   f"{sorted({family_for(t).name for t in FAMILIES})}.")


def family_for_config(config) -> Family:
  """The family that declares `type(config)` as its `config_class`, else the nearest base
  class (SpanBERT's config extends BERT's); where two families share a class (DeBERTa
  v1 / v2, GPT / GPT-2) the first one above. How a trained module's family is found."""
  families = [family_for(t) for t in FAMILIES]
  for cls in type(config).__mro__:
    for family in families:
      if family.config_class is cls:
        return family
  raise ValueError(f"No model family declares {type(config).__name__} (or a base class of "
                   "it) as its config_class.")
