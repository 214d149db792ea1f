"""SQuAD 1.1 / 2.0: sliding-window features and span post-processing.

Following the BERT paper (Sec. 4.2-4.3): the question and a window of the context are
packed as a pair in the tokenizer's layout (`[CLS] question [SEP] context [SEP]` for BERT;
XLNet, which pads on the left, puts the context first: `context <sep> question <sep>
<cls>`, as transformers' run_qa does); a start vector S and end vector E score
every context token (`heads.SpanExtractor`). Contexts longer than the window are
split with a document stride, and each context token is scored only in the window
where it has the most context on both sides. A span (i, j) scores S.T_i + E.T_j,
with j >= i and at most `max_answer_length` tokens, searched among each window's
n-best starts and ends. For 2.0 the null score s_null = S.C + E.C (C: the classifier
token, e.g. [CLS]) is compared with the best span: answer "" when s_null - s_best > tau;
tau is tuned on dev (`bertjax.evaluation.squad.best_threshold`).

Character offsets from the tokenizer map answers to tokens and back, so predicted
text is an exact substring of the context. Reading the files and the official scoring
are in bertjax.evaluation.squad.
"""
import collections
import dataclasses

import numpy as np

from bertjax.evaluation.squad import SquadExample
from bertjax.finetune.tokenization import Tokenizer


def _windows(num_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
  """(start, length) of each context window: BERT's `doc_spans`."""
  windows, start = [], 0
  while True:
    length = min(num_tokens - start, max_tokens)
    windows.append((start, length))
    if start + length >= num_tokens:
      return windows
    start += min(length, stride)


def _max_context(windows: list[tuple[int, int]], window: int, token: int) -> bool:
  """Is `window` the one where `token` has the most context? (score = min(left, right)
  + 0.01 * window length, as in BERT's `_check_is_max_context`)."""
  best, best_score = None, None
  for i, (start, length) in enumerate(windows):
    if not start <= token < start + length:
      continue
    score = min(token - start, start + length - 1 - token) + 0.01 * length
    if best_score is None or score > best_score:
      best, best_score = i, score
  return best == window


def convert_examples(examples: list[SquadExample], tokenizer: Tokenizer, max_seq_length: int,
                     doc_stride: int, max_query_length: int,
                     training: bool) -> dict[str, np.ndarray]:
  """One row per (question, window), laid out as the tokenizer lays out pairs. Besides the
  encoder inputs:

  * `example_index` [F]: row of `examples`;
  * `offsets` [F, L, 2]: the context character span of each position, -1 elsewhere;
  * `max_context` [F, L]: positions this window is the best one to score;
  * `cls_index` [F]: the classifier token's position, which stands for "no answer";
  * `start_positions`, `end_positions` [F] (training): the answer's first/last token,
    or `cls_index` when the window does not contain it or there is no answer. Training
    questions without an aligned answer (and not impossible) are left out.
  """
  layout = tokenizer.layout
  if tokenizer.cls_id is None:
    raise ValueError(f"{tokenizer.source}: its inputs hold no classifier token (cls_token), "
                     "where SQuAD points questions without an answer; give a tokenizer with "
                     "one (--tokenizer=FOLDER).")
  # The question first, as BERT does, unless the tokenizer pads on the left (XLNet): then
  # the context comes first, as transformers' run_qa feeds it.
  question_first = layout.padding_side == "right"
  context_segment = "B" if question_first else "A"
  rows = collections.defaultdict(list)
  for index, example in enumerate(examples):
    if training and not example.is_impossible and not example.answer_spans:
      continue
    question = tokenizer.encode(example.question)[:max_query_length]
    context, offsets = tokenizer.encode_with_offsets(example.context)
    budget = max_seq_length - len(question) - layout.num_special(pair=True)
    if budget <= 0:
      raise ValueError(f"max_seq_length={max_seq_length} leaves no room for context after a "
                       f"{len(question)}-token question; raise it or lower max_query_length.")
    windows = _windows(len(context), budget, doc_stride)
    answer = None
    if training and not example.is_impossible:
      start_char, end_char = example.answer_spans[0]
      inside = [i for i, (s, e) in enumerate(offsets) if s < end_char and e > start_char]
      answer = (inside[0], inside[-1]) if inside else None
    for w, (start, length) in enumerate(windows):
      window = context[start:start + length]
      ids, types, starts = layout.pack(*((question, window) if question_first
                                         else (window, question)))
      shift = layout.padding(len(ids), max_seq_length)
      first = shift + starts[context_segment]  # position of the window's first context token
      cls_index = shift + ids.index(tokenizer.cls_id)
      row_offsets = np.full((max_seq_length, 2), -1, np.int32)
      row_offsets[first:first + length] = offsets[start:start + length]
      row_max = np.zeros(max_seq_length, bool)
      row_max[first:first + length] = [_max_context(windows, w, start + t) for t in range(length)]
      rows["ids"].append(ids)
      rows["types"].append(types)
      rows["example_index"].append(index)
      rows["offsets"].append(row_offsets)
      rows["max_context"].append(row_max)
      rows["cls_index"].append(cls_index)
      if training:
        if answer and start <= answer[0] and answer[1] < start + length:
          positions = (answer[0] - start + first, answer[1] - start + first)
        else:
          positions = (cls_index, cls_index)
        rows["start_positions"].append(positions[0])
        rows["end_positions"].append(positions[1])
  if not rows:
    raise ValueError("No SQuAD features: every question was skipped or the list is empty.")
  arrays = layout.to_arrays(rows.pop("ids"), rows.pop("types"), max_seq_length)
  arrays.update({k: np.asarray(v) for k, v in rows.items()})
  for k in ("example_index", "offsets", "cls_index", "start_positions", "end_positions"):
    if k in arrays:
      arrays[k] = arrays[k].astype(np.int32)
  return arrays


@dataclasses.dataclass(frozen=True)
class SpanPrediction:
  text: str
  score: float       # best span score S.T_i + E.T_j ("" with -inf when none is valid)
  null_score: float  # min over windows of S.C + E.C (C: the classifier token)
  start: int = -1    # the text's [start, end) characters in the context
  end: int = -1
  # softmax(S)_i * softmax(E)_j over its window's context tokens and the classifier token
  probability: float = 0.0

  @property
  def null_margin(self) -> float:
    """s_null - s_best: the no-answer score compared with tau (larger = more likely none)."""
    return self.null_score - self.score


def postprocess(examples: list[SquadExample], features: dict[str, np.ndarray],
                start_logits: np.ndarray, end_logits: np.ndarray, n_best_size: int = 20,
                max_answer_length: int = 30) -> dict[str, SpanPrediction]:
  """The best span of every example, over all its windows."""
  best: dict[int, SpanPrediction] = {}
  for row, index in enumerate(features["example_index"]):
    offsets, max_context = features["offsets"][row], features["max_context"][row]
    starts_l, ends_l = start_logits[row], end_logits[row]
    cls_index = features["cls_index"][row]
    null = float(starts_l[cls_index] + ends_l[cls_index])
    valid = offsets[:, 0] >= 0
    # n-best candidates among context positions only.
    context_positions = np.flatnonzero(valid)
    top_starts = context_positions[np.argsort(-starts_l[context_positions],
                                              kind="stable")[:n_best_size]]
    top_ends = context_positions[np.argsort(-ends_l[context_positions],
                                            kind="stable")[:n_best_size]]
    span_score, span = -np.inf, None
    for s in top_starts:
      if not max_context[s]:
        continue
      for e in top_ends:
        if e < s or e - s + 1 > max_answer_length:
          continue
        score = float(starts_l[s] + ends_l[e])
        if score > span_score:
          span_score, span = score, (s, e)
    previous = best.get(index)
    found = SpanPrediction("", span_score, null)
    if span is not None:
      start, end = int(offsets[span[0], 0]), int(offsets[span[1], 1])
      scored = np.append(context_positions, cls_index)
      probability = np.exp(span_score - _logsumexp(starts_l[scored]) - _logsumexp(ends_l[scored]))
      found = SpanPrediction(examples[index].context[start:end], span_score, null, start, end,
                             float(probability))
    if previous is None:
      best[index] = found
    else:
      kept = found if span_score > previous.score else previous
      best[index] = dataclasses.replace(kept, null_score=min(null, previous.null_score))
  return {examples[i].qid: p for i, p in best.items()}


def _logsumexp(x: np.ndarray) -> float:
  x = np.asarray(x, np.float64)
  return float(x.max() + np.log(np.exp(x - x.max()).sum()))


def final_answers(predictions: dict[str, SpanPrediction], version: str,
                  null_threshold: float = 0.0) -> tuple[dict[str, str], dict[str, float]]:
  """(answer text per question, no-answer margin per question).

  v2.0 answers "" where s_null - s_best > null_threshold (tau); v1.1 always answers.
  The margins are what `evaluation.squad.evaluate(..., na_scores=)` tunes tau on.
  """
  margins = {qid: p.null_margin for qid, p in predictions.items()}
  if version == "1.1":
    return {qid: p.text for qid, p in predictions.items()}, margins
  return {qid: ("" if margins[qid] > null_threshold else p.text)
          for qid, p in predictions.items()}, margins
