"""Extractive question answering with a SQuAD-style fine-tuned model: the span of the
context that answers, found as the SQuAD evaluation finds it (sliding windows, n-best
starts and ends: `finetune.squad`)."""
from bertjax.evaluation.squad import SquadExample
from bertjax.finetune import squad
from bertjax.predict import pipeline

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _question_and_context(value) -> tuple[str, str]:
  if isinstance(value, dict):
    return (pipeline.as_text(value.get("question"), "an input's 'question'"),
            pipeline.as_text(value.get("context"), "an input's 'context'"))
  if isinstance(value, tuple) and len(value) == 2:
    return (pipeline.as_text(value[0], "a question"), pipeline.as_text(value[1], "a context"))
  raise ValueError(f"question-answering takes {{'question': ..., 'context': ...}} or a "
                   f"(question, context) tuple; got {value!r:.80}.")


class QuestionAnswering(pipeline.Pipeline):
  """{'answer', 'start', 'end' (its characters in the context), 'score' (the span's
  probability in its window: softmax of the start scores times that of the end scores)}."""
  task = "question-answering"
  architectures = ("ForQuestionAnswering", "ForQuestionAnsweringSimple")
  fix = ("Fine-tune one first (bertjax finetune --task=squad11 --output_dir=OUT) and give "
         "OUT.")

  def predict(self, inputs: list, doc_stride: int = 128, max_query_length: int = 64,
              max_answer_length: int = 30, n_best_size: int = 20) -> list:
    examples = [SquadExample(str(i), *_question_and_context(x), (), (), False, 0)
                for i, x in enumerate(inputs)]
    features = squad.convert_examples(examples, self.tokenizer, self.max_seq_length,
                                      doc_stride, max_query_length, training=False)
    logits = self.forward({k: features[k] for k in _INPUTS}, ("start_logits", "end_logits"))
    spans = squad.postprocess(examples, features, logits["start_logits"],
                              logits["end_logits"], n_best_size, max_answer_length)
    return [{"answer": spans[e.qid].text, "start": spans[e.qid].start, "end": spans[e.qid].end,
             "score": spans[e.qid].probability} for e in examples]
