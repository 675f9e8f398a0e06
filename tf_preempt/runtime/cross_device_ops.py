"""`PreemptiveAllReduce`: cross-device ops that execute a plan.

Stock `CollectiveAllReduce` reverses the gradient list and all-reduces it in
packs of `bytes_per_pack`. This class replaces only that decision: it binds a
`Plan` to the gradients (`binding`), then for each collective of the plan, in
plan order, slices the pieces out of the flattened gradients, concatenates
them, issues one `CollectiveReduceV2` through TensorFlow's own per-device
launcher, and splits the result back. Everything else -- the launchers, the
key allocator, the launch lock, the eager thread pool, `reduce`/`batch_reduce`
with their destination handling, all-gather, broadcast, `IndexedSlices` -- is
inherited from `CollectiveAllReduce`, so the two behave alike wherever a plan
plays no part.

Order. Every collective of a replica goes through the same launcher, which
passes its device's ordering token to each op; automatic control
dependencies then chain the ops in the order Python issued them. That order
is the plan's on every device and every worker, which is what NCCL needs
(NCCL deadlocks if two devices launch the same collectives in different
orders) and what CollectiveReduceV2 needs to match instance keys.

Agreement. With more than one worker, before the first collective of each
plan the workers all-gather a fixed-size summary of it (`agreement`); a
mismatch raises `PlanMismatchError` on every worker instead of a hang. The
check runs once per plan and process, eagerly, when the plan is first bound
(at trace time inside `tf.function`), so steps pay nothing for it.

Scheduler op. With `scheduler_op` (by default whenever the C++ library
loads) every collective of the plan also passes through the scheduler op's
gate before it and its completion op after it: the gate releases the
collectives in plan order within a credit of collectives / bytes in flight,
and both record the per-collective timestamps that `telemetry` returns. The
values pass through unchanged, so both modes give bit-identical results.
The wiring lives in `scheduling`.

Timeouts. None unless the options set one, as in stock TensorFlow: a dead
peer is named by a closed connection or by the coordination service's
heartbeat (`tf_preempt.runtime.failure_detection`), with no collective
timeout. `CommunicationOptions(timeout_seconds=T)` also bounds a peer that
is alive but stuck, at a price: for every collective it launches,
TensorFlow keeps threads asleep for T seconds (`Env::SchedClosureAfter`
starts them; two per launch measured), so a job issuing c collectives a
second holds about 2 c T threads, pays the thread starts on the worker's
core, and at a few hundred collectives a second exhausts the PID space
(docs/reliability.md, tests/reliability/test_thread_count.py).
"""

import copy
import dataclasses
import threading
from typing import Any, Dict, List, Optional

from absl import logging
import tensorflow as tf

from tf_preempt.plan.plan import Plan
from tf_preempt.runtime import agreement
from tf_preempt.runtime import binding
from tf_preempt.runtime import default_plan
from tf_preempt.runtime import scheduling
from tf_preempt.runtime import tf_internals

ReduceOp = tf_internals.ReduceOp
CommunicationOptions = tf_internals.CommunicationOptions


def _worker_of(device: str) -> int:
  spec = tf.DeviceSpec.from_string(device)
  return spec.task or 0


class PreemptiveAllReduce(tf_internals.CollectiveAllReduce):
  """All-reduce with collective ops, in the order and fusion of a plan.

  Use it wherever `CollectiveAllReduce` is used; the strategies
  `PreemptiveMirroredStrategy` and `PreemptiveMultiWorkerMirroredStrategy`
  install it for you:

  ```python
  ops = PreemptiveAllReduce(devices=["/cpu:0", "/cpu:1"], scheduler="pace")
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                            cross_device_ops=ops)
  ```

  The plan applies to every all-reduce of exactly as many values as the plan
  has tensors (the gradient all-reduce); those values must match it by
  position, dtype and shape. Other all-reduces (a loss, a metric) and all
  all-reduces when no plan is given get a plan made by `scheduler` from the
  values' sizes alone.

  With the scheduler op (`scheduler_op`), each device releases the planned
  collectives in plan order while at most `credit_collectives` of them (and
  `credit_bytes` bytes, if set) are in flight; both come from
  `scheduler_options` (see `__init__`). `telemetry()` returns when each
  collective was ready, released and done. After a step failed or was
  cancelled, call `reset_scheduler()` on every worker before the next one.
  """

  def __init__(self,
               devices,
               group_size: Optional[int] = None,
               options=None,
               collective_keys=None,
               plan: Optional[Plan] = None,
               scheduler: str = "pace",
               scheduler_options: Optional[Dict[str, Any]] = None,
               canonicalize_devices: bool = True,
               worker_index: Optional[int] = None,
               scheduler_op: Optional[bool] = None):
    """Initializes the object.

    Args:
      devices: the local devices, one replica each.
      group_size: the number of replicas over all workers; defaults to
        `len(devices)` (one worker).
      options: default `tf.distribute.experimental.CommunicationOptions`;
        per-call options override them. No collective timeout unless they
        set one (see the module doc for its cost).
      collective_keys: the strategy's key allocator, so that this object and
        the strategy's other collectives never collide; a new one if None.
      plan: an optional `Plan` for the gradient all-reduce.
      scheduler: how to plan all-reduces that `plan` does not cover: one of
        "pace", "priority", "fifo", "tf_default", "tf_packed", "horovod",
        "ddp", "bytescheduler".
      scheduler_options: options for the scheduler (e.g. `bytes_per_pack`
        for "tf_packed"), JSON-serialisable. Three keys are read by the
        scheduler op instead of the planner: `credit_collectives`, the
        collectives in flight per device (default 1 for NCCL and for AUTO on
        GPUs, 2 for RING and AUTO on CPUs); `credit_bytes`, the bytes in
        flight per device (default 0: no limit; a larger collective runs
        alone); `telemetry_iterations`, the steps of telemetry kept
        (default 16). `sparse_as_dense` (default False) is read by the
        runtime: True turns `IndexedSlices` (embedding gradients) into
        dense tensors that the plan schedules like any other, instead of
        all-gathering them after the plan as stock TensorFlow does; the
        reduced value is then a dense tensor (the same sum).
      canonicalize_devices: as for `CollectiveAllReduce`.
      worker_index: this worker's index in the cluster, for messages;
        defaults to the task of the first device.
      scheduler_op: whether to gate the planned collectives with the C++
        scheduler op: True requires it, False never uses it (the ordering
        token alone keeps the plan order), None uses it if its library
        loads and otherwise logs once and goes without.

    Raises:
      TypeError: if `plan` is not a `Plan`.
      ValueError: on an unknown scheduler, a bad group size or credit.
      ValueError: also for a plan that is not all-reduce only.
      SchedulerOpsUnavailableError: if `scheduler_op` is True and the op
        library does not load; the message says how to rebuild it.
    """
    binding.check_user_plan(plan)
    default_plan.check_scheduler(scheduler)
    planner_options, credit = scheduling.split_options(scheduler_options)
    sparse_as_dense = scheduling.sparse_as_dense(scheduler_options)
    use_op = scheduling.resolve_mode(scheduler_op)
    if options is None:
      options = CommunicationOptions()
    if group_size is None:
      group_size = len(devices)
    super().__init__(devices, group_size, options,
                     collective_keys=collective_keys,
                     canonicalize_devices=canonicalize_devices)
    self._plan = plan
    self._scheduler = scheduler
    self._scheduler_options = dict(scheduler_options or {})
    self._sparse_as_dense = sparse_as_dense
    self._planner_options = planner_options
    self._scheduler_op = scheduler_op
    self._op_scheduler = (scheduling.OpScheduler(self.devices, credit)
                          if use_op else None)
    self._worker_index = (_worker_of(devices[0]) if worker_index is None
                          else int(worker_index))
    # Bound plans by the values' signature; binding and default planning are
    # pure functions of it, so each is done once per signature.
    self._bound: Dict[Any, binding.BoundPlan] = {}
    self._agreed = set()
    # Guards the two caches; replicas bind concurrently in eager mode.
    self._plan_lock = threading.RLock()
    self._logged = set()

  # --- properties ----------------------------------------------------------

  @property
  def plan(self) -> Optional[Plan]:
    """The user's plan, or None."""
    return self._plan

  @property
  def scheduler(self) -> str:
    return self._scheduler

  @property
  def uses_scheduler_op(self) -> bool:
    """Whether the planned collectives go through the scheduler op."""
    return self._op_scheduler is not None

  @property
  def group_size(self) -> int:
    return tf_internals.cross_device_ops_state(self).group_size

  @property
  def devices(self):
    return tf_internals.cross_device_ops_state(self).devices

  def bound_plans(self) -> List[Plan]:
    """The plans all-reduces have been bound to so far, first bound first."""
    with self._plan_lock:
      by_fingerprint = {}
      for bound in self._bound.values():
        if bound.plan is not None:
          by_fingerprint.setdefault(bound.plan.fingerprint(), bound.plan)
      return list(by_fingerprint.values())

  def set_plan(self, plan: Optional[Plan]) -> None:
    """Replaces the user's plan; functions traced from now on use it.

    Functions traced before keep the collectives they were built with:
    rebuild them (e.g. `model.make_train_function(force=True)`) to retrace.
    The new plan goes through the workers' agreement check before its first
    collective, like the first one did (that check is per fingerprint). Call
    it on every worker with the same plan, between steps.

    Args:
      plan: the new `Plan`, or None for `scheduler`'s plans from sizes.

    Raises:
      TypeError: if `plan` is not a `Plan`.
    """
    binding.check_user_plan(plan)
    with self._plan_lock:
      self._plan = plan
      # Bound plans were derived from the old plan; default plans too are
      # cheap to re-derive, so the whole cache goes.
      self._bound.clear()

  # --- binding -------------------------------------------------------------

  @tf.autograph.experimental.do_not_convert
  def bind(self, values, options=None) -> binding.BoundPlan:
    """Returns the plan these values would be all-reduced with.

    Args:
      values: a nested structure of tensors / `IndexedSlices` of one replica.
      options: optional `CommunicationOptions` (their `bytes_per_pack` is
        read by the "tf_default" scheduler, as by stock).

    Returns:
      The `BoundPlan`.

    Raises:
      ValueError: if the user's plan covers this many values but does not
        fit them (naming the first value that differs).
    """
    specs = self._specs(tf.nest.flatten(values))
    opts = tf_internals.cross_device_ops_state(self).options.merge(options)
    return self._bind(specs, opts)

  def _specs(self, flat) -> List[binding.ValueSpec]:
    """The signature the plan is bound to: with `sparse_as_dense`, an
    `IndexedSlices` is bound as the dense tensor it is reduced as."""
    specs = [binding.spec_of(v, i) for i, v in enumerate(flat)]
    if self._sparse_as_dense:
      specs = [dataclasses.replace(s, sparse=False) for s in specs]
    return specs

  def _bind(self, specs, options) -> binding.BoundPlan:
    eager = tf.executing_eagerly()
    key = (tuple(s.key() for s in specs), eager, options.bytes_per_pack)
    with self._plan_lock:
      bound = self._bound.get(key)
      if bound is not None:
        return bound
      if self._plan is not None and len(self._plan.tensors) == len(specs):
        bound = binding.bind_plan(self._plan, specs)
      else:
        if self._plan is not None:
          self._log_once(
              ("other", len(specs)),
              "tf_preempt: the plan has %d tensors; an all-reduce of %d "
              "values uses a %r plan instead.", len(self._plan.tensors),
              len(specs), self._scheduler)
        positions = binding.plannable(specs)
        plan = default_plan.make_default_plan(
            specs, positions, self._scheduler, self.group_size,
            bytes_per_pack=options.bytes_per_pack, eager=eager,
            scheduler_options=self._planner_options)
        bound = binding.bind_default(plan, positions, specs)
      self._bound[key] = bound
      return bound

  def _log_once(self, key, msg, *args):
    if key not in self._logged:
      self._logged.add(key)
      logging.info(msg, *args)

  # --- the scheduler op ----------------------------------------------------

  def telemetry(self, num_iterations: int = 0,
                fingerprint: Optional[str] = None):
    """Per-device scheduler records of one plan's last iterations.

    One record per planned collective and step (iteration), with the
    collective's id (its position in the plan's issue order, counted over
    the collectives cut at fixed offsets) and when its input was ready, when
    the gate released it and when it was done. The result is what
    `tf_preempt.telemetry.chrome_trace.write_chrome_trace` takes.

    Args:
      num_iterations: iterations to return; 0 for all that are kept.
      fingerprint: a prefix of the plan's fingerprint; by default the
        configured plan with the most collectives (the gradient plan).

    Returns:
      {device: [`tf_preempt.ops.CollectiveRecord`, ...]}, ordered by
      iteration and collective id; {} without the scheduler op or before
      the first all-reduce.
    """
    if self._op_scheduler is None:
      return {}
    return self._op_scheduler.telemetry(num_iterations, fingerprint)

  def reset_scheduler(self) -> None:
    """Restarts every plan's scheduler at iteration 0 on the local devices.

    Call it after a step failed or was cancelled (on every worker, before
    the next step): the gates of that step may have been released on some
    devices and not on others. A no-op without the scheduler op.
    """
    if self._op_scheduler is not None:
      self._op_scheduler.reset()

  # --- agreement -----------------------------------------------------------

  def _ensure_agreement(self, bound: binding.BoundPlan, options) -> None:
    """Checks once per plan that all workers hold the same one."""
    fingerprint = bound.plan.fingerprint()
    with self._plan_lock:
      if fingerprint in self._agreed:
        return
      sig = agreement.signature(bound.plan, self._worker_index)
      # Eagerly, even while tracing: the check must finish before any of the
      # plan's collectives is even built, and must not cost every step.
      with tf.init_scope():
        gathered = self._all_gather_signature(sig, options)
      agreement.check_signatures(
          gathered.reshape(-1, agreement.SIGNATURE_LENGTH),
          plan_summary=str(bound.plan.summary()))
      self._agreed.add(fingerprint)

  def _all_gather_signature(self, sig, options):
    state = tf_internals.cross_device_ops_state(self)
    devices, launchers = state.devices, state.launchers

    # One function over all local replicas: eager collectives block until
    # every replica has joined, so they must be launched together.
    @tf.function(autograph=False)
    def gather():
      outputs = []
      for launcher, device in zip(launchers, devices):
        with tf.device(device):
          outputs.append(tf_internals.launcher_all_gather(
              launcher, tf.constant(sig), options))
      return outputs

    return gather()[0].numpy()

  # --- the all-reduce ------------------------------------------------------

  # Plain Python that builds ops: AutoGraph, which would otherwise convert it
  # (and the planner it calls) on every trace from user code, must not.
  @tf.autograph.experimental.do_not_convert
  def _all_reduce(self, reduce_op, value, replica_id, options):
    """Implements `CrossDeviceOps._all_reduce` by executing the plan."""
    if isinstance(reduce_op, str):
      reduce_op = ReduceOp(reduce_op.upper())
    state = tf_internals.cross_device_ops_state(self)
    devices, group_size, launchers = (state.devices, state.group_size,
                                      state.launchers)
    base_options = state.options
    options = base_options.merge(options)
    launcher = launchers[replica_id]
    device = devices[replica_id]
    flat = [v if isinstance(v, tf.IndexedSlices) else tf.convert_to_tensor(v)
            for v in tf.nest.flatten(value)]
    specs = self._specs(flat)
    if self._sparse_as_dense:
      with tf.device(device):
        flat = [tf.convert_to_tensor(v) for v in flat]
    bound = self._bind(specs, options)
    if bound.plan is not None and self._num_between_graph_workers > 1:
      self._ensure_agreement(bound, options)
    if not tf.executing_eagerly() and replica_id == 0:
      logging.info(
          "tf_preempt all_reduce: %d values in %d collectives (%s plan, "
          "fingerprint %s), %d IndexedSlices, group_size = %d, "
          "implementation = %s", len(flat), len(bound.steps),
          bound.plan.scheduler if bound.plan else "no",
          bound.plan.fingerprint()[:12] if bound.plan else "-",
          len(bound.sparse), group_size, options.implementation)

    results = [None] * len(flat)
    with tf.device(device):
      gated = (None if self._op_scheduler is None else
               self._op_scheduler.prepare(bound, specs,
                                          options.implementation))
      self._run_steps(launcher, flat, specs, bound, options, results, gated)
      for pos in bound.passthrough:
        results[pos] = tf.identity(flat[pos])
      if reduce_op == ReduceOp.MEAN:
        for pos in range(len(flat)):
          if pos not in bound.sparse:
            results[pos] = results[pos] / group_size
    # IndexedSlices: all-gathered after the dense values, as stock does.
    for pos in bound.sparse:
      reduced = launcher.all_reduce_indexed_slices(flat[pos], options)
      if reduce_op == ReduceOp.MEAN:
        with tf.device(device):
          reduced = tf.IndexedSlices(values=reduced.values / group_size,
                                     indices=reduced.indices,
                                     dense_shape=reduced.dense_shape)
      results[pos] = reduced
    return tf.nest.pack_sequence_as(value, results)

  def _run_steps(self, launcher, flat, specs, bound, options, results,
                 gated=None):
    """Issues the bound plan's collectives in order and stitches results.

    With a `scheduling.GatedPlan`, each gated step goes through the
    scheduler op's gate before its collective and its completion op after.
    """
    flats = {}

    def flat_of(pos):
      if pos not in flats:
        flats[pos] = tf.reshape(flat[pos], [-1])
      return flats[pos]

    reduced_pieces = {}
    for index, step in enumerate(bound.steps):
      parts = []
      for pos, offset, count in step:
        whole = (count is binding.WHOLE or
                 (offset == 0 and count == specs[pos].num_elements))
        parts.append(flat_of(pos) if whole else
                     flat_of(pos)[offset:offset + count])
      fused = parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)
      cid = None if gated is None else gated.step_ids[index]
      if cid is not None:
        fused = scheduling.gate(fused, gated, cid)
      reduced = launcher.all_reduce(fused, None, options)
      if cid is not None:
        reduced = scheduling.complete(reduced, gated, cid)
      if len(parts) == 1:
        outputs = [reduced]
      else:
        outputs = tf.split(reduced, [count for _, _, count in step], axis=0)
      for (pos, offset, _), out in zip(step, outputs):
        reduced_pieces.setdefault(pos, []).append((offset, out))

    for pos, pieces in reduced_pieces.items():
      pieces.sort(key=lambda p: p[0])
      joined = (pieces[0][1] if len(pieces) == 1 else
                tf.concat([p[1] for p in pieces], axis=0))
      shape = (specs[pos].shape.as_list() if specs[pos].known
               else tf.shape(flat[pos]))
      results[pos] = tf.reshape(joined, shape)

  def __deepcopy__(self, memo):
    # distribute_coordinator deep-copies strategies, as for the base class.
    state = tf_internals.cross_device_ops_state(self)
    return PreemptiveAllReduce(
        state.devices, state.group_size, state.options,
        copy.deepcopy(state.collective_keys, memo),
        plan=self._plan, scheduler=self._scheduler,
        scheduler_options=self._scheduler_options,
        canonicalize_devices=state.canonicalize_devices,
        worker_index=self._worker_index, scheduler_op=self._scheduler_op)
