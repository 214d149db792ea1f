"""The sizes every table shares: `tiny` (tests), `cpu` (this 2-core machine, about two
hours a table) and `paper` (the paper's run as gin for a TPU pod: written, parsed, not run).

Every arm of a table gets the same model size, steps, batch and sequence length, so the
arms' pretraining compute differs only by what their objectives add (reported in FLOPs).
"""
from bertjax.tables import corpus
from bertjax.tables.spec import Scale

TINY_MODEL = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64,
              "vocab_size": corpus.VOCAB_SIZES["tiny"]}
CPU_MODEL = {"hidden_size": 128, "num_layers": 2, "num_heads": 2, "intermediate_size": 512,
             "vocab_size": corpus.VOCAB_SIZES["cpu"]}

TINY_PRETRAIN = {"num_train_steps": 2, "batch_size": 8, "sequence_length": 32,
                 "log_every": 1, "checkpoint_every": 2, "eval_every": 2, "eval_steps": 1,
                 "show_progress": False}
CPU_PRETRAIN = {"num_train_steps": 600, "batch_size": 32, "sequence_length": 128,
                "log_every": 50, "checkpoint_every": 100, "eval_every": 600,
                "eval_steps": 8, "show_progress": False}

# runs/pretrain.gin's schedule is BERT's (peak 1e-4 after 10k warmup steps): a 600-step run
# would end its warmup at its last step. ELECTRA-Small's peak rate (5e-4, the published
# recipe nearest this size) with 10% warmup, then linear decay, for every arm.
CPU_OPTIMIZER = ("warmup_linear_decay.peak_value = 5e-4",
                 "warmup_linear_decay.warmup_steps = 60")

# The MLM recipe (BERT's model with MaskedLM: BERT Table 5, both RoBERTa tables). At the
# shared recipe above BERT stayed on the unigram plateau: held-out MLM accuracy 6.7% (loss
# 6.95) after 600 steps, so every arm fine-tuned like an untrained encoder
# (experiments/bert/bert_table5_600steps.md). At a 4x peak rate the loss leaves the plateau
# sooner (9.8% vs 6.7% held out at step 600, in a probe), and the MLM head run at BERT's 20
# predictions a sequence (max_predictions_per_seq) makes a step about 2.7x cheaper, which
# buys five times the steps: 13.8% held out (loss 6.39) after 3,000 (experiments/bert).
# Most of that gain is copying the selected tokens left unchanged; at [MASK] both runs
# predict under 5%, the longer one 0.49 nats under the unigram's cross-entropy against 0.29
# (experiments/bert/mlm_at_cpu_scale.md). transformers' BertForMaskedLM trained on the same
# batches sits on the same plateau; no vocabulary, batch, length or longer run tried (up to
# 20M tokens) leaves it held out, and the encoders learn no positional attention (same file).
CPU_MLM_PRETRAIN = {**CPU_PRETRAIN, "num_train_steps": 3000, "log_every": 100,
                    "checkpoint_every": 500, "eval_every": 1000}
CPU_MLM_BINDINGS = ("warmup_linear_decay.peak_value = 2e-3",
                    "warmup_linear_decay.warmup_steps = 300",
                    "MaskedLM.max_predictions = 20")

# The ELECTRA recipe (the three ELECTRA tables): the MLM recipe's length, every head scored
# at the masked positions run at the same 20 of them (the generators', BERT's MLM head,
# Replace MLM's network head), at ELECTRA-Small's peak rate. At the MLM recipe's 2e-3 the
# discriminator never left its base rate (loss within 0.006 of the replaced share's entropy
# and recall 0 through step 2,000, while its generator became a unigram model that copies
# the kept tokens); at 5e-4 it moved off it, if only a little (0.012 nats below held out at
# step 750, recall up to 5%): experiments/electra/cpu_probe.md.
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
                  "bindings": CPU_OPTIMIZER, **changes})


def cpu_mlm(**changes) -> Scale:
  """The CPU scale on the MLM recipe (CPU_MLM_PRETRAIN, CPU_MLM_BINDINGS)."""
  return cpu(**{"pretrain": CPU_MLM_PRETRAIN, "bindings": CPU_MLM_BINDINGS, **changes})


def cpu_electra(**changes) -> Scale:
  """The CPU scale on the ELECTRA recipe (CPU_MLM_PRETRAIN, CPU_ELECTRA_BINDINGS)."""
  return cpu(**{"pretrain": CPU_MLM_PRETRAIN, "bindings": CPU_ELECTRA_BINDINGS, **changes})


def paper(model: dict, pretrain: dict, **changes) -> Scale:
  return Scale("paper", model, pretrain, PAPER_FINETUNE, PAPER_PER_TASK, corpus=None,
               runnable=False, **{"seeds": (0, 1, 2, 3, 4), **changes})
