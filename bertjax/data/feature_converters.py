"""seqio FeatureConverters: Task features -> the batch features of bertjax.batch.

  EncoderFeatureConverter   BERT-family objectives (MLM, NSP/SOP, SBO); packs.
  EncDecFeatureConverter    T5 / BART denoising ('inputs', 'targets'); packs.
  XLNetFeatureConverter     XLNet permutation LM; pads (no packing).

Packing (seqio's greedy in-order packing) puts several examples in one row;
`segment_ids` (1..n per example, 0 = padding) keeps attention inside an example
and `position_ids` restart at 0 for each. Without packing every row holds one
example: segment_ids = attention_mask, position_ids = 0..n-1.

Each converter's `task_lengths(L)` maps a sequence length to the
task_feature_lengths seqio expects, so callers can write
  conv = EncoderFeatureConverter(nsp=True, pack=False)
  ds = conv(task_ds, conv.task_lengths(128))
"""
from typing import Iterable, Mapping, Sequence, Tuple, Union

import seqio
import tensorflow as tf

from bertjax import batch

Spec = seqio.FeatureConverter.FeatureSpec
SeqLen = Union[int, Mapping[str, int]]


def specs(names: Iterable[str]) -> dict[str, Spec]:
  """seqio feature specs of batch features, with the dtype and rank bertjax.batch gives."""
  return {name: Spec(dtype=tf.as_dtype(dtype), rank=rank)
          for name, (dtype, rank) in batch.task_features(names).items()}


def _real_tokens(ds: tf.data.Dataset, key: str, mask_key: str) -> tf.data.Dataset:
  """Adds a ones vector the length of `key`; after padding it is the attention mask."""
  def fn(ex):
    ex = dict(ex)
    ex[mask_key] = tf.ones_like(ex[key], tf.int32)
    return ex
  return ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)


def pack_dataset(ds: tf.data.Dataset, groups: Mapping[str, Tuple[int, Sequence[str]]],
                 window: int = 128) -> tf.data.Dataset:
  """Greedy in-order ("next-fit") packing of several examples per row.

  `groups` maps a name to (row length, keys); the keys of a group share one
  per-example length (e.g. input_ids and mlm_weights). A new row starts when
  any group would overflow. Adds `<name>_segment_ids` (1..n, 0 = padding) and
  `<name>_position_ids`. Examples longer than the row are trimmed; rows are
  filled from `window` consecutive examples at a time. Unlike seqio's packer
  this keeps zeros inside features (token_type_ids, mlm_targets...) and any
  dtype. Other features are dropped.
  """
  names = list(groups)
  caps = tf.constant([groups[n][0] for n in names], tf.int32)

  def trim(ex):
    out = {}
    for name, (length, keys) in groups.items():
      n = tf.minimum(tf.size(ex[keys[0]]), length)
      out.update({k: ex[k][:n] for k in keys})
      out[f"{name}__len"] = n
    return out

  def pack_batch(b):
    lens = tf.stack([b[f"{n}__len"] for n in names], axis=1)  # [B, G]

    def step(state, n):
      row, used, _ = state
      new_row = tf.reduce_any(used + n > caps)
      offset = tf.where(new_row, tf.zeros_like(used), used)
      return tf.where(new_row, row + 1, row), offset + n, offset

    zeros = tf.zeros_like(caps)
    rows, _, offsets = tf.scan(step, lens, initializer=(tf.constant(0), zeros, zeros))
    num_rows = rows[-1] + 1
    example = tf.range(tf.shape(rows)[0])
    first_in_row = tf.math.unsorted_segment_min(example, rows, num_rows)
    segment = example - tf.gather(first_in_row, rows) + 1
    out = {}
    for g, (name, (length, keys)) in enumerate(groups.items()):
      width = tf.shape(b[keys[0]])[1]
      pos = tf.range(width)[None, :]
      real = pos < lens[:, g:g + 1]
      index = tf.boolean_mask(tf.stack(
          [tf.broadcast_to(rows[:, None], tf.shape(real)), offsets[:, g:g + 1] + pos], -1), real)
      place = lambda v: tf.scatter_nd(index, tf.boolean_mask(v, real), [num_rows, length])
      out.update({k: place(b[k]) for k in keys})
      out[f"{name}_segment_ids"] = place(tf.broadcast_to(segment[:, None], tf.shape(real)))
      out[f"{name}_position_ids"] = place(tf.broadcast_to(pos, tf.shape(real)))
    return out

  first_keys = [keys[0] for _, keys in groups.values()]
  ds = ds.map(trim, num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.filter(lambda ex: tf.reduce_any([tf.size(ex[k]) > 0 for k in first_keys]))
  return ds.padded_batch(window).map(pack_batch, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


class EncoderFeatureConverter(seqio.FeatureConverter):
  """Encoder-only objectives.

  Task features (rank 1, int32 unless noted): input_ids, token_type_ids, and as
  enabled mlm_targets, mlm_weights (float32), next_sentence_label (rank 0),
  sbo_left, sbo_right, sbo_pos. Model features: the same plus attention_mask,
  position_ids, segment_ids. Packed SBO boundaries are shifted to row positions.
  NSP/SOP labels are per example, so `nsp=True` cannot be packed.
  """
  PACKING_FEATURE_DTYPES = {}

  def __init__(self, pack: bool = True, mlm: bool = True, nsp: bool = False,
               sbo: bool = False, pad_id: int = 0, pack_window: int = 128, **kwargs):
    if pack and nsp:
      raise ValueError("Cannot pack examples with a per-example next_sentence_label "
                       "(NSP/SOP); use pack=False.")
    if sbo and not mlm:
      raise ValueError("sbo=True needs mlm=True (SBO is weighted by mlm_weights).")
    names = (batch.TOKENS + (batch.MLM if mlm else ()) + (batch.SPAN_BOUNDARY if sbo else ())
             + (batch.SENTENCE_PAIR if nsp else ()))
    self.TASK_FEATURES = specs(names)
    self.MODEL_FEATURES = specs(names + tuple(k for k in batch.ENCODER_INPUTS if k not in names))
    self._pad_id = pad_id
    self._window = pack_window
    super().__init__(pack=pack, **kwargs)

  def task_lengths(self, sequence_length: SeqLen) -> dict:
    length = sequence_length["input_ids"] if isinstance(sequence_length, Mapping) \
        else sequence_length
    return {k: length for k in self.TASK_FEATURES}

  def _convert_features(self, ds, task_feature_lengths):
    length = task_feature_lengths["input_ids"]
    if self.pack:
      ds = pack_dataset(ds, {"encoder": (length, list(self.TASK_FEATURES))}, self._window)
    else:
      ds = ds.map(lambda ex: {k: ex[k] for k in self.TASK_FEATURES},
                  num_parallel_calls=tf.data.AUTOTUNE)
      ds = _real_tokens(ds, "input_ids", "attention_mask")
      ds = seqio.utils.trim_and_pad_dataset(
          ds, {k: length for k, v in self.TASK_FEATURES.items() if v.rank == 1}
          | {"attention_mask": length})

    def finish(ex):
      out = {k: ex[k] for k in self.TASK_FEATURES}
      if self.pack:
        segment_ids = ex["encoder_segment_ids"]
        position_ids = ex["encoder_position_ids"]
        if "sbo_left" in out:  # Example-relative -> row positions.
          offset = tf.range(length) - position_ids
          selected = out["mlm_weights"] > 0
          for k in ("sbo_left", "sbo_right"):
            out[k] = tf.where(selected, out[k] + offset, 0)
      else:
        segment_ids = ex["attention_mask"]
        position_ids = tf.range(length) * segment_ids
      real = segment_ids > 0
      out["input_ids"] = tf.where(real, out["input_ids"], self._pad_id)
      out["attention_mask"] = tf.cast(real, tf.int32)
      out["segment_ids"] = segment_ids
      out["position_ids"] = position_ids
      return out

    return ds.map(finish, num_parallel_calls=tf.data.AUTOTUNE)

  def get_model_feature_lengths(self, task_feature_lengths):
    length = task_feature_lengths["input_ids"]
    return {k: length for k in self.MODEL_FEATURES}


class EncDecFeatureConverter(seqio.FeatureConverter):
  """Encoder-decoder denoising: task features 'inputs' and 'targets' (int32 [n]).

  decoder_input_ids are the targets shifted right (within each packed example)
  behind `decoder_start_token_id` (T5: 0 = pad; BART: 2 = </s>); labels are the
  targets, label_weights 1.0 on real target tokens.
  """
  TASK_FEATURES = specs(batch.SOURCE_TARGET)
  MODEL_FEATURES = specs(batch.SEQ2SEQ_TOKENS + batch.TARGETS)
  PACKING_FEATURE_DTYPES = {k: spec.dtype for k, spec in specs(batch.SEQ2SEQ_PACKING).items()}

  def __init__(self, pack: bool = True, pad_id: int = 0, decoder_start_token_id: int = 0,
               pack_window: int = 128, **kwargs):
    self._pad_id = pad_id
    self._window = pack_window
    self._start_id = decoder_start_token_id
    super().__init__(pack=pack, **kwargs)

  @staticmethod
  def task_lengths(sequence_length: SeqLen) -> dict:
    if isinstance(sequence_length, Mapping):
      return {"inputs": sequence_length["inputs"], "targets": sequence_length["targets"]}
    return {"inputs": sequence_length, "targets": sequence_length}

  def _convert_features(self, ds, task_feature_lengths):
    ds = ds.map(lambda ex: {"inputs": ex["inputs"], "targets": ex["targets"],
                            "enc_real": tf.ones_like(ex["inputs"]),
                            "dec_real": tf.ones_like(ex["targets"])},
                num_parallel_calls=tf.data.AUTOTUNE)
    enc, dec = task_feature_lengths["inputs"], task_feature_lengths["targets"]
    if self.pack:
      ds = pack_dataset(ds, {"encoder": (enc, ["inputs", "enc_real"]),
                             "decoder": (dec, ["targets", "dec_real"])}, self._window)
    else:
      ds = seqio.utils.trim_and_pad_dataset(
          ds, {"inputs": enc, "enc_real": enc, "targets": dec, "dec_real": dec})

    def finish(ex):
      enc_real, dec_real = ex["enc_real"] > 0, ex["dec_real"] > 0
      dec_segments = ex["decoder_segment_ids"] if self.pack else None
      shifted = seqio.utils.make_autoregressive_inputs(
          ex["targets"], sequence_id=dec_segments, bos_id=self._start_id)
      out = {
          "input_ids": tf.where(enc_real, ex["inputs"], self._pad_id),
          "attention_mask": tf.cast(enc_real, tf.int32),
          "decoder_input_ids": tf.where(dec_real, shifted, self._pad_id),
          "decoder_attention_mask": tf.cast(dec_real, tf.int32),
          "labels": tf.where(dec_real, ex["targets"], self._pad_id),
          "label_weights": tf.cast(dec_real, tf.float32),
      }
      if self.pack:
        out.update({k: ex[k] for k in self.PACKING_FEATURE_DTYPES})
      return out

    return ds.map(finish, num_parallel_calls=tf.data.AUTOTUNE)

  def get_model_feature_lengths(self, task_feature_lengths):
    enc, dec = task_feature_lengths["inputs"], task_feature_lengths["targets"]
    lengths = {k: (enc if k in ("input_ids", "attention_mask") else dec)
               for k in self.MODEL_FEATURES}
    if self.pack:
      lengths.update(encoder_segment_ids=enc, encoder_position_ids=enc,
                     decoder_segment_ids=dec, decoder_position_ids=dec)
    return lengths


class XLNetFeatureConverter(seqio.FeatureConverter):
  """XLNet permutation LM (no packing: the permutation is over one example).

  Task features: input_ids [L], token_type_ids [L], perm_mask [L, L] (1 = query i
  may NOT see j), target_mapping [P, L] (one-hot), target_ids [P],
  target_weights [P] float32. Padding: input_ids with `pad_id` (XLNet: 5),
  token_type_ids with `pad_token_type_id` (HF: 3), perm_mask with 1 (nobody
  sees padding), the rest with 0; attention_mask marks real tokens.
  """
  TASK_FEATURES = specs(batch.TOKENS + batch.PERMUTATION + batch.PERMUTATION_TARGETS)
  MODEL_FEATURES = {**TASK_FEATURES, **specs(("attention_mask",))}
  PACKING_FEATURE_DTYPES = {}

  def __init__(self, pad_id: int = 5, pad_token_type_id: int = 3, pack: bool = False,
               **kwargs):
    if pack:
      raise ValueError("XLNetFeatureConverter does not pack (pack=False).")
    self._pad_id = pad_id
    self._pad_type = pad_token_type_id
    super().__init__(pack=False, **kwargs)

  @staticmethod
  def task_lengths(sequence_length: SeqLen, num_predict: int = None) -> dict:
    if isinstance(sequence_length, Mapping):
      length, num_predict = sequence_length["input_ids"], sequence_length["target_ids"]
    else:
      length = sequence_length
    if num_predict is None:
      raise ValueError("XLNet needs num_predict (the 'target_ids' length).")
    return {"input_ids": length, "token_type_ids": length, "perm_mask": length,
            "target_mapping": num_predict, "target_ids": num_predict,
            "target_weights": num_predict}

  def _convert_features(self, ds, task_feature_lengths):
    length, num_predict = task_feature_lengths["input_ids"], task_feature_lengths["target_ids"]

    def pad(x, shape, value):
      x = x[tuple(slice(0, s) for s in shape)]
      paddings = [[0, s - tf.shape(x)[i]] for i, s in enumerate(shape)]
      return tf.ensure_shape(tf.pad(x, paddings, constant_values=value), shape)

    def fn(ex):
      n = tf.minimum(tf.size(ex["input_ids"]), length)
      return {
          "input_ids": pad(ex["input_ids"], [length], self._pad_id),
          "token_type_ids": pad(ex["token_type_ids"], [length], self._pad_type),
          "attention_mask": tf.cast(tf.range(length) < n, tf.int32),
          "perm_mask": pad(tf.cast(ex["perm_mask"], tf.float32), [length, length], 1.0),
          "target_mapping": pad(tf.cast(ex["target_mapping"], tf.float32),
                                [num_predict, length], 0.0),
          "target_ids": pad(ex["target_ids"], [num_predict], 0),
          "target_weights": pad(ex["target_weights"], [num_predict], 0.0),
      }

    return ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)

  def get_model_feature_lengths(self, task_feature_lengths):
    return {**task_feature_lengths, "attention_mask": task_feature_lengths["input_ids"]}
