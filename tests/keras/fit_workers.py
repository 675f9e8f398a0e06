"""Keras `fit` workloads run alike in one process and in a 2-worker cluster.

`train(strategy, variant, workdir)` is the whole workload: it is called
in-process by the test (the one-process reference) and through
`multi_worker(...)` in each worker process.
"""

import json
import os

import numpy as np

GLOBAL_BATCH = 16
STEPS_PER_EPOCH = 4
EPOCHS = 3
# "xy_endless" trains on the "xy" data repeated without end: its blocks take
# their batches inside the graph (tf_preempt.keras.unrolled).
VARIANTS = ("xy", "xy_sample_weight", "dict_inputs", "xy_endless")


def _arrays(variant):
  rng = np.random.RandomState(0)
  n = GLOBAL_BATCH * STEPS_PER_EPOCH
  x = rng.randn(n, 8).astype("float32")
  y = (x[:, :4].sum(axis=1, keepdims=True) -
       x[:, 4:].sum(axis=1, keepdims=True))
  if variant == "dict_inputs":
    return ({"a": x[:, :4], "b": x[:, 4:]}, y)
  if variant == "xy_sample_weight":
    return (x, y, rng.uniform(0.5, 1.5, size=(n,)).astype("float32"))
  return (x, y)


def _dataset(variant):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  options = tf.data.Options()
  # Shard by element order so that every step's global batch holds the same
  # examples in one process and in the cluster.
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  return (tf.data.Dataset.from_tensor_slices(_arrays(variant))
          .batch(GLOBAL_BATCH).with_options(options))


def _model(variant):
  import keras  # pylint: disable=g-import-not-at-top
  if variant == "dict_inputs":
    a = keras.Input((4,), name="a")
    b = keras.Input((4,), name="b")
    h = keras.layers.Concatenate()([a, b])
  else:
    a = keras.Input((8,))
    h = a
  h = keras.layers.Dense(16, activation="relu")(h)
  out = keras.layers.Dense(1)(h)
  return keras.Model([a, b] if variant == "dict_inputs" else a, out)


def train(strategy, variant, workdir):
  """Fits, evaluates and predicts; returns what the test compares.

  Args:
    strategy: the strategy to train under.
    variant: one of VARIANTS.
    workdir: a directory of this process's own for checkpoints.

  Returns:
    A JSON-serialisable dict.
  """
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt.keras import unroll_steps  # pylint: disable=g-import-not-at-top

  class BlockCounter(keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.batch_ends = 0

    def on_train_batch_end(self, batch, logs=None):
      self.batch_ends += 1

  with strategy.scope():
    keras.utils.set_random_seed(1)
    model = _model(variant)
    model.compile(keras.optimizers.SGD(0.05), "mse", metrics=["mae"],
                  steps_per_execution=2)
  # Stock Keras cannot run steps_per_execution > 1 under these strategies
  # (see tf_preempt.keras.unrolled); the package's integration can.
  unroll_steps(model)
  counter = BlockCounter()
  checkpoint = os.path.join(workdir, "ckpt-{epoch}.weights.h5")
  endless = variant == "xy_endless"
  data = _dataset(variant).repeat() if endless else _dataset(variant)
  history = model.fit(
      data, epochs=EPOCHS, verbose=0,
      steps_per_epoch=STEPS_PER_EPOCH if endless else None,
      validation_steps=STEPS_PER_EPOCH if endless else None,
      # The dataset fixes the order; Keras ignores (and warns about) its
      # default shuffle=True for a tf.data.Dataset.
      shuffle=False,
      validation_data=data,
      callbacks=[
          counter,
          keras.callbacks.ModelCheckpoint(checkpoint, save_weights_only=True),
          keras.callbacks.BackupAndRestore(os.path.join(workdir, "backup")),
      ])
  # Before evaluate, whose finite data the test function takes eagerly.
  taken_eagerly = [f.last_input_ns is not None
                   for f in (model.train_function, model.test_function)]
  evaluation = model.evaluate(_dataset(variant), verbose=0, return_dict=True)
  x = _arrays(variant)[0]
  predictions = model.predict(x, batch_size=GLOBAL_BATCH, verbose=0)
  return {
      "history": {k: [float(v) for v in vs]
                  for k, vs in history.history.items()},
      "evaluate": {k: float(v) for k, v in evaluation.items()},
      "predict_shape": list(predictions.shape),
      "predict_sorted": np.sort(predictions.ravel()).tolist(),
      "batch_ends": counter.batch_ends,
      "checkpoints": sorted(f for f in os.listdir(workdir)
                            if f.endswith(".h5")),
      "iterations": int(model.optimizer.iterations.numpy()),
      "batches_taken_eagerly": taken_eagerly,
  }


def multi_worker(scheduler, workdir):
  """Worker entry point: every variant under the multi-worker strategy."""
  from tf_preempt import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  strategy = PreemptiveMultiWorkerMirroredStrategy(scheduler=scheduler)
  task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  out = {}
  for variant in VARIANTS:
    own = os.path.join(workdir, f"{variant}-worker{task}")
    os.makedirs(own, exist_ok=True)
    out[variant] = train(strategy, variant, own)
  return out
