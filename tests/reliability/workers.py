"""Functions that `tf_preempt.testing.cluster` runs in the reliability tests.

Each runs in a fresh worker process with TF_CONFIG set and returns plain
JSON for the test to check.
"""

import json
import os
import signal
import threading
import time

import numpy as np


def _setup_tf():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # One core per worker: more threads only contend on the shared machine.
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(2)
  return tf


def _task_id():
  return json.loads(os.environ["TF_CONFIG"])["task"]["index"]


def _tiny_model(keras):
  return keras.Sequential([
      keras.Input((6,)),
      keras.layers.Dense(8, activation="tanh"),
      keras.layers.Dense(2),
  ])


def _tiny_training_in_chunks(timeout_seconds):
  """The tiny model under the multi-worker strategy, one step at a time.

  The plan is pace's in chunks of 64 bytes, unfused: many small
  collectives per step.

  Args:
    timeout_seconds: the collectives' timeout, or None (the default: none).

  Returns:
    (strategy, step): `step()` trains one step and returns the loss.
  """
  tf = _setup_tf()
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  options = tf.distribute.experimental.CommunicationOptions(
      timeout_seconds=timeout_seconds)
  strategy = PreemptiveMultiWorkerMirroredStrategy(
      communication_options=options, scheduler="pace",
      scheduler_options={"chunk_bytes": 64, "fuse": False})
  keras.utils.set_random_seed(1)
  with strategy.scope():
    model = _tiny_model(keras)
    optimizer = keras.optimizers.SGD(0.01)
    optimizer.build(model.trainable_variables)
  x = tf.constant(np.ones((4, 6), np.float32))

  @tf.function
  def step():
    def replica_fn():
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return strategy.run(replica_fn)

  return strategy, step


def train_until_peer_dies(victim, kill_after_s, timeout_seconds, stamp_path,
                          num_workers):
  """Trains a tiny model until a step fails; `victim` SIGKILLs itself.

  The victim starts a timer after its first (traced) step and kills itself
  with SIGKILL `kill_after_s` later, from another thread, so the moment
  falls anywhere inside a step: in the compute, in a collective, between
  two. Just before, it writes the wall-clock time to `stamp_path` (the
  workers share the machine's clock), so that each survivor can say how
  long it took to notice.

  Args:
    victim: the task id that dies.
    kill_after_s: seconds after the first step.
    timeout_seconds: the collectives' timeout, or None (none, the default).
    stamp_path: file for the victim's time of death.
    num_workers: the cluster's size.

  Returns:
    For a survivor: {"error_type", "error", "detect_s", "steps",
    "heartbeat_ms"} (the coordination service's heartbeat timeout).
  """
  _, step = _tiny_training_in_chunks(timeout_seconds)
  task = _task_id()
  step()
  if task == victim:
    def die():
      time.sleep(kill_after_s)
      with open(stamp_path + ".tmp", "w") as f:
        f.write(repr(time.time()))
      os.rename(stamp_path + ".tmp", stamp_path)
      os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=die, daemon=True).start()
  steps = 1
  try:
    while True:
      step()
      steps += 1
  except Exception as e:  # pylint: disable=broad-except
    failed_at = time.time()
    died_at = None
    for _ in range(100):
      if os.path.exists(stamp_path):
        with open(stamp_path) as f:
          died_at = float(f.read())
        break
      time.sleep(0.05)
    # Stay up until every survivor has failed: a survivor that exits is a
    # second lost peer, and the slower survivors would name it instead.
    with open(f"{stamp_path}.survivor-{task}", "w") as f:
      f.write("failed")
    deadline = time.time() + 60
    while time.time() < deadline and sum(
        os.path.exists(f"{stamp_path}.survivor-{t}")
        for t in range(num_workers)) < num_workers - 1:
      time.sleep(0.05)
    from tf_preempt.runtime import tf_internals  # pylint: disable=g-import-not-at-top
    return {"error_type": type(e).__name__, "error": str(e)[-1500:],
            "detect_s": None if died_at is None else failed_at - died_at,
            "steps": steps,
            "heartbeat_ms": tf_internals.configured_heartbeat_timeout_ms()}


def late_peer(late_task, delay_s, timeout_seconds):
  """`late_task` starts its first step `delay_s` late (a slow first trace).

  Returns:
    {"ok": bool, "error": str, "wait_s": seconds the first step took}.
  """
  tf = _setup_tf()
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  options = tf.distribute.experimental.CommunicationOptions(
      timeout_seconds=timeout_seconds)
  strategy = PreemptiveMultiWorkerMirroredStrategy(
      communication_options=options)
  values = [tf.ones([16]), tf.ones([8])]

  @tf.function
  def step():
    return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
        "SUM", values))

  if _task_id() == late_task:
    time.sleep(delay_s)
  start = time.time()
  try:
    step()
    return {"ok": True, "error": "", "wait_s": time.time() - start}
  except Exception as e:  # pylint: disable=broad-except
    return {"ok": False, "error": f"{type(e).__name__}: {str(e)[-600:]}",
            "wait_s": time.time() - start}


def disagreeing_worker(difference):
  """Worker 1 differs from worker 0 in `difference`; the first step fails.

  Args:
    difference: "model" (worker 1 trains a different set of variables: its
      first layer is frozen; models whose variables differ in shape fail
      earlier, in MultiWorkerMirroredStrategy's broadcast of the initial
      values, before any plan exists) or "tensorflow_version" (worker 1 reports another
      TensorFlow release in its plan summary).

  Returns:
    {"error_type", "error", "elapsed_s"} of the first step, which must fail.
  """
  tf = _setup_tf()
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt.runtime import agreement  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  task = _task_id()
  if difference == "tensorflow_version" and task == 1:
    agreement.tensorflow_version = lambda: "2.99.0"
  strategy = PreemptiveMultiWorkerMirroredStrategy(scheduler="pace")
  keras.utils.set_random_seed(1)
  with strategy.scope():
    model = _tiny_model(keras)
  if difference == "model" and task == 1:
    model.layers[0].trainable = False
  x = tf.constant(np.ones((4, 6), np.float32))

  @tf.function
  def step():
    def replica_fn():
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
      grads = tape.gradient(loss, model.trainable_variables)
      return tf.distribute.get_replica_context().all_reduce("SUM", grads)
    return strategy.run(replica_fn)

  start = time.time()
  try:
    step()
  except Exception as e:  # pylint: disable=broad-except
    # Errors raised while tracing come wrapped (StagingError): report the
    # original type.
    cause = e
    while cause.__cause__ is not None:
      cause = cause.__cause__
    return {"error_type": type(cause).__name__, "error": str(e)[-1500:],
            "elapsed_s": time.time() - start}
  return {"error_type": None, "error": "", "elapsed_s": time.time() - start}


def soak(scheduler, steps, segments, seed):
  """Trains `steps` steps with random delays before each gradient.

  With "pace", every one of `segments` equal parts of the run gets a new
  plan with a random chunk size (seeded alike on every worker, so the
  workers agree) and a freshly traced step. Each gradient waits a random
  0-2 ms (different on each worker and step) before it is handed to the
  all-reduce, so the workers reach the collectives in shifting order.

  Returns:
    {"weights": [...], "chunk_bytes": [...], "collectives": [...],
     "step_s": median step time}.
  """
  tf = _setup_tf()
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import synthetic  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMultiWorkerMirroredStrategy  # pylint: disable=g-import-not-at-top
  task = _task_id()
  strategy = PreemptiveMultiWorkerMirroredStrategy(scheduler=scheduler)
  keras.utils.set_random_seed(3)
  with strategy.scope():
    model = keras.Sequential([
        keras.Input((10,)),
        keras.layers.Dense(33, activation="tanh"),
        keras.layers.Dense(17, activation="tanh"),
        keras.layers.Dense(3),
    ])
    optimizer = keras.optimizers.SGD(0.02, momentum=0.9)
    optimizer.build(model.trainable_variables)
  variables = model.trainable_variables
  data_rng = np.random.default_rng(seed)
  delay_rng = np.random.default_rng(seed * 1000 + task + 1)
  plan_rng = np.random.default_rng(seed + 7)
  global_batch, local = 16, 8

  def sleep_then(x):
    time.sleep(float(delay_rng.uniform(0.0, 0.002)))
    return x

  def make_step():
    @tf.function
    def step(xb, yb):
      def replica_fn(xb, yb):
        with tf.GradientTape() as tape:
          loss = tf.reduce_sum((model(xb) - yb) ** 2) / global_batch
        grads = tape.gradient(loss, variables)
        grads = [tf.ensure_shape(tf.numpy_function(sleep_then, [g],
                                                   tf.float32), g.shape)
                 for g in grads]
        optimizer.apply_gradients(zip(grads, variables))
      strategy.run(replica_fn, (xb, yb))
    return step

  chunk_sizes, collectives, times = [], [], []
  per_segment = steps // segments
  for segment in range(segments):
    if scheduler == "pace":
      chunk = int(plan_rng.integers(1, 64)) * 4
      dag = synthetic.from_forward(
          {f"op{i}": 1e-4 for i in range(len(variables))}, [],
          [(v.path, int(np.prod(v.shape)) * 4, f"op{i}")
           for i, v in enumerate(variables)])
      plan = plan_lib.make_plan(dag, plan_lib.CostModel(1e-5, 1e-9), "pace",
                                chunk_bytes=chunk,
                                fuse=bool(plan_rng.integers(0, 2)))
      strategy.cross_device_ops.set_plan(plan)
      chunk_sizes.append(chunk)
      collectives.append(plan.num_collectives)
    step = make_step()
    for _ in range(per_segment):
      x = data_rng.standard_normal((global_batch, 10)).astype(np.float32)
      y = data_rng.standard_normal((global_batch, 3)).astype(np.float32)
      start = time.perf_counter()
      step(tf.constant(x[task * local:(task + 1) * local]),
           tf.constant(y[task * local:(task + 1) * local]))
      times.append(time.perf_counter() - start)
  return {"weights": [v.numpy().tolist() for v in variables],
          "chunk_bytes": chunk_sizes, "collectives": collectives,
          "steps": len(times), "step_s": float(np.median(times))}


def threads_over_steps(steps, timeout_seconds):
  """Counts this process's threads while training `steps` steps.

  A plan of many small collectives (chunks of 64 bytes, unfused) makes any
  per-collective thread show up quickly.

  Args:
    steps: training steps after the first (traced) one.
    timeout_seconds: the collectives' timeout, or None (the default).

  Returns:
    {"collectives": collectives per step (the plan's), "before": threads
    after the first step, "after": threads after the last}.
  """
  strategy, step = _tiny_training_in_chunks(timeout_seconds)

  def threads():
    return len(os.listdir("/proc/self/task"))

  step()
  before = threads()
  for _ in range(steps):
    step()
  after = threads()
  plans = strategy.cross_device_ops.bound_plans()
  return {"collectives": max(p.num_collectives for p in plans),
          "before": before, "after": after}
