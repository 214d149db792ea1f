"""SpanBERT (Joshi et al., 2020): config, sizes and modules (model.py)."""
from bertjax.models.spanbert.model import (SpanBertConfig, spanbert_base, spanbert_large, SIZES,
                                           span_boundary_inputs, relative_positions,
                                           SpanBoundaryHead, SpanBertForPreTraining,
                                           bert_params)
