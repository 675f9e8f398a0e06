r"""Times compute and an all-reduce alone and together: one worker's side.

  python -m tf_preempt.bench.contention_worker --nbytes 2100000

Run as every worker of a TF_CONFIG cluster (`scripts/bench_contention.py`
launches it). Stock `tf.distribute.MultiWorkerMirroredStrategy` (RING). Three
functions, run in turn in every round: "compute" (a chain of `--ops` float32
matmuls of `--matrix` x `--matrix`, one at a time on the worker's core, as a
backward pass's ops are), "comm" (one all-reduce of `--nbytes`) and "both"
(the two at once, nothing ordering one against the other: the collective is
released at the start of the chain, as a gradient's all-reduce is during the
backward pass). Each stamps its start, the chain's end and the collective's
end (`tf.timestamp`). Prints one JSON line: {"task", "rounds": [{function:
[start_s, compute_end_s or null, comm_end_s or null]}, ...]}.
"""

import json
from typing import Sequence

from absl import app
from absl import flags

from tf_preempt import heap
from tf_preempt.bench import stock_ring

FUNCTIONS = ("compute", "comm", "both")


def define_flags() -> None:
  """The worker's flags (scripts/bench_contention.py has its own)."""
  flags.DEFINE_integer("nbytes", 2_100_000, "Bytes of the all-reduce.")
  flags.DEFINE_integer("ops", 60, "Matmuls in the compute chain.")
  flags.DEFINE_integer("matrix", 330, "Side of the chain's matrices.")
  flags.DEFINE_integer("rounds", 40, "Rounds (each runs the three "
                       "functions), the warm-up included.")
  flags.DEFINE_enum("heap", "tensorflow", list(heap.HEAP_MODES),
                    heap.FLAG_HELP)


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  strategy, gradient = stock_ring.strategy_and_gradient(f.nbytes,
                                                        heap_mode=f.heap)
  task = strategy.cluster_resolver.task_id
  weight, start_x = stock_ring.chain_variables(strategy, f.matrix)

  def chain(after):
    with tf.control_dependencies([after]):
      x = tf.identity(start_x.read_value())
    for _ in range(f.ops):
      x = tf.matmul(x, weight)
    with tf.control_dependencies([x]):
      return tf.timestamp(), x[0, 0]

  def all_reduce(after):
    with tf.control_dependencies([after]):
      value = tf.identity(gradient.read_value())
    reduced = tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, value)
    with tf.control_dependencies([reduced]):
      return tf.timestamp(), reduced[0]

  def make(function):
    @tf.function
    def run():
      def replica_fn():
        start = tf.timestamp()
        ends = [tf.constant(-1.0, tf.float64)] * 2
        keep = []
        if function in ("compute", "both"):
          ends[0], kept = chain(start)
          keep.append(kept)
        if function in ("comm", "both"):
          ends[1], kept = all_reduce(start)
          keep.append(kept)
        return start, ends[0], ends[1], keep
      return strategy.run(replica_fn)
    return run

  runs = {name: make(name) for name in FUNCTIONS}
  rounds = []
  for _ in range(f.rounds):
    row = {}
    for name in FUNCTIONS:
      start, compute_end, comm_end, _ = runs[name]()
      row[name] = [float(start)] + [None if float(e) < 0 else float(e)
                                    for e in (compute_end, comm_end)]
    rounds.append(row)
  print(json.dumps({"task": task, "rounds": rounds}), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
