r"""Times one stock all-reduce by which task reaches it last: one worker's side.

  python -m tf_preempt.bench.arrival_worker --nbytes 3260000 --late_ms 4

Run as every worker of a TF_CONFIG cluster (`scripts/bench_arrival_order.py`
launches it). Stock `tf.distribute.MultiWorkerMirroredStrategy` (RING, no
tf_preempt code on the collective's path), one float32 all-reduce of
`--nbytes` per step. In each step one task, drawn from a seeded sequence
that every worker draws alike, is `--late_ms` late (or none is), so it
reaches the collective that much later: with `--late_by=sleep` it sleeps
before the step (its core idles, as in the first probe); with
`--late_by=compute` every task runs a chain of float32 matmuls inside the
step before the all-reduce, `--busy_ms` long, and the late task `--late_ms`
longer, so its core is busy when the peer's first message arrives, as it is
at the end of a training step's backward pass. Inside the step the worker
stamps its arrival (`tf.timestamp`, the machine's wall clock, which the
workers on one machine share) and the collective's end. Prints one JSON
line: {"task", "ms_per_op": the chain's calibrated matmul time (compute
only), "steps": [[late task or -1, arrival_s, end_s], ...]}.
"""

import json
import statistics
import time
from typing import Sequence

from absl import app
from absl import flags

from tf_preempt import heap
from tf_preempt.bench import stock_ring

NOBODY = -1
# Side of the compute chain's matrices: about 0.5 ms a matmul on one core
# of this testbed, the size of a small model's backward op.
MATRIX = 330


def define_flags() -> None:
  """The worker's flags (also scripts/bench_arrival_order.py's)."""
  flags.DEFINE_integer("nbytes", 3_260_000, "Bytes of the all-reduce.")
  flags.DEFINE_float("late_ms", 4.0, "How late the late task arrives.")
  flags.DEFINE_integer("steps", 80, "Steps, the warm-up included.")
  flags.DEFINE_integer("seed", 1234, "Seed of the late-task sequence.")
  flags.DEFINE_enum("late_by", "sleep", ["sleep", "compute"],
                    "How the late task is late: it sleeps before the step, "
                    "or it computes longer inside the step.")
  flags.DEFINE_float("busy_ms", 10.0, "With --late_by=compute: every task's "
                     "compute before the all-reduce.")
  flags.DEFINE_enum("strategy", "stock", ["stock", "tf_preempt"],
                    "Whose all-reduce: stock MultiWorkerMirroredStrategy, or "
                    "tf_preempt's with the tf_default scheduler (the same "
                    "collective, gated by the scheduler op).")
  heap.define_flag("The workers' heap: ")


def late_tasks(num_workers: int, steps: int, seed: int):
  """The late task of each step, or NOBODY; the same on every worker."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  draws = np.random.default_rng(seed).integers(0, num_workers + 1, steps)
  return [int(d) if d < num_workers else NOBODY for d in draws]


def ops_for(ms: float, ms_per_op: float) -> int:
  """Matmuls of the chain that take about `ms`."""
  if ms_per_op <= 0:
    raise ValueError(f"ms_per_op must be positive, got {ms_per_op}")
  return max(0, round(ms / ms_per_op))


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  strategy, gradient = stock_ring.strategy_and_gradient(
      f.nbytes, preemptive=f.strategy == "tf_preempt", heap_mode=f.heap)
  task = strategy.cluster_resolver.task_id
  computing = f.late_by == "compute"
  if computing:
    weight, start_x = stock_ring.chain_variables(strategy, MATRIX)

  def chain(ops):
    return tf.while_loop(lambda i, x: i < ops,
                         lambda i, x: (i + 1, tf.matmul(x, weight)),
                         (tf.constant(0), start_x.read_value()))[1]

  @tf.function
  def step(ops):
    def replica_fn():
      # Sleeping, the step is the all-reduce alone, as in the first probe.
      x = chain(ops) if computing else tf.zeros([1, 1])
      with tf.control_dependencies([x]):
        arrival = tf.timestamp()
      with tf.control_dependencies([arrival]):
        value = tf.identity(gradient.read_value())
      reduced = tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, value)
      with tf.control_dependencies([reduced]):
        end = tf.timestamp()
      return arrival, end, reduced[0] + x[0, 0] * 0.0
    return strategy.run(replica_fn)

  # Reported so the script can show which strategy really reduced.
  out = {"task": task, "strategy_class": type(strategy).__name__,
         "heap": heap.applied_mode()}
  busy_ops = late_ops = 0
  if computing:
    # Each worker times its own chain (compute only, no collective).
    timed = tf.function(lambda ops: chain(ops)[0, 0])
    per_op = []
    for _ in range(7):
      start = time.perf_counter()
      float(timed(tf.constant(40)))
      per_op.append((time.perf_counter() - start) * 1e3 / 40)
    out["ms_per_op"] = statistics.median(per_op[2:])
    busy_ops = ops_for(f.busy_ms, out["ms_per_op"])
    late_ops = ops_for(f.late_ms, out["ms_per_op"])
  steps = []
  for late in late_tasks(strategy.num_replicas_in_sync, f.steps, f.seed):
    if late == task and not computing:
      time.sleep(f.late_ms / 1e3)
    ops = busy_ops + (late_ops if late == task else 0)
    arrival, end, _ = step(tf.constant(ops))
    steps.append([late, float(arrival), float(end)])
  out["steps"] = steps
  print(json.dumps(out), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
