"""Whether a pretraining learned word order: the two held-out signals every table reports
per arm, and plots against training tokens.

- the loss at unseen positions (`mlm_unseen_loss`, [MASK] and random positions of held-out
  text) against the held-out text's count bigram (the corpus's stats.json,
  `held_out_cross_entropy`): a model that reads its neighbours beats the bigram, one that
  knows only frequencies stays at the unigram;
- the largest attention any head puts on the previous or the next token
  (`attention_previous_max` / `attention_next_max`, `train.attention_signals`), against
  `GATE_ATTENTION`.

Neither can be faked by copying the input or memorising the training text.
"""
import json
import math
import os
from typing import Optional

GATE_ATTENTION = 0.5
LOSS = "mlm_unseen_loss"
SIGNALS = (LOSS, "attention_previous_max", "attention_next_max", "attention_previous_head",
           "attention_next_head")


def neighbour_attention(point: dict) -> Optional[float]:
  values = [point[k] for k in ("attention_previous_max", "attention_next_max") if k in point]
  return max(values) if values else None


def passes(point: dict, baselines: dict) -> bool:
  """Both signals at one eval: unseen loss under the bigram, a head over GATE_ATTENTION."""
  attention = neighbour_attention(point)
  return (point.get(LOSS, math.inf) < baselines["bigram"]
          and attention is not None and attention > GATE_ATTENTION)


def summary(point: Optional[dict], baselines: Optional[dict]) -> str:
  """One table cell: 'unseen loss 4.42 (bigram 5.14), neighbour attention 0.46: no'."""
  if not point or (LOSS not in point and neighbour_attention(point) is None):
    return "not logged"
  parts = []
  if LOSS in point:
    parts.append(f"unseen loss {point[LOSS]:.2f}"
                 + (f" (bigram {baselines['bigram']:.2f})" if baselines else ""))
  attention = neighbour_attention(point)
  if attention is not None:
    parts.append(f"neighbour attention {attention:.2f}")
  text = ", ".join(parts)
  return f"{text}: {'yes' if passes(point, baselines) else 'no'}" if baselines else text


def evals(model_dir: str) -> list[dict]:
  """The eval rows of a run's metrics.jsonl that carry a signal, with step and signals, in
  step order. A resumed run logs the steps after its checkpoint again: the latest row wins."""
  path = os.path.join(model_dir, "metrics.jsonl")
  if not os.path.isfile(path):
    return []
  with open(path) as f:
    rows = [json.loads(line) for line in f if line.strip()]
  by_step = {r["step"]: {k: r[k] for k in ("step",) + SIGNALS if k in r} for r in rows
             if r.get("split") == "eval" and any(k in r for k in SIGNALS)}
  return [by_step[step] for step in sorted(by_step)]


def first_pass(curve: list[dict], baselines: dict) -> Optional[int]:
  return next((p["step"] for p in curve if passes(p, baselines)), None)


def plot(curves: dict[str, tuple[list[dict], int]], baselines: Optional[dict], path: str,
         title: str = "") -> Optional[str]:
  """Two panels against training tokens: unseen loss (with the unigram and bigram lines)
  and the largest neighbour attention (with the gate). `curves`: label -> (eval rows,
  tokens per step). Returns `path`, or None when no curve has a point."""
  if not any(rows for rows, _ in curves.values()):
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, (loss_ax, attn_ax) = plt.subplots(1, 2, figsize=(11, 4))
  for label, (rows, tokens_per_step) in curves.items():
    tokens = [p["step"] * tokens_per_step / 1e6 for p in rows]
    loss_ax.plot([t for t, p in zip(tokens, rows) if LOSS in p],
                 [p[LOSS] for p in rows if LOSS in p], label=label)
    attn_ax.plot([t for t, p in zip(tokens, rows) if neighbour_attention(p) is not None],
                 [neighbour_attention(p) for p in rows if neighbour_attention(p) is not None],
                 label=label)
  for name in ("unigram", "bigram"):
    if baselines and name in baselines:
      loss_ax.axhline(baselines[name], color="grey", linestyle=":", linewidth=1)
      loss_ax.annotate(f"count {name}", (0, baselines[name]), fontsize=8, color="grey",
                       va="bottom")
  attn_ax.axhline(GATE_ATTENTION, color="grey", linestyle=":", linewidth=1)
  loss_ax.set(xlabel="training tokens (M)", ylabel="held-out loss at [MASK] / random (nats)")
  attn_ax.set(xlabel="training tokens (M)", ylim=(0, 1),
              ylabel="largest attention on the previous / next token")
  loss_ax.legend(fontsize=7)
  if title:
    fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
