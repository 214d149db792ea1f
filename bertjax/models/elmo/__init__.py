"""ELMo (Peters et al., 2018): config, sizes and the bidirectional LM (model.py), its
character CNN (char_cnn.py), LSTM with projection (lstm.py). Its character ids are the char_ids feature's encoding,
bertjax.characters, shared with the data recipes that write them."""
from bertjax.models.elmo.model import (ElmoConfig, ElmoBiLM, PAPER_FILTERS, SIZES, check_params,
                                       elmo_original, elmo_small, elmo_tiny, init_params)
