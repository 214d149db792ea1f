"""The left-to-right LM recipe (GPT; BERT Table 5's "LTR & No NSP"): contiguous
full-sentence blocks, no masking."""
import functools

import gin

from bertjax import batch
from bertjax.data import feature_converters as fc
from bertjax.data.preprocessors import pairs
from bertjax.data.recipes import registry, roles


@gin.configurable
def causal_lm_preprocessors(vocab, cross_documents: bool = True,
                            sentence_split: str = "newline"):
  """GPT / BERT Table 5's LTR: contiguous [CLS] sentences ... [SEP] blocks, no masking;
  the objective (bertjax.objectives.causal_lm) predicts each next token."""
  return [functools.partial(pairs.tokenize_sentences, vocabulary=vocab,
                            sentence_split=sentence_split),
          functools.partial(pairs.full_sentences, cls_id=roles.role(vocab, "cls"),
                            sep_id=roles.role(vocab, "sep"), cross_documents=cross_documents)]


def _causal_lm_converter(vocab, pack):
  return fc.EncoderFeatureConverter(pack=pack, mlm=False, pad_id=roles.role(vocab, "pad"))


registry.register("causal_lm", causal_lm_preprocessors,
                  batch.task_features(batch.TOKENS),
                  _causal_lm_converter, pack=False)
