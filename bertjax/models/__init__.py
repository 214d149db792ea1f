"""Model families: one module per family, one frozen config dataclass each."""
