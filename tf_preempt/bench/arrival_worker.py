r"""Times one stock all-reduce by which task reaches it last: one worker's side.

  python -m tf_preempt.bench.arrival_worker --nbytes 3260000 --late_ms 4

Run as every worker of a TF_CONFIG cluster (`scripts/bench_arrival_order.py`
launches it). Stock `tf.distribute.MultiWorkerMirroredStrategy` (RING, no
tf_preempt code on the collective's path), one float32 all-reduce of
`--nbytes` per step. Before each step one task, drawn from a seeded sequence
that every worker draws alike, sleeps `--late_ms` (or none does), so it
reaches the collective that much later. Inside the step the worker stamps
its arrival (`tf.timestamp`, the machine's wall clock, which the workers on
one machine share) and the collective's end. Prints one JSON line:
{"task", "steps": [[late task or -1, arrival_s, end_s], ...]}.
"""

import json
import time
from typing import Sequence

from absl import app
from absl import flags

from tf_preempt.bench import stock_ring

NOBODY = -1


def define_flags() -> None:
  """The worker's flags (also scripts/bench_arrival_order.py's)."""
  flags.DEFINE_integer("nbytes", 3_260_000, "Bytes of the all-reduce.")
  flags.DEFINE_float("late_ms", 4.0, "How late the late task arrives.")
  flags.DEFINE_integer("steps", 80, "Steps, the warm-up included.")
  flags.DEFINE_integer("seed", 1234, "Seed of the late-task sequence.")


def late_tasks(num_workers: int, steps: int, seed: int):
  """The late task of each step, or NOBODY; the same on every worker."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  draws = np.random.default_rng(seed).integers(0, num_workers + 1, steps)
  return [int(d) if d < num_workers else NOBODY for d in draws]


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  strategy, gradient = stock_ring.strategy_and_gradient(f.nbytes)
  task = strategy.cluster_resolver.task_id

  @tf.function
  def step():
    def replica_fn():
      arrival = tf.timestamp()
      with tf.control_dependencies([arrival]):
        value = tf.identity(gradient.read_value())
      reduced = tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, value)
      with tf.control_dependencies([reduced]):
        end = tf.timestamp()
      return arrival, end, reduced[0]
    return strategy.run(replica_fn)

  out = []
  for late in late_tasks(strategy.num_replicas_in_sync, f.steps, f.seed):
    if late == task:
      time.sleep(f.late_ms / 1e3)
    arrival, end, _ = step()
    out.append([late, float(arrival), float(end)])
  print(json.dumps({"task": task, "steps": out}), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
