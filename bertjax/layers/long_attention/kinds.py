"""Which self-attention an encoder uses, by name - the gin entry point.

  build_model.config_overrides = {'attention': @attention()}
  attention.attention_type = 'bigbird'      # dense | bigbird | longformer | linformer
  attention.block_size = 64                 # any field of the chosen spec

Every encoder built on BertModel / TransformerStack (BERT, RoBERTa, SpanBERT, ALBERT's
stack...) then runs that attention in each layer; the parameters of query / key / value /
out keep their names, so a dense checkpoint loads into a sparse model unchanged.
"""
from typing import Any, Optional

import gin

from bertjax.layers.long_attention import linformer as lowrank, sparse

SPECS = {"bigbird": sparse.BigBird, "longformer": sparse.Longformer,
         "linformer": lowrank.Linformer}


@gin.configurable
def attention(attention_type: str = "dense", **options: Any) -> Optional[Any]:
  """The attention spec for `BertConfig.attention` (None for dense attention)."""
  if attention_type == "dense":
    if options:
      raise ValueError(f"attention_type='dense' takes no options; got {sorted(options)}.")
    return None
  if attention_type not in SPECS:
    raise ValueError(f"attention_type={attention_type!r}; expected 'dense' or one of "
                     f"{sorted(SPECS)}.")
  for key in ("window", "dilation", "global_tokens"):  # gin gives lists; specs are hashable
    if isinstance(options.get(key), list):
      options[key] = tuple(options[key])
  try:
    return SPECS[attention_type](**options)
  except TypeError as e:
    raise ValueError(f"attention({attention_type!r}): {e}") from None
