"""Shared Transformer building blocks; every parameter carries logical axis names."""
