"""PreemptiveAllReduce against stock CollectiveAllReduce on logical CPUs.

tests/conftest.py splits the CPU into logical devices; every case all-reduces
the same per-replica values with the preemptive ops and with TensorFlow's own
`CollectiveAllReduce` (sharing one key allocator, so their collectives never
share instance keys) and compares, eagerly and inside `tf.function`.
"""


import numpy as np
import pytest
import tensorflow as tf

from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.plan import plan_from_groups
from tf_preempt.runtime import PreemptiveAllReduce
from tf_preempt.runtime import binding
from tf_preempt.runtime import tf_internals
from tf_preempt.testing import collectives
from tf_preempt.testing import graphs
from tf_preempt.testing import plans

from tensorflow.python.distribute import values as value_lib  # pylint: disable=g-direct-tensorflow-import

SUM = tf.distribute.ReduceOp.SUM
MEAN = tf.distribute.ReduceOp.MEAN
RING = tf_internals.CommunicationOptions(implementation="RING")

SHAPES = [(3, 5), (7,), (1,), (2, 2, 3), (129,), (4, 33), (1, 1)]


def _devices(n):
  return [f"/cpu:{i}" for i in range(n)]


def _per_replica(devices, per_device_values):
  """PerReplica values from [device][value] arrays, placed on the devices."""
  out = []
  for i in range(len(per_device_values[0])):
    components = []
    for d, device in enumerate(devices):
      with tf.device(device):
        components.append(tf.identity(per_device_values[d][i]))
    out.append(value_lib.PerReplica(components))
  return out


def _random_values(num_devices, seed, shapes=SHAPES, dtype=np.float32,
                   integers=False):
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(num_devices):
    if integers:
      out.append([rng.integers(-20, 20, s).astype(dtype) for s in shapes])
    else:
      out.append([rng.standard_normal(s).astype(dtype) for s in shapes])
  return out




def _pair(devices, **kwargs):
  keys = collectives.fresh_collective_keys()
  stock = tf_internals.CollectiveAllReduce(devices, len(devices), RING,
                                           collective_keys=keys)
  mine = PreemptiveAllReduce(devices, len(devices), RING, keys, **kwargs)
  return stock, mine


def _batch_reduce(ops_, reduce_op, per_replica, function):
  def run():
    return [list(m.values) for m in
            ops_.batch_reduce(reduce_op, [(v, v) for v in per_replica])]
  return tf.function(run)() if function else run()


PLANS = {
    "tiny_chunks": {"plan": plans.chunked_plan(SHAPES, 8)},
    "fused": {"plan": plans.fused_plan(SHAPES)},
    "pace": {"scheduler": "pace"},
    "pace_chunked": {"scheduler": "pace",
                     "scheduler_options": {"chunk_bytes": 64}},
    "fifo": {"scheduler": "fifo"},
    "bytescheduler": {"scheduler": "bytescheduler",
                      "scheduler_options": {"partition_elements": 16}},
    "tf_packed": {"scheduler": "tf_packed",
                  "scheduler_options": {"bytes_per_pack": 100}},
}


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("reduce_op", [SUM, MEAN], ids=["sum", "mean"])
@pytest.mark.parametrize("plan_name", sorted(PLANS))
def test_equals_stock(plan_name, reduce_op, function):
  devices = _devices(3)
  stock, mine = _pair(devices, **PLANS[plan_name])
  per_replica = _per_replica(devices, _random_values(3, seed=len(plan_name)))
  expected = _batch_reduce(stock, reduce_op, per_replica, function)
  got = _batch_reduce(mine, reduce_op, per_replica, function)
  for e_values, g_values in zip(expected, got):
    for e, g in zip(e_values, g_values):
      assert g.shape == e.shape and g.dtype == e.dtype
      np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("num_devices", [2, 4])
@pytest.mark.parametrize("bytes_per_pack", [0, 200])
def test_tf_default_is_bit_identical_to_stock(num_devices, function,
                                              bytes_per_pack):
  devices = _devices(num_devices)
  stock, mine = _pair(devices, scheduler="tf_default")
  options = tf_internals.CommunicationOptions(bytes_per_pack=bytes_per_pack)
  per_replica = _per_replica(devices, _random_values(num_devices, seed=5))

  def run(ops_):
    def fn():
      return [list(m.values) for m in ops_.batch_reduce(
          SUM, [(v, v) for v in per_replica], options)]
    return tf.function(fn)() if function else fn()

  for e_values, g_values in zip(run(stock), run(mine)):
    for e, g in zip(e_values, g_values):
      np.testing.assert_array_equal(g.numpy(), e.numpy())


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
def test_mixed_dtypes_exact(function):
  devices = _devices(2)
  _, mine = _pair(devices, scheduler="pace",
                  scheduler_options={"chunk_bytes": 16})
  dtypes = [np.float16, tf.bfloat16.as_numpy_dtype, np.float32, np.float64]
  per_device = [[], []]
  for k, dtype in enumerate(dtypes):
    for d in range(2):
      per_device[d].extend(
          v.astype(dtype) for v in
          _random_values(1, seed=10 * k + d, shapes=SHAPES[:4],
                         integers=True)[0])
  per_replica = _per_replica(devices, per_device)
  for reduce_op, scale in ((SUM, 1.0), (MEAN, 0.5)):
    got = _batch_reduce(mine, reduce_op, per_replica, function)
    for i, values in enumerate(got):
      expected = (per_device[0][i].astype(np.float64) +
                  per_device[1][i].astype(np.float64)) * scale
      for g in values:
        assert g.dtype.as_numpy_dtype == per_device[0][i].dtype  # no cast
        np.testing.assert_array_equal(g.numpy().astype(np.float64), expected)
  # One plan per dtype group: no collective mixes dtypes.
  bound = mine.bind([tf.constant(v) for v in per_device[0]])
  for step in bound.steps:
    assert len({per_device[0][pos].dtype for pos, _, _ in step}) == 1


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("reduce_op", [SUM, MEAN], ids=["sum", "mean"])
def test_indexed_slices_match_stock(reduce_op, function):
  devices = _devices(2)
  stock, mine = _pair(devices, plan=plans.fused_plan(SHAPES[:4] + [(6, 3)] +
                                                SHAPES[5:]))
  per_device = _random_values(2, seed=3)
  for d in range(2):
    per_device[d][4] = tf.IndexedSlices(
        tf.constant(np.full((d + 1, 3), d + 1.0, np.float32)),
        tf.constant(list(range(d + 1)), tf.int64), tf.constant([6, 3]))
  per_replica = _per_replica(devices, per_device)
  expected = _batch_reduce(stock, reduce_op, per_replica, function)
  got = _batch_reduce(mine, reduce_op, per_replica, function)
  for e_values, g_values in zip(expected, got):
    for e, g in zip(e_values, g_values):
      assert isinstance(g, tf.IndexedSlices) == isinstance(e, tf.IndexedSlices)
      np.testing.assert_allclose(tf.convert_to_tensor(g).numpy(),
                                 tf.convert_to_tensor(e).numpy(), rtol=1e-6)


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("reduce_op", [SUM, MEAN], ids=["sum", "mean"])
def test_sparse_as_dense_plans_indexed_slices_and_matches_stock(reduce_op,
                                                                function):
  devices = _devices(2)
  stock, mine = _pair(devices, scheduler="pace",
                      scheduler_options={"sparse_as_dense": True})
  per_device = _random_values(2, seed=5)
  for d in range(2):
    # Replica 1 touches row 0 twice: duplicates must add up.
    per_device[d][4] = tf.IndexedSlices(
        tf.constant(np.arange((d + 2) * 3, dtype=np.float32).reshape(-1, 3)),
        tf.constant([0, 2, 0][:d + 2], tf.int64), tf.constant([6, 3]))
  per_replica = _per_replica(devices, per_device)
  expected = _batch_reduce(stock, reduce_op, per_replica, function)
  got = _batch_reduce(mine, reduce_op, per_replica, function)
  for e_values, g_values in zip(expected, got):
    for e, g in zip(e_values, g_values):
      assert not isinstance(g, tf.IndexedSlices)  # Reduced densely.
      np.testing.assert_allclose(g.numpy(), tf.convert_to_tensor(e).numpy(),
                                 rtol=1e-6)
  # The dense embedding gradient is in the plan's collectives, not
  # all-gathered after them.
  bound = mine.bind([v if isinstance(v, tf.IndexedSlices) else tf.constant(v)
                     for v in per_device[0]])
  assert bound.sparse == ()
  assert any(pos == 4 for step in bound.steps for pos, _, _ in step)


def test_sparse_as_dense_must_be_a_bool():
  with pytest.raises(ValueError, match="sparse_as_dense must be True or "
                     "False"):
    _pair(_devices(2), scheduler_options={"sparse_as_dense": "yes"})


def test_unknown_shape_falls_back_and_warns_once(monkeypatch):
  devices = _devices(2)
  stock, mine = _pair(devices, scheduler="pace")
  warned = []
  monkeypatch.setattr(binding, "_warned_unknown_shape", set())
  monkeypatch.setattr(binding.logging, "warning",
                      lambda msg, *args: warned.append(msg % args))
  per_device = _random_values(2, seed=4, shapes=[(3, 4), (5,), (2,)])

  @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)] * 2)
  def run(a, b):
    per_replica = _per_replica(devices, per_device)
    # The middle value loses its static shape.
    per_replica[1] = _per_replica(devices, [[a], [b]])[0]
    out = {}
    for name, ops_ in (("stock", stock), ("mine", mine)):
      out[name] = [list(m.values) for m in
                   ops_.batch_reduce(SUM, [(v, v) for v in per_replica])]
    return out

  out = run(per_device[0][1], per_device[1][1])
  for e_values, g_values in zip(out["stock"], out["mine"]):
    for e, g in zip(e_values, g_values):
      np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)
  assert len(warned) == 1, warned
  assert "no static shape" in warned[0]


def _collectives_by_device(graph):
  by_device = {}
  for op in graph.get_operations():
    if op.type == "CollectiveReduceV2":
      by_device.setdefault(op.device, []).append(op)
  return by_device


@pytest.mark.parametrize("implementation,timeout_seconds",
                         [("RING", None), ("NCCL", None), ("RING", 30.0)])
def test_graph_order_follows_plan(implementation, timeout_seconds):
  """The traced CollectiveReduceV2 ops are chained in the plan's order.

  They carry the options' timeout, and none by default: TensorFlow keeps a
  sleeping thread per launch of a collective with a timeout.
  """
  devices = _devices(2)
  plan = plans.chunked_plan(SHAPES[:3], 8)
  options = tf_internals.CommunicationOptions(implementation=implementation,
                                              timeout_seconds=timeout_seconds)
  mine = PreemptiveAllReduce(devices, 2, options,
                             collectives.fresh_collective_keys(), plan=plan)
  per_replica = _per_replica(devices, _random_values(2, seed=1,
                                                     shapes=SHAPES[:3]))

  @tf.function
  def run():
    return [list(m.values) for m in
            mine.batch_reduce(SUM, [(v, v) for v in per_replica])]

  # Traced only: NCCL needs GPUs, but the graph is built the same way.
  graph = run.get_concrete_function().graph
  by_device = _collectives_by_device(graph)
  assert len(by_device) == 2
  sizes = [c.nbytes // 4 for c in plan.collectives]
  for ops_ in by_device.values():
    assert len(ops_) == plan.num_collectives
    # Build order is issue order; check it against the dependency chain:
    # each collective waits (through the ordering token's automatic control
    # edges) for the one before it, and never the other way round.
    for before, after in zip(ops_, ops_[1:]):
      assert before in graphs.ancestors(after)
      assert after not in graphs.ancestors(before)
    assert [op.inputs[0].shape.num_elements() for op in ops_] == sizes
    for op in ops_:
      assert op.get_attr("communication_hint") == implementation.lower(
      ).encode()
      assert op.get_attr("timeout_seconds") == (timeout_seconds or 0)


def test_binding_mismatch_names_the_tensor():
  devices = _devices(2)
  tensors = [PlanTensor("dense/kernel", 60), PlanTensor("dense/bias", 28)]
  plan = plan_from_groups(tensors, [[(1, 0, 28)], [(0, 0, 60)]])
  mine = PreemptiveAllReduce(devices, plan=plan)
  with pytest.raises(ValueError, match=r"value 1 .*dense/bias.*28 bytes"):
    mine.bind([tf.zeros([3, 5]), tf.zeros([6])])
  with pytest.raises(ValueError, match=r"value 0 .*dense/kernel.*float64"):
    mine.bind([tf.zeros([15], tf.float64), tf.zeros([7])])
  typed = plan_from_groups(
      [PlanTensor("k", 60, 4, "float32", (3, 5)), PlanTensor("b", 28)],
      [[(0, 0, 60), (1, 0, 28)]])
  with pytest.raises(ValueError, match=r"value 0 .*'k' has shape \[3, 5\]"):
    PreemptiveAllReduce(devices, plan=typed).bind(
        [tf.zeros([5, 3]), tf.zeros([7])])
  # A plan covering as many values as given fits only those values.
  bound = mine.bind([tf.zeros([3, 5]), tf.zeros([7])])
  assert bound.plan.tensors[0].dtype == "float32"
  assert bound.plan.tensors[0].shape == (3, 5)
  assert bound.steps == (((1, 0, 7),), ((0, 0, 15),))


def test_plan_fusing_dtypes_is_rejected():
  tensors = [PlanTensor("a", 8, 4), PlanTensor("b", 8, 4)]
  plan = plan_from_groups(tensors, [[(0, 0, 8), (1, 0, 8)]])
  mine = PreemptiveAllReduce(_devices(2), plan=plan)
  with pytest.raises(ValueError, match="dtype"):
    mine.bind([tf.zeros([2]), tf.zeros([1], tf.float64)])


def test_unknown_scheduler_lists_valid_ones():
  with pytest.raises(ValueError, match="pace.*bytescheduler"):
    PreemptiveAllReduce(_devices(2), scheduler="nope")


def test_all_schedulers_run():
  devices = _devices(2)
  per_replica = _per_replica(devices, _random_values(2, seed=9))
  stock, _ = _pair(devices)
  expected = _batch_reduce(stock, SUM, per_replica, function=False)
  from tf_preempt.runtime import default_plan  # pylint: disable=g-import-not-at-top
  for scheduler in default_plan.SCHEDULERS:
    _, mine = _pair(devices, scheduler=scheduler)
    got = _batch_reduce(mine, SUM, per_replica, function=True)
    for e_values, g_values in zip(expected, got):
      np.testing.assert_allclose(g_values[0].numpy(), e_values[0].numpy(),
                                 rtol=1e-6, atol=1e-6)


def test_broadcast_and_gather():
  devices = _devices(2)
  stock, mine = _pair(devices)
  per_replica = _per_replica(devices, [[np.ones((1, 2), np.float32)],
                                       [np.zeros((2, 2), np.float32)]])[0]
  with tf.device(devices[0]):
    t = tf.constant([1.0, 2.0])
  out = mine.broadcast(t, per_replica)
  assert [v.numpy().tolist() for v in out.values] == [[1.0, 2.0]] * 2
  assert [v.device for v in out.values] == [
      v.device for v in stock.broadcast(t, per_replica).values]
  gather = tf.function(lambda ops_: list(
      ops_._gather(per_replica, per_replica, axis=0).values))  # pylint: disable=protected-access
  for e, g in zip(gather(stock), gather(mine)):
    np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_replica_context_path():
  """`_all_reduce` per replica, as MultiWorkerMirroredStrategy calls it."""
  devices = _devices(2)
  stock, mine = _pair(devices, scheduler="pace",
                      scheduler_options={"chunk_bytes": 32})
  values = _random_values(2, seed=12)

  @tf.function
  def run(ops_):
    out = []
    for i, device in enumerate(devices):
      with tf.device(device):
        out.append(ops_._all_reduce(  # pylint: disable=protected-access
            MEAN, [tf.constant(v) for v in values[i]], i, RING))
    return out

  for e_rep, g_rep in zip(run(stock), run(mine)):
    for e, g in zip(e_rep, g_rep):
      np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)
