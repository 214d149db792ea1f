"""The ELMo experiment's downstream rows (experiments/elmo/results.md), after pretraining:

1. word2vec and fastText vectors trained with gensim on the ELMo pretraining corpus
   (the same sentences, split into words as the `bilm` recipe splits them);
2. feature-based CoNLL-2003 NER (BERT Table 7 style): frozen features -> the 2-layer BiLSTM
   tagger of bertjax.finetune.feature_based, trained on the first --train_sentences
   training sentences, conlleval entity F1 on all 3,250 dev sentences. Features: ELMo's
   scalar mix of its 3 layers, ELMo's context-free layer 0 alone, word2vec, fastText;
3. STS benchmark test, Spearman x 100 of cosine similarity (bertjax.evaluation.sts) of
   averaged word vectors (SBERT Table 1's first row) and of averaged ELMo layers.

Usage: python experiments/elmo/run.py --elmo=/tmp/elmo_small_run \
         --corpus=/tmp/elmo_corpus/train.txt --vectors_dir=/tmp/elmo_vectors \
         --out=/tmp/elmo_results.json
"""
import argparse
import json
import os
import time

from absl import logging
import gensim
import numpy as np

from bertjax.data import lm_word_vocabulary
from bertjax.evaluation import conll, readers, sts
from bertjax.finetune import feature_based, loop, word_features


def corpus_sentences(path: str) -> list[list[str]]:
  with open(path, encoding="utf-8") as f:
    lines = [line for line in f.read().split("\n") if line.strip()]
  split = lm_word_vocabulary.split_words_tf(lines).to_list()
  return [[w.decode("utf-8") for w in words] for words in split]


def tagging_arrays(states: np.ndarray, sentences) -> dict[str, np.ndarray]:
  lengths = np.array([len(s.words) for s in sentences])
  mask = (np.arange(states.shape[1])[None] < lengths[:, None]).astype(np.int32)
  labels = np.zeros(mask.shape, np.int32)
  for i, s in enumerate(sentences):
    labels[i, :len(s.tags)] = [conll.LABELS.index(t) for t in s.tags]
  return {"features": states, "attention_mask": mask, "labels": labels,
          "label_weights": mask.astype(np.float32)}


def train_tagger(mode: str, train: dict, dev: dict, dev_sentences, args) -> dict:
  start = time.time()
  config = loop.FinetuneConfig(learning_rate=args.learning_rate, batch_size=32,
                               num_epochs=args.epochs, weight_decay=0.0, log_every=50)
  steps = int(args.epochs * loop.steps_per_epoch(loop.num_rows(train), config.batch_size))
  tagger = feature_based.FeatureTagger(mode, len(conll.LABELS))
  tuner = loop.Finetuner(tagger, feature_based.WordTagging(), train, config, steps)
  history = tuner.train(train, steps)
  logits = tuner.predict(dev, ("logits",))["logits"]
  predicted = [[conll.LABELS[k] for k in logits[i, :len(s.words)].argmax(-1)]
               for i, s in enumerate(dev_sentences)]
  scores = conll.entity_scores([s.tags for s in dev_sentences], predicted)
  return {"f1": scores["f1"], "precision": scores["precision"], "recall": scores["recall"],
          "steps": steps, "final_train_loss": history[-1]["loss"],
          "time_s": time.time() - start}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--elmo", required=True, help="model_dir of the ELMo pretraining run")
  parser.add_argument("--corpus", required=True, help="its train.txt (make_corpus.py)")
  parser.add_argument("--out", required=True)
  parser.add_argument("--train_sentences", type=int, default=2000)
  parser.add_argument("--epochs", type=float, default=3.0)
  parser.add_argument("--learning_rate", type=float, default=1e-3)
  parser.add_argument("--vector_dim", type=int, default=128)  # = ELMo small's 2 x 64
  parser.add_argument("--vector_epochs", type=int, default=5)
  parser.add_argument("--vectors_dir", required=True, help="where the vectors are kept")
  parser.add_argument("--with_layer0", action="store_true", help="+ a row of ELMo layer 0")
  parser.add_argument("--only_vectors", action="store_true", help="train them, then stop")
  args = parser.parse_args()
  logging.set_verbosity(logging.WARNING)
  results, start = {"args": vars(args), "ner": {}, "sts": {}, "time_s": {}}, time.time()

  os.makedirs(args.vectors_dir, exist_ok=True)
  corpus = corpus_sentences(args.corpus)
  vectors = {}
  for kind in word_features.KINDS:
    t, path = time.time(), os.path.join(args.vectors_dir, f"{kind}.kv")
    if os.path.exists(path):  # trained by an earlier (e.g. --only_vectors) run
      vectors[kind] = gensim.models.KeyedVectors.load(path)
      continue
    vectors[kind] = word_features.train_word_vectors(corpus, kind, args.vector_dim,
                                                     args.vector_epochs)
    vectors[kind].save(path)
    results["time_s"][f"train_{kind}"] = time.time() - t
    print(f"trained {kind} in {time.time() - t:.0f} s", flush=True)
  if args.only_vectors:
    return
  skips = readers.SkipLog()
  train = conll.read_sentences(conll.path("train"), skips)[:args.train_sentences]
  dev = conll.read_sentences(conll.path("dev"), skips)
  words = {"train": [s.words for s in train], "dev": [s.words for s in dev]}
  results["corpus_sentences"] = len(corpus)
  results["coverage"] = {k: word_features.coverage(v, words["dev"]) for k, v in vectors.items()}

  t = time.time()
  module, params = word_features.open_elmo(args.elmo)
  elmo = {split: word_features.elmo_states(module, params, w) for split, w in words.items()}
  results["time_s"]["elmo_features"] = time.time() - t
  layer0 = {split: states[:, :, :1] for split, states in elmo.items()}
  features = {"elmo_scalar_mix": ("sum_all", elmo)}
  if args.with_layer0:
    features["elmo_layer0_char_cnn"] = ("embeddings", layer0)
  for kind, kv in vectors.items():
    features[kind] = ("embeddings", {split: word_features.vector_states(kv, w)
                                     for split, w in words.items()})
  for name, (mode, states) in features.items():
    row = train_tagger(mode, tagging_arrays(states["train"], train),
                       tagging_arrays(states["dev"], dev), dev, args)
    results["ner"][name] = row
    print(f"NER {name}: dev F1 {100 * row['f1']:.1f} ({row['time_s']:.0f} s)", flush=True)

  split = lambda texts: [[w.decode("utf-8") for w in ws]
                         for ws in lm_word_vocabulary.split_words_tf(texts).to_list()]
  pairs = sts.read_stsbenchmark("test")
  for kind, kv in vectors.items():
    results["sts"][f"avg_{kind}"] = sts.evaluate_pairs(
        lambda texts, kv=kv: word_features.mean_vectors(kv, split(texts)), pairs)

  def elmo_mean(texts):
    sentences = split(texts)
    states = word_features.elmo_states(module, params, sentences).astype(np.float32)
    lengths = np.maximum([len(s) for s in sentences], 1)
    return states.mean(axis=2).sum(axis=1) / lengths[:, None]
  results["sts"]["avg_elmo_layers"] = sts.evaluate_pairs(elmo_mean, pairs)
  print("STSb test Spearman:", {k: round(v, 1) for k, v in results["sts"].items()})
  results["time_s"]["total"] = time.time() - start
  with open(args.out, "w") as f:
    json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
