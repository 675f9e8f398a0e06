r"""Times compute and an all-reduce alone and together: one worker's side.

  python -m tf_preempt.bench.contention_worker --nbytes 2100000

Run as every worker of a TF_CONFIG cluster (`scripts/bench_contention.py`
launches it). Stock `tf.distribute.MultiWorkerMirroredStrategy` (RING). Three
functions, run in turn in every round: "compute" (a chain of `--ops` float32
matmuls of `--matrix` x `--matrix`, one at a time on the worker's core, as a
backward pass's ops are; with `--compute=model`, the forward and backward
pass of `--model` on a synthetic batch of `--batch_size`, its gradients
computed and not reduced, `--passes` times one after another), "comm" (one
all-reduce of `--nbytes`) and "both" (the two at once, nothing ordering one
against the other: the collective is released at the start of the chain, as
a gradient's all-reduce is during the backward pass). Each stamps its
start, the chain's end and the collective's end (`tf.timestamp`). Prints
one JSON line: {"task", "rounds": [{function: [start_s, compute_end_s or
null, comm_end_s or null]}, ...]}.
"""

import json
from typing import Sequence

from absl import app
from absl import flags

from tf_preempt import heap
from tf_preempt.bench import stock_ring

FUNCTIONS = ("compute", "comm", "both")

# The flags scripts/bench_contention.py shares with its workers and passes
# on to them as they are.
SHARED_FLAGS = ("ops", "matrix", "rounds", "compute", "model", "batch_size",
                "passes", "heap")


def define_shared_flags() -> None:
  """The flags in `SHARED_FLAGS` (also scripts/bench_contention.py's)."""
  flags.DEFINE_integer("ops", 60, "Matmuls in the compute chain.")
  flags.DEFINE_integer("matrix", 330, "Side of the chain's matrices (330: "
                       "about 0.5 ms a matmul here, the benchmark model's "
                       "op size).")
  flags.DEFINE_integer("rounds", 40, "Rounds (each runs the three "
                       "functions), the warm-up included.")
  flags.DEFINE_enum("compute", "chain", ["chain", "model"],
                    "The compute beside the all-reduce: the chain of "
                    "matmuls, or --model's forward and backward pass on a "
                    "synthetic batch of --batch_size per worker.")
  flags.DEFINE_string("model", "vgg_small", "With --compute=model: the "
                      "model of the registry.")
  flags.DEFINE_integer("batch_size", 5, "With --compute=model: each "
                       "worker's batch.")
  flags.DEFINE_integer("passes", 1, "With --compute=model: passes one "
                       "after another in each round. A collective that "
                       "outlasts the compute stops taking from it, so the "
                       "compute should outlast the largest all-reduce.")
  heap.define_flag("The workers' heap: ")


def define_flags() -> None:
  """The worker's flags."""
  flags.DEFINE_integer("nbytes", 2_100_000, "Bytes of the all-reduce.")
  define_shared_flags()


def _model_pass(strategy, model_name: str, batch_size: int,
                passes: int = 1):
  """A function of `after` that runs the model's forward and backward pass.

  The gradients are computed and summed, not reduced nor applied: the
  compute of a training step without its collectives, as the chain is
  for matmuls; `passes` passes, each after the previous one's sum.
  Returns (the timestamp at its end, a scalar that depends on it).
  """
  # pylint: disable=g-import-not-at-top
  import keras
  import tensorflow as tf
  from tf_preempt.models import registry
  # pylint: enable=g-import-not-at-top
  with strategy.scope():
    model = registry.get(model_name)
  shape = [batch_size] + [int(d) for d in model.input_shape[1:]]
  classes = int(model.output_shape[-1])
  images = tf.random.stateless_uniform(shape, seed=[1, 2])
  labels = tf.random.stateless_uniform([batch_size], seed=[3, 4],
                                       maxval=classes, dtype=tf.int32)
  loss_fn = keras.losses.SparseCategoricalCrossentropy()

  def model_pass(after):
    total = after
    for _ in range(passes):
      with tf.control_dependencies([total]):
        x = tf.identity(images)
      with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(x, training=True))
      grads = tape.gradient(loss, model.trainable_variables)
      # Consumed, not only depended on: with control dependencies alone
      # the pass measured 2.5 ms against 7.3 for vgg_small (grappler drops
      # work whose values nothing reads); a sum reads each gradient once,
      # as the optimizer does.
      total = tf.add_n([tf.reduce_sum(g) for g in grads])
    with tf.control_dependencies([total]):
      return tf.timestamp(), total
  return model_pass


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  strategy, gradient = stock_ring.strategy_and_gradient(f.nbytes,
                                                        heap_mode=f.heap)
  task = strategy.cluster_resolver.task_id
  compute = (_model_pass(strategy, f.model, f.batch_size, f.passes)
             if f.compute == "model" else
             stock_ring.matmul_chain(strategy, f.ops, f.matrix))

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
          ends[0], kept = compute(start)
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
