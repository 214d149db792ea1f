"""Pretraining and fine-tuning objectives: model outputs + batch -> (loss, metrics)."""
