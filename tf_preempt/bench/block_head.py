r"""Measures a training block's head: when its first step's loss is ready.

  python -m tf_preempt.bench.block_head --model transformer_tiny \
      --batch_size 32 --unroll 2

One process, the compute alone of `scripts/bench.py` (the training binary's
`--strategy=one_device` run: `tf_preempt.training.runner`, its synthetic
data, SGD with momentum, blocks of `--unroll` steps, traced flat by
`tf_preempt.keras.unroll_steps` for K > 1), with `--blocks` blocks after
`--warmup_blocks` under TensorFlow's profiler. Per profiled block (one call
of the train function) its head is the time from the call's start to the
end of its first step's loss op (the first `LOSS_OP_TYPE` op outside the
gradient tape to end): the forward pass of the block's first step, plus
whatever the block runs before it.

In a flat block of K steps the later steps' work that reads no updated
weight (dropout's random masks, the batches taken in the graph) is ready
at the block's start, and the executor runs it then, before and between
the first step's forward ops: a K = 2 block's head is longer than a K = 1
block's by as much as that work holds the core
(`ExecutionModel.early_compute`), and by any other difference between
stock Keras's K = 1 train function and the unrolled one (the benchmark's
rows differ alike). `scripts/bench_block_head.py` takes the difference,
each head over its own step, in the workers' threading (run it pinned to
one core with one intra-op and two inter-op threads, as
`tf_preempt.launch.MEASUREMENT_WORKER` does).

Prints one JSON line: {"model", "per_worker_batch", "unroll", "heads_ms"
and "blocks_ms" (each profiled block's head and length), "head_ms" and
"block_ms" (their medians), "step_ms" (the run's median step,
`runner.run`'s, profiled blocks included)}.
"""

import json
import statistics
import tempfile
from typing import Any, Dict, List, Sequence, Tuple

from absl import app
from absl import flags

from tf_preempt.bench import step_profile
from tf_preempt.bench import xspace
from tf_preempt.training import config as config_lib
from tf_preempt.training import profiling
from tf_preempt.training import runner

# The loss op of the binaries' loss (SparseCategoricalCrossentropy on
# logits or probabilities: Keras computes both through it).
LOSS_OP_TYPE = "SparseSoftmaxCrossEntropyWithLogits"


def define_flags() -> None:
  """The worker's flags."""
  flags.DEFINE_string("model", "transformer_tiny", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 32, "The batch of one worker.")
  flags.DEFINE_integer("unroll", 1, "Steps per block (K).")
  flags.DEFINE_integer("blocks", 8, "Blocks profiled.")
  flags.DEFINE_integer("warmup_blocks", 6, "Blocks run before profiling.")


def block_heads(space, unroll: int) -> List[Tuple[float, float]]:
  """(head seconds, block seconds) of each train-function call profiled.

  Args:
    space: a profile (`step_profile.read_profile`).
    unroll: the steps of each call.

  Returns:
    Per call that ran a loss op, in order: from its start to the end of
    its first loss op (`loss_ends`), and its
    length. A call that starts inside the one before is that one's.

  Raises:
    ValueError: if the profile has no host CPU plane or no eager call, or
      a call ran other than `unroll` loss ops (not a block of this
      many steps, or events missing).
  """
  return [((ends[0] - call.start_ns) * 1e-9,
           (call.end_ns - call.start_ns) * 1e-9)
          for call, ends in step_calls(space, unroll)]


def step_calls(space, unroll: int) -> List[Tuple[xspace.Call, List[int]]]:
  """The train-function calls of a profile that ran training steps.

  Args:
    space: a profile (`step_profile.read_profile`).
    unroll: the steps of each call.

  Returns:
    (call, `loss_ends` of it) of each call that ran a loss op, in order
    (a call without one, e.g. the logs' reduction, is no block).

  Raises:
    ValueError: if the profile has no host CPU plane or no eager call, or
      a call ran other than `unroll` loss ops.
  """
  out = []
  for call in xspace.train_calls(space):
    ends = loss_ends(call)
    if not ends:
      continue
    if len(ends) != unroll:
      raise ValueError(f"a call ran {len(ends)} loss ops, not {unroll}: "
                       f"not a block of {unroll} steps")
    out.append((call, ends))
  return out


def loss_ends(call: xspace.Call) -> List[int]:
  """The end of each step's loss op in a call.

  Args:
    call: an `xspace.Call`.

  Returns:
    The ends (ns), in order, of its `LOSS_OP_TYPE` ops outside the
    gradient tape (stock Keras's K = 1 function names them under
    "StatefulPartitionedCall/").
  """
  return sorted(e for n, s, e in call.ops
                if n.endswith(":" + LOSS_OP_TYPE)
                and "gradient_tape/" not in n)


def measure(model: str, batch_size: int, unroll: int, blocks: int,
            warmup_blocks: int) -> Dict[str, Any]:
  """The heads of `blocks` profiled blocks (the module doc's JSON line).

  Args:
    model: a model of `tf_preempt.models.registry`.
    batch_size: the batch of one worker.
    unroll: steps per block (K).
    blocks: blocks profiled.
    warmup_blocks: blocks run before (tracing, allocations).

  Returns:
    The record.

  Raises:
    ValueError: if `blocks` < 1 or `warmup_blocks` < 1 (the first block
      traces the function), or the profile holds no block.
  """
  if blocks < 1 or warmup_blocks < 1:
    raise ValueError(f"blocks={blocks} and warmup_blocks={warmup_blocks} "
                     "must be at least 1")
  config = config_lib.TrainConfig(
      model=model, batch_size=batch_size, strategy="one_device",
      unroll=unroll, steps=unroll * (warmup_blocks + blocks + 1),
      warmup_blocks=warmup_blocks)
  with tempfile.TemporaryDirectory() as log_dir:
    profiler = profiling.ProfileBlocks(warmup_blocks, blocks, log_dir)
    try:
      stats = runner.run(config, callbacks=[profiler])
    finally:
      # A failed run must not leave the process's profiler running.
      profiler.stop()
    pairs = block_heads(step_profile.read_profile(log_dir), unroll)
  if not pairs:
    raise ValueError("the profile holds no block of the train function")
  heads = [h * 1e3 for h, _ in pairs]
  lengths = [b * 1e3 for _, b in pairs]
  return {"model": model, "per_worker_batch": batch_size, "unroll": unroll,
          "heads_ms": heads, "blocks_ms": lengths,
          "head_ms": statistics.median(heads),
          "block_ms": statistics.median(lengths),
          "step_ms": stats["median_step_s"] * 1e3}


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  record = measure(f.model, f.batch_size, f.unroll, f.blocks,
                   f.warmup_blocks)
  print(json.dumps(record), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
