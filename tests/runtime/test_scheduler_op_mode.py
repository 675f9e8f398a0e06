"""PreemptiveAllReduce with the C++ scheduler op against without it.

tests/conftest.py splits the CPU into logical devices. Every case all-reduces
the same values with two `PreemptiveAllReduce`s of the same plan, one gating
its collectives with the scheduler op and one relying on the ordering token
alone (separate key allocators, so their collectives never share keys), and
requires bit-identical results over several steps, eagerly and inside
`tf.function`. The op's records and the traced graph are checked too.
"""

import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_preempt import ops as scheduler_ops
from tf_preempt.ops import scheduler as scheduler_lib
from tf_preempt.runtime import PreemptiveAllReduce
from tf_preempt.runtime import scheduling
from tf_preempt.runtime import tf_internals
from tf_preempt.strategies import PreemptiveMirroredStrategy
from tf_preempt.testing import collectives
from tf_preempt.testing import graphs
from tf_preempt.testing import plans

from tensorflow.python.distribute import values as value_lib  # pylint: disable=g-direct-tensorflow-import

SUM = tf.distribute.ReduceOp.SUM
MEAN = tf.distribute.ReduceOp.MEAN
RING = tf_internals.CommunicationOptions(implementation="RING")
SHAPES = [(3, 5), (7,), (1,), (2, 2, 3), (129,), (4, 33), (1, 1)]
STEPS = 3


@pytest.fixture(scope="module", autouse=True)
def ops_library():
  """Builds the op library if it is missing or stale (as tests/ops does)."""
  path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops",
                      "conftest.py")
  spec = importlib.util.spec_from_file_location("_ops_build", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  module.build_if_needed()
  assert scheduler_ops.is_available()




def _make(devices, scheduler_op, options=RING, **kwargs):
  return PreemptiveAllReduce(devices, len(devices), options,
                             collectives.fresh_collective_keys(),
                             scheduler_op=scheduler_op, **kwargs)


# Chunks of 128 bytes, not finer: TensorFlow keeps threads per executed
# collective instance (about a dozen), and a process has a thread limit.
CHUNK_BYTES = 128


MIXED_DTYPES = (np.float16, tf.bfloat16.as_numpy_dtype, np.float32,
                np.int32)

CASES = {
    "chunks": ({"plan": plans.chunked_plan(SHAPES, CHUNK_BYTES)}, (np.float32,)),
    "fused": ({"plan": plans.fused_plan(SHAPES)}, (np.float32,)),
    "pace_chunked": ({"scheduler": "pace",
                      "scheduler_options": {"chunk_bytes": 128}},
                     (np.float32,)),
    "mixed_dtypes": ({"scheduler": "pace",
                      "scheduler_options": {"chunk_bytes": 128,
                                            "credit_collectives": 3}},
                     MIXED_DTYPES),
    "byte_credit": ({"plan": plans.chunked_plan(SHAPES, CHUNK_BYTES),
                     "scheduler_options": {"credit_collectives": 4,
                                           "credit_bytes": 300}},
                    (np.float32,)),
}


def _values(num_devices, step, dtypes):
  """[device][value] integer-valued arrays (exact in every dtype)."""
  out = []
  for d in range(num_devices):
    rng = np.random.default_rng(1000 * step + d)
    out.append([rng.integers(-20, 20, s).astype(dtype)
                for dtype in dtypes for s in SHAPES])
  return out


def _per_replica(devices, per_device):
  out = []
  for i in range(len(per_device[0])):
    components = []
    for d, device in enumerate(devices):
      with tf.device(device):
        components.append(tf.identity(per_device[d][i]))
    out.append(value_lib.PerReplica(components))
  return out


def _eager_steps(ops_, devices, reduce_op, dtypes):
  """Cross-replica `batch_reduce` eagerly (one thread per replica)."""
  results = []
  for step in range(STEPS):
    per_replica = _per_replica(devices, _values(len(devices), step, dtypes))
    reduced = ops_.batch_reduce(reduce_op, [(v, v) for v in per_replica])
    results.append([[t.numpy() for t in m.values] for m in reduced])
  return results


def _function_steps(ops_, devices, reduce_op, dtypes):
  """The replica path (`_all_reduce` per replica) in one tf.function."""

  @tf.function
  def step_fn(per_device):
    out = []
    for i, device in enumerate(devices):
      with tf.device(device):
        out.append(ops_._all_reduce(  # pylint: disable=protected-access
            reduce_op, per_device[i], i, RING))
    return out

  results = []
  for step in range(STEPS):
    values = [[tf.constant(v) for v in vs]
              for vs in _values(len(devices), step, dtypes)]
    results.append([[t.numpy() for t in rep] for rep in step_fn(values)])
  return results


def _assert_bitwise_equal(got, expected):
  flat_got, flat_expected = tf.nest.flatten(got), tf.nest.flatten(expected)
  assert len(flat_got) == len(flat_expected)
  for g, e in zip(flat_got, flat_expected):
    assert g.dtype == e.dtype
    np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8),
                                  np.atleast_1d(e).view(np.uint8))


def _num_planned(ops_):
  return max(p.num_collectives for p in ops_._op_scheduler.plans)  # pylint: disable=protected-access


def _check_telemetry(ops_, devices, iterations):
  """Rows per collective per step, ordered timestamps, plan-order release."""
  telemetry = ops_.telemetry()
  assert sorted(telemetry) == sorted(ops_.devices)
  n = _num_planned(ops_)
  for device, records in telemetry.items():
    expected = [(it, cid) for it in range(iterations) for cid in range(n)]
    assert [(r.iteration, r.collective_id) for r in records] == expected, (
        device)
    for r in records:
      assert r.done_ns is not None, r
      assert r.ready_ns <= r.released_ns <= r.done_ns, r
    released = [r.released_ns for r in records]
    assert released == sorted(released), device
  assert len(devices) == len(telemetry)


# Every case on two replicas; on four only the two cases that matter most
# there (the CPU is shared, and four replicas cost twice the time).
_DEVICE_CASES = ([(2, case) for case in sorted(CASES)] +
                 [(4, "chunks"), (4, "mixed_dtypes")])


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("num_devices,case", _DEVICE_CASES)
def test_op_mode_equals_token_mode(case, function, num_devices,
                                   logical_cpus):
  kwargs, dtypes = CASES[case]
  devices = list(logical_cpus[:num_devices])
  with_op = _make(devices, True, **kwargs)
  without = _make(devices, False, **kwargs)
  assert with_op.uses_scheduler_op and not without.uses_scheduler_op
  run = _function_steps if function else _eager_steps
  for reduce_op in (SUM, MEAN):
    if reduce_op == MEAN and np.int32 in dtypes:
      continue  # An integer mean is no exact comparison of interest.
    _assert_bitwise_equal(run(with_op, devices, reduce_op, dtypes),
                          run(without, devices, reduce_op, dtypes))
  # Each step was one iteration of the plan's scheduler on every device.
  iterations = STEPS * (1 if np.int32 in dtypes else 2)
  _check_telemetry(with_op, devices, iterations)
  assert without.telemetry() == {}


def _with_metric_function(ops_, devices, values):
  """A step: the planned values and a metric of unknown shape, by replica."""
  value_specs = [[tf.TensorSpec.from_tensor(v) for v in vs] for vs in values]
  unknown_specs = [tf.TensorSpec([None], tf.float32)] * len(devices)

  @tf.function(input_signature=[value_specs, unknown_specs])
  def step_fn(per_device, unknown):
    out = []
    for i, device in enumerate(devices):
      with tf.device(device):
        out.append(ops_._all_reduce(  # pylint: disable=protected-access
            SUM, per_device[i], i, RING))
        # A metric: another (default) plan, with a scheduler of its own,
        # and a value of unknown shape, all-reduced outside any plan.
        out.append(ops_._all_reduce(  # pylint: disable=protected-access
            SUM, [unknown[i] * 2.0, tf.reduce_sum(unknown[i])], i, RING))
    return out

  return step_fn


def test_every_planned_collective_is_gated(logical_cpus):
  """Graph: gate -> CollectiveReduceV2 -> complete, for planned ones only."""
  devices = list(logical_cpus[:2])
  plan = plans.fused_plan(SHAPES)
  ops_ = _make(devices, True, plan=plan)
  values = [[tf.constant(v) for v in vs]
            for vs in _values(2, 0, (np.float32,))]
  step_fn = _with_metric_function(ops_, devices, values)
  graph = step_fn.get_concrete_function().graph
  collectives = graphs.collective_reductions(graph)
  # Per device: the plan's collectives, the metric plan's one (the scalar)
  # and the fallback of the unknown-shape value, which is not gated.
  assert len(collectives) == 2 * (plan.num_collectives + 2)
  gated = 0
  for c in collectives:
    consumers = [op.type for op in c.outputs[0].consumers()]
    if c.inputs[0].shape.is_fully_defined():
      assert c.inputs[0].op.type == "PreemptSchedulerGate", c.name
      assert consumers == ["PreemptSchedulerComplete"], (c.name, consumers)
      assert c.inputs[0].op.device == c.device
      gated += 1
    else:
      assert c.inputs[0].op.type != "PreemptSchedulerGate"
      assert "PreemptSchedulerComplete" not in consumers
  assert gated == 2 * (plan.num_collectives + 1)
  # Two plans, so two scheduler resources on each device.
  names = {op.get_attr("shared_name") for op in graph.get_operations()
           if op.type == "PreemptSchedulerGate"}
  assert {n.decode() for n in names} == {
      p.name for p in ops_._op_scheduler.plans}  # pylint: disable=protected-access
  assert len(names) == 2

  # And it runs, equal to the ordering-token mode, for several steps.
  without = _make(devices, False, plan=plan)
  plain_fn = _with_metric_function(without, devices, values)
  for step in range(STEPS):
    unknown = [tf.constant([1.0, 2.0, 3.0 + step]),
               tf.constant([4.0, 5.0, 6.0])]
    _assert_bitwise_equal(
        [[t.numpy() for t in r] for r in step_fn(values, unknown)],
        [[t.numpy() for t in r] for r in plain_fn(values, unknown)])
  _check_telemetry(ops_, devices, STEPS)


def test_credit_defaults_and_options(logical_cpus):
  devices = list(logical_cpus[:2])
  impl = tf.distribute.experimental.CommunicationImplementation
  default = scheduling.Credit()
  assert default.max_collectives(impl.NCCL, devices) == 1
  assert default.max_collectives(impl.RING, devices) == 2
  assert default.max_collectives(impl.AUTO, devices) == 2
  assert default.max_collectives(impl.AUTO, ["/gpu:0"]) == 1
  planner, credit = scheduling.split_options(
      {"chunk_bytes": 64, "credit_collectives": 3, "credit_bytes": 100})
  assert planner == {"chunk_bytes": 64}
  assert credit.max_collectives(impl.NCCL, devices) == 3
  assert credit.nbytes == 100
  with pytest.raises(ValueError, match="credit_collectives"):
    scheduling.split_options({"credit_collectives": 0})

  ops_ = _make(devices, True, plan=plans.chunked_plan(SHAPES[:2], CHUNK_BYTES),
               scheduler_options={"credit_collectives": 3,
                                  "credit_bytes": 200})
  _function_steps(ops_, devices, SUM, (np.float32,))
  (gated,) = ops_._op_scheduler.plans  # pylint: disable=protected-access
  assert (gated.max_collectives, gated.max_bytes) == (3, 200)
  # The planner never saw the credit: the plan is the user's, unchanged.
  for records in ops_.telemetry().values():
    for r in records:
      holding = [s for s in records
                 if s.released_ns <= r.released_ns < s.done_ns]
      assert len(holding) <= 3
      if len(holding) > 1:
        assert sum(s.nbytes for s in holding) <= 200


def test_reset_restarts_iterations(logical_cpus):
  devices = list(logical_cpus[:2])
  ops_ = _make(devices, True, plan=plans.chunked_plan(SHAPES[:3], CHUNK_BYTES))
  _function_steps(ops_, devices, SUM, (np.float32,))
  assert {r.iteration for rs in ops_.telemetry().values() for r in rs} == (
      set(range(STEPS)))
  ops_.reset_scheduler()
  assert all(not rs for rs in ops_.telemetry().values())
  _function_steps(ops_, devices, SUM, (np.float32,))
  _check_telemetry(ops_, devices, STEPS)


def test_strategy_step_with_gradient_and_metric_plans(logical_cpus):
  """A strategy step: the gradients and a loss, each with its scheduler."""
  devices = list(logical_cpus[:2])
  results = {}
  for scheduler_op in (True, False):
    strategy = PreemptiveMirroredStrategy(
        devices, scheduler="pace", scheduler_op=scheduler_op,
        scheduler_options={"chunk_bytes": 32})
    assert strategy.cross_device_ops.uses_scheduler_op == scheduler_op
    with strategy.scope():
      w = tf.Variable(tf.reshape(tf.range(24, dtype=tf.float32), [4, 6]))
      b = tf.Variable(tf.ones([6]))

    def replica_fn(x):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w) + b))
      grads = tape.gradient(loss, [w, b])
      ctx = tf.distribute.get_replica_context()
      grads = ctx.all_reduce(SUM, grads)
      loss = ctx.all_reduce(SUM, loss)
      return [loss] + grads

    @tf.function
    def train_step(x):
      return strategy.run(replica_fn, args=(x,))

    losses = []
    for step in range(STEPS):
      x = tf.constant(np.random.default_rng(step).integers(
          -3, 3, [2, 4]).astype(np.float32))
      per = strategy.experimental_distribute_values_from_function(
          lambda ctx, x=x: x * float(ctx.replica_id_in_sync_group + 1))
      losses.append([[t.numpy() for t in
                      strategy.experimental_local_results(out)]
                     for out in train_step(per)])
    results[scheduler_op] = losses
    if scheduler_op:
      ops_ = strategy.cross_device_ops
      assert len(ops_._op_scheduler.plans) == 2  # pylint: disable=protected-access
      _check_telemetry(ops_, devices, STEPS)
  _assert_bitwise_equal(results[True], results[False])


def test_required_op_raises_the_loaders_error(tmp_path, monkeypatch,
                                              logical_cpus):
  devices = list(logical_cpus[:2])
  broken = tmp_path / "_scheduler_ops.so"
  broken.write_bytes(b"not a shared object")
  monkeypatch.setattr(scheduler_lib, "_LIBRARY",
                      scheduler_lib.OpLibrary(str(broken)))
  with pytest.raises(scheduler_ops.SchedulerOpsUnavailableError) as info:
    _make(devices, True)
  message = str(info.value)
  assert str(broken) in message
  assert "pip install --no-build-isolation -e ." in message
  with pytest.raises(scheduler_ops.SchedulerOpsUnavailableError):
    PreemptiveMirroredStrategy(devices, scheduler_op=True)


def test_default_falls_back_with_one_log_line(tmp_path, monkeypatch,
                                              logical_cpus):
  devices = list(logical_cpus[:2])
  monkeypatch.setattr(scheduler_lib, "_LIBRARY", scheduler_lib.OpLibrary(
      str(tmp_path / "missing.so")))
  monkeypatch.setattr(scheduling, "_fallback_logged", [])
  logged = []
  monkeypatch.setattr(scheduling.logging, "warning",
                      lambda msg, *args: logged.append(msg % args))
  plan = plans.chunked_plan(SHAPES[:3], CHUNK_BYTES)
  fallback = [_make(devices, None, plan=plan) for _ in range(2)]
  assert not any(ops_.uses_scheduler_op for ops_ in fallback)
  assert len(logged) == 1 and "ordering token alone" in logged[0]
  assert "does not exist" in logged[0]
  got = _function_steps(fallback[0], devices, SUM, (np.float32,))
  monkeypatch.undo()
  expected = _function_steps(_make(devices, True, plan=plan), devices, SUM,
                             (np.float32,))
  _assert_bitwise_equal(got, expected)
  assert fallback[0].telemetry() == {}
  with pytest.raises(TypeError):
    _make(devices, "yes")
