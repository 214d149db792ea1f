"""The model-output contract: what a model's outputs dict may hold, and who reads it.

bertjax.batch is the contract of a model's inputs; this is the one of its outputs. A model
returns a dict named as the transformers class it mirrors names its outputs
(`BertForPreTraining`: `prediction_logits`, `seq_relationship_logits`). An objective reads
an output by its *role*: the masked-LM logits are `prediction_logits` of a pretraining
class with several heads and `logits` of a *ForMaskedLM class, so MaskedLM reads the role
MASKED_LM_LOGITS and finds whichever one the model returned. Objective gin files therefore
never bind an output name per architecture; an objective's `logits_key` stays for a model
outside the contract.
"""
from typing import Any, Mapping, Sequence

OUTPUTS = {
    # Every encoder (bertjax.models.<family>: the base model and each task class).
    "last_hidden_state": "[B, L, H] the last layer's states",
    "pooler_output": "[B, H] the pooled vector (BERT's tanh pooler over [CLS], ...)",
    "hidden_states": "[layers + 1, B, L, H] the embeddings' and every layer's states, when "
                     "asked for (output_hidden_states)",
    # Pretraining heads.
    "prediction_logits": "[B, L or P, V] masked-LM logits of a class with more heads "
                         "(BertForPreTraining, AlbertForPreTraining, SpanBertForPreTraining)",
    "logits": "the one head's logits: tokens (*ForMaskedLM, GPT, T5, BART, XLNet [B, P, V]), "
              "classes (*ForSequenceClassification [B, C], *ForTokenClassification "
              "[B, L, C], *ForMultipleChoice [B, C]), or ELECTRA's Replace-MLM network",
    "seq_relationship_logits": "[B, 2] next-sentence prediction (BertForPreTraining)",
    "sop_logits": "[B, 2] sentence-order prediction (AlbertForPreTraining)",
    "sbo_logits": "[B, L or P, V] SpanBERT's span-boundary logits",
    "generator_logits": "[B, L or P, V] ELECTRA's generator (its masked LM)",
    "discriminator_logits": "[B, L] ELECTRA's replaced-token logits",
    "replaced": "[B, L] 1 where ELECTRA's generator changed the token",
    "corrupted_ids": "[B, L] the ids the generator's samples made (Replace MLM)",
    "copy_logits": "[B, L] Replace MLM's copy-or-predict logit",
    "start_logits": "[B, L] answer-start logits (*ForQuestionAnswering)",
    "end_logits": "[B, L] answer-end logits (*ForQuestionAnswering)",
    "mems": "XLNet's memory for the next segment, one [B, M, H] per layer",
    "forward_logits": "[B, L, V] ELMo's forward LM",
    "backward_logits": "[B, L, V] ELMo's backward LM",
    # A distillation pair (models.common.distillation) adds the teacher's outputs as
    # teacher_<name>; these are the ones bertjax.objectives.distill reads.
    "teacher_logits": "the teacher's `logits`",
    "teacher_last_hidden_state": "the teacher's `last_hidden_state`",
}

# Roles an objective reads, and the names that architectures give them.
MASKED_LM_LOGITS = ("prediction_logits", "logits")  # *ForPreTraining, *ForMaskedLM
SENTENCE_PAIR_LOGITS = ("seq_relationship_logits", "sop_logits")  # NSP (BERT), SOP (ALBERT)


def read(outputs: Mapping[str, Any], names: Sequence[str], reader: str) -> Any:
  """The one output among `names` that the model returned; an error naming what it
  returned when there is none, or more than one (then `reader`'s key must choose)."""
  unknown = [n for n in names if n not in OUTPUTS]
  if unknown:
    raise ValueError(f"{reader}: {unknown} are not model outputs; use names from "
                     f"bertjax.outputs.OUTPUTS (or add the new output there).")
  present = [n for n in names if outputs.get(n) is not None]
  if len(present) == 1:
    return outputs[present[0]]
  returned = sorted(k for k, v in outputs.items() if v is not None)
  if not present:
    raise ValueError(f"{reader} reads the model output {' or '.join(map(repr, names))}; the "
                     f"model returned {returned}. Use a model with that head, or set "
                     f"{reader}.logits_key in gin to the output it should read.")
  raise ValueError(f"{reader}: the model returned {present}, each of which could be its "
                   f"input; set {reader}.logits_key in gin to the one it should read.")
