"""The batch-feature contract: what a batch may hold, and who writes and reads it.

A batch is a dict of arrays whose first axis is the batch. The feature converters
(bertjax.data.feature_converters) and the fine-tuning featurizers write these names; the
objectives (bertjax.objectives) and task heads read them. A feature not listed here is not
part of the contract, so a typo fails where `select` / `require` meet it.

Each group below is one role; its features appear together or not at all.
"""
import dataclasses
from typing import Any, Iterable, Mapping


@dataclasses.dataclass(frozen=True)
class Feature:
  dtype: str  # 'int32' or 'float32'
  rank: int   # axes after the batch axis: 0 a scalar per row, 1 per token, 2 a matrix
  doc: str


FEATURES = {
    # Every encoder. Written by EncoderFeatureConverter and the fine-tuning featurizers.
    "input_ids": Feature("int32", 1, "token ids; padding holds the vocabulary's pad id"),
    "attention_mask": Feature("int32", 1, "1 = real token, 0 = padding"),
    "token_type_ids": Feature("int32", 1, "segment A = 0, B = 1 (XLNet pads with 3)"),
    "position_ids": Feature("int32", 1, "position within its example (restarts when packed)"),
    "segment_ids": Feature("int32", 1, "packed example number 1..n, 0 = padding"),
    # Masked LM (BERT, RoBERTa, ALBERT, SpanBERT, ELECTRA's generator, DistilBERT).
    "mlm_targets": Feature("int32", 1, "the original id where a token was selected, else 0"),
    "mlm_weights": Feature("float32", 1, "1.0 at selected tokens"),
    # NSP / SOP.
    "next_sentence_label": Feature("int32", 0, "NSP: 1 = random B; SOP: 1 = swapped"),
    # SpanBERT's span-boundary objective, per token (0 where not selected).
    "sbo_left": Feature("int32", 1, "position of the span's left boundary token"),
    "sbo_right": Feature("int32", 1, "position of the span's right boundary token"),
    "sbo_pos": Feature("int32", 1, "1-based offset of the token inside its span"),
    # Encoder-decoder recipes write these task features; EncDecFeatureConverter turns them
    # into the batch features below.
    "inputs": Feature("int32", 1, "the (noised) source tokens"),
    "targets": Feature("int32", 1, "the tokens to generate"),
    # Encoder-decoders (T5, BART) and decoder-only LMs. Written by EncDecFeatureConverter.
    "decoder_input_ids": Feature("int32", 1, "targets shifted right behind the start token"),
    "decoder_attention_mask": Feature("int32", 1, "1 = real target token"),
    "labels": Feature("int32", 1, "target ids (seq2seq, LM, NER) or one label per row "
                                  "(classification, regression: rank 0)"),
    "label_weights": Feature("float32", 1, "1.0 where a label counts"),
    "encoder_segment_ids": Feature("int32", 1, "packed example number of each input token"),
    "encoder_position_ids": Feature("int32", 1, "position of each input token in its example"),
    "decoder_segment_ids": Feature("int32", 1, "packed example number of each target token"),
    "decoder_position_ids": Feature("int32", 1, "position of each target token in its example"),
    # XLNet's permutation LM. Written by XLNetFeatureConverter.
    "perm_mask": Feature("float32", 2, "[L, L]: 1 = query i may not see token j"),
    "target_mapping": Feature("float32", 2, "[P, L]: one-hot position of each prediction"),
    "target_ids": Feature("int32", 1, "[P] the ids to predict"),
    "target_weights": Feature("float32", 1, "[P] 1.0 for real predictions"),
    "mems": Feature("float32", 3, "[layers, M, H] memory carried from the previous step"),
    # Fine-tuning tasks. Written by bertjax.finetune's featurizers.
    "start_positions": Feature("int32", 0, "SQuAD: answer start token (0 = [CLS]: none)"),
    "end_positions": Feature("int32", 0, "SQuAD: answer end token"),
    "weights": Feature("float32", 0, "1.0 for a real row, 0.0 for a row padding a batch"),
}

ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "segment_ids")
MLM = ("mlm_targets", "mlm_weights")
SENTENCE_PAIR = ("next_sentence_label",)
SPAN_BOUNDARY = ("sbo_left", "sbo_right", "sbo_pos")
SEQ2SEQ_INPUTS = ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask",
                  "encoder_segment_ids", "encoder_position_ids", "decoder_segment_ids",
                  "decoder_position_ids")
TARGETS = ("labels", "label_weights")
LM_INPUTS = ("input_ids", "attention_mask", "position_ids", "segment_ids")
PERMUTATION_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "perm_mask",
                      "target_mapping")
PERMUTATION_TARGETS = ("target_ids", "target_weights")
SPAN_TARGETS = ("start_positions", "end_positions")


def select(batch: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
  """The features of `names` that `batch` holds (model inputs are optional by design)."""
  return {k: batch[k] for k in names if k in batch}


def require(batch: Mapping[str, Any], names: Iterable[str], reader: str) -> dict[str, Any]:
  """The features of `names`, all of them: a missing one fails naming it and the reader."""
  missing = [k for k in names if k not in batch]
  if missing:
    raise ValueError(f"{reader} reads batch features {missing}, which this batch lacks (it has "
                     f"{sorted(batch)}); pair it with a data recipe that writes them "
                     f"(see bertjax.batch).")
  return {k: batch[k] for k in names}


def task_features(names: Iterable[str]) -> dict[str, tuple[str, int]]:
  """{name: (dtype, rank)} of `names`, as a data recipe declares its task features."""
  unknown = [k for k in names if k not in FEATURES]
  if unknown:
    raise ValueError(f"{unknown} are not batch features; add them to bertjax.batch.FEATURES.")
  return {k: (FEATURES[k].dtype, FEATURES[k].rank) for k in names}
