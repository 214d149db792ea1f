"""BERT (Devlin et al., 2019), Table 5: the effect of the pretraining tasks."""
from bertjax.tables import scales
from bertjax.tables.spec import Arm, Table, Task

# The shared CPU scale (600 steps peaking at lr 5e-4) left BERT on the unigram plateau: its
# held-out MLM accuracy was 6.7% (loss 6.95) after 600 steps, so every arm fine-tuned like an
# untrained encoder (experiments/bert/bert_table5_600steps.md). At a 4x peak rate the MLM
# loss leaves the plateau sooner (9.8% vs 6.7% held out at step 600, in a probe), and the MLM
# head run at BERT's 20 predictions a sequence (max_predictions_per_seq) makes a step about
# 2.7x cheaper, which buys five times the steps.
CPU_PRETRAIN = {**scales.CPU_PRETRAIN, "num_train_steps": 3000, "log_every": 100,
                "checkpoint_every": 500, "eval_every": 1000}
CPU_BINDINGS = ("warmup_linear_decay.peak_value = 2e-3", "warmup_linear_decay.warmup_steps = 300",
                "MaskedLM.max_predictions = 20")

SST2 = Task("sst2", "SST-2 acc", "dev/accuracy")
MRPC = Task("mrpc", "MRPC F1", "dev/f1", extra=("dev/accuracy",))
RTE = Task("rte", "RTE acc", "dev/accuracy")
SQUAD = Task("squad11", "SQuAD 1.1 F1 (article split)", "held_out/f1",
             extra=("held_out/exact",))

TABLE5 = Table(
    name="bert_table5", paper="bert",
    title="BERT Table 5: ablation over the pretraining tasks",
    direction=("MLM + NSP beats No NSP (MNLI 84.4 vs 83.9, QNLI 88.4 vs 84.9, MRPC 86.7 vs "
               "86.5, SQuAD 88.5 vs 87.9 F1), and the left-to-right LM is clearly worse "
               "again (MRPC 77.5, SQuAD 77.8 F1; SST-2 92.6 vs 92.7/92.6)."),
    arms=(
        Arm("mlm_nsp", "BERT (MLM + NSP)", ("models/bert_base.gin", "objectives/mlm_nsp.gin")),
        Arm("no_nsp", "No NSP (MLM only)", ("models/bert_base.gin", "objectives/bert_mlm.gin"),
            note="the same segment pairs, B always the text after A, static masks"),
        Arm("ltr", "LTR & No NSP", ("models/gpt_ltr_base.gin", "objectives/causal_lm.gin"),
            finetune_flags=("--gin_param=Options.pooling = 'last'",),
            note=("a BERT-sized left-to-right Transformer (GPT layout); fine-tuned on the "
                  "last position's state, the only one that sees the whole input")),
    ),
    tasks=(SST2, MRPC, RTE, SQUAD),
    scales={
        "tiny": scales.tiny(("sst2",)),
        "cpu": scales.cpu(pretrain=CPU_PRETRAIN, bindings=CPU_BINDINGS),
        # BERT-base, 1M steps of 256 x 128 tokens (runs/pretrain.gin); bind the paper's
        # BooksCorpus + Wikipedia with task_dataset.source on the pod.
        "paper": scales.paper({}, {}),
    },
    notes=("SQuAD v1.1: only its dev set is in the shared data, so it is split by article, "
           "deterministically: the first 38 of its 48 articles train, the last 10 (1,988 "
           "questions) evaluate (`--squad_train_articles=38`), article-disjoint.",),
)
