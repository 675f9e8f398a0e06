"""`run(config)`: one Keras `fit` under a (preemptive) strategy, and its stats.

The training binary's whole workload, callable from tests: builds the
strategy, the data, the model and the optimizer from a `TrainConfig`, trains
with `model.fit`, and returns a JSON-serialisable stats dict (median step
time, throughput, final loss, the gradient plan, ...).
"""

import json
import os
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from tf_preempt import models
from tf_preempt import strategies
from tf_preempt.keras import unroll_steps
from tf_preempt.plan import Plan
from tf_preempt import heap
from tf_preempt.telemetry import chrome_trace
from tf_preempt.training import config as config_lib
from tf_preempt.training import data
from tf_preempt.training import profiling

# Set on the stats when --profile_steps is given but this installation has no
# profile-and-re-plan callback.
PROFILE_NOT_WIRED = ("profiling is not wired: tf_preempt.keras has no "
                     "ProfileAndReplan callback here; trained with the "
                     "scheduler's plan throughout")


def configure_threads(config: config_lib.TrainConfig) -> None:
  """Applies the thread counts; must run before TensorFlow runs anything.

  Importing TensorFlow and Keras does not start TensorFlow's runtime; the
  first op or device query does.

  Raises:
    RuntimeError: if TensorFlow has already started its runtime.
  """
  if config.intra_op_threads is None and config.inter_op_threads is None:
    return
  try:
    if config.intra_op_threads is not None:
      tf.config.threading.set_intra_op_parallelism_threads(
          config.intra_op_threads)
    if config.inter_op_threads is not None:
      tf.config.threading.set_inter_op_parallelism_threads(
          config.inter_op_threads)
  except RuntimeError as e:
    raise RuntimeError(
        "--intra_op_threads/--inter_op_threads must be set before "
        f"TensorFlow runs anything in this process: {e}") from e


def _cluster_position(config: config_lib.TrainConfig):
  """(number of workers, this worker's index), from TF_CONFIG if any."""
  if config.strategy != "multi_worker":
    return 1, 0
  tf_config = config.tf_config()
  cluster, task = tf_config["cluster"], tf_config["task"]
  chiefs = len(cluster.get("chief", ()))
  workers = chiefs + len(cluster.get("worker", ()))
  index = task["index"] + (chiefs if task["type"] == "worker" else 0)
  return workers, index


def make_strategy(config: config_lib.TrainConfig):
  """Builds the strategy of `config.strategy`.

  Returns:
    The strategy.

  Raises:
    ValueError: for an implementation this machine cannot run, or a plan
      file that is not a plan.
  """
  if config.strategy == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else
                                           "/cpu:0")
  if config.strategy == "stock_mirrored":
    return tf.distribute.MirroredStrategy(
        devices=list(config.devices) if config.devices else None)
  implementation = {
      "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
      "ring": tf.distribute.experimental.CommunicationImplementation.RING,
      "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
  }[config.implementation]
  if config.implementation == "nccl" and not tf.config.list_physical_devices(
      "GPU"):
    raise ValueError("--implementation=nccl needs GPUs; this machine has "
                     "none (use auto or ring)")
  scheduler = config.effective_scheduler
  comm = {"implementation": implementation}
  if config.collective_timeout_s is not None:
    comm["timeout_seconds"] = float(config.collective_timeout_s)
  options: Dict[str, Any] = {}
  if config.bytes_per_pack is not None:
    if scheduler == "tf_default":
      # Exactly stock's knob: CollectiveAllReduce packs the reversed
      # gradient list into packs of this size.
      comm["bytes_per_pack"] = config.bytes_per_pack
    else:
      options["bytes_per_pack"] = config.bytes_per_pack
  if config.chunk_bytes is not None:
    options["chunk_bytes"] = config.chunk_bytes
  if config.credit_bytes is not None:
    # Read by the scheduler op, whatever the scheduler.
    options["credit_bytes"] = config.credit_bytes
  if config.telemetry_iterations is not None:
    options["telemetry_iterations"] = config.telemetry_iterations
  if config.sparse_as_dense:
    options["sparse_as_dense"] = True
  plan = None
  if config.plan is not None:
    with open(config.plan) as f:
      text = f.read()
    try:
      plan = Plan.from_json(text)
    except ValueError as e:
      raise ValueError(f"--plan file {config.plan!r} is not a plan: {e}"
                       ) from e
  scheduler_op = {"auto": None, "on": True, "off": False}[config.scheduler_op]
  communication_options = tf.distribute.experimental.CommunicationOptions(
      **comm)
  common = dict(plan=plan, scheduler=scheduler,
                communication_options=communication_options,
                scheduler_options=options or None, scheduler_op=scheduler_op)
  if config.strategy == "mirrored":
    return strategies.PreemptiveMirroredStrategy(
        devices=list(config.devices) if config.devices else None, **common)
  return strategies.PreemptiveMultiWorkerMirroredStrategy(**common)


class StepTimer(keras.callbacks.Callback):
  """Wall time of each block of `unroll` steps (one train-function call).

  Within an epoch, a block's time runs from the end of the previous block to
  its own end, so it includes everything a step costs (input, callbacks, the
  wait for the last collective); the first block of an epoch runs from its
  begin, so checkpointing at epoch ends is not counted.

  Attributes:
    block_s: seconds of each block, in order.
    spans: the same blocks as compute spans for the Chrome trace
      (`time.monotonic_ns()`, the scheduler op's clock); their args hold
      Keras's batch index and, under `unroll_steps` on finite data,
      "input_us": the microseconds the block took to take its batches
      from the iterator, eagerly (on data that never runs out, the
      binaries' own, the block takes them inside its graph: no
      "input_us").
    first_epoch: the first epoch run (> 0 after a restore).
    epochs_run: epochs begun.
  """

  def __init__(self, unroll: int):
    super().__init__()
    self.unroll = unroll
    self.block_s: List[float] = []
    self.spans: List[Dict[str, Any]] = []
    self.first_epoch: Optional[int] = None
    self.epochs_run = 0
    self._last_ns: Optional[int] = None

  def on_epoch_begin(self, epoch, logs=None):
    if self.first_epoch is None:
      self.first_epoch = epoch
    self.epochs_run += 1
    self._last_ns = None

  def on_train_batch_begin(self, batch, logs=None):
    if self._last_ns is None:
      self._last_ns = time.monotonic_ns()

  def on_train_batch_end(self, batch, logs=None):
    now = time.monotonic_ns()
    self.block_s.append((now - self._last_ns) / 1e9)
    steps = f"{self.unroll} step{'s' if self.unroll > 1 else ''}"
    args = {"batch": int(batch)}
    input_ns = getattr(self.model.train_function, "last_input_ns", None)
    if input_ns is not None:
      args["input_us"] = input_ns / 1e3
    self.spans.append({"name": f"block {len(self.spans)} ({steps})",
                       "start": self._last_ns, "end": now, "args": args})
    self._last_ns = now


def timed_blocks(block_s: Sequence[float], warmup_blocks: int) -> List[float]:
  """The blocks that count: drop the warm-up, but keep at least one."""
  skip = min(warmup_blocks, max(0, len(block_s) - 1))
  return list(block_s[skip:])


def gradient_plan(strategy):
  """The plan of the gradient all-reduce, or None (no collectives yet).

  The user's plan if one was given; otherwise the bound plan with the most
  tensors, which is the gradients' (the loss and metrics are one each).
  """
  ops = getattr(strategy, "cross_device_ops", None)
  if ops is None or not hasattr(ops, "plan"):
    return None
  if ops.plan is not None:
    return ops.plan
  return max(ops.bound_plans(), key=lambda p: len(p.tensors), default=None)


def check_plan_fits(plan, model, path: str) -> None:
  """Raises ValueError unless `plan` was made for `model`'s gradients.

  The runtime applies a plan to the all-reduce of as many values as the plan
  has tensors, so a plan made for another model would otherwise go unused
  without a word; this is checked before the first step.

  Args:
    plan: the `Plan` of `--plan`.
    model: the model about to be trained.
    path: the plan file, for the message.

  Raises:
    ValueError: naming the first tensor that does not fit.
  """
  variables = model.trainable_variables
  if len(plan.tensors) != len(variables):
    raise ValueError(
        f"--plan {path!r} is a plan for {len(plan.tensors)} tensors, but "
        f"this model has {len(variables)} trainable variables: the plan was "
        "made for another model.")
  for i, (tensor, variable) in enumerate(zip(plan.tensors, variables)):
    nbytes = (int(np.prod(variable.shape)) *
              tf.as_dtype(variable.dtype).size)
    if tensor.nbytes != nbytes:
      raise ValueError(
          f"--plan {path!r}: tensor {i} ({tensor.name!r}) has "
          f"{tensor.nbytes} bytes, but the model's variable "
          f"{variable.path!r} has {nbytes} bytes: the plan was made for "
          "another model.")


def _model_and_data(config):
  """Builds the model (in the current scope) and the matching dataset."""
  name = config.tfds_name
  if name is None:
    keras.utils.set_random_seed(config.seed)
    model = models.get(config.model)
    spec = data.input_spec_of(model)
    dataset = data.synthetic(spec, config.batch_size,
                             config_lib.SYNTHETIC_BATCHES, seed=config.seed)
    return model, dataset, config_lib.SYNTHETIC_BATCHES
  info = data.tfds_info(name, config.data_dir)
  keras.utils.set_random_seed(config.seed)
  try:
    model = models.get(config.model, input_shape=info.spec.shape,
                       num_classes=info.spec.num_classes)
  except TypeError as e:
    raise ValueError(f"--model={config.model} does not take images: "
                     f"--data={config.data}") from e
  dataset = data.tfds_dataset(name, config.batch_size, config.data_dir,
                              image_shape=info.spec.shape,
                              shuffle_seed=config.seed)
  if info.num_examples is None:
    return model, dataset, None
  return model, dataset, info.num_examples // config.batch_size


def timeline_path(path: str, workers: int, worker_index: int) -> str:
  """`path` itself for one worker; "<stem>.worker-<i><ext>" for several."""
  if workers <= 1:
    return path
  stem, ext = os.path.splitext(path)
  return f"{stem}.worker-{worker_index}{ext or '.json'}"


def _replan_callback(config: config_lib.TrainConfig):
  """The profile-and-re-plan callback of --profile_steps, or None."""
  try:
    from tf_preempt.keras import replan  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  cache_dir = (os.path.join(config.model_dir, "plans")
               if config.model_dir is not None else None)
  return replan.ProfileAndReplan(
      config.batch_size, warmup_steps=config.profile_steps,
      cache_dir=cache_dir, scheduler=config.effective_scheduler)


def _write_timeline(path, strategy, timer, worker_index, stats):
  """Writes a Chrome trace of the step blocks and the collectives."""
  ops = getattr(strategy, "cross_device_ops", None)
  records = {}
  if ops is not None and hasattr(ops, "telemetry"):
    # The plan the last steps ran: after a re-plan, the warm-up plan may
    # have more collectives, and telemetry() would pick that one.
    plan = gradient_plan(strategy)
    try:
      telemetry = ops.telemetry(
          fingerprint=plan.fingerprint() if plan is not None else None)
    except KeyError:  # That plan never went through the scheduler op.
      telemetry = ops.telemetry()
    records = {f"w{worker_index} {device}": list(r)
               for device, r in telemetry.items()}
  compute = {f"w{worker_index} steps": timer.spans}
  chrome_trace.write_chrome_trace(
      path, records, compute,
      metadata={"worker": worker_index, "stats": stats})
  if records:
    return "step blocks and the scheduler op's collective records"
  return ("step blocks only: no collective records (no scheduler op, or "
          "no all-reduce)")


def run(config: config_lib.TrainConfig, callbacks: Sequence[Any] = (),
        verbose: int = 0) -> Dict[str, Any]:
  """Trains as `config` says and returns the stats.

  Args:
    config: the settings; validated here again.
    callbacks: more Keras callbacks (tests use them to interrupt a run).
    verbose: Keras `fit` verbosity.

  Returns:
    A JSON-serialisable dict: "median_step_s", "examples_per_s",
    "final_loss", "plan" (summary of the gradient plan or None),
    "scheduler", "unroll", "workers", "worker_index", and more.

  Raises:
    ValueError: on an invalid config (naming the flag) or TF_CONFIG.
  """
  config.validate()
  configure_threads(config)

  workers, worker_index = _cluster_position(config)
  strategy = make_strategy(config)
  # After the strategy: a multi-worker strategy must come before any op.
  heap.configure_heap(config.heap)
  previous_policy = keras.mixed_precision.global_policy()
  if config.mixed_precision is not None:
    keras.mixed_precision.set_global_policy(config.mixed_precision)
  try:
    with strategy.scope():
      model, dataset, dataset_steps = _model_and_data(config)
      model.compile(
          optimizer=keras.optimizers.SGD(
              config.learning_rate, momentum=0.9,
              name=config_lib.OPTIMIZER_NAME),
          loss=keras.losses.SparseCategoricalCrossentropy(),
          metrics=["accuracy"], steps_per_execution=config.unroll)
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
  if config.unroll > 1:
    # Stock Keras cannot run steps_per_execution > 1 under the preemptive
    # strategies; this also traces the K steps as one flat graph.
    unroll_steps(model, config.unroll)
  epochs, steps_per_epoch = config.schedule(dataset_steps)

  user_plan = getattr(getattr(strategy, "cross_device_ops", None), "plan",
                      None)
  if user_plan is not None:
    check_plan_fits(user_plan, model, config.plan)

  timer = StepTimer(config.unroll)
  all_callbacks = [timer]
  model_dir = None
  if config.model_dir is not None:
    # One directory per worker: workers must not overwrite each other's
    # files, and each restores its own backup.
    model_dir = os.path.join(config.model_dir, f"worker-{worker_index}")
    os.makedirs(model_dir, exist_ok=True)
    # Built before fit: BackupAndRestore restores into built weights.
    model.build(dataset.element_spec[0].shape)
    all_callbacks += [
        keras.callbacks.ModelCheckpoint(
            os.path.join(model_dir, "ckpt-{epoch:04d}.weights.h5"),
            save_weights_only=True),
        keras.callbacks.BackupAndRestore(os.path.join(model_dir, "backup")),
    ]
  replanner = None
  if config.profile_steps:
    replanner = _replan_callback(config)
    if replanner is not None:
      all_callbacks.append(replanner)
  profiler = None
  if config.tf_profiler_dir is not None and worker_index == 0:
    # The chief only: stopping the profiler crashed the other worker of
    # two-worker runs (see profiling.ProfileBlocks).
    profiler = profiling.ProfileBlocks(
        config.warmup_blocks,
        config.tf_profiler_blocks or config_lib.DEFAULT_PROFILER_BLOCKS,
        os.path.join(config.tf_profiler_dir, f"worker-{worker_index}"))
    all_callbacks.append(profiler)
  all_callbacks += list(callbacks)

  start = time.perf_counter()
  try:
    history = model.fit(dataset, epochs=epochs,
                        steps_per_epoch=steps_per_epoch,
                        callbacks=all_callbacks, verbose=verbose,
                        shuffle=False)  # The dataset shuffles (tfds) itself.
  finally:
    if profiler is not None:
      # A failed run must not leave the process's profiler running.
      profiler.stop()
  elapsed = time.perf_counter() - start

  blocks = timed_blocks(timer.block_s, config.warmup_blocks)
  median_step = (statistics.median(blocks) / config.unroll if blocks
                 else None)
  losses = history.history.get("loss", [])
  plan = gradient_plan(strategy)
  ops = getattr(strategy, "cross_device_ops", None)
  threading = tf.config.threading
  stats: Dict[str, Any] = {
      "model": config.model,
      "data": config.data,
      "strategy": config.strategy,
      "scheduler": (config.effective_scheduler if config.preemptive
                    else None),
      "unroll": config.unroll,
      "workers": workers,
      "worker_index": worker_index,
      "replicas": int(strategy.num_replicas_in_sync),
      "global_batch_size": config.batch_size,
      "epochs": epochs,
      "steps_per_epoch": steps_per_epoch,
      "initial_epoch": timer.first_epoch,
      "epochs_run": timer.epochs_run,
      "steps_run": len(timer.block_s) * config.unroll,
      "timed_steps": len(blocks) * config.unroll,
      "median_step_s": median_step,
      "step_s": [round(b / config.unroll, 6) for b in timer.block_s],
      "examples_per_s": (config.batch_size / median_step if median_step
                         else None),
      "final_loss": float(losses[-1]) if losses else None,
      "elapsed_s": elapsed,
      "plan": plan.summary() if plan is not None else None,
      # The whole plan, so that a benchmark can simulate what ran.
      "plan_json": plan.to_json() if plan is not None else None,
      "scheduler_op": bool(getattr(ops, "uses_scheduler_op", False)),
      "mixed_precision": config.mixed_precision,
      "intra_op_threads": threading.get_intra_op_parallelism_threads(),
      "inter_op_threads": threading.get_inter_op_parallelism_threads(),
      # What this process applied, not the flag: what tests and the
      # benchmark's details check.
      "heap": heap.applied_mode(),
  }
  if config.profile_steps:
    if replanner is None:
      stats["profile"] = PROFILE_NOT_WIRED
    else:
      # The block after the re-plan traces again; it is in "step_s" and,
      # unless --warmup_blocks covers it, in the median.
      result = replanner.result
      stats["profile"] = {
          "summary": replanner.summary,
          "warmup_step_s": replanner.warmup_step_s,
          "replanned_step_s": replanner.replanned_step_s,
          "plan": result.plan.summary() if result is not None else None,
          "from_cache": result.from_cache if result is not None else None,
          "forward_s": getattr(result, "forward_s", None),
          "backward_s": getattr(result, "backward_s", None),
          "cost_model": ({"alpha": result.cost.alpha,
                          "beta": result.cost.beta}
                         if getattr(result, "cost", None) is not None
                         else None),
          "collective_seconds": ({str(k): v for k, v in
                                  result.collective_seconds.items()}
                                 if getattr(result, "collective_seconds",
                                            None) else None),
      }
  if model_dir is not None:
    stats["model_dir"] = model_dir
  if profiler is not None:
    stats["tf_profiler"] = {"log_dir": profiler.log_dir,
                            "first_block": profiler.first,
                            "blocks": profiler.profiled}
  if config.timeline is not None:
    path = timeline_path(config.timeline, workers, worker_index)
    stats["timeline"] = path
    stats["timeline_contents"] = _write_timeline(
        path, strategy, timer, worker_index, stats)
  logging.info("tf_preempt.training stats: %s", json.dumps(stats))
  return stats
