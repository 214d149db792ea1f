"""The sizes every table shares: `tiny` (tests), `cpu` (this 2-core machine: about an hour
a pretraining), `gpu` (one H100/H200: the CPU recipe scaled up, see `gpu`) and `paper` (the
paper's run as gin for a TPU pod: written, parsed, not run).

Every arm of a table gets the same model size, steps, batch and sequence length, so the
arms' pretraining compute differs only by what their objectives add (reported in FLOPs).
"""
import dataclasses

from bertjax.tables import corpus
from bertjax.tables.spec import Scale

TINY_MODEL = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64,
              "vocab_size": corpus.VOCAB_SIZES["tiny"]}
# The CPU recipe of experiments/scale (its search, curves and costs): the size of
# ELECTRA-Small's smaller half, with rotary positions and four heads of 32, the variant that
# learns word order from the wiki_books corpus within about an hour of this machine. BERT's
# learned position table did not in the same budget. Rotary positions depart from the papers'
# encoders (each table says so).
CPU_MODEL = {"hidden_size": 128, "num_layers": 2, "num_heads": 4, "intermediate_size": 512,
             "vocab_size": corpus.VOCAB_SIZES["cpu"], "position_embedding": "rotary"}
CPU_DEPARTURE = ("Every encoder here (and the left-to-right arm) uses rotary positions where "
                 "the paper's has a learned position table: the CPU recipe that learns word "
                 "order in an hour (experiments/scale).")

TINY_PRETRAIN = {"num_train_steps": 2, "batch_size": 8, "sequence_length": 32,
                 "log_every": 1, "checkpoint_every": 2, "eval_every": 2, "eval_steps": 1,
                 "show_progress": False}
# 6,000 steps of 32 x 128 tokens (24.6M tokens, a quarter of the corpus: no text read twice),
# the word-order signals logged at every eval (tables.word_order). A checkpoint every 250
# steps (about 5 minutes alone on this machine): a table takes several sittings, and a sitting
# killed without its SIGTERM loses at most that.
CPU_PRETRAIN = {"num_train_steps": 6000, "batch_size": 32, "sequence_length": 128,
                "log_every": 100, "checkpoint_every": 250, "eval_every": 500,
                "eval_steps": 8, "show_progress": False}

# Peak 2e-3 after 300 warmup steps, then linear decay (runs/pretrain.gin's BERT schedule would
# still be warming up at the end), and BERT's 20 predictions a sequence for the MLM head
# (max_predictions_per_seq: the head scores 20 positions, not 128).
CPU_MLM_BINDINGS = ("warmup_linear_decay.peak_value = 2e-3",
                    "warmup_linear_decay.warmup_steps = 300",
                    "MaskedLM.max_predictions = 20")

# ELECTRA's heads scored at the same 20 positions (the generator's, BERT's MLM head, Replace
# MLM's network head), at ELECTRA-Small's peak rate: on the 1.6M-token corpus a discriminator
# at 2e-3 never left its base rate (experiments/scale/README.md).
ELECTRA_HEADS_AT_20 = ("ReplacedTokenDetection.max_predictions = 20",
                       "ReplacedMLM.max_predictions = 20",
                       "MaskedLM.max_predictions = 20")
CPU_ELECTRA_BINDINGS = ("warmup_linear_decay.peak_value = 5e-4",
                        "warmup_linear_decay.warmup_steps = 300") + ELECTRA_HEADS_AT_20

TINY_FINETUNE = ("--max_train_examples=16", "--max_eval_examples=16", "--max_steps=2",
                 "--max_seq_length=32", "--batch_size=8", "--eval_batch_size=16",
                 "--log_every=1", "--squad_train_articles=38", "--doc_stride=16",
                 "--max_query_length=12")
# BERT's recipe (AdamW, 10% warmup, linear decay, batch 32) at the rate that lets encoders
# this small learn at all (experiments/finetune/results.md: 1e-4 leaves them at the
# majority class).
CPU_FINETUNE = ("--batch_size=32", "--learning_rate=1e-3", "--log_every=50")
CPU_PER_TASK = {
    "sst2": ("--max_train_examples=8000", "--num_epochs=2", "--max_seq_length=64"),
    "mrpc": ("--num_epochs=3", "--max_seq_length=128"),
    "rte": ("--num_epochs=3", "--max_seq_length=128"),
    # SQuAD v1.1 dev split by article: the first 38 train (8,582 questions, 4,000 drawn
    # per seed), the last 10 evaluate (1,988 questions).
    "squad11": ("--squad_train_articles=38", "--max_train_examples=4000", "--num_epochs=2",
                "--max_seq_length=192", "--doc_stride=96", "--max_query_length=48",
                "--eval_batch_size=64"),
}
PAPER_FINETUNE = ("--batch_size=32", "--learning_rate=5e-5", "--num_epochs=3")
PAPER_PER_TASK = {"squad11": ("--max_seq_length=384", "--doc_stride=128",
                              "--squad_train_articles=38")}


def tiny(tasks: tuple[str, ...], **changes) -> Scale:
  return Scale("tiny", TINY_MODEL, TINY_PRETRAIN, TINY_FINETUNE, corpus="tiny",
               tasks=tasks, **{"seeds": (0,), **changes})


def cpu(**changes) -> Scale:
  return Scale(**{"name": "cpu", "model": CPU_MODEL, "pretrain": CPU_PRETRAIN,
                  "finetune": CPU_FINETUNE, "per_task": CPU_PER_TASK,
                  "bindings": CPU_MLM_BINDINGS, "departure": CPU_DEPARTURE, **changes})


def cpu_mlm(**changes) -> Scale:
  """The CPU scale of the MLM tables (BERT, RoBERTa, SpanBERT, DistilBERT's teacher)."""
  return cpu(**changes)


def cpu_electra(**changes) -> Scale:
  """The CPU scale of the ELECTRA tables (CPU_ELECTRA_BINDINGS)."""
  return cpu(**{"bindings": CPU_ELECTRA_BINDINGS, **changes})


def paper(model: dict, pretrain: dict, **changes) -> Scale:
  return Scale("paper", model, pretrain, PAPER_FINETUNE, PAPER_PER_TASK, corpus=None,
               runnable=False, **{"seeds": (0, 1, 2, 3, 4), **changes})


# The accelerator scale: a table's CPU recipe twice as wide and twice as deep, in bfloat16
# with cuDNN's fused attention, reading four times the tokens a step, on the same corpus and
# with the same tasks and seeds. Sized by FLOPs, not yet timed (no accelerator was at hand when
# it was written): an MLM arm is about 32 times a CPU arm's compute, some 9 PFLOP, about two
# minutes at 10% of an H200's bf16 matmul rate (benchmarks/results/gpu_step.md measured 34% at
# BERT-base; models this small reach less). Fine-tuning cells cost mostly their process's
# start-up and compilation there (tens of seconds each).
GPU_WIDER = ("hidden_size", "embedding_size", "intermediate_size")
GPU_DEEPER = ("num_layers", "num_decoder_layers")
GPU_BATCH_FACTOR = 4


def gpu(cpu_scale: Scale, fused_attention: bool = True) -> Scale:
  """The `gpu` scale of a table whose CPU scale is `cpu_scale`. fused_attention: False for
  the families whose attention cuDNN's kernel does not serve (T5's relative bias)."""
  model = {k: v * 2 if k in GPU_WIDER + GPU_DEEPER else v for k, v in cpu_scale.model.items()}
  if model:
    model["dtype"] = "bfloat16"
    if fused_attention:
      model.update(attention_implementation="cudnn", attention_dropout=0.0)
  pretrain = dict(cpu_scale.pretrain)
  if "batch_size" in pretrain:
    pretrain["batch_size"] *= GPU_BATCH_FACTOR
  return dataclasses.replace(cpu_scale, name="gpu", model=model, pretrain=pretrain)

