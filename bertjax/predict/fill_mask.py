"""Filling the mask token of a text with a masked language model (BERT, RoBERTa, ALBERT,
ELECTRA's generator, DeBERTa...): transformers' fill-mask pipeline's outputs."""
import numpy as np

from bertjax.predict import pipeline


class FillMask(pipeline.Pipeline):
  """The top_k words for each mask token of a text: {'score', 'token' (id), 'token_str',
  'sequence' (the text with it in place)}; a list per mask when a text holds several."""
  task = "fill-mask"
  architectures = ("ForMaskedLM", "BertForPreTraining")  # (Albert... too; not ELECTRA's)
  fix = ("Give a pretrained model with its language-model head: a pretraining run's "
         "model_dir, or a Hugging Face ...ForMaskedLM folder.")

  def predict(self, inputs: list, top_k: int = 5) -> list:
    tokenizer, layout = self.tokenizer, self.tokenizer.layout
    if tokenizer.mask_id is None:
      raise ValueError(f"{tokenizer.source} names no mask token (mask_token); fill-mask needs "
                       "one in the text.")
    mask = tokenizer.id_to_token(tokenizer.mask_id)
    budget = self.max_seq_length - layout.num_special(pair=False)
    rows, types = [], []
    for text in inputs:
      ids = tokenizer.encode(pipeline.as_text(text, "an input"))[:budget]
      if tokenizer.mask_id not in ids:
        raise ValueError(f"No {mask} in {text!r:.80} (within its first {budget} tokens): "
                         f"put {mask} where a word should be predicted.")
      row, row_types, _ = layout.pack(ids)
      rows.append(row)
      types.append(row_types)
    outputs = self.model.family.architectures[self.model.architecture]
    name = "logits" if "logits" in outputs else outputs[0]  # ForPreTraining: prediction_logits
    logits = self.forward(layout.to_arrays(rows, types, self.max_seq_length), (name,))[name]
    results = []
    for n, row in enumerate(rows):
      shift = layout.padding(len(row), self.max_seq_length)
      masks = [i for i, token in enumerate(row) if token == tokenizer.mask_id]
      found = [self._fill(row, at, logits[n, shift + at], top_k, len(masks) == 1)
               for at in masks]
      results.append(found[0] if len(found) == 1 else found)
    return results

  def _fill(self, row: list[int], at: int, logits: np.ndarray, top_k: int, single: bool):
    probabilities = pipeline.softmax(logits.astype(np.float64))
    best = np.argsort(-probabilities, kind="stable")[:top_k]
    proposals = []
    for token in best:
      filled = list(row)
      filled[at] = int(token)
      proposals.append({
          "score": float(probabilities[token]), "token": int(token),
          "token_str": self.tokenizer.decode([token], skip_special_tokens=False),
          # Other masks stay visible where a text holds several, as transformers keeps them.
          "sequence": self.tokenizer.decode(filled, skip_special_tokens=single)})
    return proposals
