"""`bertjax.pipeline` and `bertjax predict` give what transformers gives on the same folder.

Tiny random models of each task class (weights drawn wide, so scores differ), saved as
Hugging Face folders: transformers' own pipelines where this version has them
(text-classification, token-classification, fill-mask, feature-extraction), else its
models' outputs (question answering: the best span of the start and end logits; text to
text: `generate`, greedy). Our side also runs on the bertjax checkpoint converted from the
folder, as a fine-tuning's output is one.
"""
import json
import pathlib

import numpy as np
import pytest
import tokenizers
import torch
import transformers

import bertjax
from bertjax.tools import convert
from tests.helpers import cli, finetune as ftl, hf as hf_helpers

TOL = 1e-4
TINY = dict(vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64)
SENTIMENT = {0: "negative", 1: "positive"}
ENTITIES = {0: "O", 1: "B-PER", 2: "I-PER"}
TEXTS = ["a man sleeps .", "it rains .", "a dog is dry ."]


def _bert(root: pathlib.Path, architecture: str, **config) -> str:
  directory = root / architecture
  torch.manual_seed(0)
  model = getattr(transformers, architecture)(transformers.BertConfig(**TINY, **config))
  hf_helpers.redraw_weights(model).save_pretrained(directory)
  ftl.write_vocab(directory)
  return str(directory)


def _labels(names: dict) -> dict:
  return {"id2label": names, "label2id": {v: k for k, v in names.items()}}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
  root = tmp_path_factory.mktemp("pipelines")
  return {
      "text-classification": _bert(root, "BertForSequenceClassification", **_labels(SENTIMENT)),
      "token-classification": _bert(root, "BertForTokenClassification", **_labels(ENTITIES)),
      "fill-mask": _bert(root, "BertForMaskedLM"),
      "question-answering": _bert(root, "BertForQuestionAnswering"),
      "sentence-embeddings": _bert(root, "BertModel"),
  }


def _close(ours, theirs) -> None:
  """Same structure, same strings and ints, floats within TOL."""
  if isinstance(theirs, dict):
    assert set(ours) == set(theirs), (ours, theirs)
    for key in theirs:
      _close(ours[key], theirs[key])
  elif isinstance(theirs, list):
    assert len(ours) == len(theirs), (ours, theirs)
    for a, b in zip(ours, theirs):
      _close(a, b)
  elif isinstance(theirs, (float, np.floating)):
    assert abs(ours - theirs) < TOL, (ours, theirs)
  else:
    assert ours == theirs, (ours, theirs)


def test_text_classification_of_texts_and_pairs_names_the_labels(folders, tmp_path):
  folder = folders["text-classification"]
  checkpoint = str(tmp_path / "ckpt")
  convert.from_hf(folder, checkpoint)  # a bertjax checkpoint, as a fine-tuning writes
  theirs = transformers.pipeline("text-classification", model=folder)
  inputs = [TEXTS[0], (TEXTS[0], TEXTS[1]), TEXTS[2], {"text": TEXTS[1], "text_pair": TEXTS[2]}]
  as_theirs = [x if isinstance(x, (str, dict)) else {"text": x[0], "text_pair": x[1]}
               for x in inputs]
  for path, packing in ((folder, True), (checkpoint, True), (folder, False)):
    ours = bertjax.pipeline("text-classification", path, batch_size=2, packing=packing)
    assert ours.packing.enabled == packing  # several inputs per row, or one (--packing=false)
    _close(ours(inputs, top_k=None), [theirs(x, top_k=None) for x in as_theirs])
    best = ours(inputs)
    assert {b["label"] for b in best} <= set(SENTIMENT.values())
    _close(best, [theirs(x, top_k=None)[0] for x in as_theirs])
    _close(ours(TEXTS[0]), theirs(TEXTS[0], top_k=None)[0])  # one input, one result


def test_token_classification_reports_each_token(folders):
  folder = folders["token-classification"]
  ours = bertjax.pipeline("ner", folder)
  assert ours.packing.enabled
  theirs = transformers.pipeline("token-classification", model=folder, ignore_labels=[])
  for text in TEXTS:
    found = ours(text, ignore_labels=())
    _close(found, theirs(text))
    assert {e["entity"] for e in found} <= set(ENTITIES.values())


def test_fill_mask_proposes_transformers_words(folders):
  folder = folders["fill-mask"]
  ours, theirs = bertjax.pipeline("fill-mask", folder), transformers.pipeline("fill-mask",
                                                                               model=folder)
  texts = ["a [MASK] sleeps .", "it [MASK] ."]
  _close(ours(texts, top_k=3), theirs(texts, top_k=3))
  with pytest.raises(ValueError, match=r"No \[MASK\]"):
    ours("a man sleeps .")


def test_question_answering_finds_the_best_span(folders):
  """The span (start <= end, both in the context, at most 30 tokens) of the largest start +
  end logit of transformers' model; its characters in the context."""
  folder = folders["question-answering"]
  reference = transformers.AutoModelForQuestionAnswering.from_pretrained(folder).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
  question, context = "who sleeps ?", "a man sleeps . it rains . a dog is dry ."
  encoded = tokenizer(question, context, return_offsets_mapping=True, return_tensors="pt")
  offsets = encoded.pop("offset_mapping")[0].tolist()
  with torch.no_grad():
    out = reference(**encoded)
  starts, ends = out.start_logits[0].numpy(), out.end_logits[0].numpy()
  in_context = [i for i, s in enumerate(encoded.sequence_ids(0)) if s == 1]
  best = max(((starts[s] + ends[e], s, e) for s in in_context for e in in_context
              if s <= e < s + 30))
  start, end = offsets[best[1]][0], offsets[best[2]][1]
  for value in ({"question": question, "context": context}, (question, context)):
    found = bertjax.pipeline("question-answering", folder)(value)
    assert (found["answer"], found["start"], found["end"]) == (context[start:end], start, end)
    assert 0 < found["score"] <= 1


def test_sentence_embeddings_are_the_mean_of_the_tokens(folders):
  """A folder without sentence-transformers files: mean pooling over the tokens, as
  transformers' feature-extraction outputs them."""
  folder = folders["sentence-embeddings"]
  features = transformers.pipeline("feature-extraction", model=folder)
  want = np.stack([np.mean(features(t)[0], axis=0) for t in TEXTS])
  ours = bertjax.pipeline("sentence-embeddings", folder)
  assert np.abs(ours(TEXTS) - want).max() < TOL
  assert ours(TEXTS[0]).shape == want[0].shape


def _tiny_bart(directory: pathlib.Path) -> str:
  """A BART of byte-level BPE pieces trained on a few sentences (vocab.json + merges.txt,
  as BartTokenizer reads them)."""
  directory.mkdir(parents=True)
  bpe = tokenizers.ByteLevelBPETokenizer()
  bpe.train_from_iterator(TEXTS * 10, vocab_size=300, min_frequency=1,
                          special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
  bpe.save_model(str(directory))
  (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BartTokenizer"}))
  vocab_size = len(json.loads((directory / "vocab.json").read_text()))
  torch.manual_seed(0)
  config = transformers.BartConfig(
      vocab_size=vocab_size, d_model=16, encoder_layers=1, decoder_layers=1,
      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
      decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=1, bos_token_id=0,
      eos_token_id=2, decoder_start_token_id=2, forced_bos_token_id=None,
      forced_eos_token_id=None)
  hf_helpers.redraw_weights(transformers.BartForConditionalGeneration(config)).save_pretrained(
      directory)
  return str(directory)


def test_text_to_text_generates_transformers_tokens(tmp_path):
  folder = _tiny_bart(tmp_path / "bart")
  reference = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
  encoded = tokenizer(TEXTS, return_tensors="pt", padding=True)
  with torch.no_grad():
    ids = reference.generate(**encoded, max_new_tokens=8, do_sample=False, num_beams=1)
  want = [{"generated_text": t} for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
  ours = bertjax.pipeline("auto", folder, batch_size=2)
  assert ours.task == "text2text-generation"
  assert ours(TEXTS, max_new_tokens=8) == want


def test_auto_picks_the_task_of_the_model_class(folders):
  for task, folder in folders.items():
    assert bertjax.pipeline("auto", folder).task == task


def test_a_model_of_another_class_is_refused_saying_what_to_give(folders):
  with pytest.raises(ValueError, match=r"holds a BertForMaskedLM.*Fine-tune one first"):
    bertjax.pipeline("text-classification", folders["fill-mask"])
  with pytest.raises(ValueError, match=r"No task 'sentiment'"):
    bertjax.pipeline("sentiment", folders["fill-mask"])


def test_open_model_gives_its_tokenizer(folders):
  model = bertjax.open_model(folders["text-classification"])
  reference = transformers.AutoTokenizer.from_pretrained(folders["text-classification"])
  encoded = model.tokenizer.encode(TEXTS[0], TEXTS[1])
  want = reference(TEXTS[0], TEXTS[1])
  assert encoded.ids == want["input_ids"] and encoded.type_ids == want["token_type_ids"]
  assert str(model.family) == "bert"


# ----------------------------------------------------------------- the predict command
def test_predict_command_reads_tsv_and_jsonl_and_writes_jsonl(folders, tmp_path):
  folder = folders["text-classification"]
  tsv = tmp_path / "pairs.tsv"
  tsv.write_text("id\tsentence1\tsentence2\n" + "".join(
      f"{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(zip(TEXTS, TEXTS[1:] + TEXTS[:1]))))
  out = tmp_path / "pairs.jsonl"
  printed = cli.run_module(["bertjax.predict", f"--model={folder}", f"--input={tsv}",
                            f"--output={out}", "--columns=text=sentence1,text_pair=sentence2"])
  assert printed.strip() == f"Wrote 3 predictions (text-classification) to {out}"
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  want = bertjax.pipeline("text-classification", folder)(
      [(a, b) for a, b in zip(TEXTS, TEXTS[1:] + TEXTS[:1])])
  assert [r["id"] for r in rows] == ["0", "1", "2"]
  _close([r["prediction"] for r in rows], want)
  with pytest.raises(AssertionError, match=r"--output=.*pairs\.jsonl.*--overwrite"):
    cli.run_module(["bertjax.predict", f"--model={folder}", f"--input={tsv}", f"--output={out}"])
  cli.run_module(["bertjax.predict", f"--model={folder}", f"--input={tsv}", f"--output={out}",
                  "--columns=text=sentence1", "--overwrite"])
  assert len(out.read_text().splitlines()) == 3

  jsonl = tmp_path / "texts.jsonl"
  jsonl.write_text(json.dumps(TEXTS[0]) + "\n" + json.dumps({"text": TEXTS[1]}) + "\n")
  printed = cli.run_module(["bertjax", "predict", f"--checkpoint={folder}", f"--input={jsonl}",
                            "--top_k=2"])
  rows = [json.loads(line) for line in printed.splitlines()]
  _close([r["prediction"] for r in rows],
         bertjax.pipeline("text-classification", folder)(TEXTS[:2], top_k=2))


def test_predict_command_writes_embeddings_as_npy(folders, tmp_path):
  texts = tmp_path / "texts.tsv"
  texts.write_text("text\n" + "\n".join(TEXTS) + "\n")
  out = tmp_path / "embeddings.npy"
  cli.run_module(["bertjax.predict", f"--model={folders['sentence-embeddings']}",
                  f"--input={texts}", f"--output={out}"])
  want = bertjax.pipeline("sentence-embeddings", folders["sentence-embeddings"])(TEXTS)
  assert np.abs(np.load(out) - want).max() < 1e-6


def test_predict_command_names_a_missing_column(folders, tmp_path):
  texts = tmp_path / "texts.tsv"
  texts.write_text("sentence\na man sleeps .\n")
  with pytest.raises(AssertionError, match=r"row 1 has no 'text'.*--columns=text=COLUMN"):
    cli.run_module(["bertjax.predict", f"--model={folders['text-classification']}",
                    f"--input={texts}"])
