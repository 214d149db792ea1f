"""BigBird's random-block plan: which key blocks each query block attends at random.

The plan is drawn once per (sequence length, layer) with numpy from an explicit seed,
so it is a static constant of the compiled step: reproducible, and the same on every
host. The drawing follows the reference (google-research/bigbird, and transformers'
`BigBirdBlockSparseAttention`) call for call, so `np.random.RandomState(layer)` yields
exactly the plan transformers uses for that layer in training mode.

A plan is an int32 array [heads, num_blocks - 2, num_random_blocks]: for every
non-global query block 1 .. num_blocks - 2, the key blocks it sees at random.
"""
import functools

import numpy as np

# Lengths for which the reference keeps the plan of the original paper (drawn for
# max_position_embeddings and truncated), instead of the per-head plan.
PAPER_PLAN_LENGTHS = (1024, 3072, 4096)


def draw_plan(length: int, block_size: int, num_random_blocks: int, num_heads: int,
              rng: np.random.RandomState, max_length: int) -> np.ndarray:
  """The plan for a `length`-token sequence ([heads, length // block_size - 2, r])."""
  num_blocks = length // block_size
  if num_random_blocks == 0:
    return np.zeros((num_heads, num_blocks - 2, 0), np.int32)
  if length in PAPER_PLAN_LENGTHS:
    return np.stack([
        _paper_plan(max_length, block_size, num_random_blocks, rng, last_idx=1024)[:num_blocks - 2]
        for _ in range(num_heads)])
  plan_lengths, plan_counts = _plan_layout(length, block_size, num_random_blocks)
  return _per_head_plan(num_blocks, block_size, num_heads, plan_lengths, plan_counts, rng)


@functools.lru_cache(maxsize=64)
def layer_plans(length: int, block_size: int, num_random_blocks: int, num_heads: int,
                num_layers: int, seed: int, max_length: int) -> np.ndarray:
  """Plans of every layer, [layers, heads, blocks - 2, r]; layer l draws with seed + l."""
  plans = [draw_plan(length, block_size, num_random_blocks, num_heads,
                     np.random.RandomState(seed + layer), max_length)
           for layer in range(num_layers)]
  return np.stack(plans).astype(np.int32)


def _plan_layout(length: int, block_size: int, r: int):
  """Where random blocks may come from: prefixes of the sequence and how many from each."""
  num_blocks = length // block_size
  if 2 * r + 5 < num_blocks:
    return [(2 * r + 5) * block_size, length], [r, 0]
  if r + 5 < num_blocks:
    return [(r + 5) * block_size, length], [r // 2, r - r // 2]
  return [length], [r]


def _paper_plan(length: int, block_size: int, r: int, rng, last_idx: int) -> np.ndarray:
  """The original paper's plan (one head): blocks outside the window, up to `last_idx`."""
  num_blocks = length // block_size
  plan = np.zeros((num_blocks - 2, r), np.int32)
  middle = np.arange(1, num_blocks - 1, dtype=np.int32)
  last = num_blocks - 1
  if last_idx > 2 * block_size:
    last = last_idx // block_size - 1
  for i in range(1, num_blocks - 1):
    start, end = i - 2, i
    if i == 1:
      choices = middle[2:last]
    elif i == 2:
      choices = middle[3:last]
    elif i in (num_blocks - 3, num_blocks - 2):
      choices = middle[:last]  # The reference does not exclude the window here.
    elif start > last:
      choices = middle[:last]
    elif end + 1 == last:
      choices = middle[:start]
    else:
      choices = np.concatenate((middle[:start], middle[end + 1:last]))
    plan[i - 1] = rng.permutation(choices)[:r]
  return plan


def _per_head_plan(num_blocks: int, block_size: int, num_heads: int, plan_lengths, plan_counts,
                   rng) -> np.ndarray:
  """Random blocks per head, drawn plan segment by plan segment as the reference does."""
  plan_blocks = [n // block_size for n in plan_lengths]
  last_segment = plan_lengths.index(num_blocks * block_size)
  plan = np.zeros((num_heads, num_blocks, int(np.sum(plan_counts[:last_segment + 1]))), np.int32)

  def fill(rows, column_range, key_range, count):
    for row in rows:
      for h in range(num_heads):
        plan[h, row, column_range[0]:column_range[1]] = _row_plan(row, *key_range, count, rng)

  for seg in range(last_segment + 1):
    drawn = 0
    if seg > 0:
      if plan_counts[seg] > 0:
        drawn = int(np.sum(plan_counts[:seg]))
        fill(range(1, plan_blocks[seg - 1]), (drawn, int(np.sum(plan_counts[:seg + 1]))),
             (plan_blocks[seg - 1], plan_blocks[seg]), plan_counts[seg])
      for earlier in range(seg):
        if plan_counts[earlier] == 0:
          continue
        start = 0 if earlier == 0 else plan_blocks[earlier - 1]
        columns = (int(np.sum(plan_counts[:earlier])), int(np.sum(plan_counts[:earlier + 1])))
        fill(range(plan_blocks[seg - 1], plan_blocks[seg]), columns,
             (start, plan_blocks[earlier]), plan_counts[earlier])
    if plan_counts[seg] == 0:
      continue
    first_row, first_key = (1, 0) if seg == 0 else (plan_blocks[seg - 1], plan_blocks[seg - 1])
    if seg > 0:
      drawn = int(np.sum(plan_counts[:seg]))
    fill(range(first_row, plan_blocks[seg]), (drawn, int(np.sum(plan_counts[:seg + 1]))),
         (first_key, plan_blocks[seg]), plan_counts[seg])
  return plan[:, 1:num_blocks - 1]


def _row_plan(row: int, key_start: int, key_end: int, count: int, rng) -> np.ndarray:
  """`count` key blocks in [key_start, key_end) outside the row's window and the globals."""
  candidates = rng.permutation(np.arange(key_start, key_end, dtype=np.int32))
  illegal = {row - 1, row, row + 1, 0, key_end - 1}
  if row == 1:
    illegal.add(key_end - 2)  # the second block may not pick the second-to-last one
  if row == key_end - 2:
    illegal.add(1)
  chosen = [b for b in candidates if b not in illegal][:count]
  if len(chosen) < count:
    raise ValueError(f"BigBird: only {len(chosen)} legal random blocks for block {row} "
                     f"(need {count}); use a longer sequence or fewer num_random_blocks.")
  return np.asarray(chosen, np.int32)
