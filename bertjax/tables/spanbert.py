"""SpanBERT (Joshi et al., 2020): masking contiguous spans, and the span-boundary objective
(SBO), against BERT's random-token masking; Tables 1, 5 and 6 of the paper in one.

Every arm reads the same single segments of one document (SpanBERT's "1seq" input: no
second segment, no NSP), dynamically masked, 15% of the tokens, 80/10/10 [MASK] / random /
kept; only what is masked and what is predicted differ:

  random tokens      subword tokens drawn independently (BERT's MLM; the paper's
                     "Our BERT-1seq" baseline), `roberta_mlm` with DOC-SENTENCES inputs
  whole words        whole words drawn independently (Table 5's "Whole Words")
  span masking       spans of whole words, geometric lengths (p = 0.2, at most 10 words),
                     MLM loss only (Table 6's "Span Masking (1seq)")
  span masking + SBO the same spans, MLM + the span-boundary objective (SpanBERT)

The MLM arms are BERT with its MLM head (BertForMaskedLM); SpanBERT adds the SBO head.
Fine-tuning reads the BERT encoder of each.
"""
from bertjax.tables import scales
from bertjax.tables.bert import MRPC, SQUAD, SST2
from bertjax.tables.spec import Arm, Table

_MLM = ("models/bert_base.gin", "models/bert_mlm.gin", "objectives/mlm.gin")
_ONE_SEGMENT = "roberta_preprocessors.cross_documents = False"

TABLE = Table(
    name="spanbert", paper="spanbert",
    title="SpanBERT Tables 1, 5 and 6: span masking and the span-boundary objective",
    direction=("Span masking + SBO beats random-token masking on span extraction (SQuAD 1.1 "
               "F1 94.6 vs 92.6 at large scale, Table 1); geometric spans beat whole-word, "
               "named-entity and noun-phrase masking (Table 5), and SBO helps on top of span "
               "masking while NSP hurts (Table 6)."),
    arms=(
        Arm("random_tokens", "random tokens (BERT MLM)", _MLM, (_ONE_SEGMENT,)),
        Arm("whole_words", "whole words", _MLM,
            (_ONE_SEGMENT, "roberta_preprocessors.whole_word = True")),
        Arm("span", "span masking (no SBO)", _MLM, ("Trainer.train_task = 'spanbert'",),
            note="SpanBERT's data (its span masks); the SBO features go unread"),
        Arm("span_sbo", "span masking + SBO (SpanBERT)",
            ("models/spanbert_base.gin", "objectives/spanbert_mlm_sbo.gin")),
    ),
    tasks=(SQUAD, SST2, MRPC),
    scales={
        # Tests train the two models (BERT's MLM, SpanBERT's SBO); whole words and spans
        # without SBO differ only in their data (every arm's config is parsed anyway).
        "tiny": scales.tiny(("squad11",), arms=("random_tokens", "span_sbo")),
        # The MLM recipe (scales.cpu_mlm): both heads at 20 positions a sequence; the few
        # span-masked tokens beyond 20 go unscored, and are counted (`mlm_dropped`).
        "cpu": scales.cpu_mlm(tasks=("squad11",), seeds=(0, 1)),
        "gpu": scales.gpu(scales.cpu_mlm(tasks=("squad11",), seeds=(0, 1))),
        # SpanBERT's pretraining (runs/spanbert_pretrain.gin: 2.4M steps of 256 x 512 tokens,
        # BERT's optimizer) at base size, with BERT's uncased vocabulary as that file binds.
        "paper": scales.paper({"vocab_size": 30522}, {}, run_gin="runs/spanbert_pretrain.gin"),
    },
    notes=("SQuAD v1.1: only its dev set is in the shared data, so it is split by article "
           "(`--squad_train_articles=38`, as in BERT Table 5 here): the first 38 of its 48 "
           "articles train, the last 10 (1,988 questions) evaluate.",
           "The paper's named-entity and noun-phrase masking need a tagger and a parser "
           "this repository does not have; NSP (Table 6) is BERT Table 5's comparison here.",
           "At CPU scale, to fit two hours: SQuAD only (8 min a fine-tuning), 2 seeds. SST-2 "
           "and MRPC are the paper's Table 1 tasks beside it; MRPC stays at its majority "
           "class with encoders this small (BERT Table 5 here).",
           "The paper compares large models (Table 1) and base models (Tables 5-6)."),
)
