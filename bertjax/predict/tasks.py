"""The tasks `bertjax.pipeline` knows, and which one a model folder's class does."""
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.model import HFModel
from bertjax.predict import answer, classify, embed, fill_mask, generate

TASKS = {cls.task: cls for cls in (
    fill_mask.FillMask, classify.TextClassification, classify.TokenClassification,
    answer.QuestionAnswering, embed.SentenceEmbeddings, generate.TextToText)}
ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification",
           "embeddings": "sentence-embeddings", "text2text": "text2text-generation"}
AUTO = "auto"


def task_for(model: HFModel) -> str:
  """The task of a model's class: its transformers task class, else a masked LM's
  fill-mask or an encoder-decoder's generation; a bare encoder embeds sentences."""
  for task, cls in TASKS.items():
    if cls is not embed.SentenceEmbeddings and model.architecture.endswith(cls.architectures):
      return task
  if model.architecture.endswith(("Model", "BiLM")) and "LMHead" not in model.architecture:
    return embed.SentenceEmbeddings.task
  raise ValueError(f"{model.source} holds a {model.architecture}, which none of the tasks "
                   f"{sorted(TASKS)} runs.")


def pipeline(task: str, model: str, tokenizer: str | None = None, **options):
  """The `task` pipeline ('auto': the one the folder's model class does) of the model at
  `model` (any folder `bertjax.open_model` reads); `options`: batch_size, max_seq_length
  (and pooling / normalize for sentence-embeddings)."""
  task = ALIASES.get(task, task)
  if task != AUTO and task not in TASKS:
    raise ValueError(f"No task {task!r}; use one of {sorted(TASKS)} or {AUTO!r} "
                     f"(aliases: {ALIASES}).")
  opened = None
  if task == AUTO:
    opened = open_model(model, tokenizer)
    task = task_for(opened)
  if task == embed.SentenceEmbeddings.task:
    return embed.SentenceEmbeddings(model, tokenizer, **options)
  return TASKS[task](opened or model, tokenizer, **options)
