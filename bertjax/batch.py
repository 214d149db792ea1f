"""The batch-feature contract: what a batch may hold, and who writes and reads it.

A batch is a dict of arrays whose first axis is the batch. The feature converters
(bertjax.data.feature_converters), the fine-tuning featurizers (bertjax.finetune) and
SBERT's batcher (bertjax.sbert.data) write these names; the objectives
(bertjax.objectives, bertjax.sbert.losses) read them and pass the model inputs on to the
model. A feature not listed here is not part of the contract, so a typo fails where
`select` / `require` / `check` meet it.

The groups below name the features of one role. Objectives take a model-input group with
`select` (a model input a batch lacks is left to the model's default: no packing, no
token types) and a target group with `require` (a missing target fails, naming it).
"""
import dataclasses
from typing import Any, Iterable, Mapping


@dataclasses.dataclass(frozen=True)
class Feature:
  dtype: str  # 'int32', 'float32' or 'float16'
  rank: int   # axes after the batch axis: 0 a scalar per row, 1 per token, 2 a matrix
  doc: str


FEATURES = {
    # Every encoder. Written by EncoderFeatureConverter and the fine-tuning featurizers;
    # SBERT's batcher stacks the S sentences of an example on an extra axis, [B, S, L].
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
    "mems": Feature("float32", 3, "[layers, M, H] memory carried from the previous step "
                                  "(the trainer adds it: PermutationLM.next_carry)"),
    # Fine-tuning tasks. Written by bertjax.finetune's featurizers.
    "start_positions": Feature("int32", 0, "SQuAD: answer start token (0 = [CLS]: none)"),
    "end_positions": Feature("int32", 0, "SQuAD: answer end token"),
    "weights": Feature("float32", 0, "1.0 for a real row, 0.0 for a row padding a batch "
                                     "(packed rows, [E]: 1.0 per filled example slot)"),
    "example_positions": Feature("int32", 1, "packed fine-tuning rows, [E]: where each example "
                                             "slot's example starts, -1 = empty slot "
                                             "(finetune.packing)"),
    "first_piece": Feature("int32", 1, "NER, [W]: each word's first token, -1 = none "
                                       "(read by the word-level evaluation, not the model)"),
    "features": Feature("float16", 3, "feature-based NER, [W, K, H]: a frozen encoder's K "
                                      "layers at each word (finetune.feature_based)"),
    # ELMo's bidirectional LM. Written by the `bilm` recipe (data.recipes.bilm), read by
    # objectives.bilm (targets) and models.elmo (char_ids); input_ids hold the word ids.
    "char_ids": Feature("int32", 2, "[L, C] each word's character ids "
                                    "(bertjax.characters; 0 = padding word)"),
    "forward_targets": Feature("int32", 1, "the next word's id, 0 = none"),
    "backward_targets": Feature("int32", 1, "the previous word's id, 0 = none"),
    # SBERT (bertjax.sbert.data writes, bertjax.sbert.losses reads), one per example.
    "label": Feature("int32", 0, "NLI class: 0 entailment, 1 neutral, 2 contradiction"),
    "score": Feature("float32", 0, "gold similarity (sbert.data scales it to [0, 1])"),
    "weight": Feature("float32", 0, "1.0 for a real example, 0.0 for one padding a batch"),
    "sentence_slots": Feature("int32", 1, "packed SBERT rows, [S]: where each sentence of the "
                                          "example was pooled, row * sentences_per_row + its "
                                          "segment - 1 (sbert.data.packed_batches)"),
    # Distillation into a small student (bertjax.distill writes, LogitRegression reads).
    "teacher_logits": Feature("float32", 1, "[C] a fine-tuned teacher's logits for the row"),
}

# Token ids and segments, as the encoder and XLNet recipes write them per example.
TOKENS = ("input_ids", "token_type_ids")
# Model inputs of every encoder (objectives select them; packing adds the last two).
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "segment_ids")
# Fine-tuned task models: a packed row's sequence classifier also reads its examples' starts.
TASK_INPUTS = ENCODER_INPUTS + ("example_positions",)
# SBERT's siamese model: packed rows [R, L] also say where each example's sentences went.
SIAMESE_INPUTS = ENCODER_INPUTS + ("sentence_slots",)
# Decoder-only LMs: no token types (GPT would look them up in its token table).
LM_INPUTS = ("input_ids", "attention_mask", "position_ids", "segment_ids")
# Masked LM targets (MaskedLM, SpanBoundary, ReplacedTokenDetection, DistilBertLoss).
MLM = ("mlm_targets", "mlm_weights")
SENTENCE_PAIR = ("next_sentence_label",)
SPAN_BOUNDARY = ("sbo_left", "sbo_right", "sbo_pos")
# Encoder-decoder task features (the recipes write them; EncDecFeatureConverter reads them).
SOURCE_TARGET = ("inputs", "targets")
# Encoder-decoder model inputs: the tokens, plus the packing features of packed batches.
SEQ2SEQ_TOKENS = ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask")
SEQ2SEQ_PACKING = ("encoder_segment_ids", "encoder_position_ids", "decoder_segment_ids",
                   "decoder_position_ids")
SEQ2SEQ_INPUTS = SEQ2SEQ_TOKENS + SEQ2SEQ_PACKING
# Token targets: seq2seq and LM (EncDecFeatureConverter), NER (finetune.ner).
TARGETS = ("labels", "label_weights")
# XLNet: the factorization order and the prediction slots, then their targets.
PERMUTATION = ("perm_mask", "target_mapping")
PERMUTATION_INPUTS = ("input_ids", "attention_mask", "token_type_ids") + PERMUTATION
PERMUTATION_TARGETS = ("target_ids", "target_weights")
SPAN_TARGETS = ("start_positions", "end_positions")
# ELMo: the model reads characters (and the mask); the two LMs' targets.
BILM_INPUTS = ("char_ids", "attention_mask")
BILM_TARGETS = ("forward_targets", "backward_targets")


def check(names: Iterable[str], reader: str) -> None:
  """Fails naming `reader` when one of `names` is not a batch feature."""
  unknown = [k for k in names if k not in FEATURES]
  if unknown:
    raise ValueError(f"{reader}: {unknown} are not batch features; use names from "
                     f"bertjax.batch.FEATURES (or add the new feature there).")


def select(batch: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
  """The features of `names` that `batch` holds (model inputs are optional by design)."""
  return {k: batch[k] for k in names if k in batch}


def require(batch: Mapping[str, Any], names: Iterable[str], reader: str,
            writer: str = "see bertjax.batch") -> dict[str, Any]:
  """The features of `names`, all of them: a missing one fails naming it, the reader and
  (when given) the data recipe that writes it."""
  missing = [k for k in names if k not in batch]
  if missing:
    raise ValueError(f"{reader} reads batch features {missing}, which this batch lacks (it has "
                     f"{sorted(batch)}); pair it with a data recipe that writes them "
                     f"({writer}).")
  return {k: batch[k] for k in names}


def task_features(names: Iterable[str]) -> dict[str, tuple[str, int]]:
  """{name: (dtype, rank)} of `names`, as a data recipe declares its task features."""
  names = tuple(names)
  check(names, "task_features")
  return {k: (FEATURES[k].dtype, FEATURES[k].rank) for k in names}
