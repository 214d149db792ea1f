"""A local Hugging Face tokenizer folder as one `tokenizers.Tokenizer`, as transformers builds it.

Fine-tuning and sentence encoding need more than a vocabulary's ids: character offsets
(SQuAD), word alignment (NER), and the special tokens the tokenizer's post-processor puts
around one text or a pair. transformers (5.x) builds every tokenizer on the `tokenizers`
library, so `load(path)` gives the very same object without transformers:

- tokenizer.json: read as is. Its post-processor (TemplateProcessing, BertProcessing,
  RobertaProcessing...) lays out single and pair inputs; a file without one gets its
  tokenizer class's.
- no tokenizer.json: built from the vocabulary files the way the tokenizer class named by
  tokenizer_config.json's `tokenizer_class` builds it: vocab.txt (WordPiece: BERT, ELECTRA,
  DistilBERT, MiniLM), a SentencePiece *.model (ALBERT, XLNet, DeBERTa-v2/v3, BigBird),
  vocab.json + merges.txt (byte-level BPE: RoBERTa, Longformer, BART, GPT-2).

tokenizer_config.json names the special tokens and may set `padding_side`; tokenizer.json's
`padding` section gives the pad token, its type id and side too. Classes keep their own
defaults (XLNet pads on the left, as transformers' XLNetTokenizer does).
"""
import dataclasses
import json
import os
import re
from typing import Callable, Mapping, Optional

import gin
import tokenizers
from sentencepiece import sentencepiece_model_pb2
from tokenizers import normalizers, pre_tokenizers, processors

TOKENIZER_JSON = "tokenizer.json"
CONFIG_JSON = "tokenizer_config.json"
ROLES = ("pad", "unk", "cls", "sep", "mask", "bos", "eos")

# Special-token layouts of single texts and pairs, in TemplateProcessing's syntax; {cls} and
# {sep} stand for the tokenizer's own tokens.
TEMPLATES = {
    "bert": ("{cls}:0 $A:0 {sep}:0", "{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1"),
    "xlnet": ("$A:0 {sep}:0 {cls}:2", "$A:0 {sep}:0 $B:1 {sep}:1 {cls}:2"),
    "roberta": None,  # RobertaProcessing: <s> A </s> and <s> A </s></s> B </s>, all type 0
}


@dataclasses.dataclass(frozen=True)
class TokenizerFolder:
  """A reference tokenizer: the `tokenizers` object (post-processor included; padding and
  truncation off) plus what transformers keeps beside it."""
  tokenizer: tokenizers.Tokenizer
  source: str                # the file it was built from, for error messages
  tokens: Mapping[str, str]  # role (pad, unk, cls, sep, mask, bos, eos) -> token
  padding_side: str = "right"
  pad_type_id: int = 0

  def token_id(self, role: str) -> Optional[int]:
    token = self.tokens.get(role)
    return None if token is None else self.tokenizer.token_to_id(token)


@dataclasses.dataclass(frozen=True)
class _Style:
  """What a transformers tokenizer class sets when a folder does not say otherwise."""
  template: Optional[str]        # a TEMPLATES key; None: no special tokens (GPT-2)
  tokens: Mapping[str, str]
  padding_side: str = "right"
  sentencepiece: Optional[Callable] = None  # (model proto, config) -> tokenizers.Tokenizer


_BERT_TOKENS = dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]", mask="[MASK]")
_ALBERT_TOKENS = dict(_BERT_TOKENS, pad="<pad>", unk="<unk>")
_XLNET_TOKENS = dict(pad="<pad>", unk="<unk>", cls="<cls>", sep="<sep>", mask="<mask>",
                     bos="<s>", eos="</s>")
_ROBERTA_TOKENS = dict(pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>",
                       bos="<s>", eos="</s>")


def _unigram(proto, added: Optional[Mapping[str, bool]] = None) -> tokenizers.Tokenizer:
  """The SentencePiece model's pieces and scores as a `tokenizers` Unigram model, with the
  `added` tokens (token -> special) cut out of raw text; by default its control pieces
  (special) and user-defined ones (not special), as transformers adds them."""
  tok = tokenizers.Tokenizer(tokenizers.models.Unigram(
      [(p.piece, p.score) for p in proto.pieces], proto.trainer_spec.unk_id, False))
  if added is None:
    kinds = sentencepiece_model_pb2.ModelProto.SentencePiece
    added = {p.piece: p.type == kinds.CONTROL for p in proto.pieces
             if p.type in (kinds.CONTROL, kinds.USER_DEFINED)}
  tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                          for t, special in added.items() if special])
  tok.add_tokens([tokenizers.AddedToken(t, normalized=False)
                  for t, special in added.items() if not special])
  return tok


def sentencepiece_tokenizer(proto, *, lower_case: bool, strip_accents: bool,
                            normalize_quotes: bool, whitespace_split: bool = True,
                            prefix_space: bool = True,
                            added: Optional[Mapping[str, bool]] = None) -> tokenizers.Tokenizer:
  """ALBERT's / XLNet's pipeline (quotes, accents, case, the model's own normaliser, words
  split on whitespace, each with a "▁") or, with `whitespace_split=False`, BigBird's (a run
  of spaces is one "▁", every other space a "▁"). `added`: as in `_unigram`."""
  tok = _unigram(proto, added)
  prepend = "always" if prefix_space else "never"
  if not whitespace_split:
    tok.normalizer = normalizers.Replace(tokenizers.Regex(" {2,}"), "▁")
    tok.pre_tokenizer = pre_tokenizers.Metaspace("▁", prepend_scheme=prepend, split=True)
  else:
    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')] * normalize_quotes
    steps += [normalizers.NFKD(), normalizers.StripAccents()] * strip_accents
    steps += [normalizers.Lowercase()] * lower_case
    if proto.normalizer_spec.precompiled_charsmap:
      steps.append(normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace("▁", prepend_scheme=prepend)])
  tok.decoder = tokenizers.decoders.Metaspace("▁", prepend_scheme=prepend)
  return tok


def _albert(proto, config) -> tokenizers.Tokenizer:
  return sentencepiece_tokenizer(
      proto, lower_case=config.get("do_lower_case", True),
      strip_accents=not config.get("keep_accents", False), normalize_quotes=True,
      prefix_space=config.get("add_prefix_space", True))


def _xlnet(proto, config) -> tokenizers.Tokenizer:
  # transformers' XLNetTokenizer strips accents whatever keep_accents says.
  return sentencepiece_tokenizer(proto, lower_case=config.get("do_lower_case", False),
                                 strip_accents=True, normalize_quotes=True)


def _bigbird(proto, config) -> tokenizers.Tokenizer:
  return sentencepiece_tokenizer(proto, lower_case=False, strip_accents=False,
                                 normalize_quotes=False, whitespace_split=False,
                                 prefix_space=config.get("add_prefix_space", True))


def _deberta_v2(proto, config) -> tokenizers.Tokenizer:
  """DebertaV2Tokenizer: no SentencePiece normaliser; whitespace runs, tabs and newlines
  become one space, NFC, trailing spaces dropped."""
  tok = _unigram(proto)
  steps = [normalizers.Lowercase()] * config.get("do_lower_case", False)
  steps += [normalizers.Replace(tokenizers.Regex(r"\s{2,}|[\n\r\t]"), " "), normalizers.NFC(),
            normalizers.Strip(left=False, right=True)]
  tok.normalizer = normalizers.Sequence(steps)
  prepend = "always" if config.get("add_prefix_space", True) else "first"
  pre = [pre_tokenizers.Punctuation("isolated")] * config.get("split_by_punct", False)
  tok.pre_tokenizer = pre_tokenizers.Sequence(pre + [pre_tokenizers.Metaspace(
      "▁", prepend_scheme=prepend)])
  tok.decoder = tokenizers.decoders.Metaspace("▁", prepend_scheme=prepend)
  return tok


_STYLES = {
    **{name: _Style("bert", _BERT_TOKENS) for name in (
        "BertTokenizer", "DistilBertTokenizer", "ElectraTokenizer")},
    **{name: _Style("roberta", _ROBERTA_TOKENS) for name in (
        "RobertaTokenizer", "LongformerTokenizer", "BartTokenizer")},
    "GPT2Tokenizer": _Style(None, dict(unk="<|endoftext|>", bos="<|endoftext|>",
                                       eos="<|endoftext|>")),
    "AlbertTokenizer": _Style("bert", _ALBERT_TOKENS, sentencepiece=_albert),
    "BigBirdTokenizer": _Style("bert", dict(_ALBERT_TOKENS, bos="<s>", eos="</s>"),
                               sentencepiece=_bigbird),
    "DebertaV2Tokenizer": _Style("bert", _BERT_TOKENS, sentencepiece=_deberta_v2),
    "XLNetTokenizer": _Style("xlnet", _XLNET_TOKENS, "left", sentencepiece=_xlnet),
}


def _read_json(path: str) -> dict:
  if not os.path.isfile(path):
    return {}
  with open(path, encoding="utf-8") as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path} is not valid JSON: {e}") from None


def _style(config: dict, kind: str, where: str, vocab_tokens=(),
           has_json: bool = False) -> _Style:
  """The tokenizer class's style; without a class, the usual one for the files' kind."""
  name = str(config.get("tokenizer_class") or "").removesuffix("Fast")
  if name in _STYLES and (has_json or kind != "sentencepiece" or _STYLES[name].sentencepiece):
    return _STYLES[name]
  if kind == "bpe":
    return _STYLES["RobertaTokenizer" if "<s>" in vocab_tokens else "GPT2Tokenizer"]
  if kind == "wordpiece":
    return _STYLES["BertTokenizer"]
  if has_json:  # a SentencePiece tokenizer.json: ALBERT's special tokens by default
    return _Style("bert", _ALBERT_TOKENS)
  known = sorted(n for n, s in _STYLES.items() if s.sentencepiece)
  raise ValueError(
      f"{where} holds a SentencePiece model but no tokenizer.json, and "
      f"{f'tokenizer_class {name!r}' if name else 'no tokenizer_class'} in {CONFIG_JSON}, so "
      f"its normalisation and special tokens are unknown: set tokenizer_class to one of "
      f"{known}, or save the tokenizer with its tokenizer.json (save_pretrained does).")


def _tokens(config: dict, style: _Style) -> dict[str, str]:
  tokens = dict(style.tokens)
  for role in ROLES:
    if f"{role}_token" in config:
      token = config[f"{role}_token"]
      token = token.get("content") if isinstance(token, dict) else token
      if token is None:
        tokens.pop(role, None)
      else:
        tokens[role] = token
  return tokens


def post_processor(template: str, tokens: Mapping[str, str], tokenizer: tokenizers.Tokenizer,
                   source: str, prefix_space: bool = False):
  """The `tokenizers` post-processor of a TEMPLATES layout over `tokens`' cls / sep."""
  ids = {}
  for role in ("cls", "sep"):
    token = tokens.get(role)
    token_id = None if token is None else tokenizer.token_to_id(token)
    if token_id is None:
      pair = (TEMPLATES[template] or (None, "{cls} $A {sep} {sep} $B {sep}"))[1]
      shown = re.sub(r":\d|\$", "", pair).format(cls=tokens.get("cls", "[cls]"),
                                                  sep=tokens.get("sep", "[sep]"))
      raise ValueError(
          f"{source} has no {role} token{f' {token!r}' if token else ''}, which its inputs "
          f"`{shown}` need: add it to the vocabulary, or name the vocabulary's own one as "
          f"{role}_token in {CONFIG_JSON}.")
    ids[role] = (token, token_id)
  if TEMPLATES[template] is None:
    return processors.RobertaProcessing(ids["sep"], ids["cls"], trim_offsets=True,
                                        add_prefix_space=prefix_space)
  single, pair = (t.format(cls=ids["cls"][0], sep=ids["sep"][0]) for t in TEMPLATES[template])
  return processors.TemplateProcessing(single=single, pair=pair,
                                       special_tokens=list(ids.values()))


def _from_vocabulary_files(folder: str, config: dict) -> tuple[tokenizers.Tokenizer, str, _Style]:
  """(tokenizer without post-processor, the file it came from, the class style)."""
  names = os.listdir(folder)
  models = sorted(f for f in names if f.endswith(".model"))
  if models:
    path = os.path.join(folder, "spiece.model" if "spiece.model" in models else models[0])
    style = _style(config, "sentencepiece", folder)
    with open(path, "rb") as f:
      proto = sentencepiece_model_pb2.ModelProto.FromString(f.read())
    return style.sentencepiece(proto, config), path, style
  source = next((f for f in ("vocab.txt", "vocab.json", "encoder.json") if f in names), None)
  if source is None:
    raise FileNotFoundError(
        f"{folder} holds no tokenizer (it has {sorted(names)[:12]}): expected tokenizer.json, "
        "vocab.txt, a SentencePiece *.model or vocab.json + merges.txt; give the folder the "
        "model was trained with.")
  # WordPiece and byte-level BPE: the vocabularies build the reference pipeline already
  # (imported here: they bring TensorFlow, which tokenizer.json folders do not need).
  # Importing registers gin configurables, which gin refuses once a run has locked its
  # config (fine-tuning reads its tokenizer after parsing gin): registration is not binding.
  with gin.unlock_config():
    from bertjax.data import hf_vocabulary  # pylint: disable=g-import-not-at-top
  tok = tokenizers.Tokenizer.from_str(hf_vocabulary.vocab_from_hf(folder).tokenizer.to_str())
  kind = "wordpiece" if source == "vocab.txt" else "bpe"
  return tok, os.path.join(folder, source), _style(config, kind, folder, tok.get_vocab())


def load(path) -> TokenizerFolder:
  """The reference tokenizer of a folder (or of the folder holding the file `path`)."""
  path = os.fspath(path)
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  if not os.path.exists(path) or not os.path.isdir(folder):
    raise FileNotFoundError(f"No tokenizer at {path!r}: give a folder holding tokenizer.json, "
                            "vocab.txt, a SentencePiece *.model or vocab.json + merges.txt.")
  config = _read_json(os.path.join(folder, CONFIG_JSON))
  spec_path = os.path.join(folder, TOKENIZER_JSON)
  if os.path.isfile(spec_path) and path in (folder, spec_path):
    tok = tokenizers.Tokenizer.from_file(spec_path)
    kind = {"Unigram": "sentencepiece", "BPE": "bpe"}.get(type(tok.model).__name__, "wordpiece")
    style = _style(config, kind, folder, tok.get_vocab(), has_json=True)
    source = spec_path
  else:
    tok, source, style = _from_vocabulary_files(folder, config)
  tokens = _tokens(config, style)
  padding = tok.padding or {}
  if padding.get("pad_token") and "pad_token" not in config:
    tokens["pad"] = padding["pad_token"]
  # Role tokens are special: cut out of raw text before tokenisation, as transformers does.
  added = {t.content for t in tok.get_added_tokens_decoder().values()}
  tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                          for t in dict.fromkeys(tokens.values())
                          if t not in added and tok.token_to_id(t) is not None])
  if tok.post_processor is None and style.template is not None:
    tok.post_processor = post_processor(style.template, tokens, tok, source,
                                        bool(config.get("add_prefix_space", False)))
  tok.no_padding()
  tok.no_truncation()
  side = config.get("padding_side") or padding.get("direction", style.padding_side).lower()
  return TokenizerFolder(tok, source, tokens, side, int(padding.get("pad_type_id", 0)))


# Embedding rows a model may have beyond its tokenizer's ids (tables padded to a multiple of
# 64 or 128: T5 has 28 more, DeBERTa-v3 99).
PADDING_SLACK = 128


def check_fits(tokenizer_ids: int, tokenizer: str, model_vocab_size: int, model: str) -> None:
  """Fails when a tokenizer of `tokenizer_ids` ids has ids past the model's embedding table,
  or far fewer ids than it (then it is not the model's tokenizer: most of its vocabulary
  would go unused, and its words would map to other ids)."""
  if tokenizer_ids > model_vocab_size:
    raise ValueError(
        f"{tokenizer} has {tokenizer_ids} token ids but {model} embeds only "
        f"{model_vocab_size} (its config's vocab_size): ids from {model_vocab_size} up would "
        "index past its embedding table. Use the tokenizer the model was trained with "
        "(--tokenizer=FOLDER).")
  if model_vocab_size - tokenizer_ids >= PADDING_SLACK:
    raise ValueError(
        f"{tokenizer} has {tokenizer_ids} token ids but {model} embeds {model_vocab_size}: it "
        "is not the tokenizer the model was trained with. Use the model's own tokenizer "
        "(--tokenizer=FOLDER).")
