"""What `open_model` returns: a runnable model, its tokenizer, where it came from."""
import dataclasses
import functools

import numpy as np

from bertjax.hf.model import HFModel


@dataclasses.dataclass
class OpenedModel(HFModel):
  """HFModel's family, architecture, config, module and params (call it with the
  reference's input names), plus the folder holding its tokenizer files, the folder it
  was read from and what it was there ('Hugging Face folder', 'step 7'...)."""
  tokenizer_dir: str
  source: str
  origin: str

  @functools.cached_property
  def tokenizer(self):
    """The model's tokenizer, as transformers' fast tokenizer runs it: a `tokenizers.Tokenizer`
    whose `encode(text)` / `encode(text_a, text_b)` add the family's special tokens
    (`.ids`, `.attention_mask`, `.type_ids`, `.offsets`); padding and truncation off."""
    from bertjax.data import hf_tokenizer  # pylint: disable=g-import-not-at-top
    return hf_tokenizer.load(self.tokenizer_dir).tokenizer

  @property
  def description(self) -> str:
    """One line for logs and reports, e.g. 'bert BertModel (step 7) from /runs/a'."""
    return f"{self.family.name} {self.architecture} ({self.origin}) from {self.source}"

  def fit_inputs(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Task arrays as this model takes them: a model with a single token type
    (RoBERTa: type_vocab_size = 1) sees pairs with type 0 throughout, as its own
    tokenizer feeds them; a type id past its table would read garbage."""
    if "token_type_ids" in arrays and getattr(self.config, "type_vocab_size", 2) == 1:
      return {**arrays, "token_type_ids": np.zeros_like(arrays["token_type_ids"])}
    return arrays
