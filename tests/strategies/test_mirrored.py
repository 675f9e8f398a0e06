"""PreemptiveMirroredStrategy against MirroredStrategy on logical CPUs."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.plan import plan_from_groups
from tf_preempt.runtime import PreemptiveAllReduce
from tf_preempt.strategies import PreemptiveMirroredStrategy
from tf_preempt.testing import collectives

DEVICES = ["/cpu:0", "/cpu:1"]


def _model():
  return keras.Sequential([
      keras.Input((8,)),
      keras.layers.Dense(16, activation="relu"),
      keras.layers.Dense(3),
  ])


def _embedding_model():
  # The embedding's gradient is a tf.IndexedSlices.
  return keras.Sequential([
      keras.Input((8,), dtype="int32"),
      keras.layers.Embedding(20, 4),
      keras.layers.Flatten(),
      keras.layers.Dense(3),
  ])


def _train(strategy, steps=4, embedding=False):
  keras.utils.set_random_seed(1)
  with strategy.scope():
    model = _embedding_model() if embedding else _model()
    optimizer = keras.optimizers.SGD(0.1, momentum=0.5)
    # Slots made up front: made lazily inside the first step's tf.function,
    # they hit a stock TF issue with conditional initialisation.
    optimizer.build(model.trainable_variables)
  rng = np.random.default_rng(0)
  if embedding:
    # Few ids, so that replicas and steps touch the same rows.
    x = rng.integers(0, 6, (8 * steps, 8)).astype(np.int32)
  else:
    x = rng.standard_normal((8 * steps, 8)).astype(np.float32)
  y = rng.standard_normal((8 * steps, 3)).astype(np.float32)
  dataset = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensor_slices((x, y)).batch(8))

  @tf.function
  def step(xb, yb):
    def replica_fn(xb, yb):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum((model(xb) - yb) ** 2) / 8.0
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return strategy.reduce("SUM", strategy.run(replica_fn, (xb, yb)),
                           axis=None)

  losses = [float(step(xb, yb)) for xb, yb in dataset]
  return model, [v.numpy() for v in model.trainable_variables], losses


@pytest.fixture(scope="module")
def stock_result():
  return _train(collectives.stock_mirrored_strategy(DEVICES))


@pytest.mark.parametrize("scheduler", ["pace", "tf_default", "fifo", "ddp"])
def test_training_equals_stock(stock_result, scheduler):
  _, expected, expected_losses = stock_result
  strategy = PreemptiveMirroredStrategy(DEVICES, scheduler=scheduler)
  assert isinstance(strategy.cross_device_ops, PreemptiveAllReduce)
  assert strategy.num_replicas_in_sync == 2
  _, weights, losses = _train(strategy)
  for e, g in zip(expected, weights):
    np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)


@pytest.mark.parametrize("sparse_as_dense", [False, True],
                         ids=["all_gathered", "sparse_as_dense"])
def test_embedding_training_equals_stock(sparse_as_dense):
  _, expected, expected_losses = _train(
      collectives.stock_mirrored_strategy(DEVICES), embedding=True)
  strategy = PreemptiveMirroredStrategy(
      DEVICES, scheduler="pace",
      scheduler_options={"sparse_as_dense": sparse_as_dense})
  _, weights, losses = _train(strategy, embedding=True)
  for e, g in zip(expected, weights):
    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
  bound = [b for b in strategy.cross_device_ops._bound.values()  # pylint: disable=protected-access
           if len(b.flat_index) + len(b.sparse) == 3]
  assert bound, "the gradient all-reduce was not bound"
  # Densified, the embedding is planned; otherwise it is all-gathered.
  assert len(bound[0].sparse) == (0 if sparse_as_dense else 1)


def test_training_with_a_plan(stock_result):
  _, expected, _ = stock_result
  shapes = [(8, 16), (16,), (16, 3), (3,)]
  tensors = [PlanTensor(f"t{i}", int(np.prod(s)) * 4)
             for i, s in enumerate(shapes)]
  # First layer first, its kernel in two chunks, the small tensors fused.
  plan = plan_from_groups(tensors, [[(0, 0, 256)], [(0, 256, 256), (1, 0, 64)],
                                    [(2, 0, 192), (3, 0, 12)]])
  strategy = PreemptiveMirroredStrategy(DEVICES, plan=plan)
  _, weights, _ = _train(strategy)
  for e, g in zip(expected, weights):
    np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
  bound = [b for b in strategy.cross_device_ops._bound.values()  # pylint: disable=protected-access
           if b.plan is not None and b.plan.scheduler == "manual"]
  assert bound and bound[0].plan.tensors[0].shape == (8, 16)


def test_drop_in_surface(tmp_path):
  strategy = PreemptiveMirroredStrategy(
      DEVICES, scheduler="pace",
      communication_options=tf.distribute.experimental.CommunicationOptions(
          timeout_seconds=30))
  assert strategy.extended.worker_devices == tuple(
      tf.DeviceSpec.from_string(d).to_string() for d in
      strategy.extended.worker_devices)
  model, weights, _ = _train(strategy, steps=1)
  with strategy.scope():
    checkpoint = tf.train.Checkpoint(model=model)
  path = checkpoint.save(os.path.join(tmp_path, "ckpt"))
  for v in model.trainable_variables:
    v.assign(tf.zeros_like(v))
  checkpoint.restore(path)
  for v, w in zip(model.trainable_variables, weights):
    np.testing.assert_array_equal(v.numpy(), w)
  per_replica = strategy.run(lambda: tf.constant(2.0))
  assert float(strategy.reduce("SUM", per_replica, axis=None)) == 4.0
  assert float(strategy.reduce("MEAN", per_replica, axis=None)) == 2.0
  with pytest.raises(ValueError, match="valid schedulers"):
    PreemptiveMirroredStrategy(DEVICES, scheduler="bogus")


def test_keras_fit():
  strategy = PreemptiveMirroredStrategy(DEVICES, scheduler="pace")
  with strategy.scope():
    model = _model()
    model.compile(optimizer="adam", loss="mse")
  x = np.random.default_rng(0).standard_normal((32, 8)).astype(np.float32)
  y = np.random.default_rng(1).standard_normal((32, 3)).astype(np.float32)
  history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))
