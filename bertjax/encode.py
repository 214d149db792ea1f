"""`python -m bertjax.encode`: sentence embeddings, one row per input line (bertjax.sbert.encode)."""
from bertjax.sbert import encode

if __name__ == "__main__":
  encode.run()
