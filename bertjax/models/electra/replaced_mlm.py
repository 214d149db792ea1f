"""ELECTRA's Table 5 ablations that keep the generator but make the discriminator an MLM
(Clark et al., 2020, sec. 3.2):

  Replace MLM      the masked positions hold the generator's samples instead of [MASK]; the
                   network predicts the original tokens there (softmax over the vocabulary).
                   It tests how much of ELECTRA's gain comes from never showing [MASK].
  All-Tokens MLM   the same input, but the original token of *every* position is predicted,
                   through the paper's copy mechanism: a sigmoid layer gives a copy
                   probability D per token and
                     p(x_t = w) = D * [w == input_t] + (1 - D) * softmax(logits_t)[w]

Both run the generator and the sampling of `ElectraGeneratorDiscriminator` unchanged (same
shared embeddings, same parameter layout); only the head on the discriminator's encoder
differs: BERT's MLM head at the discriminator's size (`mlm_head`, tied to the shared
embeddings) and, for All-Tokens, a copy head shaped like the discriminator head
(`copy_head`: dense, activation, one logit). Their losses: bertjax.objectives.replaced_mlm.
"""
from typing import ClassVar

from bertjax.models.electra.model import (DiscriminatorHead, ElectraGeneratorDiscriminator,
                                          generator_head)


class ElectraReplacedMLM(ElectraGeneratorDiscriminator):
  """Replace MLM. Outputs: `logits` [B, L, V] (the network's MLM over the corrupted input;
  [B, P, V] when given `masked_positions` [B, P], where it is scored, as the generator's),
  `generator_logits`, `replaced`, `corrupted_ids`, `last_hidden_state`."""
  RELEASED_AS: ClassVar[str] = "ElectraForMaskedLM"  # its MLM network: what fine-tunes
  copy_mechanism: bool = False

  @staticmethod
  def release(params: dict) -> dict:
    return mlm_params(params)

  def setup(self):
    self.networks()
    self.mlm_head = generator_head(self.config)
    if self.copy_mechanism:
      self.copy_head = DiscriminatorHead(self.config)

  def heads(self, out: dict, masked_positions=None) -> dict:
    hidden = out["last_hidden_state"]
    # All-Tokens MLM predicts every position; Replace MLM only the masked ones.
    at = None if self.copy_mechanism else masked_positions
    out["logits"] = self.mlm_head(hidden, self.embeddings.word_embeddings, at)
    if self.copy_mechanism:
      out["copy_logits"] = self.copy_head(hidden)
    return out


class ElectraAllTokensMLM(ElectraReplacedMLM):
  """All-Tokens MLM: Replace MLM + `copy_logits` [B, L] (the copy probability's logit);
  its `logits` are [B, L, V] always (only the generator's run at `masked_positions`)."""
  copy_mechanism: bool = True


def mlm_params(params: dict) -> dict:
  """ElectraForMaskedLM params (the shared embeddings, the discriminator's encoder and its
  MLM head) from ElectraReplacedMLM / ElectraAllTokensMLM params: what fine-tunes."""
  return {"electra": {"embeddings": params["embeddings"], **params["discriminator"]},
          "generator_head": params["mlm_head"]}
