"""Self-attention for long sequences, chosen by config: BigBird and Longformer (block-sparse),
Linformer (low-rank). None of them builds an [L, L] mask."""
