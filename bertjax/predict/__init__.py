"""Predictions on your own text from any model folder bertjax opens.

  classify = bertjax.pipeline("text-classification", "OUT")
  classify("a gripping film")            # {'label': 'positive', 'score': 0.93}
  bertjax.pipeline("auto", "OUT")         # the task the folder's model class does

Tasks (`TASKS`, named as transformers' pipelines): fill-mask, text-classification (texts
and pairs), token-classification, question-answering, sentence-embeddings,
text2text-generation. `bertjax predict` runs one over a TSV / JSONL file
(`bertjax.predict.__main__`).
"""
from bertjax.predict.pipeline import Pipeline
from bertjax.predict.tasks import TASKS, pipeline, task_for

__all__ = ["TASKS", "Pipeline", "pipeline", "task_for"]
