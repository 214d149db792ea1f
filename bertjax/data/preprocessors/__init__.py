"""seqio preprocessors: C4 cleaning, masking, pairs, spans, permutation, denoising."""
