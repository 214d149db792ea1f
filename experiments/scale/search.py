"""The CPU recipe search: which small encoder learns word order from Wikipedia + books
within about an hour of this 2-core machine?

Each arm is one `python -m bertjax.main` run (BERT's MLM, no NSP, on the `wiki_books`
source with the tables' WordPiece 8,192) that changes one thing or a few against `base`,
the tables' CPU model and MLM recipe. Every eval (every `EVAL_EVERY` steps, 8 held-out
batches of 32 x 128) logs the two gate signals:

  mlm_unseen_loss         held-out loss at the [MASK] and random positions, against the
                          held-out text's unigram and count bigram (the corpus's stats.json)
  attention_*_max         the largest attention any head puts on the previous / next token

    python experiments/scale/search.py run ARM [ARM ...] --corpus=DIR --out=DIR
    python experiments/scale/search.py report       # results.md + curves.png

`run` writes each arm's curve and costs to experiments/scale/results/ARM.json (CPU seconds
as the process used them, so a shared machine's contention does not count).
"""
import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
# pylint: disable=g-import-not-at-top,wrong-import-position
from bertjax.tables import corpus as corpus_lib
from bertjax.tables import word_order
RESULTS = os.path.join(HERE, "results")
EVAL_EVERY = 250

TABLES_MODEL = {"hidden_size": 128, "num_layers": 2, "num_heads": 2, "intermediate_size": 512,
                "vocab_size": 8192, "hidden_dropout": 0.1, "attention_dropout": 0.1}


@dataclasses.dataclass(frozen=True)
class Arm:
  note: str
  steps: int
  model: dict = dataclasses.field(default_factory=dict)
  peak: float = 2e-3
  warmup: int = 300
  batch: int = 32
  bindings: tuple = ()

  def model_config(self) -> dict:
    return {**TABLES_MODEL, **self.model}


ARMS = {
    "base": Arm("the tables' CPU model and MLM recipe (2 x 128, post-LN, learned absolute "
                "positions, peak 2e-3), no text repeated", steps=6000),
    "rotary": Arm("base with rotary positions instead of the learned table", steps=6000,
                  model={"position_embedding": "rotary"}),
    "rotary_preln": Arm("rotary positions and pre-LN", steps=6000,
                        model={"position_embedding": "rotary", "pre_norm": True}),
    "rotary_heads4": Arm("rotary positions, 4 heads of 32 instead of 2 of 64 (same width "
                         "and FLOPs)", steps=6000,
                         model={"position_embedding": "rotary", "num_heads": 4}),
    "rotary_preln_heads4": Arm("rotary positions, pre-LN and 4 heads of 32", steps=6000,
                               model={"position_embedding": "rotary", "pre_norm": True,
                                      "num_heads": 4}),
}


def command(name: str, arm: Arm, corpus: str, model_dir: str) -> list[str]:
  bindings = [
      f"build_model.config_overrides = {arm.model_config()!r}",
      f"Trainer.num_train_steps = {arm.steps}", f"Trainer.batch_size = {arm.batch}",
      "Trainer.sequence_length = 128", "Trainer.log_every = 50",
      f"Trainer.eval_every = {EVAL_EVERY}", "Trainer.eval_steps = 8",
      "Trainer.eval_batch_size = 32", f"Trainer.checkpoint_every = {arm.steps}",
      "Trainer.keep_checkpoints = 1", "Trainer.show_progress = False",
      "Trainer.best_metric = None",
      f"warmup_linear_decay.peak_value = {arm.peak}",
      f"warmup_linear_decay.warmup_steps = {arm.warmup}",
      "MaskedLM.max_predictions = 20", "bert_preprocessors.dupe_factor = 1",
  ] + corpus_lib.gin_bindings(corpus, "wordpiece", "cpu") + list(arm.bindings)
  return ([sys.executable, "-m", "bertjax.main", f"--model_dir={model_dir}",
           "--gin_file=gin/runs/pretrain.gin", "--gin_file=gin/models/bert_base.gin",
           "--gin_file=gin/objectives/bert_mlm.gin"]
          + [f"--gin_bindings={b}" for b in bindings])


def train_rate(model_dir: str) -> dict:
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f if line.strip()]
  rates = sorted(r["steps_per_sec"] for r in rows if r.get("split") == "train"
                 and r.get("steps_per_sec"))
  return {"median_steps_per_sec": rates[len(rates) // 2] if rates else None}


def run(names: list[str], corpus: str, out: str) -> None:
  os.makedirs(RESULTS, exist_ok=True)
  for name in names:
    arm = ARMS[name]
    model_dir = os.path.join(out, name)
    cmd = command(name, arm, corpus, model_dir)
    print("$", " ".join(cmd), flush=True)
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    with open(os.path.join(out, f"{name}.log"), "a") as log:
      code = subprocess.call(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.path.join(corpus, "stats.json")) as f:
      baselines = json.load(f)["held_out_cross_entropy"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    record = {"arm": name, "note": arm.note, "model": arm.model_config(), "steps": arm.steps,
              "batch": arm.batch, "peak": arm.peak, "warmup": arm.warmup,
              "bindings": list(arm.bindings), "exit_code": code, "cpu_seconds": round(cpu),
              "wall_seconds": round(time.time() - start), "tokens": arm.steps * arm.batch * 128,
              "baselines": baselines, "command": cmd[1:], **train_rate(model_dir),
              "curve": word_order.evals(model_dir)}
    with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
      json.dump(record, f, indent=1)
    print(f"{name}: exit {code}, {cpu / 3600:.2f} CPU hours", flush=True)


def report() -> None:
  """results.md (one row per arm: its last eval, the first step that passed the gate, the
  cost) and curves.png (held-out unseen loss and neighbour attention against tokens)."""
  records = []
  for name in ARMS:
    path = os.path.join(RESULTS, f"{name}.json")
    if os.path.isfile(path):
      with open(path) as f:
        records.append(json.load(f))
  if not records:
    raise SystemExit(f"No results in {RESULTS}: run some arms first.")
  base = records[0]["baselines"]
  lines = ["| arm | what changes | steps x batch (tokens) | held-out unseen loss | "
           "previous / next attention (max head) | gate passed at | CPU h | steps/s |",
           "|---|---|---|---|---|---|---|---|"]
  for rec in records:
    last = rec["curve"][-1] if rec["curve"] else {}
    passed = next((p["step"] for p in rec["curve"] if word_order.passes(p, base)), None)
    lines.append(
        f"| `{rec['arm']}` | {rec['note']} | {rec['steps']:,} x {rec['batch']} "
        f"({rec['tokens'] / 1e6:.1f}M) | {last.get('mlm_unseen_loss', float('nan')):.2f} | "
        f"{last.get('attention_previous_max', 0):.2f} / {last.get('attention_next_max', 0):.2f} | "
        f"{'step ' + format(passed, ',') if passed else 'not passed'} | "
        f"{rec['cpu_seconds'] / 3600:.2f} | {rec['median_steps_per_sec'] or 0:.2f} |")
  word_order.plot({rec["arm"]: (rec["curve"], rec["batch"] * 128) for rec in records}, base,
                  os.path.join(HERE, "curves.png"))
  header = [f"Held-out text: {base['tokens']:,} tokens; unigram {base['unigram']:.2f} nats, "
            f"count bigram {base['bigram']:.2f}. The gate: unseen loss under the bigram and a "
            f"head with more than {word_order.GATE_ATTENTION:.0%} on the previous or next token.", ""]
  with open(os.path.join(HERE, "results.md"), "w") as f:
    f.write("\n".join(header + lines) + "\n\n![curves](curves.png)\n")
  print("\n".join(header + lines))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = parser.add_subparsers(dest="what", required=True)
  r = sub.add_parser("run")
  r.add_argument("arms", nargs="+", choices=sorted(ARMS))
  r.add_argument("--corpus", required=True)
  r.add_argument("--out", required=True)
  sub.add_parser("report")
  args = parser.parse_args()
  if args.what == "run":
    run(args.arms, args.corpus, args.out)
  else:
    report()


if __name__ == "__main__":
  main()
