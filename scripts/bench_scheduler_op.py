r"""Measures the overhead of the scheduler's gate and completion ops.

The collective is instant (an identity), so what is timed is what the
scheduler adds to each collective:

- eager: one `gate` + identity + `complete` called from Python, next to
  three eager identity ops (the dispatch cost any op pays);
- tf.function: a graph of --collectives gate -> identity -> complete chains
  released in plan order, minus the same graph without gate and complete,
  divided by the number of collectives;
- in-op: the gate's own latency from the telemetry (released - ready) when
  the collective is next and credit is free.

Usage:
  python scripts/bench_scheduler_op.py
  python scripts/bench_scheduler_op.py --collectives=128 --json

Prints numbers, asserts nothing. The target is under 50 us per collective.
"""

import json
import os
import statistics
import time
from typing import Any, Dict, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines the script's flags; all optional."""
  flags.DEFINE_integer("eager_iterations", 2000, "Gate + complete pairs "
                       "timed eagerly.", lower_bound=10)
  flags.DEFINE_integer("collectives", 64, "Collectives per tf.function "
                       "call.", lower_bound=1)
  flags.DEFINE_integer("calls", 200, "tf.function calls timed.",
                       lower_bound=5)
  flags.DEFINE_integer("max_collectives_in_flight", 1, "Collective credit.",
                       lower_bound=1)
  flags.DEFINE_bool("json", False, "Print one JSON object instead of a table.")


def _median_us(samples_ns: Sequence[float]) -> float:
  return statistics.median(samples_ns) / 1e3


def run(eager_iterations: int = 2000, collectives: int = 64, calls: int = 200,
        max_collectives_in_flight: int = 1) -> Dict[str, Any]:
  """Runs the three measurements; returns medians in microseconds."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_preempt import ops  # pylint: disable=g-import-not-at-top

  x = tf.constant([1.0] * 256)

  # Eager.
  ops.configure([0], [x.shape[0] * 4], 0, max_collectives_in_flight,
                telemetry_iterations=eager_iterations, scheduler="bench_eager")
  pair, dispatch = [], []
  for _ in range(eager_iterations):
    start = time.perf_counter_ns()
    y = ops.gate(x, 0, scheduler="bench_eager")
    ops.complete(tf.identity(y), 0, scheduler="bench_eager")
    pair.append(time.perf_counter_ns() - start)
    start = time.perf_counter_ns()
    tf.identity(tf.identity(tf.identity(x)))
    dispatch.append(time.perf_counter_ns() - start)
  in_op = [r.released_ns - r.ready_ns for r in ops.telemetry_records(
      ops.telemetry(scheduler="bench_eager"))]

  # tf.function.
  ids = list(range(collectives))
  ops.configure(ids, [x.shape[0] * 4] * collectives, 0,
                max_collectives_in_flight, scheduler="bench_graph")

  def step(v, scheduled):
    outs = []
    for cid in ids:
      w = v + float(cid)
      if scheduled:
        w = ops.complete(tf.identity(ops.gate(w, cid, scheduler="bench_graph")),
                         cid, scheduler="bench_graph")
      else:
        w = tf.identity(w)
      outs.append(w)
    return tf.add_n(outs)

  with_ops = tf.function(lambda v: step(v, True))
  without = tf.function(lambda v: step(v, False))
  for fn in (with_ops, without):
    fn(x).numpy()  # Trace and warm up.
  graph_with, graph_without = [], []
  for _ in range(calls):
    start = time.perf_counter_ns()
    with_ops(x).numpy()
    graph_with.append(time.perf_counter_ns() - start)
    start = time.perf_counter_ns()
    without(x).numpy()
    graph_without.append(time.perf_counter_ns() - start)

  return {
      "tensorflow": tf.__version__,
      "cpu_count": os.cpu_count(),
      # gate + identity (the collective) + complete, from Python.
      "eager_per_collective_us": _median_us(pair),
      # For scale: three eager identity ops.
      "eager_three_identities_us": _median_us(dispatch),
      "graph_call_with_ops_us": _median_us(graph_with),
      "graph_call_without_ops_us": _median_us(graph_without),
      "graph_overhead_per_collective_us":
          (_median_us(graph_with) - _median_us(graph_without)) / collectives,
      "gate_in_op_latency_us": _median_us(in_op),
      "collectives_per_call": collectives,
      "max_collectives_in_flight": max_collectives_in_flight,
  }


def main(argv: Optional[Sequence[str]] = None) -> None:
  del argv
  stats = run(FLAGS.eager_iterations, FLAGS.collectives, FLAGS.calls,
              FLAGS.max_collectives_in_flight)
  if FLAGS.json:
    print(json.dumps(stats))
    return
  for key, value in stats.items():
    if isinstance(value, float):
      print(f"{key:40s} {value:10.2f}")
    else:
      print(f"{key:40s} {value!s:>10}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
