"""Classifying texts, pairs of texts and tokens with a fine-tuned model.

`text-classification` runs a ...ForSequenceClassification (GLUE-style fine-tuning) on a
text or a pair (`("premise", "hypothesis")` or `{"text": ..., "text_pair": ...}`);
`token-classification` a ...ForTokenClassification (CoNLL-2003-style) on raw text, one
entity per token as transformers' pipeline (aggregation "none") reports it.
"""
from bertjax.evaluation.glue import PairExample
from bertjax.finetune import glue
from bertjax.predict import pipeline

_FINE_TUNE = ("Fine-tune one first (bertjax finetune --task=... --output_dir=OUT, or "
              "bertjax.fine_tune on your own files) and give OUT.")


def _text_or_pair(value) -> tuple[str, str | None]:
  if isinstance(value, dict):
    return (pipeline.as_text(value.get("text"), "an input's 'text'"),
            None if value.get("text_pair") is None
            else pipeline.as_text(value["text_pair"], "an input's 'text_pair'"))
  if isinstance(value, tuple) and len(value) == 2:
    return (pipeline.as_text(value[0], "a pair's first text"),
            pipeline.as_text(value[1], "a pair's second text"))
  return pipeline.as_text(value, "an input (a text, a (text, text_pair) tuple or a dict)"), None


class TextClassification(pipeline.Pipeline):
  """Labels of texts and pairs: {'label': name, 'score': probability} (top_k=1), or the
  top_k best (all with top_k=None), best first; a regression head's score is its output."""
  task = "text-classification"
  architectures = ("ForSequenceClassification",)
  fix = _FINE_TUNE

  def predict(self, inputs: list, top_k: int | None = 1) -> list:
    texts = [_text_or_pair(x) for x in inputs]
    results: list = [None] * len(texts)
    for pairs in (False, True):  # one featurizer call per layout
      rows = [i for i, (_, b) in enumerate(texts) if (b is not None) == pairs]
      if not rows:
        continue
      examples = [PairExample(texts[i][0], texts[i][1], 0, "input") for i in rows]
      arrays = glue.convert_examples(examples, self.tokenizer, self.max_seq_length)
      logits = self.forward(arrays, ("logits",))["logits"]
      scores = pipeline.probabilities(logits, self.model.config.problem_type)
      for i, row_scores in zip(rows, scores):
        results[i] = self._labelled(row_scores, top_k)
    return results

  def _labelled(self, scores, top_k: int | None):
    ranked = sorted(((self.labels[i], float(s)) for i, s in enumerate(scores)),
                    key=lambda pair: -pair[1])
    if top_k == 1:
      return {"label": ranked[0][0], "score": ranked[0][1]}
    return [{"label": label, "score": score} for label, score in ranked[:top_k]]


class TokenClassification(pipeline.Pipeline):
  """Entities of raw texts: per token whose label is not ignored, {'entity', 'score',
  'index' (its position among the model's input ids), 'word' (the token), 'start', 'end'
  (its characters in the text)}."""
  task = "token-classification"
  architectures = ("ForTokenClassification",)
  fix = _FINE_TUNE

  def predict(self, inputs: list, ignore_labels: tuple[str, ...] = ("O",)) -> list:
    layout, tokenizer = self.tokenizer.layout, self.tokenizer
    budget = self.max_seq_length - layout.num_special(pair=False)
    rows, types, tokens = [], [], []
    for text in inputs:
      ids, offsets = tokenizer.encode_with_offsets(pipeline.as_text(text, "an input"))
      ids, offsets = ids[:budget], offsets[:budget]
      row, row_types, starts = layout.pack(ids)
      rows.append(row)
      types.append(row_types)
      tokens.append([(starts["A"] + t, ids[t], offsets[t]) for t in range(len(ids))])
    arrays = layout.to_arrays(rows, types, self.max_seq_length)
    logits = self.forward(arrays, ("logits",))["logits"]
    results = []
    for n, (text, row_tokens) in enumerate(zip(inputs, tokens)):
      shift = layout.padding(len(rows[n]), self.max_seq_length)
      probabilities = pipeline.softmax(logits[n].astype("float64"))
      entities = []
      for index, token_id, (start, end) in row_tokens:
        scores = probabilities[shift + index]
        label = self.labels[int(scores.argmax())]
        if label in ignore_labels:
          continue
        word = (text[start:end] if token_id == tokenizer.unk_id
                else tokenizer.id_to_token(token_id))
        entities.append({"entity": label, "score": float(scores.max()), "index": index,
                         "word": word, "start": start, "end": end})
      results.append(entities)
    return results
