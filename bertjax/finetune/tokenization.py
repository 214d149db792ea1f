"""A checkpoint's own tokenizer for fine-tuning: ids with character offsets and word
alignment, and the layout of its inputs.

Fine-tuning needs more than ids: SQuAD maps answer characters to tokens and back, NER
labels the first sub-token of each word, and every task lays its texts out with the
family's special tokens. All of it comes from the reference tokenizer itself, the
`tokenizers` object transformers would build from the same folder
(`bertjax.data.hf_tokenizer`): WordPiece (BERT, ELECTRA, DistilBERT, MiniLM),
SentencePiece (ALBERT, XLNet, DeBERTa-v3, BigBird) and byte-level BPE (RoBERTa,
Longformer). Its post-processor is run once on two probe texts to read off the layout
(`features.Layout`); the task converters then pack, truncate and pad themselves, so SQuAD
can cut windows and NER can keep word positions.
"""
import json
from typing import Sequence

import tokenizers

from bertjax.data import hf_tokenizer
from bertjax.finetune import features


class Tokenizer:
  """A reference tokenizer with special tokens added by the caller, per `layout`."""

  def __init__(self, folder: hf_tokenizer.TokenizerFolder):
    self.source = folder.source
    self._tok = folder.tokenizer
    self.vocab_size = max(self._tok.get_vocab().values()) + 1
    self.pad_id = folder.token_id("pad")
    if self.pad_id is None:
      raise ValueError(
          f"{self.source} has no padding token{_named(folder, 'pad')}; fine-tuning pads every "
          "row to one length. Name one of the vocabulary's tokens as pad_token in "
          f"{hf_tokenizer.CONFIG_JSON} (or give the tokenizer the model was trained with).")
    self.layout = _layout(self._tok, folder, self.pad_id)
    in_layout = {token for token, _ in self.layout.pair}
    self.cls_id = folder.token_id("cls") if folder.token_id("cls") in in_layout else None
    self.sep_id = folder.token_id("sep") if folder.token_id("sep") in in_layout else None
    self._words = _for_pre_split_words(self._tok)
    self.unk_id = folder.token_id("unk")
    self.mask_id = folder.token_id("mask")

  @classmethod
  def from_path(cls, path: str) -> "Tokenizer":
    """`path`: a tokenizer folder (tokenizer.json, vocab.txt, *.model or vocab.json +
    merges.txt, with tokenizer_config.json) or one of those files."""
    return cls(hf_tokenizer.load(path))

  def check_fits(self, model_vocab_size: int, model: str) -> None:
    """Fails unless this is a tokenizer the model can use (hf_tokenizer.check_fits)."""
    hf_tokenizer.check_fits(self.vocab_size, self.source, model_vocab_size, model)

  def token_id(self, token: str) -> int | None:
    """The id of one vocabulary entry (e.g. "[MASK]"), None if the vocabulary lacks it."""
    return self._tok.token_to_id(token)

  def id_to_token(self, token_id: int) -> str | None:
    """The vocabulary entry of an id ('##ing', 'Ġthe', '▁the'), None past the vocabulary."""
    return self._tok.id_to_token(int(token_id))

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
    """Text of ids, as the reference tokenizer's decoder joins their pieces."""
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

  def encode(self, text: str) -> list[int]:
    return self._tok.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

  def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids and each token's [start, end) character span in `text` (as the reference
    reports it: byte-level BPE leaves the leading space out, a lone "▁" may be empty)."""
    encoding = self._tok.encode(text, add_special_tokens=False)
    return encoding.ids, encoding.offsets

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """The pieces of each pre-split word (a word may yield no piece: e.g. a control char)."""
    encoding = self._words.encode(list(words), is_pretokenized=True, add_special_tokens=False)
    pieces: list[list[int]] = [[] for _ in words]
    for token_id, word in zip(encoding.ids, encoding.word_ids):
      pieces[word].append(token_id)
    return pieces

  def tokens(self, ids: Sequence[int]) -> list[str]:
    """Each id's token string (its vocabulary entry, e.g. `[CLS]`, `##s`)."""
    return [self._tok.id_to_token(int(i)) or "" for i in ids]


WordPiece = Tokenizer  # the earlier, WordPiece-only name


def _named(folder: hf_tokenizer.TokenizerFolder, role: str) -> str:
  token = folder.tokens.get(role)
  return f" ({token!r} is not in its vocabulary)" if token else ""


def _layout(tok: tokenizers.Tokenizer, folder: hf_tokenizer.TokenizerFolder,
            pad_id: int) -> features.Layout:
  """The special-token layout of single texts and pairs, read off the tokenizer's own
  post-processor applied to two probe texts (of different tokens, so each text's run of
  tokens in the result tells which text it is)."""
  probes = {}
  for encoding in tok.encode_batch(["a", "b", "x", "1", "."], add_special_tokens=False):
    if encoding.ids and tuple(encoding.ids) not in probes:
      probes[tuple(encoding.ids)] = encoding
  if len(probes) < 2:
    raise ValueError(f"{folder.source} turns plain text into (nearly) no tokens at all.")
  (a_ids, a), (b_ids, b) = list(probes.items())[:2]
  slots = {}
  for kind, encoding in (("single", tok.post_process(a)), ("pair", tok.post_process(a, b))):
    layout, position = [], 0
    ids, types, special = encoding.ids, encoding.type_ids, encoding.special_tokens_mask
    while position < len(ids):
      text = next((name for name, text_ids in (("A", a_ids), ("B", b_ids))
                   if not special[position]
                   and tuple(ids[position:position + len(text_ids)]) == text_ids), None)
      layout.append((text or ids[position], types[position]))
      position += len(a_ids if text == "A" else b_ids) if text else 1
    slots[kind] = tuple(layout)
  result = features.Layout(slots["single"], slots["pair"], pad_id, folder.pad_type_id,
                           folder.padding_side)
  if not result.num_special(pair=True):
    raise ValueError(
        f"{folder.source} puts no special tokens around its inputs (a decoder's tokenizer, "
        "like GPT-2's), so a pair's texts cannot be told apart and there is no classifier "
        "token. Fine-tune with the encoder's own tokenizer (--tokenizer=FOLDER), or give "
        f"this one a post-processor with cls_token / sep_token in {hf_tokenizer.CONFIG_JSON}.")
  return result


def _for_pre_split_words(tok: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
  """The tokenizer for pre-split words: byte-level BPE with a space before every word, as
  transformers requires (add_prefix_space=True) for is_split_into_words inputs; any other
  tokenizer as it is."""
  spec = json.loads(tok.to_str())

  def prefix_spaces(node):
    if isinstance(node, dict):
      if node.get("type") == "ByteLevel" and "add_prefix_space" in node:
        node["add_prefix_space"] = True
      for value in node.values():
        prefix_spaces(value)
    elif isinstance(node, list):
      for value in node:
        prefix_spaces(value)

  before = json.dumps(spec["pre_tokenizer"])
  prefix_spaces(spec["pre_tokenizer"])
  if json.dumps(spec["pre_tokenizer"]) == before:
    return tok
  return tokenizers.Tokenizer.from_str(json.dumps(spec))


def for_model(model, path: str | None = None) -> Tokenizer:
  """The tokenizer to fine-tune `model` (an `open_model` result) with: the one at `path`,
  else the model's own tokenizer files; checked against its embedding table."""
  try:
    tokenizer = Tokenizer.from_path(path or model.tokenizer_dir)
  except FileNotFoundError as e:
    if path:
      raise
    raise FileNotFoundError(f"{e} ({model.description} keeps no tokenizer beside its weights; "
                            "pass the one it was trained with: --tokenizer=FOLDER.)") from None
  vocab_size = getattr(model.config, "vocab_size", None)
  if vocab_size:
    tokenizer.check_fits(vocab_size, model.description)
  return tokenizer
