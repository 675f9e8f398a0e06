"""Profiling a live model and cluster, and re-planning from the measurements.

`profile_and_replan(model, strategy, ...)` is the whole loop for custom
training loops; `tf_preempt.keras.ProfileAndReplan` calls it from `fit`.

What is measured, and how:

- Compute. Two functions run on every replica of the strategy, timed with
  the wall clock (median of `repeats` calls after one that traces): the
  forward pass, and the forward plus backward pass (the gradient of the sum
  of the outputs with respect to `model.trainable_variables`). Neither
  all-reduces anything. Backward = (forward + backward) - forward. The
  per-layer split comes from `model_to_dag`'s roofline estimate, scaled so
  that the forward ops sum to the measured forward time and the backward ops
  to the measured backward time. Per-op traces (TF's profiler, step stats)
  are not used (not tried yet): mapping fused CPU kernels back to Keras
  layers is fragile, while two phase totals are robust and the per-layer
  split only shapes the ready and need times within each phase.
  The model runs with `training=False` on synthetic inputs, so neither batch
  norm statistics nor dropout seeds move: profiling never changes the
  training math.
- Network. One all-reduce per size (4 KiB .. 16 MiB by default), issued
  through the strategy's own per-device launchers (the path a plan's
  collectives take), timed as above; `CostModel.fit` over the medians
  together with the telemetry samples below.
- Telemetry. With the scheduler op, the records of the default plan's last
  iterations give, per planned collective, its bytes and its released-to-
  done time in real steps (beside compute and the other collectives): these
  samples join the timed ones in the cost-model fit. They also give when
  each collective's gradients became ready: the backward ops of the DAG are
  re-timed so that the gradients become ready as observed, within the
  measured backward total (`calibrate_ready_times`); the span from the
  first to the last is reported next to the measured backward time.

Agreement. Measurements differ a little between workers, and so would plans
made from them. Every worker therefore all-gathers every worker's
measurements (one collective) and plans from their mean, computed in the
same order everywhere: all workers derive the very same plan. The runtime's
agreement check then verifies it by fingerprint before the plan's first
collective, as for any plan.

Cache. The plan is written, atomically (temp file + `os.replace`), to
`<cache_dir>/plan-<signature>-w<world>-<implementation>.json`, where the
signature hashes the trainable variables' shapes and dtypes. A restart finds
it and skips the profiling. A file that cannot be parsed (truncated,
corrupted) is logged and re-profiled, then overwritten; a well-formed file
made for another model, world size or implementation raises
`plan_cache.PlanCacheMismatchError` -- it is never used (`plan_cache.py`). With several workers, all of
them profile unless every one found a valid cached plan (one collective
decides), since profiling issues collectives that must match.
"""

import dataclasses
import os
import statistics
import time
import warnings
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from tf_preempt.plan.cost import CostModel
from tf_preempt.plan.dag import TrainingDAG
from tf_preempt.plan.plan import Plan
from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.registry import make_plan
from tf_preempt.profile import model_dag
from tf_preempt.profile import plan_cache
from tf_preempt.runtime import tf_internals

# Collective sizes the cost model is fitted from: from the alpha-dominated
# end to the beta-dominated end of gradient sizes.
DEFAULT_SIZES = (4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20)
DEFAULT_REPEATS = 5


# --- measurement ----------------------------------------------------------


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
  """Median wall time of `fn()`; the first call (tracing) is not counted."""
  _sync(fn())
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    _sync(fn())
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _sync(outputs) -> None:
  # Eager function calls return when their outputs exist; reading one small
  # value of each output makes that explicit (and cheap).
  for t in tf.nest.flatten(outputs, expand_composites=True):
    if hasattr(t, "values") and not isinstance(t, tf.Tensor):
      for v in t.values:
        _ = tf.reshape(v, [-1])[:1].numpy()
    elif isinstance(t, tf.Tensor):
      _ = tf.reshape(t, [-1])[:1].numpy()


def _synthetic_inputs(model: keras.Model, batch_size: int):
  """Random inputs of `model.inputs`' shapes, with `batch_size` examples."""
  rng = np.random.RandomState(0)
  out = []
  for spec in model.inputs:
    shape = [batch_size] + [int(d) for d in spec.shape[1:]]
    dtype = keras.backend.standardize_dtype(spec.dtype)
    if dtype.startswith("int") or dtype.startswith("uint"):
      out.append(tf.zeros(shape, dtype))  # valid ids for embeddings
    else:
      out.append(tf.constant(rng.randn(*shape).astype(dtype)))
  return out[0] if len(out) == 1 else out


def measure_compute(model: keras.Model, strategy, per_replica_batch: int,
                    repeats: int = DEFAULT_REPEATS):
  """Times the forward and the backward pass on every replica at once.

  Args:
    model: a built functional Keras model, made under `strategy`.
    strategy: its strategy.
    per_replica_batch: examples per replica.
    repeats: timed calls per function (median).

  Returns:
    (forward_s, backward_s), seconds per step.
  """
  x = _synthetic_inputs(model, per_replica_batch)
  variables = model.trainable_variables

  def forward():
    outputs = model(x, training=False)
    return tf.add_n([tf.reduce_sum(o) for o in tf.nest.flatten(outputs)])

  def forward_backward():
    with tf.GradientTape() as tape:
      loss = forward()
    grads = tape.gradient(loss, variables)
    # Every gradient is an output, so none of the backward pass is pruned.
    return [g for g in grads if g is not None]

  with strategy.scope():
    fwd = tf.function(lambda: strategy.run(forward), autograph=False)
    fwd_bwd = tf.function(lambda: strategy.run(forward_backward),
                          autograph=False)
    forward_s = _median_seconds(fwd, repeats)
    total_s = _median_seconds(fwd_bwd, repeats)
  # Timing noise can make the difference tiny or negative on a small model;
  # a backward pass never costs less than a tenth of the forward one.
  return forward_s, max(total_s - forward_s, 0.1 * forward_s)


def time_collectives(cross_device_ops, sizes: Sequence[int] = DEFAULT_SIZES,
                     repeats: int = DEFAULT_REPEATS) -> Dict[int, float]:
  """Times one float32 all-reduce per size through the strategy's launchers.

  Every worker must call it with the same sizes (its collectives match the
  other workers'). Each size is its own function, traced once.

  Args:
    cross_device_ops: the strategy's `PreemptiveAllReduce`.
    sizes: bytes per all-reduce, multiples of 4.
    repeats: timed calls per size (median).

  Returns:
    {nbytes: median seconds}.
  """
  state = tf_internals.cross_device_ops_state(cross_device_ops)
  out = {}
  for nbytes in sizes:
    inputs = []
    for device in state.devices:
      with tf.device(device):
        inputs.append(tf.ones([max(1, int(nbytes) // 4)], tf.float32))

    @tf.function(autograph=False)
    def reduce_all(values):
      outputs = []
      for launcher, device, value in zip(state.launchers, state.devices,
                                         values):
        with tf.device(device):
          reduced = launcher.all_reduce(value, None, state.options)
          outputs.append(reduced[:1])  # a small output keeps it all alive
      return outputs

    out[int(nbytes)] = _median_seconds(lambda: reduce_all(inputs), repeats)
  return out


# One gather function per (cross-device ops, vector length): a new function
# per call would retrace every time (and TensorFlow warns about it).
_gather_functions = weakref.WeakKeyDictionary()


def all_workers_mean(cross_device_ops, vector: Sequence[float]) -> np.ndarray:
  """The mean of `vector` over all replicas, bit-identical on every worker.

  All-gathers the vectors (float64) and averages them in numpy in replica
  order, so every worker computes the same numbers from the same rows.
  Every worker must call it alike (it is a collective).
  """
  state = tf_internals.cross_device_ops_state(cross_device_ops)
  local = np.asarray(vector, dtype=np.float64).reshape(1, -1)
  functions = _gather_functions.setdefault(cross_device_ops, {})
  gather = functions.get(local.shape[1])
  if gather is None:

    @tf.function(autograph=False)
    def gather(value):
      outputs = []
      for launcher, device in zip(state.launchers, state.devices):
        with tf.device(device):
          outputs.append(tf_internals.launcher_all_gather(
              launcher, tf.identity(value), state.options))
      return outputs

    functions[local.shape[1]] = gather
  rows = gather(tf.constant(local))[0].numpy().reshape(-1, local.shape[1])
  return rows.mean(axis=0)


def telemetry_ready_span(cross_device_ops) -> Optional[float]:
  """Median seconds from the first to the last gradient ready, or None.

  Read from the scheduler op's records of the gradient plan (None without
  the scheduler op or before the first step).
  """
  records = cross_device_ops.telemetry()
  spans = []
  for device_records in records.values():
    by_iteration: Dict[int, List[int]] = {}
    for r in device_records:
      by_iteration.setdefault(r.iteration, []).append(r.ready_ns)
    spans.extend((max(v) - min(v)) * 1e-9 for v in by_iteration.values()
                 if len(v) > 1)
  return statistics.median(spans) if spans else None


def _records_by_collective(cross_device_ops):
  """{collective id: (bytes, [seconds released to done], [seconds ready
  after the iteration's first ready collective])} of the gradient plan."""
  out: Dict[int, Tuple[int, List[float], List[float]]] = {}
  for device_records in cross_device_ops.telemetry().values():
    first_ready: Dict[int, int] = {}
    for r in device_records:
      first_ready[r.iteration] = min(first_ready.get(r.iteration, r.ready_ns),
                                     r.ready_ns)
    for r in device_records:
      if r.done_ns is None or not r.done_ns >= r.released_ns >= 0:
        continue
      entry = out.setdefault(r.collective_id, (int(r.nbytes), [], []))
      entry[1].append((r.done_ns - r.released_ns) * 1e-9)
      entry[2].append((r.ready_ns - first_ready[r.iteration]) * 1e-9)
  return dict(sorted(out.items()))


def telemetry_collective_seconds(cross_device_ops
                                 ) -> Dict[int, Tuple[int, float]]:
  """The gradient plan's collectives as the scheduler op saw them in steps.

  Released-to-done time of each planned collective during real training
  steps, so with the compute and the other collectives they compete with:
  on a CPU cluster, where gRPC's all-reduce shares the cores with compute,
  that is what a collective costs, more than an isolated timed one.

  Args:
    cross_device_ops: the strategy's `PreemptiveAllReduce`.

  Returns:
    {collective id: (bytes, median seconds over iterations and devices)};
    {} without the scheduler op or before the first step.
  """
  return {cid: (nbytes, statistics.median(seconds))
          for cid, (nbytes, seconds, _) in
          _records_by_collective(cross_device_ops).items()}


def telemetry_ready_offsets(cross_device_ops) -> Dict[int, float]:
  """When each planned collective's input became ready, in real steps.

  Args:
    cross_device_ops: the strategy's `PreemptiveAllReduce`.

  Returns:
    {collective id: median seconds after the first collective of the same
    iteration became ready}; {} without the scheduler op or before the first
    step.
  """
  return {cid: statistics.median(ready)
          for cid, (_, _, ready) in
          _records_by_collective(cross_device_ops).items()}


def _agreed_telemetry(cross_device_ops):
  """Telemetry averaged over workers: (`telemetry_collective_seconds`,
  `telemetry_ready_offsets`), or ({}, {}).

  Used only if every worker has records of the same collectives: the mean
  and the mean square of the count agree only if all counts are equal (the
  plan agreement already makes the collectives the same).
  """
  local = _records_by_collective(cross_device_ops)
  count = float(len(local))
  mean_count, mean_square = all_workers_mean(cross_device_ops,
                                             [count, count * count])
  if count < 1 or mean_count != count or mean_square != count * count:
    return {}, {}
  ids = sorted(local)
  agreed = all_workers_mean(
      cross_device_ops,
      [statistics.median(local[c][1]) for c in ids] +
      [statistics.median(local[c][2]) for c in ids])
  seconds = {c: (local[c][0], float(t)) for c, t in zip(ids, agreed)}
  ready = {c: float(t) for c, t in zip(ids, agreed[len(ids):])}
  return seconds, ready


# --- the DAG and the plan ----------------------------------------------------


def calibrate_ready_times(dag: TrainingDAG,
                          ready_offsets: Dict[int, float],
                          collectives: Sequence[Sequence[int]]
                          ) -> Dict[str, float]:
  """Backward op durations re-timed to the gradient ready times seen.

  The scheduler op saw when each planned collective's input became ready,
  relative to the first one of the step. A monotone piecewise-linear map
  from the DAG's estimated clock to the observed one (through those points,
  the start of the backward pass and its end, which stays where it is) turns
  every backward op's [start, end) into a new duration, so the gradients
  become ready as observed and the backward pass keeps its measured length.

  Args:
    dag: the DAG with estimated backward durations.
    ready_offsets: {collective id: seconds after the first ready one}.
    collectives: per collective id, the positions of its tensors in
      `dag.tensors`.

  Returns:
    {backward op name: duration}.
  """
  start, end = dag.backward_times()
  ready = dag.ready_times()
  backward_end = dag.backward_end()
  ids = sorted(ready_offsets)
  estimated = np.array([max(ready[t] for t in collectives[c]) for c in ids])
  observed = np.array([ready_offsets[c] for c in ids])
  # The collective seen first anchors the observed clock on the estimate.
  observed = observed + estimated[int(np.argmin(observed))]
  points = {0.0: 0.0, backward_end: backward_end}
  for x, y in zip(estimated, np.clip(observed, 0.0, backward_end)):
    points[float(x)] = max(points.get(float(x), 0.0), float(y))
  xs = np.array(sorted(points))
  ys = np.maximum.accumulate(np.array([points[x] for x in xs]))
  ys[-1] = backward_end
  ys = np.minimum(ys, backward_end)
  mapped_start = np.interp(start, xs, ys)
  mapped_end = np.interp(end, xs, ys)
  return {op.name: float(mapped_end[i] - mapped_start[i])
          for i, op in enumerate(dag.ops) if op.phase == model_dag.BACKWARD}


def measured_dag(model: keras.Model, per_replica_batch: int,
                 forward_s: float, backward_s: float,
                 ready_offsets: Optional[Dict[int, float]] = None,
                 plan: Optional[Plan] = None) -> TrainingDAG:
  """`model_to_dag` with its per-op times scaled to measured phase totals.

  Args:
    model: the Keras model.
    per_replica_batch: examples per replica and step.
    forward_s: measured forward time.
    backward_s: measured backward time.
    ready_offsets: optional `telemetry_ready_offsets` recorded under `plan`;
      with them the backward ops are re-timed (`calibrate_ready_times`).
    plan: the plan the offsets were recorded under (its tensors must be the
      model's trainable variables).

  Returns:
    The measured `TrainingDAG`.
  """
  estimate = model_dag.model_to_dag(model, batch_size=per_replica_batch)
  totals = {model_dag.FORWARD: forward_s, model_dag.BACKWARD: backward_s}
  estimated = {phase: sum(op.duration for op in estimate.ops
                          if op.phase == phase) for phase in totals}
  profile = {}
  for op in estimate.ops:
    share = (op.duration / estimated[op.phase] if estimated[op.phase] > 0
             else 1.0 / sum(1 for o in estimate.ops if o.phase == op.phase))
    profile[op.name] = share * totals[op.phase]
  scaled = model_dag.model_to_dag(model, batch_size=per_replica_batch,
                                  profile=profile)
  if (not ready_offsets or plan is None or
      len(plan.tensors) != len(scaled.tensors) or
      not set(ready_offsets) <= set(range(plan.num_collectives))):
    return scaled
  profile.update(calibrate_ready_times(
      scaled, ready_offsets, [c.tensors for c in plan.collectives]))
  return model_dag.model_to_dag(model, batch_size=per_replica_batch,
                                profile=profile)


def _with_variable_specs(plan: Plan, model: keras.Model) -> Plan:
  """Records each variable's dtype and shape, so binding checks them."""
  tensors = tuple(
      dataclasses.replace(t, dtype=keras.backend.standardize_dtype(v.dtype),
                          shape=tuple(int(d) for d in v.shape))
      for t, v in zip(plan.tensors, model.trainable_variables))
  return dataclasses.replace(plan, tensors=tensors)


def chunk_bytes_of(plan: Plan) -> Optional[int]:
  """The largest piece of a tensor the plan splits, or None if none is."""
  sizes = [p.length for c in plan.collectives for p in c.pieces
           if p.length < plan.tensors[p.tensor].nbytes]
  return max(sizes) if sizes else None


@dataclasses.dataclass
class ReplanResult:
  """What `profile_and_replan` did.

  Attributes:
    plan: the plan installed (or to install).
    from_cache: whether it was read from the cache (nothing was measured).
    cache_file: the cache file, if a cache directory was given.
    profile_seconds: wall time of the profiling (0 from the cache).
    forward_s: measured forward time per step (mean over replicas).
    backward_s: measured backward time per step.
    collective_seconds: {nbytes: median seconds} of the timed all-reduces.
    cost: the fitted cost model.
    telemetry_ready_span_s: first-to-last gradient ready time in the
      warm-up steps, from the scheduler op, if available.
    telemetry_collective_seconds: {collective id: seconds} of the warm-up
      steps' planned collectives (scheduler op, released to done), which the
      cost model was fitted from together with `collective_seconds`.
    telemetry_ready_offsets: {collective id: seconds after the first ready
      one} in the warm-up steps, which re-timed the DAG's backward ops.
  """
  plan: Plan
  from_cache: bool
  cache_file: Optional[str] = None
  profile_seconds: float = 0.0
  forward_s: Optional[float] = None
  backward_s: Optional[float] = None
  collective_seconds: Optional[Dict[int, float]] = None
  cost: Optional[CostModel] = None
  telemetry_ready_span_s: Optional[float] = None
  telemetry_collective_seconds: Optional[Dict[int, float]] = None
  telemetry_ready_offsets: Optional[Dict[int, float]] = None

  def summary_line(self, measured_step_s: Optional[float] = None) -> str:
    plan = self.plan
    chunk = chunk_bytes_of(plan)
    predicted = plan.predicted_iteration_s
    parts = [
        f"tf_preempt re-plan ({'cached' if self.from_cache else 'profiled'}"
        f" in {self.profile_seconds:.2f} s):",
        f"{plan.scheduler} plan {plan.fingerprint()[:12]},",
        f"{len(plan.tensors)} tensors in {plan.num_collectives} collectives,",
        f"{sum(1 for c in plan.collectives if len(c.tensors) > 1)} fused,",
        f"chunk {'none' if chunk is None else f'{chunk} B'},",
        "predicted step " + ("n/a" if predicted is None else
                             f"{predicted * 1e3:.2f} ms"),
        "vs measured " + ("n/a" if measured_step_s is None else
                          f"{measured_step_s * 1e3:.2f} ms"),
    ]
    if self.cost is not None:
      parts.append(f"(alpha {self.cost.alpha * 1e6:.1f} us, "
                   f"{1e-9 / self.cost.beta if self.cost.beta else 0:.2f} "
                   "GB/s)")
    return " ".join(parts)


def warn_if_global_clipnorm(model: keras.Model) -> bool:
  """Warns that clipping by global norm removes the overlap; True if set."""
  optimizer = getattr(model, "optimizer", None)
  if getattr(optimizer, "global_clipnorm", None):
    message = (
        "tf_preempt: the optimizer clips by global norm (global_clipnorm="
        f"{optimizer.global_clipnorm}): every update waits for all reduced "
        "gradients, so the next forward pass cannot overlap the all-reduce "
        "and a preemptive plan gains little. Training is still correct; "
        "use clipnorm (per variable) to keep the overlap.")
    warnings.warn(message, RuntimeWarning, stacklevel=2)
    logging.warning(message)
    return True
  return False


def profile_and_replan(model: keras.Model,
                       strategy,
                       global_batch_size: int,
                       cache_dir: Optional[str] = None,
                       sizes: Sequence[int] = DEFAULT_SIZES,
                       repeats: int = DEFAULT_REPEATS,
                       scheduler: str = "pace",
                       install: bool = True) -> ReplanResult:
  """Measures the model and the cluster, plans, and installs the plan.

  Call it between steps, on every worker alike. After it returns, rebuild
  the functions that all-reduce the gradients (for Keras:
  `model.make_train_function(force=True)`); the next trace uses the plan.

  Args:
    model: a built functional Keras model made under `strategy`.
    strategy: a `PreemptiveMirroredStrategy` or
      `PreemptiveMultiWorkerMirroredStrategy`.
    global_batch_size: examples per step over all replicas.
    cache_dir: where plans are cached; None for no cache.
    sizes: bytes of the timed all-reduces (at least two distinct).
    repeats: timed calls per measurement.
    scheduler: the planner's scheduler.
    install: whether to `set_plan` the result.

  Returns:
    A `ReplanResult`.

  Raises:
    ValueError: if the strategy has no `PreemptiveAllReduce`.
    plan_cache.PlanCacheMismatchError: on a cache file of another model.
  """
  ops = getattr(strategy, "cross_device_ops", None)
  if ops is None or not hasattr(ops, "set_plan"):
    raise ValueError("profile_and_replan needs a tf_preempt strategy "
                     "(PreemptiveMirroredStrategy or "
                     "PreemptiveMultiWorkerMirroredStrategy).")
  world = int(strategy.num_replicas_in_sync)
  per_replica = max(1, int(global_batch_size) // world)
  signature = plan_cache.model_signature(model)
  implementation = plan_cache.implementation_name(ops)
  path = (None if cache_dir is None else
          plan_cache.cache_path(cache_dir, signature, world, implementation))
  warn_if_global_clipnorm(model)

  cached = None
  if path is not None:
    cached = plan_cache.load_cached_plan(path, signature, world, implementation)
    if cached is not None:
      plan_cache.check_plan_fits(cached, model, path)
  # Every worker must profile if any one does: profiling issues collectives.
  if all_workers_mean(ops, [0.0 if cached is None else 1.0])[0] == 1.0:
    if install:
      ops.set_plan(cached)
    logging.info("tf_preempt: using cached plan %s from %s",
                 cached.fingerprint()[:12], path)
    return ReplanResult(plan=cached, from_cache=True, cache_file=path)

  start = time.perf_counter()
  span = telemetry_ready_span(ops)
  forward_s, backward_s = measure_compute(model, strategy, per_replica,
                                          repeats)
  local_coll = time_collectives(ops, sizes, repeats)
  sizes = sorted(local_coll)
  agreed = all_workers_mean(
      ops, [forward_s, backward_s] + [local_coll[s] for s in sizes])
  forward_s, backward_s = float(agreed[0]), float(agreed[1])
  coll = {s: float(t) for s, t in zip(sizes, agreed[2:])}
  # The warm-up steps' own collectives, as timed by the scheduler op, join
  # the isolated ones: they cost what a collective costs beside compute.
  in_steps, ready_offsets = _agreed_telemetry(ops)
  recorded_under = max(ops.bound_plans(), key=lambda p: len(p.tensors),
                       default=None)
  cost = CostModel.fit(
      list(coll) + [nbytes for nbytes, _ in in_steps.values()],
      list(coll.values()) + [t for _, t in in_steps.values()])
  if cost.beta == 0:
    # Noise on a fast in-process link can flatten the fit; a plan needs a
    # positive per-byte cost to trade fusion against preemption.
    largest = max(coll)
    cost = CostModel(cost.alpha, max(coll[largest] - cost.alpha, 1e-12) /
                     largest)
  dag = measured_dag(model, per_replica, forward_s, backward_s,
                     ready_offsets, recorded_under)
  plan = _with_variable_specs(make_plan(dag, cost, scheduler), model)
  result = ReplanResult(
      plan=plan, from_cache=False, cache_file=path,
      profile_seconds=time.perf_counter() - start, forward_s=forward_s,
      backward_s=backward_s, collective_seconds=coll, cost=cost,
      telemetry_ready_span_s=span,
      telemetry_collective_seconds={c: t for c, (_, t) in in_steps.items()},
      telemetry_ready_offsets=ready_offsets)
  if path is not None:
    plan_cache.save_cached_plan(path, plan, signature, world, implementation, {
        "forward_s": forward_s, "backward_s": backward_s,
        "collective_seconds": {str(k): v for k, v in coll.items()},
        "cost": cost.to_dict(),
    })
  if install:
    ops.set_plan(plan)
  return result
