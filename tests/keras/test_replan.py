"""`ProfileAndReplan` in `fit`: plan replaced, math unchanged, cache."""

import json
import os

import numpy as np
import pytest

GLOBAL_BATCH = 16
STEPS = 6
EPOCHS = 2


def _data():
  rng = np.random.RandomState(0)
  x = rng.randn(GLOBAL_BATCH * STEPS, 8).astype("float32")
  y = (x[:, :4].sum(axis=1, keepdims=True) -
       x[:, 4:].sum(axis=1, keepdims=True))
  return x, y


def _fit(strategy, callbacks=(), unroll=None, optimizer=None):
  """Trains a small MLP; returns (losses, weights, model)."""
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt.keras.unrolled import unroll_steps  # pylint: disable=g-import-not-at-top
  with strategy.scope():
    keras.utils.set_random_seed(1)
    x = keras.Input((8,))
    h = keras.layers.Dense(32, activation="relu")(x)
    h = keras.layers.Dense(32, activation="relu")(h)
    model = keras.Model(x, keras.layers.Dense(1)(h))
    model.compile(optimizer or keras.optimizers.SGD(0.02), "mse")
  if unroll:
    unroll_steps(model, unroll)
  x, y = _data()
  history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS,
                      shuffle=False, verbose=0, callbacks=list(callbacks))
  return (history.history["loss"], [w.numpy() for w in model.weights],
          model)


def _callback(**kwargs):
  from tf_preempt.keras.replan import ProfileAndReplan  # pylint: disable=g-import-not-at-top
  kwargs.setdefault("sizes", (4 << 10, 256 << 10, 1 << 20))
  kwargs.setdefault("repeats", 2)
  return ProfileAndReplan(global_batch_size=GLOBAL_BATCH, **kwargs)


def _strategy(devices, plan=None):
  from tf_preempt import PreemptiveMirroredStrategy  # pylint: disable=g-import-not-at-top
  return PreemptiveMirroredStrategy(list(devices[:2]), plan=plan)


def _default_fingerprint(strategy, model):
  """The fingerprint of the plan a traced gradient all-reduce gets now."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  found = []

  @tf.function(autograph=False)
  def trace():
    found.append(strategy.cross_device_ops.bind(
        [tf.zeros(v.shape, v.dtype) for v in model.trainable_variables]))
    return tf.constant(0)

  trace()
  return found[0].plan.fingerprint()


@pytest.mark.parametrize("unroll", [None, 2])
def test_replan_installs_measured_plan_and_keeps_the_math(logical_cpus,
                                                          unroll):
  reference_losses, reference_weights, _ = _fit(_strategy(logical_cpus),
                                                unroll=unroll)
  strategy = _strategy(logical_cpus)
  callback = _callback(warmup_steps=2 * (unroll or 1))
  losses, weights, model = _fit(strategy, [callback], unroll=unroll)

  plan = callback.result.plan
  assert strategy.cross_device_ops.plan is plan
  assert plan.scheduler == "pace"
  assert plan.predicted_iteration_s > 0
  assert not callback.result.from_cache
  assert plan.fingerprint() != _default_fingerprint(_strategy(logical_cpus),
                                                    model)
  # The new plan is the one the retraced train function all-reduces with.
  records = strategy.cross_device_ops.telemetry(0, plan.fingerprint())
  if strategy.cross_device_ops.uses_scheduler_op:
    assert records and all(records.values())
  assert callback.warmup_step_s > 0 and callback.replanned_step_s > 0
  assert "collectives" in callback.summary and "measured" in callback.summary
  # Plans never change the sums: same losses as without re-planning ...
  assert len(losses) == EPOCHS
  np.testing.assert_allclose(losses, reference_losses, rtol=1e-5, atol=1e-6)
  # ... and the same weights as a run with the final plan from the start.
  _, fixed_weights, _ = _fit(_strategy(logical_cpus, plan=plan),
                             unroll=unroll)
  for a, b, c in zip(weights, fixed_weights, reference_weights):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)


def test_restart_reads_the_cache_and_skips_profiling(logical_cpus, tmp_path,
                                                     monkeypatch):
  from tf_preempt.profile import online  # pylint: disable=g-import-not-at-top
  calls = []
  timed = online.time_collectives

  def counting(*args, **kwargs):
    calls.append(1)
    return timed(*args, **kwargs)

  monkeypatch.setattr(online, "time_collectives", counting)
  first = _callback(cache_dir=str(tmp_path))
  losses1, _, _ = _fit(_strategy(logical_cpus), [first])
  assert len(calls) == 1 and not first.result.from_cache
  files = os.listdir(tmp_path)
  assert files == [os.path.basename(first.result.cache_file)]

  # A restart: new strategy, new model (other layer names), same cache.
  second = _callback(cache_dir=str(tmp_path))
  strategy = _strategy(logical_cpus)
  losses2, _, _ = _fit(strategy, [second])
  assert len(calls) == 1  # no collective was timed
  assert second.result.from_cache
  assert second.result.plan.fingerprint() == first.result.plan.fingerprint()
  assert strategy.cross_device_ops.plan is second.result.plan
  np.testing.assert_allclose(losses2, losses1, rtol=1e-5, atol=1e-6)


def test_truncated_cache_is_reprofiled_and_rewritten(logical_cpus, tmp_path):
  first = _callback(cache_dir=str(tmp_path))
  _fit(_strategy(logical_cpus), [first])
  path = first.result.cache_file
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text[:len(text) // 3])  # a crash mid-write without os.replace

  second = _callback(cache_dir=str(tmp_path))
  losses, _, _ = _fit(_strategy(logical_cpus), [second])
  assert not second.result.from_cache  # re-profiled, not crashed
  assert np.all(np.isfinite(losses))
  with open(path) as f:
    assert json.load(f)["fingerprint"] == second.result.plan.fingerprint()


def test_cache_of_another_model_is_rejected_before_training(logical_cpus,
                                                            tmp_path):
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt.profile import plan_cache  # pylint: disable=g-import-not-at-top
  first = _callback(cache_dir=str(tmp_path))
  _fit(_strategy(logical_cpus), [first])
  # The file at this model's path now holds another model's plan (copied
  # by hand, or a stale shared directory): its signature says so.
  other = keras.Sequential([keras.Input((8,)), keras.layers.Dense(64),
                            keras.layers.Dense(1)])
  path = first.result.cache_file
  with open(path) as f:
    data = json.load(f)
  data["signature"] = plan_cache.model_signature(other)
  with open(path, "w") as f:
    json.dump(data, f)
  with pytest.raises(plan_cache.PlanCacheMismatchError, match="another model"):
    _fit(_strategy(logical_cpus), [_callback(cache_dir=str(tmp_path))])


def test_global_clipnorm_warns_and_still_trains(logical_cpus):
  import keras  # pylint: disable=g-import-not-at-top
  callback = _callback()
  with pytest.warns(RuntimeWarning, match="global norm"):
    losses, _, _ = _fit(_strategy(logical_cpus), [callback],
                        optimizer=keras.optimizers.SGD(0.02,
                                                       global_clipnorm=1.0))
  assert callback.result.plan.scheduler == "pace"
  assert np.all(np.isfinite(losses))


def replan_worker(cache_dir):
  """Worker entry point: fit with re-planning under the multi-worker strategy.

  Each worker gets its own cache directory; the second fit must read it.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_preempt import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  # One core per worker: more threads only contend on the shared machine.
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(2)
  task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  own = os.path.join(cache_dir, f"worker{task}")
  strategy = PreemptiveMultiWorkerMirroredStrategy()
  callback = _callback(cache_dir=own)
  losses, _, _ = _fit(strategy, [callback])
  restarted = _callback(cache_dir=own)
  losses_again, _, _ = _fit(strategy, [restarted])
  return {
      "fingerprint": callback.result.plan.fingerprint(),
      "installed": strategy.cross_device_ops.plan.fingerprint(),
      "scheduler": callback.result.plan.scheduler,
      "from_cache": [callback.result.from_cache,
                     restarted.result.from_cache],
      "fingerprint_again": restarted.result.plan.fingerprint(),
      "losses": [float(v) for v in losses],
      "losses_again": [float(v) for v in losses_again],
  }


@pytest.mark.slow
def test_two_workers_replan_to_the_same_plan(tmp_path):
  from tf_preempt.testing import cluster  # pylint: disable=g-import-not-at-top
  results = cluster.run_workers(f"{os.path.abspath(__file__)}:replan_worker",
                                2, args=(str(tmp_path),), timeout=240,
                                pin_cpus=True)
  cluster.check_all_ok(results)
  first, second = (r.value for r in results)
  # Measured separately, planned from the all-gathered mean: one plan, which
  # also passed the runtime's fingerprint agreement check before its first
  # collective.
  assert first["fingerprint"] == second["fingerprint"]
  assert first["installed"] == second["installed"] == first["fingerprint"]
  assert first["scheduler"] == "pace"
  assert first["from_cache"] == second["from_cache"] == [False, True]
  assert first["fingerprint_again"] == first["fingerprint"]
  assert first["losses"] == second["losses"]
  np.testing.assert_allclose(first["losses_again"], second["losses_again"])
