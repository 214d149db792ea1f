"""Looking inside the models: attention maps and statistics, head masking, importance and
pruning, probing classifiers (`python -m bertjax.analysis attention|heads|probe ...`).

Attention probabilities and head masks come from every dense attention layer
(bertjax.models.common.attention_maps; `from_hf(...)(..., output_attentions=True,
head_mask=...)`); this package builds the analyses on top of them.
"""
