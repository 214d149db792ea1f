"""Evaluators that score frozen encoders (no fine-tuning): STS similarity."""
