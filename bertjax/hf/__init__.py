"""The bridge kernel: what a family adapter is made of, below the families themselves.

`Family` (family.py) and its `Rule` tables (mapping.py), the task classes' shared rules
(tasks.py), the `model_type` registry (registry.py) and tensor I/O (io.py). The families
(bertjax.models.<family>.hf) build on it; the runnable model, `from_hf` and `to_hf` sit
above them in bertjax.checkpoints.model.
"""
