"""Text-to-text generation with an encoder-decoder (T5, BART): the text in, as its
tokenizer lays it out, and the decoded continuation out (`HFModel.generate`: greedy, beam
search or sampling, with caches)."""
from bertjax.finetune import loop
from bertjax.predict import pipeline


class TextToText(pipeline.Pipeline):
  """{'generated_text': ...} per input; `generate` options (max_new_tokens, num_beams,
  do_sample, ...) pass through."""
  task = "text2text-generation"
  architectures = ("ForConditionalGeneration",)
  fix = "Give a T5 or BART model (...ForConditionalGeneration), e.g. a t5_finetune.gin run."

  def predict(self, inputs: list, max_new_tokens: int = 32, **generate_options) -> list:
    layout = self.tokenizer.layout
    budget = self.max_seq_length - layout.num_special(pair=False)
    rows = [layout.pack(self.tokenizer.encode(pipeline.as_text(t, "an input"))[:budget])
            for t in inputs]
    arrays = layout.to_arrays([r[0] for r in rows], [r[1] for r in rows], self.max_seq_length)
    results = []
    for start in range(0, len(rows), self.batch_size):
      batch = loop.trim_padding({k: v[start:start + self.batch_size] for k, v in arrays.items()})
      ids = self.model.generate(batch["input_ids"], batch["attention_mask"],
                                max_new_tokens=max_new_tokens, **generate_options)
      results += [{"generated_text": self.tokenizer.decode(row)} for row in ids]
    return results
