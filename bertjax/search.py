"""`python -m bertjax.search`: nearest sentences of a corpus (bertjax.sbert.search)."""
from bertjax.sbert import search

if __name__ == "__main__":
  search.run()
