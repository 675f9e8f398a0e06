"""The scheduler op across two real worker processes, with random delays.

Each worker sleeps a random time (seeded per run, worker and tensor) before
each gradient reaches the all-reduce, so the gates see their inputs ready in
a different order on every worker and every run. The gated all-reduce (the
strategy's, default credit, and one with a credit of one collective) must
neither deadlock nor differ, bit for bit, from the ordering-token mode.
Twenty runs in two launches of ten, to keep process start-ups few.
"""

import json
import os

import numpy as np
import pytest

from tf_preempt.testing import cluster

RUNS_PER_LAUNCH = 10
LAUNCHES = 2
SHAPES = [(3, 5), (7,), (1,), (2, 2, 3), (129,), (4, 33), (16, 8), (40,)]
MAX_DELAY_S = 0.02


def _delays(run, task):
  rng = np.random.default_rng(7919 * run + task)
  return rng.uniform(0.0, MAX_DELAY_S, len(SHAPES)).astype(np.float32)


def _gradients(run, task):
  rng = np.random.default_rng(104729 * run + task)
  return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def delayed_runs(first_run, num_runs):
  """Worker: `num_runs` runs with gated and token-ordered all-reduces."""
  import time  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(4)
  from tf_preempt.runtime import PreemptiveAllReduce  # pylint: disable=g-import-not-at-top
  from tf_preempt.runtime import tf_internals  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top

  task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  planner = {"chunk_bytes": 128, "fuse": False}
  strategy = PreemptiveMultiWorkerMirroredStrategy(
      scheduler="pace", scheduler_options=planner, scheduler_op=True)
  gated = strategy.cross_device_ops
  assert gated.uses_scheduler_op
  state = tf_internals.cross_device_ops_state(gated)
  # The same group and key allocator, so no two share instance keys.
  def make(scheduler_op, **options):
    return PreemptiveAllReduce(
        state.devices, state.group_size, state.options,
        state.collective_keys, scheduler="pace",
        scheduler_options=dict(planner, **options),
        scheduler_op=scheduler_op)
  variants = {"gated": gated,
              "gated_credit_1": make(True, credit_collectives=1),
              "token_only": make(False)}
  sum_op = tf.distribute.ReduceOp.SUM
  options = tf_internals.CommunicationOptions()

  def sleep_then(x, seconds):
    time.sleep(float(seconds))
    # A copy: `x` views the caller's gradient, and a collective may reduce
    # in place into a buffer it holds the only reference to, which would
    # rewrite the gradients that the next variant all-reduces.
    return x.copy()

  def step_function(ops_):
    @tf.function
    def step(grads, delays):
      # Not stateful: automatic control dependencies would otherwise run
      # the sleeps one after another in program order.
      delayed = [tf.numpy_function(sleep_then, [g, delays[i]], tf.float32,
                                   stateful=False)
                 for i, g in enumerate(grads)]
      delayed = [tf.ensure_shape(d, g.shape) for d, g in zip(delayed, grads)]
      return ops_._all_reduce(sum_op, delayed, 0, options)  # pylint: disable=protected-access
    return step

  steps = {name: step_function(ops_) for name, ops_ in variants.items()}
  mismatches = []
  start = time.monotonic()
  for run in range(first_run, first_run + num_runs):
    grads = [tf.constant(g) for g in _gradients(run, task)]
    delays = tf.constant(_delays(run, task))
    results = {name: [t.numpy() for t in step(grads, delays)]
               for name, step in steps.items()}
    expected = [a + b for a, b in zip(_gradients(run, 0), _gradients(run, 1))]
    for name, values in results.items():
      for i, (a, b) in enumerate(zip(values, results["token_only"])):
        if a.tobytes() != b.tobytes():
          mismatches.append((run, name, i, float(np.max(np.abs(a - b)))))
        if not np.allclose(a, expected[i], rtol=1e-5, atol=1e-5):
          mismatches.append((run, name, i, "wrong"))
  # Every run was one iteration of the plan, released in plan order.
  telemetry = {}
  for name in ("gated", "gated_credit_1"):
    (records,) = variants[name].telemetry().values()
    ids = [r.collective_id for r in records]
    n = len(gated.bind(grads).steps)
    telemetry[name] = {
        "rows": len(records), "collectives": n,
        "plan_order": ids == list(range(n)) * num_runs,
        "ordered": all(r.ready_ns <= r.released_ns <= r.done_ns
                       for r in records),
        "release_sorted": ([r.released_ns for r in records] ==
                           sorted(r.released_ns for r in records))}
  expected_sum = [sum(_gradients(r, t)[i] for t in range(2)).tolist()
                  for r in [first_run + num_runs - 1]
                  for i in range(len(SHAPES))]
  last = [v.tolist() for v in results["gated"]]
  return {"mismatches": mismatches, "telemetry": telemetry,
          "last": last, "expected_last": expected_sum,
          "seconds": time.monotonic() - start}


@pytest.mark.slow
def test_random_delays_no_deadlock_and_equal_results():
  target = f"{os.path.abspath(__file__)}:delayed_runs"
  for launch in range(LAUNCHES):
    results = cluster.run_workers(
        target, 2, args=(launch * RUNS_PER_LAUNCH, RUNS_PER_LAUNCH),
        timeout=120, pin_cpus=True)
    cluster.check_all_ok(results)
    for result in results:
      value = result.value
      assert value["mismatches"] == [], value["mismatches"]
      for name, t in value["telemetry"].items():
        assert t["rows"] == t["collectives"] * RUNS_PER_LAUNCH, (name, t)
        assert t["plan_order"] and t["ordered"] and t["release_sorted"], (
            name, t)
      for got, expected in zip(value["last"], value["expected_last"]):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    # Both workers computed the same sums.
    assert results[0].value["last"] == results[1].value["last"]
