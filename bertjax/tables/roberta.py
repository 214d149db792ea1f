"""RoBERTa (Liu et al., 2019): static vs dynamic masking (Table 1) and the input formats
(Table 2), all on BERT-base's architecture and objective files, equal steps and batch."""
from bertjax.tables import scales
from bertjax.tables.bert import MRPC, SQUAD, SST2
from bertjax.tables.spec import Arm, Table

_BERT = "models/bert_base.gin"
_DYNAMIC = "Trainer.train_task = 'bert_mlm_nsp_dynamic'"
_MLM_ONLY = (_BERT, "objectives/bert_mlm.gin")  # BERT's heads, MLM loss only

TABLE1 = Table(
    name="roberta_table1", paper="roberta",
    title="RoBERTa Table 1: static vs dynamic masking",
    direction=("Dynamic masking is comparable or slightly better than static (SQuAD 2.0 "
               "78.7 vs 78.3 F1, MNLI-m 84.0 vs 84.3, SST-2 92.9 vs 92.5)."),
    arms=(
        Arm("static", "static (10 masks, BERT)", (_BERT, "objectives/mlm_nsp.gin"),
            note="bert_mlm_nsp: 10 copies masked once, repeated"),
        Arm("dynamic", "dynamic", (_BERT, "objectives/mlm_nsp.gin"), (_DYNAMIC,),
            note="bert_mlm_nsp_dynamic: pairs and masks drawn anew every epoch"),
    ),
    tasks=(SST2, MRPC, SQUAD),
    scales={"tiny": scales.tiny(("sst2",)), "cpu": scales.cpu_mlm(),
            "gpu": scales.gpu(scales.cpu_mlm()),
            # BERT-base, 1M steps of 256 x 512 tokens, as the paper's reimplementation.
            "paper": scales.paper({}, {"sequence_length": 512})},
    notes=("The paper's SQuAD 2.0 and MNLI are not in the shared data: SST-2, MRPC and the "
           "SQuAD 1.1 article split stand in.",),
)

TABLE2 = Table(
    name="roberta_table2", paper="roberta",
    title="RoBERTa Table 2: input formats and next-sentence prediction",
    direction=("Single sentences hurt (SENTENCE-PAIR 88.7 SQuAD 1.1 F1 vs SEGMENT-PAIR "
               "90.4); without NSP, FULL-SENTENCES (90.4) and DOC-SENTENCES (90.6) match or "
               "beat SEGMENT-PAIR + NSP."),
    arms=(
        Arm("segment_pair", "SEGMENT-PAIR + NSP", (_BERT, "objectives/mlm_nsp.gin"),
            (_DYNAMIC,)),
        Arm("sentence_pair", "SENTENCE-PAIR + NSP", (_BERT, "objectives/mlm_nsp.gin"),
            (_DYNAMIC, "bertjax.data.recipes.encoder.bert_preprocessors.unit = 'sentence'"),
            note=("pairs of single sentences; the paper raises the batch to match the "
                  "tokens per step, here the batch is the same (fewer real tokens)")),
        Arm("full_sentences", "FULL-SENTENCES", _MLM_ONLY,
            ("Trainer.train_task = 'roberta_mlm'",)),
        Arm("doc_sentences", "DOC-SENTENCES", _MLM_ONLY,
            ("Trainer.train_task = 'roberta_mlm'",
             "roberta_preprocessors.cross_documents = False")),
    ),
    tasks=(SST2, SQUAD),
    scales={"tiny": scales.tiny(("sst2",), arms=("segment_pair", "doc_sentences")),
            "cpu": scales.cpu_mlm(), "gpu": scales.gpu(scales.cpu_mlm()),
            "paper": scales.paper({}, {"sequence_length": 512})},
    notes=("Every arm masks dynamically, as in the paper's Table 2.",
           "The paper's MNLI and RACE are not in the shared data: SST-2 and the SQuAD 1.1 "
           "article split stand in.",),
)
