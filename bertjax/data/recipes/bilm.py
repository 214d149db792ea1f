"""ELMo's bidirectional-LM recipe `bilm`: documents -> sentences -> words -> rows of
per-word character ids and word ids, with forward and backward targets.

  task_dataset.vocabulary = @lm_word_vocabulary()    # gin/objectives/bilm.gin
  ds = recipes.get_dataset('bilm', sequence_length=20, vocabulary=lm_word_vocabulary())

1. Each line of a document is a sentence; its words are split by
   `lm_word_vocabulary.split_words_tf` and the sentence is wrapped in <S> ... </S>.
2. The sentences of `docs_per_group` consecutive documents are laid end to end and cut
   into rows of L words, the stream bilm-tf trains on (its windows of 20 words); a
   sentence may continue into the next row, and the group's last row is shorter.
3. Each word -> its word id (<UNK> outside the vocabulary) and its character ids
   (`bertjax.characters`: UTF-8 bytes inside begin / end-of-word marks).

Batch features (bertjax.batch): `char_ids` [L, C] (the model input), `input_ids` [L]
(the word ids), `attention_mask`, `forward_targets` (the next word) and
`backward_targets` (the previous word), 0 = no target. As in bilm-tf, the forward LM
never predicts a sentence's <S> and the backward LM never its </S>: each direction
predicts w_1 .. w_n and the closing mark of every sentence, nothing across the gap.

Rules (counted in `preprocessors.stats`): empty lines and documents are dropped; a word
longer than C - 2 bytes keeps its first C - 2 bytes (the released model's rule).
"""
from typing import Mapping, Union

import gin
import seqio
import tensorflow as tf

from bertjax import batch
from bertjax.data import feature_converters as fc
from bertjax.data import lm_word_vocabulary
from bertjax.data.preprocessors import stats
from bertjax.data.recipes import registry
from bertjax import characters

SeqLen = Union[int, Mapping[str, int]]
WORD_FEATURES = ("input_ids", "char_ids")  # what the preprocessors write


def _check_vocabulary(vocab) -> lm_word_vocabulary.LMWordVocabulary:
  if not isinstance(vocab, lm_word_vocabulary.LMWordVocabulary):
    raise ValueError(f"The 'bilm' recipe predicts words: give it a word vocabulary "
                     f"(gin: task_dataset.vocabulary = @lm_word_vocabulary(), as "
                     f"gin/objectives/bilm.gin does), not a {type(vocab).__name__}.")
  return vocab


def char_ids_tf(words: tf.Tensor, max_characters: int = characters.MAX_CHARACTERS) -> tf.Tensor:
  """int32 [n, max_characters] character ids of a 1-D string tensor of words (the same ids
  as `characters.word_ids`)."""
  content = max_characters - 2
  num_bytes = tf.minimum(tf.strings.length(words), content)
  raw = tf.cast(tf.io.decode_raw(words, tf.uint8, fixed_length=content), tf.int32)
  body = tf.where(tf.range(content)[None] < num_bytes[:, None], raw, characters.PAD_CHAR)
  rows = tf.shape(words)[0]
  column = lambda value: tf.fill([rows, 1], value)
  ids = tf.concat([column(characters.BEGIN_WORD), body, column(characters.PAD_CHAR)], axis=1)
  ids = tf.where(tf.range(max_characters)[None] == num_bytes[:, None] + 1,
                 characters.END_WORD, ids)
  for word in (characters.BOS_WORD, characters.EOS_WORD):
    special = tf.constant(characters.word_ids(word, max_characters) - 1)
    ids = tf.where((words == word)[:, None], special[None], ids)
  return ids + 1


def sentence_words(dataset: tf.data.Dataset, text_key: str = "text") -> tf.data.Dataset:
  """seqio preprocessor: {'text'} -> {'words': [sentences, words] strings}, one
  sentence per non-empty line; documents without words are dropped (counted)."""
  def split(ex):
    lines = tf.strings.split(ex[text_key], "\n")
    words = lm_word_vocabulary.split_words_tf(lines)
    return {"words": tf.ragged.boolean_mask(words, words.row_lengths() > 0)}

  def keep(ex):
    empty = tf.equal(ex["words"].nrows(), 0)
    with tf.control_dependencies([stats.count("bilm/dropped_empty_documents", empty)]):
      return tf.logical_not(empty)

  return dataset.map(split, num_parallel_calls=tf.data.AUTOTUNE).filter(keep)


def word_rows(dataset: tf.data.Dataset, sequence_length: SeqLen,
              docs_per_group: int = 64) -> tf.data.Dataset:
  """seqio preprocessor: sentences of `docs_per_group` documents, each inside <S> .. </S>,
  end to end, cut into rows {'words': [<= L] strings}."""
  length = sequence_length["input_ids"] if isinstance(sequence_length, Mapping) \
      else sequence_length
  if length < 2:
    raise ValueError(f"bilm: sequence_length={length} leaves no word to predict (>= 2).")

  def cut(group):
    sentences = group["words"].values  # [sentences of the group, words]
    n = sentences.nrows()
    marks = lambda word: tf.fill([n, 1], word)
    flat = tf.concat([marks(characters.BOS_WORD), sentences, marks(characters.EOS_WORD)],
                     axis=1).flat_values
    total = tf.size(flat, out_type=tf.int64)
    full, rest = total // length, total % length
    lengths = tf.concat([tf.fill([full], tf.cast(length, tf.int64)),
                         tf.boolean_mask([rest], [rest > 0])], axis=0)
    return {"words": tf.RaggedTensor.from_row_lengths(flat, lengths)}

  groups = dataset.map(lambda ex: {"words": ex["words"]}).batch(docs_per_group)
  return groups.map(cut, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def encode_words(dataset: tf.data.Dataset, vocabulary: lm_word_vocabulary.LMWordVocabulary,
                 max_characters: int = characters.MAX_CHARACTERS) -> tf.data.Dataset:
  """seqio preprocessor: {'words'} -> {'input_ids' [n], 'char_ids' [n, C]}; words longer
  than C - 2 bytes are cut there (counted)."""
  def encode(ex):
    words = ex["words"]
    cut = tf.reduce_sum(tf.cast(tf.strings.length(words) > max_characters - 2, tf.int64))
    with tf.control_dependencies([stats.count("bilm/truncated_long_words", cut)]):
      return {"input_ids": vocabulary.lookup_tf(words),
              "char_ids": char_ids_tf(words, max_characters)}

  return dataset.map(encode, num_parallel_calls=tf.data.AUTOTUNE)


@gin.configurable
def bilm_preprocessors(vocab, docs_per_group: int = 64,
                       max_characters: int = characters.MAX_CHARACTERS):
  """The recipe's steps (module doc); `max_characters` must equal the model's
  ElmoConfig.max_characters_per_word (the model checks)."""
  vocab = _check_vocabulary(vocab)

  def rows(dataset, sequence_length):
    return word_rows(dataset, sequence_length, docs_per_group)

  def encode(dataset):
    return encode_words(dataset, vocab, max_characters)

  return [sentence_words, rows, encode]


class BiLMFeatureConverter(seqio.FeatureConverter):
  """Rows of {'input_ids', 'char_ids'} -> the bilm batch features, padded to L (no packing:
  rows are already full but for the last of a group)."""
  TASK_FEATURES = fc.specs(WORD_FEATURES)
  MODEL_FEATURES = fc.specs(WORD_FEATURES + ("attention_mask",) + batch.BILM_TARGETS)
  PACKING_FEATURE_DTYPES = {}

  def __init__(self, vocabulary: lm_word_vocabulary.LMWordVocabulary, pack: bool = False,
               **kwargs):
    if pack:
      raise ValueError("BiLMFeatureConverter does not pack: the recipe lays sentences end "
                       "to end already (pack=False).")
    self._bos, self._eos = vocabulary.bos_id, vocabulary.eos_id
    super().__init__(pack=False, **kwargs)

  @staticmethod
  def task_lengths(sequence_length: SeqLen) -> dict:
    length = sequence_length["input_ids"] if isinstance(sequence_length, Mapping) \
        else sequence_length
    return {"input_ids": length, "char_ids": length}

  def _convert_features(self, ds, task_feature_lengths):
    length = task_feature_lengths["input_ids"]

    def convert(ex):
      ids, chars = ex["input_ids"][:length], ex["char_ids"][:length]
      pad = length - tf.size(ids)
      ids = tf.pad(ids, [[0, pad]])
      chars = tf.pad(chars, [[0, pad], [0, 0]])
      following = tf.pad(ids[1:], [[0, 1]])
      preceding = tf.pad(ids[:-1], [[1, 0]])
      return {
          "input_ids": tf.ensure_shape(ids, [length]),
          "char_ids": tf.ensure_shape(chars, [length, None]),
          "attention_mask": tf.cast(ids > 0, tf.int32),
          "forward_targets": tf.where(following == self._bos, 0, following),
          "backward_targets": tf.where(preceding == self._eos, 0, preceding),
      }

    return ds.map(convert, num_parallel_calls=tf.data.AUTOTUNE)

  def get_model_feature_lengths(self, task_feature_lengths):
    length = task_feature_lengths["input_ids"]
    return {k: length for k in self.MODEL_FEATURES}


def _bilm_lengths(sequence_length: SeqLen) -> Mapping[str, int]:
  return BiLMFeatureConverter.task_lengths(sequence_length)


registry.register("bilm", bilm_preprocessors, batch.task_features(WORD_FEATURES),
                  lambda vocab, pack: BiLMFeatureConverter(_check_vocabulary(vocab), pack),
                  sequence_lengths=_bilm_lengths, pack=False)
