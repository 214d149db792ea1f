"""Generation (greedy, beam search, sampling) with key/value caches."""
