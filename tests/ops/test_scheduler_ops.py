"""Tests of the C++ scheduler ops: order, credit, errors, telemetry."""

import random
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
# Private, tests only: TF's own helper to cancel a running function.
from tensorflow.python.eager import cancellation

from tf_preempt import ops as scheduler_ops

pytestmark = pytest.mark.usefixtures("ops_library")

_COUNTER = iter(range(1 << 30))


def _fresh_name():
  """A scheduler name of its own for each test (schedulers outlive tests)."""
  return f"test_scheduler_{next(_COUNTER)}"


def _check_schedule(matrix, plan_ids, plan_bytes, iterations,
                    max_collectives, max_bytes):
  """Checks plan order, credit and timestamps of a telemetry matrix."""
  records = scheduler_ops.telemetry_records(matrix)
  expected = [(it, cid) for it in range(iterations) for cid in plan_ids]
  # Rows come by iteration and plan position.
  assert [(r.iteration, r.collective_id) for r in records] == expected
  sizes = dict(zip(plan_ids, plan_bytes))
  for r in records:
    assert r.nbytes == sizes[r.collective_id]
    assert r.done_ns is not None, r
    assert r.ready_ns <= r.released_ns <= r.done_ns, r
  # Releases follow plan order, across iterations too.
  released = [r.released_ns for r in records]
  assert released == sorted(released)
  # Credit: at each release, what holds credit ([released, done)) fits.
  for r in records:
    holding = [s for s in records
               if s.released_ns <= r.released_ns < s.done_ns]
    assert len(holding) <= max_collectives, (r, holding)
    if max_bytes > 0 and len(holding) > 1:
      assert sum(s.nbytes for s in holding) <= max_bytes, (r, holding)
  return records


def _random_plan(rng, n):
  ids = rng.sample(range(100, 100 + 4 * n), n)
  nbytes = [rng.randrange(10, 100) for _ in range(n)]
  return ids, nbytes


@pytest.mark.parametrize("max_collectives,max_bytes", [
    (1, 0),      # NCCL: one at a time.
    (3, 0),      # Several in flight, count-limited.
    (4, 150),    # Byte-limited.
])
def test_eager_threads_release_in_plan_order(max_collectives, max_bytes):
  rng = random.Random(max_collectives * 1000 + max_bytes)
  name = _fresh_name()
  ids, nbytes = _random_plan(rng, 8)
  iterations = 4
  scheduler_ops.configure(ids, nbytes, max_bytes, max_collectives,
                          telemetry_iterations=iterations, scheduler=name)
  in_flight = [0]
  peak = [0]
  lock = threading.Lock()
  errors = []

  def worker(cid, seed):
    local = random.Random(seed)
    try:
      x = tf.constant([float(cid)])
      for _ in range(iterations):
        time.sleep(local.uniform(0, 0.004))
        y = scheduler_ops.gate(x, cid, scheduler=name)
        with lock:
          in_flight[0] += 1
          peak[0] = max(peak[0], in_flight[0])
        time.sleep(local.uniform(0, 0.002))  # The collective.
        with lock:
          in_flight[0] -= 1
        x = scheduler_ops.complete(y, cid, scheduler=name)
        np.testing.assert_array_equal(x.numpy(), [float(cid)])
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=worker, args=(cid, rng.random()))
             for cid in ids]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=60)
  assert not any(t.is_alive() for t in threads), "gates deadlocked"
  assert not errors, errors
  assert peak[0] <= max_collectives
  _check_schedule(scheduler_ops.telemetry(scheduler=name), ids, nbytes,
                  iterations, max_collectives, max_bytes)


@pytest.mark.parametrize("max_collectives", [1, 3])
def test_tf_function_gates_release_in_plan_order(max_collectives):
  rng = random.Random(max_collectives)
  name = _fresh_name()
  n = 12
  ids, nbytes = _random_plan(rng, n)
  ready_order = rng.sample(range(n), n)  # Positions in the order they arrive.

  @tf.function
  def two_steps(x):
    values = [x + float(k) for k in range(n)]
    outs = []
    for step in range(2):
      # Inputs become ready in `ready_order`, not in plan order.
      inputs = [None] * n
      previous = None
      for k in ready_order:
        deps = [] if previous is None else [previous]
        with tf.control_dependencies(deps):
          inputs[k] = tf.identity(values[k])
        previous = inputs[k]
      values = []
      for k in range(n):
        y = scheduler_ops.gate(inputs[k], ids[k], scheduler=name)
        y = y * 1.0  # The collective.
        values.append(scheduler_ops.complete(y, ids[k], scheduler=name))
      outs = values if step == 1 else outs
    return tf.add_n(outs)

  scheduler_ops.configure(ids, nbytes, 0, max_collectives, scheduler=name)
  graph = two_steps.get_concrete_function(tf.constant(0.0)).graph
  gates = [op for op in graph.get_operations()
           if op.type in ("PreemptSchedulerGate", "PreemptSchedulerComplete")]
  assert len(gates) == 4 * n
  # Not chained by automatic control dependencies.
  assert all(not op.control_inputs for op in gates)

  for call in range(2):
    out = two_steps(tf.constant(1.0))
    assert out.numpy() == pytest.approx(sum(1.0 + k for k in range(n)))
    del call
  _check_schedule(scheduler_ops.telemetry(scheduler=name), ids, nbytes, 4,
                  max_collectives, 0)


def test_wrap_around_and_telemetry_ring():
  name = _fresh_name()
  ids, nbytes = [5, 3, 9], [1, 2, 3]
  gen = scheduler_ops.configure(ids, nbytes, telemetry_iterations=2,
                                scheduler=name)
  assert int(gen) == 1
  x = tf.constant(1.0)
  for _ in range(5):
    for cid in ids:
      x = scheduler_ops.complete(scheduler_ops.gate(x, cid, scheduler=name),
                                 cid, scheduler=name)
  records = scheduler_ops.telemetry_records(
      scheduler_ops.telemetry(scheduler=name))
  assert [(r.iteration, r.collective_id) for r in records] == [
      (3, 5), (3, 3), (3, 9), (4, 5), (4, 3), (4, 9)]
  last = scheduler_ops.telemetry(1, scheduler=name).numpy()
  assert last.shape == (3, 6)
  assert set(last[:, 0]) == {4}


def test_timestamps_use_python_monotonic_clock():
  name = _fresh_name()
  scheduler_ops.configure([1], [8], scheduler=name)
  before = time.monotonic_ns()
  y = scheduler_ops.gate(tf.constant(0.0), 1, scheduler=name)
  scheduler_ops.complete(y, 1, scheduler=name)
  after = time.monotonic_ns()
  (record,) = scheduler_ops.telemetry_records(
      scheduler_ops.telemetry(scheduler=name))
  assert before <= record.ready_ns <= record.released_ns <= record.done_ns
  assert record.done_ns <= after


def test_oversized_collective_runs_alone():
  name = _fresh_name()
  scheduler_ops.configure([1, 2, 3], [10, 500, 10], max_bytes_in_flight=100,
                          max_collectives_in_flight=3, scheduler=name)
  x = tf.constant(0.0)
  a = scheduler_ops.gate(x, 1, scheduler=name)
  result = {}
  thread = threading.Thread(
      target=lambda: result.update(b=scheduler_ops.gate(x, 2, scheduler=name)))
  thread.start()
  thread.join(0.3)
  assert thread.is_alive()  # 10 + 500 > 100: waits for collective 1.
  scheduler_ops.complete(a, 1, scheduler=name)
  thread.join(10)
  assert "b" in result
  scheduler_ops.complete(result["b"], 2, scheduler=name)
  scheduler_ops.complete(scheduler_ops.gate(x, 3, scheduler=name), 3,
                         scheduler=name)


def test_unknown_id_is_invalid_argument():
  name = _fresh_name()
  scheduler_ops.configure([1, 2], [4, 4], scheduler=name)
  with pytest.raises(tf.errors.InvalidArgumentError, match="not in the"):
    scheduler_ops.gate(tf.constant(0.0), 7, scheduler=name)


def test_gate_without_configure_fails():
  with pytest.raises(tf.errors.FailedPreconditionError, match="configure"):
    scheduler_ops.gate(tf.constant(0.0), 1, scheduler=_fresh_name())


def test_complete_without_gate_fails():
  name = _fresh_name()
  scheduler_ops.configure([1, 2], [4, 4], scheduler=name)
  with pytest.raises(tf.errors.FailedPreconditionError, match="not in flight"):
    scheduler_ops.complete(tf.constant(0.0), 1, scheduler=name)


@pytest.mark.parametrize("ids,nbytes,max_collectives", [
    ([1, 1], [4, 4], 1),     # Duplicate id.
    ([1, 2], [4], 1),        # Length mismatch.
    ([1], [-4], 1),          # Negative size.
    ([1], [4], 0),           # No credit.
    ([], [], 1),             # Empty plan.
])
def test_configure_rejects_bad_plans(ids, nbytes, max_collectives):
  with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
    scheduler_ops.configure(ids, nbytes, 0, max_collectives,
                            scheduler=_fresh_name())


def _gate_in_thread(x, cid, name):
  """Starts a gate that is expected to wait; returns (thread, result)."""
  result = {}

  def run():
    try:
      result["value"] = scheduler_ops.gate(x, cid, scheduler=name)
    except tf.errors.OpError as e:
      result["error"] = e

  thread = threading.Thread(target=run)
  thread.start()
  thread.join(0.2)
  assert thread.is_alive(), result
  return thread, result


def test_close_fails_waiting_gates():
  name = _fresh_name()
  scheduler_ops.configure([1, 2], [4, 4], scheduler=name)
  thread, result = _gate_in_thread(tf.constant(0.0), 2, name)
  scheduler_ops.close(scheduler=name)
  thread.join(10)
  assert not thread.is_alive()
  assert isinstance(result.get("error"), tf.errors.CancelledError), result
  with pytest.raises(tf.errors.FailedPreconditionError):
    scheduler_ops.gate(tf.constant(0.0), 1, scheduler=name)
  scheduler_ops.close(scheduler=name)  # Closing twice is fine.


def test_reconfigure_aborts_waiting_and_forgets_in_flight():
  name = _fresh_name()
  scheduler_ops.configure([1, 2], [4, 4], scheduler=name)
  x = tf.constant(0.0)
  in_flight = scheduler_ops.gate(x, 1, scheduler=name)
  thread, result = _gate_in_thread(x, 2, name)  # Credit is 1.
  gen = scheduler_ops.configure([2, 1], [4, 4], scheduler=name)
  assert int(gen) == 2
  thread.join(10)
  assert isinstance(result.get("error"), tf.errors.AbortedError), result
  # The old plan's in-flight collective completes without error...
  scheduler_ops.complete(in_flight, 1, scheduler=name)
  # ...and the new plan starts from its first collective.
  y = scheduler_ops.gate(x, 2, scheduler=name)
  scheduler_ops.complete(y, 2, scheduler=name)
  with pytest.raises(tf.errors.FailedPreconditionError):
    scheduler_ops.complete(x, 1, scheduler=name)


def test_schedulers_are_per_device(logical_cpus):
  if len(tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs two logical CPU devices")
  name = _fresh_name()
  with tf.device(logical_cpus[0]):
    scheduler_ops.configure([1], [4], scheduler=name)
    scheduler_ops.complete(scheduler_ops.gate(tf.constant(0.0), 1,
                                              scheduler=name), 1,
                           scheduler=name)
  with tf.device(logical_cpus[1]):
    with pytest.raises(tf.errors.FailedPreconditionError, match="CPU:1"):
      scheduler_ops.gate(tf.constant(0.0), 1, scheduler=name)


def test_gate_forwards_any_dtype_and_shape():
  name = _fresh_name()
  scheduler_ops.configure([1, 2], [4, 4], max_collectives_in_flight=2,
                          scheduler=name)
  for cid, value in ((1, tf.constant([[1, 2], [3, 4]], tf.int32)),
                     (2, tf.constant([1.5], tf.bfloat16))):
    out = scheduler_ops.gate(value, cid, scheduler=name)
    assert out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(out.numpy(), value.numpy())
    scheduler_ops.complete(out, cid, scheduler=name)


def test_telemetry_records_conversion():
  matrix = np.array([[0, 7, 16, 10, 20, 30], [0, 8, 4, 11, 31, -1]])
  first, second = scheduler_ops.telemetry_records(matrix)
  assert first.as_dict() == dict(iteration=0, collective_id=7, nbytes=16,
                                 ready_ns=10, released_ns=20, done_ns=30)
  assert first.wait_ns == 10 and first.duration_ns == 10
  assert second.done_ns is None and second.duration_ns is None
  assert scheduler_ops.telemetry_records(np.zeros((0, 6))) == []
  with pytest.raises(ValueError):
    scheduler_ops.telemetry_records(np.zeros((2, 5)))


def test_cancelled_step_fails_waiting_gate():
  name = _fresh_name()
  scheduler_ops.configure([1, 2], [4, 4], scheduler=name)

  @tf.function
  def waits_for_collective_2(x):
    return scheduler_ops.gate(x, 2, scheduler=name)  # 1 never arrives.

  concrete = waits_for_collective_2.get_concrete_function(tf.constant(0.0))
  manager = cancellation.CancellationManager()
  cancelable = manager.get_cancelable_function(concrete)
  result = {}

  def run():
    try:
      result["value"] = cancelable(tf.constant(0.0))
    except tf.errors.OpError as e:
      result["error"] = e

  thread = threading.Thread(target=run)
  thread.start()
  thread.join(0.3)
  assert thread.is_alive(), result
  manager.start_cancel()
  thread.join(10)
  assert not thread.is_alive()
  assert isinstance(result.get("error"), tf.errors.CancelledError), result
  # The scheduler is still usable: collective 1 then 2 go through.
  x = tf.constant(0.0)
  for cid in (1, 2):
    scheduler_ops.complete(scheduler_ops.gate(x, cid, scheduler=name), cid,
                           scheduler=name)
