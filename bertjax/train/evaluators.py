"""Scoring a sequence model by what it generates: decode, postprocess, task metrics.

`GenerationEvaluator` is one of the trainer's `evaluators` (gin: `Trainer.evaluators =
[@GenerationEvaluator()]`): at every evaluation it reads the eval split of a task
registered in seqio's TaskRegistry (e.g. bertjax.data.recipes.text_to_text's), generates an
answer for every example with `bertjax.inference.decoding.generate` (greedy by default), decodes
it with the task's vocabulary, and scores it as seqio does:

  predictions = [task.postprocess_fn(text, example=ex, is_target=False)]
  targets = [task.postprocess_fn(ex['targets_pretokenized'], example=ex, is_target=True)]
  metric_fn(targets, predictions) for metric_fn in task.metric_fns

The batches have a fixed shape (the last one is padded with dummy rows), so decoding
compiles once per run. Metrics come back prefixed (`generate_accuracy`, ...), ready
for `Trainer.best_metric`.
"""
from typing import Any, Iterator, Optional

import gin
import numpy as np
import seqio


def decode_ids(vocabulary: seqio.Vocabulary, ids: np.ndarray, eos_id: int) -> str:
  """Text of one generated row: after the decoder start token, up to the first EOS."""
  ids = [int(i) for i in ids[1:]]
  if eos_id in ids:
    ids = ids[:ids.index(eos_id)]
  return vocabulary.decode(ids)


@gin.configurable
class GenerationEvaluator:
  """Generation metrics of a registered seqio Task (see the module doc).

  task_name / split: what to score; default the trainer's eval task and split.
  batch_size: rows per generate call. max_new_tokens: longest answer generated.
  num_beams: 1 = greedy. max_examples: score the first N examples only (None: all).
  prefix: put before every metric name.
  """

  def __init__(self, task_name: Optional[str] = None, split: Optional[str] = None,
               batch_size: int = 64, max_new_tokens: int = 8, num_beams: int = 1,
               max_examples: Optional[int] = None, prefix: str = "generate_"):
    self.task_name, self.split = task_name, split
    self.batch_size, self.max_new_tokens, self.num_beams = batch_size, max_new_tokens, num_beams
    self.max_examples, self.prefix = max_examples, prefix
    self.last_predictions: list[str] = []  # decoded text of the latest evaluation

  def examples(self, task: seqio.Task, split: str, sequence_length: int) -> list[dict]:
    lengths = {"inputs": sequence_length, "targets": sequence_length}
    ds = task.get_dataset(lengths, split=split, shuffle=False, num_epochs=1, use_cached=False)
    if self.max_examples:
      ds = ds.take(self.max_examples)
    return list(ds.as_numpy_iterator())

  def _batches(self, examples: list[dict], length: int, pad_id: int) -> Iterator[tuple]:
    for start in range(0, len(examples), self.batch_size):
      rows = examples[start:start + self.batch_size]
      ids = np.full((self.batch_size, length), pad_id, np.int32)
      mask = np.zeros((self.batch_size, length), np.int32)
      mask[:, 0] = 1  # dummy rows attend to one pad token, never to nothing
      for i, ex in enumerate(rows):
        n = min(len(ex["inputs"]), length)
        ids[i, :n], mask[i, :n] = ex["inputs"][:n], 1
      yield len(rows), ids, mask

  def __call__(self, model: Any, params: Any, task_name: Optional[str] = None,
               split: Optional[str] = None, sequence_length: int = 512) -> dict[str, float]:
    from bertjax.inference import decoding  # pylint: disable=g-import-not-at-top
    name, split = self.task_name or task_name, self.split or split or "validation"
    task = seqio.get_mixture_or_task(name)
    vocabulary = task.output_features["targets"].vocabulary
    examples = self.examples(task, split, sequence_length)
    if not examples:
      raise ValueError(f"Split {split!r} of task {name!r} is empty; nothing to generate for.")
    config = getattr(model, "config", None)
    eos_id = getattr(config, "eos_token_id", None)
    eos_id = vocabulary.eos_id if eos_id is None else eos_id
    texts = []
    for count, ids, mask in self._batches(examples, sequence_length, vocabulary.pad_id or 0):
      out = decoding.generate(model, params, ids, mask, model_config=config,
                              max_new_tokens=self.max_new_tokens, num_beams=self.num_beams)
      texts += [decode_ids(vocabulary, row, eos_id) for row in out[:count]]
    self.last_predictions = texts
    postprocess = task.postprocess_fn or (lambda x, **_: x)
    predictions = [postprocess(t, example=ex, is_target=False) for t, ex in zip(texts, examples)]
    targets = [postprocess(ex["targets_pretokenized"], example=ex, is_target=True)
               for ex in examples]
    results = {"examples": float(len(examples))}
    for metric_fn in task.predict_metric_fns:
      results.update({k: float(v) for k, v in metric_fn(targets, predictions).items()})
    return {self.prefix + k: v for k, v in results.items()}
