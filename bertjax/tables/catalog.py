"""Every paper table `python -m bertjax.tables` runs, by name."""
from bertjax.tables import bert, distilbert, electra, roberta, spanbert, t5, task_distillation
from bertjax.tables.spec import Table

TABLES: dict[str, Table] = {t.name: t for t in (
    bert.TABLE5, roberta.TABLE1, roberta.TABLE2, spanbert.TABLE, electra.TABLE5,
    electra.GENERATOR_SIZE, electra.LEARNING_CURVE, t5.OBJECTIVES, t5.CORRUPTION,
    distilbert.TABLE, task_distillation.TABLE)}


def get(name: str) -> Table:
  if name not in TABLES:
    raise SystemExit(f"Unknown table {name!r}; tables: {', '.join(sorted(TABLES))}.")
  return TABLES[name]
