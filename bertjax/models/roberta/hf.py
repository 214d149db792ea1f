"""RoBERTa <-> transformers' RobertaModel / RobertaForMaskedLM and the task classes
RobertaFor{SequenceClassification, TokenClassification, QuestionAnswering, MultipleChoice}.

RoBERTa's config.json and encoder tensors are BERT's, so the adapter extends the BERT
one; only the heads' tensor names and the module classes differ.
"""
import dataclasses

from bertjax.hf import tasks
from bertjax.models.bert.hf import BertFamily, lm_transform_rules
from bertjax.hf.mapping import Rule
from bertjax.models import roberta
from bertjax.models.roberta import tasks as roberta_tasks

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": ("classifier.dense", "classifier.out_proj"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": (None, "classifier"),
}

CONFIG_MAP = dataclasses.replace(
    BertFamily.config_map, model="RoBERTa",
    hf_only={**BertFamily.config_map.hf_only, "bos_token_id": 0, "eos_token_id": 2})


def lm_head_rules(hf: str = "lm_head.", ours: str = "lm_head/") -> list[Rule]:
  return lm_transform_rules(f"{hf}dense", f"{hf}layer_norm", f"{hf}bias", ours)


class RobertaFamily(BertFamily):
  name = "roberta"
  model_types = ("roberta",)
  config_class = roberta.RobertaConfig
  config_map = CONFIG_MAP
  architectures = {
      "RobertaModel": ("last_hidden_state", "pooler_output"),
      "RobertaForMaskedLM": ("logits",),
      **tasks.architectures("Roberta", roberta_tasks.KINDS),
  }
  task_encoder_prefix = "roberta."
  task_heads = TASK_HEADS
  pooled_kinds = roberta_tasks.POOLED
  # Buffers, and the decoder tied to the word embeddings and to lm_head.bias.
  ignored_keys = (r".*position_ids", r".*token_type_ids", r"lm_head\.decoder\.(weight|bias)")
  modules = {"RobertaModel": roberta.RobertaModel, "RobertaForMaskedLM": roberta.RobertaForMaskedLM}
  task_models = roberta_tasks

  def model_rules(self, architecture: str, config: roberta.RobertaConfig) -> list[Rule]:
    if architecture == "RobertaModel":
      return self.encoder_rules("", "", config) + self.pooler_rules("", "")
    return self.encoder_rules("roberta.", "roberta/", config) + lm_head_rules()
