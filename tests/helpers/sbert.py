"""A tiny random BERT saved as a Hugging Face directory with a WordPiece vocabulary."""
import pathlib

WORDS = ("a man woman is playing the guitar piano dog cat runs on grass ##s ##ing . , "
         "very long sentence with many words here").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))


def write_tiny_bert(directory: pathlib.Path, seed: int = 0, hidden: int = 32) -> pathlib.Path:
  """config.json + model.safetensors + vocab.txt of a 2-layer BERT with random weights."""
  import torch
  import transformers
  torch.manual_seed(seed)
  config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=2 * hidden,
                                   max_position_embeddings=64)
  transformers.BertModel(config).save_pretrained(directory)
  (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (directory / "tokenizer_config.json").write_text('{"do_lower_case": true}')
  return directory
