"""Packed rows for fine-tuning, evaluation and prediction: no compute on padding.

SST-2 sentences average ~13 tokens in rows of 64-128: most of an unpacked batch is
padding. Packing lays several examples end to end in one row of the same length, as
pretraining's MLM does (`data.feature_converters.pack_dataset`):

  input_ids     [CLS] a b [SEP] [CLS] c [SEP] [CLS] d e f [SEP] pad pad
  segment_ids     1   1 1   1     2   2   2     3   3 3 3   3    0   0
  position_ids    0   1 2   3     0   1   2     0   1 2 3   4    0   0

`segment_ids` keep attention inside each example (the encoders' `segment_mask`, through
whatever attention path they use) and positions restart per example, so every real
token's hidden state is the one the example gets alone in its own row.

Training rows take the examples in a seeded random order (the same seed packs the same
rows, so a resumed run sees what it saw; packed in data order, CoNLL-2003's consecutive
sentences of one document trained together: dev F1 0.49 after an epoch, 0.57 shuffled),
filled greedily, an example going to the current row while it fits and the row holds fewer
than `max_examples_per_row` (`plan`). Prediction, whose order does not matter, packs into
the fewest rows (`plan_tight`: 0.99 of SST-2 dev's slots real with MiniLM's tokenizer,
against 0.78 in data order). A row is as long as the data's longest example needs
(`row_length`: a power of two, at least 32, at most the featurizer's length), not the
featurizer's length: attention costs a row's length squared, and on this CPU a MiniLM
forward pass over [32, 128] costs 1.45x as much per token as over [32, 64] (SST-2's
longest training sentence has 62 MiniLM tokens). Each row keeps `max_examples_per_row`
example slots for what is per example:

  * `example_positions` [R, E]: where each slot's example starts in its row (its [CLS]),
    -1 for an empty slot. A sequence classifier reads its pooled vector there
    (task_heads.SequenceClassifier), so `logits` come out [R, E, K];
  * `weights` [R, E]: 1 for a filled slot, so losses and metrics stay per example;
  * the per-example targets (`labels`, SQuAD's `start_positions` / `end_positions`,
    shifted to row positions) as [R, E]. The span loss takes each example's softmax over
    its own tokens only (objectives.downstream.SpanExtraction).

Per-token features (NER's labels, SQuAD's offsets) are laid out like the tokens.
`Packed.tokens` / `Packed.examples` put the outputs back into the unpacked layout, so
every evaluation and prediction reads what it read before.

Which models pack (`refusal`): the encoders whose attention takes a segment mask and
whose heads pool at an example's first token. XLNet (relative positions over left-padded
rows, memory, the last-token summary), BigBird and Longformer (their attention and task
heads read the whole row: global tokens, random blocks, the row's first [SEP]) and
Linformer attention (its projections mix every position of a row) run unpacked, and so
does multiple choice: SWAG's endings of one example are scored against each other, and
four 60-token endings do not fit one row of max_seq_length, so an example's natural
packing unit would be a row 4x longer - no fewer slots than its [B, 4, L] rows trimmed of
their shared padding. The feature-based taggers' frozen encoder packs
(feature_based.extract); their BiLSTM and ELMo's states (word_features) do not: a
recurrent state would run from one example into the next.
"""
import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np

# Families whose encoder takes `segment_ids` / `position_ids` and whose task classes pool
# at an example's first token (checkpoints.encoders / hf family names).
PACKABLE = ("bert", "roberta", "albert", "electra", "distilbert", "deberta", "deberta-v2",
            "modernbert")
CANNOT_PACK = {
    "xlnet": "XLNet's relative attention takes no segment_ids / position_ids, its rows are "
             "left-padded and its heads summarise the row's last token",
    "big_bird": "BigBird's block-sparse attention (global and random blocks) spans the whole "
                "row and its question-answering head finds the question at the row's first "
                "[SEP]",
    "longformer": "Longformer's global attention tokens see the whole row and its task heads "
                  "choose them from the row's first </s>",
}
MULTIPLE_CHOICE = "ForMultipleChoice"
# Per-example features that are token positions (-1: none): shifted to the example's place
# in its row.
POSITIONS = ("start_positions", "end_positions", "first_piece")
SEQUENCE, TOKENS = "ForSequenceClassification", "ForTokenClassification"
# The task classes packed rows run (one output per example, or per token).
KINDS = (SEQUENCE, TOKENS, "ForQuestionAnswering")
DEFAULT_EXAMPLES_PER_ROW = 8
# The shortest row (and trimmed batch, finetune.loop.trim_padding): fewer compiled shapes.
MIN_ROW_LENGTH = 32


def refusal(family: str, config: Any, kind: str) -> str | None:
  """Why a model of `family` / `config` cannot run `kind` packed, or None when it can."""
  if kind == MULTIPLE_CHOICE:
    return ("multiple choice scores an example's endings against each other and they do not "
            "fit one row; its [B, choices, L] rows run unpacked")
  if kind not in KINDS:
    return f"packed rows run the task classes ...{' / ...'.join(KINDS)}, not {kind or 'this'}"
  if getattr(config, "attention", None) is not None:
    return (f"long-sequence attention ({type(config.attention).__name__}) mixes a row's "
            "positions across its examples (Linformer's projections of the whole row, "
            "block-sparse attention's global and random blocks)")
  if family in CANNOT_PACK:
    return CANNOT_PACK[family]
  if family not in PACKABLE:
    return f"family {family!r} is not one of the packable encoders {PACKABLE}"
  return None


def check(family: str, config: Any, kind: str) -> None:
  """Raises, saying why, when `family` cannot run `kind` packed."""
  reason = refusal(family, config, kind)
  if reason:
    raise ValueError(f"Packing refused for {family} {kind}: {reason}. Run it unpacked "
                     "(--packing=false, Options.packing = False).")


def row_length(longest: int, width: int) -> int:
  """The power of two holding `longest` tokens, at least MIN_ROW_LENGTH, at most `width`:
  the few row lengths that packed rows and trimmed batches take (each a fresh XLA compile)."""
  return min(width, max(MIN_ROW_LENGTH, 1 << (max(longest, 1) - 1).bit_length()))


def plan(lengths: Sequence[int], capacity: int, max_examples_per_row: int) -> list[list[int]]:
  """Greedy in-order packing: the examples (indices) of each row, in data order."""
  _check(lengths, capacity, max_examples_per_row)
  rows: list[list[int]] = []
  used = capacity
  for i, n in enumerate(lengths):
    if used + n > capacity or len(rows[-1]) >= max_examples_per_row:
      rows.append([])
      used = 0
    rows[-1].append(i)
    used += n
  return rows


def plan_tight(lengths: Sequence[int], capacity: int, max_examples_per_row: int
               ) -> list[list[int]]:
  """Packing into fewest rows, for prediction (where data order does not matter): each row
  starts with the longest example left and then takes the longest left that still fits."""
  _check(lengths, capacity, max_examples_per_row)
  by_length: list[list[int]] = [[] for _ in range(capacity + 1)]
  for i in reversed(range(len(lengths))):  # popped from the end: lower indices first
    by_length[lengths[i]].append(i)
  rows: list[list[int]] = []
  for longest in range(capacity, 0, -1):
    while by_length[longest]:
      row, free = [by_length[longest].pop()], capacity - longest
      while len(row) < max_examples_per_row:
        n = next((n for n in range(min(free, longest), 0, -1) if by_length[n]), 0)
        if not n:
          break
        row.append(by_length[n].pop())
        free -= n
      rows.append(row)
  return rows


def _check(lengths: Sequence[int], capacity: int, max_examples_per_row: int) -> None:
  if max_examples_per_row < 1:
    raise ValueError(f"max_examples_per_row = {max_examples_per_row}: give 1 or more.")
  for i, n in enumerate(lengths):
    if not 0 < n <= capacity:
      raise ValueError(f"Example {i} has {n} tokens; packing takes 1 to {capacity} (the row "
                       "length) per example.")


@dataclasses.dataclass(frozen=True)
class Packed:
  """Packed rows and where each example went: `row`, `slot`, `start` (its first position
  in the row) and `length` [N]; `length_unpacked`: the unpacked rows' length."""
  arrays: dict[str, np.ndarray]
  row: np.ndarray
  slot: np.ndarray
  start: np.ndarray
  length: np.ndarray
  length_unpacked: int

  @property
  def num_rows(self) -> int:
    return len(self.arrays["attention_mask"])

  def tokens(self, output: np.ndarray) -> np.ndarray:
    """A per-token output of the packed rows [R, L, ...] -> [N, L_unpacked, ...], each
    example's tokens from position 0 on, zeros after them (right padding)."""
    out = np.zeros((len(self.row), self.length_unpacked, *output.shape[2:]), output.dtype)
    for i, (r, s, n) in enumerate(zip(self.row, self.start, self.length)):
      out[i, :n] = output[r, s:s + n]
    return out

  def examples(self, output: np.ndarray) -> np.ndarray:
    """A per-example output [R, E, ...] -> [N, ...]."""
    return output[self.row, self.slot]


def pack(arrays: Mapping[str, np.ndarray], max_examples_per_row: int = DEFAULT_EXAMPLES_PER_ROW,
         per_example: bool = True, tight: bool = False) -> Packed:
  """Packs right-padded rows [N, L] (the featurizers' output) into rows of `row_length`
  (the longest example's power of two, at most L).

  Per-token arrays ([N, L, ...], laid out like `attention_mask`) are concatenated;
  with `per_example`, every other array ([N, ...]) goes to its example's slot
  ([R, E, ...]) and `example_positions` / `weights` are added (sequence and span
  tasks); token tasks need neither. `tight`: the fewest rows (`plan_tight`, for
  prediction), not data order (`plan`, for training)."""
  mask = np.asarray(arrays["attention_mask"])
  if mask.ndim != 2:
    raise ValueError(f"Packing takes rows [N, L]; attention_mask is {mask.shape} (multiple "
                     "choice runs unpacked).")
  count, width = mask.shape
  lengths = mask.sum(1)
  capacity = row_length(int(lengths.max(initial=1)), width)
  # Fewer slots than tokens: per-example arrays [R, E] never look like per-token ones [R, L].
  max_examples_per_row = min(max_examples_per_row, max(capacity - 1, 1))
  if not np.array_equal(mask, np.arange(width)[None] < lengths[:, None]):
    raise ValueError("Packing takes right-padded rows (real tokens first); these rows have "
                     "padding before or between their tokens (a left-padding tokenizer such as "
                     "XLNet's runs unpacked: --packing=false).")
  rows = (plan_tight if tight else plan)(lengths.tolist(), capacity, max_examples_per_row)
  row = np.zeros(count, np.int32)
  slot = np.zeros(count, np.int32)
  start = np.zeros(count, np.int32)
  for r, members in enumerate(rows):
    offset = 0
    for s, i in enumerate(members):
      row[i], slot[i], start[i] = r, s, offset
      offset += lengths[i]
  # Where each example's tokens go: [N, L] source columns -> (row, column) targets.
  real = np.nonzero(mask)
  target_col = start[real[0]] + real[1]
  target_row = row[real[0]]
  packed: dict[str, np.ndarray] = {}
  for key, value in arrays.items():
    value = np.asarray(value)
    if value.shape[:2] == mask.shape and key not in POSITIONS:
      packed[key] = _token_array(value, mask, (len(rows), capacity), real, (target_row, target_col))
    elif per_example:
      filled = np.zeros((len(rows), max_examples_per_row, *value.shape[1:]), value.dtype)
      if key in POSITIONS:
        shift = start.reshape(-1, *[1] * (value.ndim - 1))
        value = np.where(value >= 0, value + shift, value)
      filled[row, slot] = value
      packed[key] = filled
  packed["attention_mask"] = np.zeros((len(rows), capacity), np.int32)
  packed["attention_mask"][target_row, target_col] = 1
  packed["segment_ids"] = np.zeros((len(rows), capacity), np.int32)
  packed["segment_ids"][target_row, target_col] = slot[real[0]] + 1
  packed["position_ids"] = np.zeros((len(rows), capacity), np.int32)
  packed["position_ids"][target_row, target_col] = real[1]
  if per_example:
    packed["example_positions"] = np.full((len(rows), max_examples_per_row), -1, np.int32)
    packed["example_positions"][row, slot] = start
    weights = np.zeros((len(rows), max_examples_per_row), np.float32)
    weights[row, slot] = np.asarray(arrays["weights"]) if "weights" in arrays else 1.0
    packed["weights"] = weights
  return Packed(packed, row, slot, start, lengths.astype(np.int32), width)


def _token_array(value: np.ndarray, mask: np.ndarray, shape: tuple[int, int], real, target
                 ) -> np.ndarray:
  """A per-token array in packed rows; padding slots hold what the unpacked padding held
  (the pad id for input_ids, 0 or -1 elsewhere)."""
  padding = np.nonzero(mask == 0)
  fill = value[padding[0][0], padding[1][0]] if len(padding[0]) else np.zeros_like(value[0, 0])
  out = np.empty((*shape, *value.shape[2:]), value.dtype)
  out[...] = fill
  out[target] = value[real]
  return out


def efficiency(attention_mask: np.ndarray) -> float:
  """Real tokens / token slots of rows."""
  mask = np.asarray(attention_mask)
  return float(mask.sum() / max(mask.size, 1))


@dataclasses.dataclass(frozen=True)
class Packing:
  """A run's packing of one task kind: `enabled`, `max_examples_per_row`, and why it is off
  (`reason`). Sequence classes give one output per example, the others per token."""
  enabled: bool
  kind: str = SEQUENCE
  max_examples_per_row: int = DEFAULT_EXAMPLES_PER_ROW
  reason: str | None = None

  @classmethod
  def choose(cls, wanted: bool, family: str, config: Any, kind: str,
             max_examples_per_row: int = DEFAULT_EXAMPLES_PER_ROW) -> "Packing":
    """Packing when `wanted` and the model can pack `kind`; else unpacked, saying why."""
    reason = refusal(family, config, kind) if wanted else "turned off (packing=False)"
    return cls(reason is None, kind, max_examples_per_row, reason)

  @property
  def per_example_outputs(self) -> bool:
    return self.kind == SEQUENCE

  def pack(self, arrays: Mapping[str, np.ndarray], seed: int | None = 0) -> Packed:
    """Rows as training packs them (`seed`: the examples shuffled by it first) or as
    prediction packs them (None: the fewest rows, `plan_tight`). Per-example targets go
    in slots (but for token tagging); only a sequence classifier reads
    `example_positions`."""
    if seed is not None:
      shuffled = np.random.default_rng(seed).permutation(len(arrays["attention_mask"]))
      arrays = {k: np.asarray(v)[shuffled] for k, v in arrays.items()}
    packed = pack(arrays, self.max_examples_per_row, per_example=self.kind != TOKENS,
                  tight=seed is None)
    if not self.per_example_outputs:
      packed.arrays.pop("example_positions", None)
    return packed

  def train_rows(self, arrays: Mapping[str, np.ndarray], batch_size: int, multiple: int = 1,
                 seed: int = 0) -> tuple[dict[str, np.ndarray], int]:
    """(packed training rows, rows per batch): the examples shuffled by `seed` and packed;
    a batch holds about `batch_size` examples, as unpacked batches do, so an epoch takes
    about as many steps; `multiple` (the microbatches times the devices) divides the rows
    per batch. Data that packs into fewer rows than `multiple` trains unpacked,
    `batch_size` rows a batch."""
    packed = self.pack(arrays, seed)
    rows = packed.num_rows
    if rows < multiple:  # too few packed rows for one batch over every device: unpacked
      return dict(arrays), batch_size
    per_batch = max(1, round(batch_size * rows / max(len(packed.row), 1)))
    per_batch = min(-(-per_batch // multiple) * multiple, max(rows // multiple, 1) * multiple)
    return packed.arrays, per_batch

  def report(self, arrays: Mapping[str, np.ndarray], seed: int | None = None) -> dict:
    """What packing does to `arrays` (packed as `pack(arrays, seed)` packs them: training's
    rows with a seed, prediction's without): rows, examples per row, efficiency (real
    tokens / slots) packed and unpacked; or why it is off."""
    mask = np.asarray(arrays["attention_mask"])
    report = {"enabled": self.enabled, "examples": int(np.prod(mask.shape[:-1])),
              "unpacked_efficiency": round(efficiency(mask), 4)}
    if not self.enabled:
      return {**report, "reason": self.reason}
    packed = self.pack({"attention_mask": mask}, seed)
    return {**report, "rows": packed.num_rows,
            "examples_per_row": round(len(mask) / max(packed.num_rows, 1), 3),
            "max_examples_per_row": self.max_examples_per_row,
            "efficiency": round(efficiency(packed.arrays["attention_mask"]), 4)}

  def predict(self, forward: Callable[..., dict[str, np.ndarray]],
              arrays: Mapping[str, np.ndarray], output_keys: tuple[str, ...]
              ) -> dict[str, np.ndarray]:
    """`forward(arrays, output_keys, untrim)`'s outputs for every unpacked row of `arrays`,
    computed on packed rows when packing is on."""
    if not self.enabled:
      return forward(dict(arrays), output_keys, True)
    # Per-example slots only for what comes out per example (no targets go in).
    packed = pack(arrays, self.max_examples_per_row, self.per_example_outputs, tight=True)
    out = forward(packed.arrays, output_keys, not self.per_example_outputs)
    unpack = packed.examples if self.per_example_outputs else packed.tokens
    return {k: unpack(v) for k, v in out.items()}
