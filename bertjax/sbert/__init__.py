"""Sentence embeddings (Reimers & Gurevych, 2019): siamese model, losses, data, encode and
search, training."""
