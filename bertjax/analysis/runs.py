"""The three analyses as runs over a model on disk (anything `bertjax.open_model` reads),
writing their tables, figures and JSON into one output folder (see `__main__`)."""
import json
import os
import time

import jax
import numpy as np
import optax

import bertjax
from bertjax.analysis import figures, head_view, heads, probing, statistics
from bertjax.evaluation import conll, glue, readers
from bertjax.finetune import glue as glue_features, tokenization
from bertjax.models.common import attention_maps

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _model_and_tokenizer(model_path: str, tokenizer_path: str | None):
  model = bertjax.open_model(model_path)
  return model, tokenization.for_model(model, tokenizer_path)


def _write(out_dir: str, name: str, content) -> str:
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, name)
  with open(path, "w", encoding="utf-8") as f:
    f.write(content if isinstance(content, str) else json.dumps(content, indent=1))
  return path


def _batches(arrays: dict, batch_size: int, trim: bool = False):
  """Rows in batches; `trim`: right-padded token columns cut to the batch's longest row."""
  n = len(arrays["input_ids"])
  for start in range(0, n, batch_size):
    batch = {k: v[start:start + batch_size] for k, v in arrays.items()}
    used = np.flatnonzero(batch["attention_mask"].any(0))
    if trim and used.size and batch["attention_mask"][:, 0].all():
      batch = {k: v[:, :used[-1] + 1] if k in INPUTS else v for k, v in batch.items()}
    yield batch


def attention(model_path: str, input_file: str, out_dir: str, tokenizer: str | None = None,
              max_examples: int = 1000, max_seq_length: int = 128, batch_size: int = 16) -> dict:
  """Clark et al.'s statistics over the lines of `input_file` (a sentence per line, or two
  separated by a tab), their table and figure, and heatmaps + head view of line 1."""
  start = time.time()
  model, tok = _model_and_tokenizer(model_path, tokenizer)
  with open(input_file, encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f if line.strip()][:max_examples]
  if not lines:
    raise ValueError(f"input_file {input_file!r} has no non-empty line.")
  examples = [glue.PairExample(*(line.split("\t", 1) + [None])[:2], 0, f"{input_file}:{i}")
              for i, line in enumerate(lines, 1)]
  arrays = glue_features.convert_examples(examples, tok, max_seq_length)
  cls_token, sep_token = (tok.tokens([i])[0] if i is not None else None
                          for i in (tok.cls_id, tok.sep_id))
  stats = statistics.HeadStatistics()
  first = None
  for batch in _batches(arrays, batch_size, trim=True):
    probs = model(**{k: batch[k] for k in INPUTS}, output_attentions=True)
    probs = probs.get("attentions", probs.get("encoder_attentions"))
    tokens = [tok.tokens(row) for row in batch["input_ids"]]
    stats.add(probs, batch["attention_mask"], statistics.token_kinds(
        tokens, probs.shape[-1], cls_token, sep_token))
    if first is None:
      real = np.flatnonzero(batch["attention_mask"][0])
      first = (probs[:, 0][:, :, real][..., real], [tokens[0][i] for i in real])
  result = stats.result()
  name = os.path.basename(os.path.normpath(model_path))
  figures.statistics_figure(result, os.path.join(out_dir, "head_statistics.png"),
                            f"{name}: attention statistics per head")
  figures.layer_heatmaps(first[0], first[1], os.path.join(out_dir, "heatmaps"))
  head_view.write(os.path.join(out_dir, "head_view.html"), first[1], first[0],
                  title=f"{name}: {lines[0][:80]}")
  _write(out_dir, "head_statistics.md", f"{len(lines)} inputs from {input_file}\n\n"
         + statistics.table(result) + "\n\nMean per layer:\n\n" + statistics.by_layer(result))
  summary = {"model": model_path, "examples": len(lines), "seconds": time.time() - start,
             "statistics": {k: v.tolist() for k, v in result.items()}}
  _write(out_dir, "head_statistics.json", summary)
  return summary


def _cross_entropy(outputs, batch):
  return optax.softmax_cross_entropy_with_integer_labels(outputs["logits"],
                                                         batch["labels"]).mean()


def pruning(model_path: str, task: str, out_dir: str, tokenizer: str | None = None,
            max_eval_examples: int | None = None, importance_examples: int = 256,
            step: float = 0.1, max_fraction: float = 0.9, max_seq_length: int = 128,
            batch_size: int = 32, data_dir: str | None = None) -> dict:
  """Michel et al.'s iterative pruning of a fine-tuned GLUE classifier: dev score as the
  least important heads (importance on `importance_examples` training rows) are masked."""
  start = time.time()
  model, tok = _model_and_tokenizer(model_path, tokenizer)
  task_def = glue.get_task(task)
  if task_def.is_regression:
    raise ValueError(f"task {task!r} is a regression; use a classification task "
                     "(sst2, mrpc, cola, rte, ...).")
  log = readers.SkipLog()
  dev = glue_features.convert_examples(glue.read_examples(
      task_def, "dev", log, data_dir, max_eval_examples), tok, max_seq_length)
  train = glue_features.convert_examples(glue.read_examples(
      task_def, "train", log, data_dir, importance_examples), tok, max_seq_length)
  inputs = lambda batch: {k: batch[k] for k in INPUTS}
  forward = jax.jit(lambda params, mask, batch: attention_maps.apply(
      model.module, {"params": params}, head_mask=mask, **batch)["logits"])

  def score(mask):
    logits = np.concatenate([np.asarray(forward(model.params, mask, inputs(b)))
                             for b in _batches(dev, batch_size)])
    return glue.evaluate(task_def, logits, dev["labels"])[task_def.metrics[0]]

  rows = heads.pruning_curve(model.module, model.params, lambda: _batches(train, batch_size),
                             _cross_entropy, inputs, score, step, max_fraction)
  metric = task_def.metrics[0]
  figures.curve_figure([r["fraction_pruned"] for r in rows], {metric: [r["score"] for r in rows]},
                       os.path.join(out_dir, "pruning_curve.png"), "fraction of heads pruned",
                       f"{task} dev {metric}", os.path.basename(os.path.normpath(model_path)))
  table = [f"| heads pruned | fraction | dev {metric} |", "|---|---|---|"]
  table += [f"| {r['heads_pruned']} | {r['fraction_pruned']:.2f} | {r['score']:.4f} |"
            for r in rows]
  _write(out_dir, "pruning_curve.md", "\n".join(table) + "\n")
  summary = {"model": model_path, "task": task, "dev_examples": len(dev["labels"]),
             "importance_examples": len(train["labels"]), "metric": metric, "curve": rows,
             "seconds": time.time() - start}
  _write(out_dir, "pruning_curve.json", summary)
  return summary


def probe(model_path: str, out_dir: str, tasks=probing.TASKS, tokenizer: str | None = None,
          train_sentences: int = 1000, dev_sentences: int = 300, max_seq_length: int = 128,
          steps: int = 300, data_dir: str | None = None) -> dict:
  """Layer-by-layer linear probes (and a scalar-mix probe) on CoNLL-2003 train -> dev."""
  start = time.time()
  unknown = set(tasks) - set(probing.TASKS)
  if unknown:
    raise ValueError(f"tasks: {sorted(unknown)} unknown; use some of {probing.TASKS}.")
  model, tok = _model_and_tokenizer(model_path, tokenizer)
  data = {split: probing.read_columns(conll.path(split, data_dir), limit)
          for split, limit in (("train", train_sentences), ("dev", dev_sentences))}
  feats = {split: probing.word_states(model.module, model.params, tok, sentences,
                                      max_seq_length) for split, sentences in data.items()}
  results = {}
  for task in tasks:
    if task in probing.TOKEN_TASKS:
      rows, y, names = probing.word_targets(data["train"], task, feats["train"][1])
      dev_rows, dev_y, _ = probing.word_targets(data["dev"], task, feats["dev"][1], names)
      x, dev_x = feats["train"][0][rows], feats["dev"][0][dev_rows]
    else:
      a, b, y, names = probing.span_targets(data["train"], task, feats["train"][1])
      dev_a, dev_b, dev_y, _ = probing.span_targets(data["dev"], task, feats["dev"][1], names)
      x = probing.span_features(feats["train"][0], a, b)
      dev_x = probing.span_features(feats["dev"][0], dev_a, dev_b)
    by_layer = probing.layer_probes(x, y, dev_x, dev_y, len(names), steps)
    mixed, weights = probing.mix_probe(x, y, dev_x, dev_y, len(names), steps)
    majority = float(np.mean(dev_y == np.bincount(y).argmax()))
    results[task] = {"accuracy_by_layer": by_layer.tolist(), "scalar_mix": mixed,
                     "mix_weights": weights.tolist(), "majority_baseline": majority,
                     "labels": len(names), "train_items": len(y), "dev_items": len(dev_y)}
  layers = len(next(iter(results.values()))["accuracy_by_layer"])
  figures.curve_figure(list(range(layers)), {t: r["accuracy_by_layer"] for t, r in
                                             results.items()},
                       os.path.join(out_dir, "probe_by_layer.png"),
                       "layer (0 = embeddings)", "dev accuracy",
                       os.path.basename(os.path.normpath(model_path)))
  header = "| task | " + " | ".join(f"layer {i}" for i in range(layers)) + " | mix | majority |"
  lines = [header, "|---" * (layers + 3) + "|"]
  for task, r in results.items():
    cells = " | ".join(f"{a:.3f}" for a in r["accuracy_by_layer"])
    lines.append(f"| {task} | {cells} | {r['scalar_mix']:.3f} | {r['majority_baseline']:.3f} |")
  _write(out_dir, "probe_by_layer.md", "\n".join(lines) + "\n")
  summary = {"model": model_path, "train_sentences": len(data["train"]),
             "dev_sentences": len(data["dev"]), "tasks": results, "seconds": time.time() - start}
  _write(out_dir, "probe_by_layer.json", summary)
  return summary
