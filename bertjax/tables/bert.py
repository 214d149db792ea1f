"""BERT (Devlin et al., 2019), Table 5: the effect of the pretraining tasks."""
from bertjax.tables import scales
from bertjax.tables.spec import Arm, Table, Task

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
            # GPT's attention is the explicit one only (no fused kernel at the gpu scale).
            model_overrides={"attention_implementation": None},
            note=("a BERT-sized left-to-right Transformer (GPT layout); fine-tuned on the "
                  "last position's state, the only one that sees the whole input")),
    ),
    tasks=(SST2, MRPC, RTE, SQUAD),
    scales={
        # The tests train two arms end to end; No NSP differs from MLM + NSP only in its
        # objective file, which every arm's config test parses and builds.
        "tiny": scales.tiny(("sst2",), arms=("mlm_nsp", "ltr")),
        "cpu": scales.cpu_mlm(),  # the CPU recipe of experiments/scale (scales.py)
        "gpu": scales.gpu(scales.cpu_mlm()),
        # BERT-base, 1M steps of 256 x 128 tokens (runs/pretrain.gin); bind the paper's
        # BooksCorpus + Wikipedia with task_dataset.source on the pod.
        "paper": scales.paper({}, {}),
    },
    notes=("SQuAD v1.1: only its dev set is in the shared data, so it is split by article, "
           "deterministically: the first 38 of its 48 articles train, the last 10 (1,988 "
           "questions) evaluate (`--squad_train_articles=38`), article-disjoint.",),
)
