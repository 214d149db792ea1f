"""The one training loop that pretraining, fine-tuning and SBERT use: trainer, step, state,
inputs, optimizers, partitioning, distributed runs, metric writers, FLOP counts."""
