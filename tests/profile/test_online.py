"""Tests of online profiling: measurements, cost-model fit, plan cache."""

import json
import os

from absl import logging
import keras
import numpy as np
import pytest

from tf_preempt import PreemptiveMirroredStrategy
from tf_preempt.plan import make_plan
from tf_preempt.plan import CostModel
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan.dag import Op
from tf_preempt.profile import model_dag
from tf_preempt.profile import online
from tf_preempt.profile import plan_cache


def _model(width=16):
  x = keras.Input((8,))
  h = keras.layers.Dense(width, activation="relu")(x)
  return keras.Model(x, keras.layers.Dense(1)(h))


def _plan_for(model):
  return make_plan(model_dag.model_to_dag(model), CostModel(1e-4, 1e-9))


@pytest.fixture
def strategy(logical_cpus):
  return PreemptiveMirroredStrategy(list(logical_cpus[:2]))


def test_cost_model_from_timed_collectives(strategy):
  seconds = online.time_collectives(strategy.cross_device_ops,
                                    sizes=(4 << 10, 1 << 20, 16 << 20),
                                    repeats=3)
  assert sorted(seconds) == [4 << 10, 1 << 20, 16 << 20]
  assert all(s > 0 for s in seconds.values())
  cost = CostModel.fit(list(seconds), list(seconds.values()))
  assert cost.alpha >= 0
  assert cost.beta > 0
  # Even in one process, 16 MiB take longer than 4 KiB (copies, sums).
  assert seconds[16 << 20] > seconds[4 << 10]


def test_measure_compute_and_measured_dag(strategy):
  with strategy.scope():
    model = _model(64)
  forward_s, backward_s = online.measure_compute(model, strategy, 8,
                                                 repeats=2)
  assert forward_s > 0 and backward_s > 0
  dag = online.measured_dag(model, 8, forward_s, backward_s)
  fwd = sum(op.duration for op in dag.ops if op.phase == "forward")
  bwd = sum(op.duration for op in dag.ops if op.phase == "backward")
  np.testing.assert_allclose([fwd, bwd], [forward_s, backward_s], rtol=1e-9)
  # Tensors are the trainable variables, in their order.
  assert [t.name for t in dag.tensors] == [
      v.path for v in model.trainable_variables]


def test_all_workers_mean_is_the_mean_over_replicas(strategy):
  mean = online.all_workers_mean(strategy.cross_device_ops, [1.5, 2.0])
  np.testing.assert_array_equal(mean, [1.5, 2.0])


def test_model_signature_ignores_names_not_shapes():
  a, b, c = _model(16), _model(16), _model(32)
  assert a.trainable_variables[0].path != b.trainable_variables[0].path
  assert plan_cache.model_signature(a) == plan_cache.model_signature(b)
  assert plan_cache.model_signature(a) != plan_cache.model_signature(c)


def test_cache_round_trip_is_atomic(tmp_path):
  model = _model()
  plan = _plan_for(model)
  sig = plan_cache.model_signature(model)
  path = plan_cache.cache_path(str(tmp_path / "c"), sig, 2, "ring")
  plan_cache.save_cached_plan(path, plan, sig, 2, "ring", {"forward_s": 1.0})
  assert os.listdir(tmp_path / "c") == [os.path.basename(path)]
  loaded = plan_cache.load_cached_plan(path, sig, 2, "ring")
  assert loaded.fingerprint() == plan.fingerprint()
  assert loaded.predicted_iteration_s == plan.predicted_iteration_s
  assert plan_cache.load_cached_plan(path + ".missing", sig, 2, "ring") is None


@pytest.mark.parametrize("damage", ["truncate", "garbage", "fingerprint"])
def test_corrupted_cache_is_logged_and_ignored(tmp_path, damage, caplog):
  model = _model()
  sig = plan_cache.model_signature(model)
  path = plan_cache.cache_path(str(tmp_path), sig, 2, "ring")
  plan_cache.save_cached_plan(path, _plan_for(model), sig, 2, "ring")
  text = open(path).read()
  if damage == "truncate":
    text = text[:len(text) // 2]
  elif damage == "garbage":
    text = "\x00\x01 not json"
  else:
    data = json.loads(text)
    data["plan"]["collectives"] = data["plan"]["collectives"][::-1]
    data["plan"]["collectives"].append([[0, 0, 4]])  # covers a byte twice
    text = json.dumps(data)
  with open(path, "w") as f:
    f.write(text)
  logging.get_absl_logger().propagate = True
  with caplog.at_level("WARNING"):
    assert plan_cache.load_cached_plan(path, sig, 2, "ring") is None
  assert "re-profiling" in caplog.text


@pytest.mark.parametrize("field", ["model", "world_size", "implementation"])
def test_cache_of_another_setup_is_rejected(tmp_path, field):
  model, other = _model(16), _model(32)
  sig = plan_cache.model_signature(model)
  path = str(tmp_path / "plan.json")
  plan_cache.save_cached_plan(path, _plan_for(model), sig, 2, "ring")
  wanted = {"model": (plan_cache.model_signature(other), 2, "ring"),
            "world_size": (sig, 4, "ring"),
            "implementation": (sig, 2, "nccl")}[field]
  with pytest.raises(plan_cache.PlanCacheMismatchError, match="another"):
    plan_cache.load_cached_plan(path, *wanted)


def test_profile_and_replan_installs_a_measured_pace_plan(strategy, tmp_path):
  with strategy.scope():
    model = _model(32)
  result = online.profile_and_replan(
      model, strategy, global_batch_size=16, cache_dir=str(tmp_path),
      sizes=(4 << 10, 1 << 20), repeats=2)
  assert not result.from_cache
  assert strategy.cross_device_ops.plan is result.plan
  assert result.plan.scheduler == "pace"
  assert result.plan.predicted_iteration_s > 0
  assert result.cost.beta > 0
  assert "collectives" in result.summary_line(0.01)
  again = online.profile_and_replan(model, strategy, 16,
                                    cache_dir=str(tmp_path))
  assert again.from_cache
  assert again.plan.fingerprint() == result.plan.fingerprint()


def test_set_plan_rebinds_and_checks_its_argument(strategy):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  model = _model()
  ops = strategy.cross_device_ops
  values = [tf.zeros(v.shape) for v in model.trainable_variables]
  default = ops.bind(values).plan
  plan = online._with_variable_specs(_plan_for(model), model)  # pylint: disable=protected-access
  ops.set_plan(plan)
  assert ops.bind(values).plan.fingerprint() == plan.fingerprint()
  ops.set_plan(None)
  assert ops.bind(values).plan.fingerprint() == default.fingerprint()
  with pytest.raises(TypeError):
    ops.set_plan(plan.to_json())


def test_telemetry_samples_of_real_steps_join_the_cost_fit(strategy):
  if not strategy.cross_device_ops.uses_scheduler_op:
    pytest.skip("the scheduler op library is not built")
  with strategy.scope():
    model = _model(64)
    model.compile(keras.optimizers.SGD(0.01), "mse")
  x = np.random.default_rng(0).standard_normal((64, 8)).astype("float32")
  model.fit(x, x[:, :1], batch_size=16, epochs=1, verbose=0)
  ops = strategy.cross_device_ops
  samples = online.telemetry_collective_seconds(ops)
  plan = max(ops.bound_plans(), key=lambda p: len(p.tensors))
  # One sample per planned collective of the gradient plan, with its bytes.
  assert sorted(samples) == list(range(plan.num_collectives))
  assert [nbytes for nbytes, _ in samples.values()] == [
      c.nbytes for c in plan.collectives]
  assert all(seconds > 0 for _, seconds in samples.values())
  result = online.profile_and_replan(model, strategy, 16,
                                     sizes=(4 << 10, 1 << 20), repeats=2,
                                     install=False)
  assert sorted(result.telemetry_collective_seconds) == sorted(samples)
  assert sorted(result.telemetry_ready_offsets) == sorted(samples)
  assert min(result.telemetry_ready_offsets.values()) == 0.0


def test_calibration_moves_ready_times_to_the_observed_ones():
  # Four layers, estimated 1 s of backward each: gradients ready at 1, 2, 3
  # and 4 s (last layer first). Observed: the first three much sooner.
  dag = TrainingDAG.chain([0.1] * 4, [1.0] * 4, [400] * 4)
  ready = dag.ready_times()  # tensor i is produced by b_i
  assert list(ready) == [4.0, 3.0, 2.0, 1.0]
  # One collective per tensor, in ready order: t3, t2, t1, t0.
  collectives = [[3], [2], [1], [0]]
  observed = {0: 0.0, 1: 0.5, 2: 1.0, 3: 3.0}
  durations = online.calibrate_ready_times(dag, observed, collectives)
  calibrated = TrainingDAG(
      [Op(o.name, o.phase, durations.get(o.name, o.duration))
       for o in dag.ops], dag.edges, dag.tensors)
  np.testing.assert_allclose(calibrated.ready_times(), [4.0, 2.0, 1.5, 1.0],
                             atol=1e-12)
  # The backward pass keeps its length; no duration is negative.
  assert calibrated.backward_end() == pytest.approx(dag.backward_end())
  assert min(durations.values()) >= 0
