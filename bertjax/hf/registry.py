"""model_type (from config.json) -> the family adapter that handles it.

Families are imported lazily: `import bertjax` stays cheap, and a family's own
dependencies load only when a checkpoint of that family is opened. Add one line per family.
"""
import importlib

from bertjax.hf.family import Family

FAMILIES: dict[str, str] = {
    "bert": "bertjax.hf.bert:BertFamily",
    "big_bird": "bertjax.hf.bigbird:BigBirdFamily",
    "longformer": "bertjax.hf.longformer:LongformerFamily",
    "electra": "bertjax.hf.electra:ElectraFamily",
    "deberta": "bertjax.hf.deberta:DebertaFamily",
    "deberta-v2": "bertjax.hf.deberta:DebertaV2Family",
    "roberta": "bertjax.hf.roberta:RobertaFamily",
    "albert": "bertjax.hf.albert:AlbertFamily",
    "distilbert": "bertjax.hf.distilbert:DistilBertFamily",
    "t5": "bertjax.hf.t5:T5Family",
    "bart": "bertjax.hf.bart:BartFamily",
    "xlnet": "bertjax.hf.xlnet:XLNetFamily",
    "gpt2": "bertjax.hf.gpt:GPT2Family",
    "openai-gpt": "bertjax.hf.gpt:OpenAIGPTFamily",
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
