"""Functions that `tf_preempt.testing.cluster` runs inside worker processes.

Each runs in a fresh process with TF_CONFIG set, builds one multi-worker
strategy, and returns plain lists (JSON) for the test to compare.
"""

import json
import os

import numpy as np


def _setup_tf():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # One core per worker: more threads only contend on the shared machine.
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(2)
  return tf


def _task_id():
  return json.loads(os.environ["TF_CONFIG"])["task"]["index"]


def _gradients(seed, task, shapes):
  """Integer-valued float32 gradients, different on every worker."""
  rng = np.random.default_rng(seed * 100 + task)
  return [rng.integers(-50, 50, size=s).astype(np.float32) for s in shapes]


SHAPES = [(3, 5), (7,), (1,), (2, 2, 3), (129,), (4, 33)]


def reduce_equal_to_stock(seed, scheduler):
  """All-reduces random gradients with the preemptive and the stock ops.

  Returns:
    {"preemptive": [...], "stock": [...], "eager": [...]} nested lists, the
    SUM over workers, computed by each implementation.
  """
  tf = _setup_tf()
  from tf_preempt.runtime import tf_internals  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  strategy = PreemptiveMultiWorkerMirroredStrategy(
      scheduler=scheduler, scheduler_options=(
          {"chunk_bytes": 64, "fuse": False} if scheduler == "pace"
          else None))
  ops = strategy.cross_device_ops
  state = tf_internals.cross_device_ops_state(ops)
  # Stock ops on the same group and key allocator, so the two never reuse
  # one another's instance keys.
  stock = tf_internals.CollectiveAllReduce(
      state.devices, state.group_size, state.options,
      collective_keys=state.collective_keys)
  grads = [tf.constant(g) for g in _gradients(seed, _task_id(), SHAPES)]
  options = tf_internals.CommunicationOptions()
  sum_op = tf.distribute.ReduceOp.SUM

  @tf.function
  def both():
    mine = ops._all_reduce(sum_op, grads, 0, options)  # pylint: disable=protected-access
    theirs = stock._all_reduce(sum_op, grads, 0, options)  # pylint: disable=protected-access
    return mine, theirs

  mine, theirs = both()
  eager = ops._all_reduce(sum_op, grads, 0, options)  # pylint: disable=protected-access
  return {"preemptive": [t.numpy().tolist() for t in mine],
          "stock": [t.numpy().tolist() for t in theirs],
          "eager": [t.numpy().tolist() for t in eager],
          "collectives": len(ops.bind(grads).steps)}


def train(kind, steps, scheduler="pace"):
  """Trains a small model for `steps` steps; returns the final weights."""
  tf = _setup_tf()
  import keras  # pylint: disable=g-import-not-at-top
  if kind == "stock":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
  else:
    from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
    strategy = PreemptiveMultiWorkerMirroredStrategy(scheduler=scheduler)
  keras.utils.set_random_seed(7)
  with strategy.scope():
    model = keras.Sequential([
        keras.Input((10,)),
        keras.layers.Dense(17, activation="tanh"),
        keras.layers.Dense(9, activation="tanh"),
        keras.layers.Dense(3),
    ])
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    # Slots made up front: made lazily inside the first step's tf.function,
    # they hit a stock TF issue with conditional initialisation.
    optimizer.build(model.trainable_variables)
  rng = np.random.default_rng(3)
  x = rng.standard_normal((16 * steps, 10)).astype(np.float32)
  y = rng.standard_normal((16 * steps, 3)).astype(np.float32)
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
  dataset = strategy.experimental_distribute_dataset(
      dataset.with_options(options))
  global_batch = 16

  @tf.function
  def step(xb, yb):
    def replica_fn(xb, yb):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum((model(xb) - yb) ** 2) / global_batch
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return strategy.reduce("SUM", strategy.run(replica_fn, (xb, yb)),
                           axis=None)

  losses = [float(step(xb, yb)) for xb, yb in dataset]
  return {"weights": [v.numpy().tolist() for v in model.trainable_variables],
          "losses": losses}


def mismatched_plans():
  """Each worker holds a different plan; the first step must fail."""
  tf = _setup_tf()
  from tf_preempt.plan.plan import PlanTensor  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan.plan import plan_from_groups  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  task = _task_id()
  tensors = [PlanTensor("a", 64), PlanTensor("b", 32)]
  if task == 0:
    plan = plan_from_groups(tensors, [[(0, 0, 64), (1, 0, 32)]])
  else:
    plan = plan_from_groups(tensors, [[(1, 0, 32)], [(0, 0, 64)]])
  strategy = PreemptiveMultiWorkerMirroredStrategy(plan=plan)
  values = [tf.ones([16]), tf.ones([8])]

  @tf.function
  def step():
    return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
        "SUM", values))

  step()
  return "no error"
