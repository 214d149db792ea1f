"""`python -m bertjax.convert`: Hugging Face model directories <-> bertjax checkpoints
(bertjax.tools.convert)."""
from bertjax.tools import convert

if __name__ == "__main__":
  convert.run()
