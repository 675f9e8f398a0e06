"""Wiring the C++ scheduler ops (`tf_preempt.ops`) around a plan's collectives.

`PreemptiveAllReduce` issues a bound plan's collectives in plan order; the
ordering token alone already makes every device launch them in that order.
With the scheduler op, each planned collective additionally passes through

  packed = gate(packed, k)       # released in plan order, within the credit
  reduced = all_reduce(packed)
  reduced = complete(reduced, k)  # returns the credit, records the end time

which bounds how much is in flight (the credit) and records, per collective
and step, when its input was ready, when it was released and when it was
done: the measurements the planner re-plans from (`OpScheduler.telemetry`).

Rules kept here (from the op's contract, `tf_preempt.ops.scheduler`):

- One scheduler resource per plan, per device, per `PreemptiveAllReduce`. A
  step all-reduces the gradients with one plan and, say, a metric with a
  small default plan: their collectives interleave in program order, so a
  shared resource would wait for ids of the other plan forever. The
  resource's `shared_name` is derived from the plan's fingerprint, its gated
  collectives and the credit, plus a number unique to the cross-device ops
  object, because two strategies over the same devices run independent
  collectives (their own keys) and must not reset each other's scheduler.
  Resources are local to a process, so the names need not agree across
  workers; the plans (checked by `agreement`) do.
- Configured eagerly (`tf.init_scope`) on every local device the first time a
  plan is bound, before any of its gates is built, so that a step never pays
  for it. A new plan gets a new, freshly configured resource; the old one is
  left alone (a function traced with it may still run).
- Only the collectives that every step issues are gated: the plan's, cut at
  fixed offsets. The fallback collectives of unknown-shape values and the
  all-gathers of `IndexedSlices` are not: they are not in the plan's release
  order, and gating them would make the order depend on the values.
- A step that fails or is cancelled leaves a gate's iteration half done;
  `reset` re-configures every resource so that the next step starts at
  iteration 0 on every device (call it on all workers).

Credit: `credit_collectives` collectives and `credit_bytes` bytes may be in
flight per device (0 bytes: no byte limit). By default 1 collective for NCCL
(NCCL launches must not interleave; AUTO on a GPU counts as NCCL) and 2 for
RING / AUTO on CPUs (one reducing while the next is released, so the gate
costs no round trip between collectives).
"""

import dataclasses
import hashlib
import itertools
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from tf_preempt.ops import records as records_lib
from tf_preempt.ops import scheduler as scheduler_ops
from tf_preempt.runtime import binding

# Keys of `scheduler_options` read by the runtime, never by the planner.
CREDIT_COLLECTIVES = "credit_collectives"
CREDIT_BYTES = "credit_bytes"
TELEMETRY_ITERATIONS = "telemetry_iterations"
# Densify `IndexedSlices` (embedding gradients) so that the plan schedules
# them like any dense gradient, instead of all-gathering them after the
# plan as stock TensorFlow does (Horovod's `sparse_as_dense`).
SPARSE_AS_DENSE = "sparse_as_dense"
RUNTIME_OPTIONS = (CREDIT_COLLECTIVES, CREDIT_BYTES, TELEMETRY_ITERATIONS,
                   SPARSE_AS_DENSE)

DEFAULT_CREDIT_NCCL = 1
DEFAULT_CREDIT_OTHER = 2

_instances = itertools.count(1)
_fallback_logged = []  # One log line per process, not per strategy.
_fallback_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Credit:
  """What the runtime asks of the scheduler op, from `scheduler_options`.

  Attributes:
    collectives: collectives in flight per device; None for the default of
      the implementation (see the module docstring).
    nbytes: bytes in flight per device; 0 for no byte limit.
    telemetry_iterations: iterations the telemetry ring keeps.
  """
  collectives: Optional[int] = None
  nbytes: int = 0
  telemetry_iterations: int = scheduler_ops.DEFAULT_TELEMETRY_ITERATIONS

  def max_collectives(self, implementation, devices: Sequence[str]) -> int:
    """The collective credit for this implementation on these devices."""
    if self.collectives is not None:
      return self.collectives
    impls = tf.distribute.experimental.CommunicationImplementation
    nccl = implementation == impls.NCCL
    auto = implementation in (impls.AUTO, None)
    on_gpu = any(tf.DeviceSpec.from_string(d).device_type == "GPU"
                 for d in devices)
    return DEFAULT_CREDIT_NCCL if nccl or (auto and on_gpu) else (
        DEFAULT_CREDIT_OTHER)


def split_options(scheduler_options: Optional[Dict[str, Any]]
                  ) -> Tuple[Dict[str, Any], Credit]:
  """Splits `scheduler_options` into the planner's options and the credit.

  Args:
    scheduler_options: the user's options, or None.

  Returns:
    (the options without `RUNTIME_OPTIONS`, the `Credit`).

  Raises:
    ValueError: on a credit below 1 collective or 0 bytes.
  """
  planner = dict(scheduler_options or {})
  runtime = {k: planner.pop(k) for k in RUNTIME_OPTIONS if k in planner}
  collectives = runtime.get(CREDIT_COLLECTIVES)
  credit = Credit(
      collectives=None if collectives is None else int(collectives),
      nbytes=int(runtime.get(CREDIT_BYTES) or 0),
      telemetry_iterations=int(runtime.get(
          TELEMETRY_ITERATIONS, scheduler_ops.DEFAULT_TELEMETRY_ITERATIONS)))
  if credit.collectives is not None and credit.collectives < 1:
    raise ValueError(f"{CREDIT_COLLECTIVES} must be >= 1, got "
                     f"{credit.collectives}.")
  if credit.nbytes < 0:
    raise ValueError(f"{CREDIT_BYTES} must be >= 0, got {credit.nbytes}.")
  if credit.telemetry_iterations < 1:
    raise ValueError(f"{TELEMETRY_ITERATIONS} must be >= 1, got "
                     f"{credit.telemetry_iterations}.")
  return planner, credit


def sparse_as_dense(scheduler_options: Optional[Dict[str, Any]]) -> bool:
  """Whether `scheduler_options` ask to densify `IndexedSlices`.

  Raises:
    ValueError: if the option is there and not a bool.
  """
  value = (scheduler_options or {}).get(SPARSE_AS_DENSE, False)
  if not isinstance(value, bool):
    raise ValueError(f"{SPARSE_AS_DENSE} must be True or False, got "
                     f"{value!r}.")
  return value


def resolve_mode(scheduler_op: Optional[bool]) -> bool:
  """Whether to use the scheduler op.

  Args:
    scheduler_op: True (required), False (never) or None (if it loads).

  Returns:
    Whether to gate the collectives.

  Raises:
    SchedulerOpsUnavailableError: if `scheduler_op` is True and the library
      does not load (the loader's message says how to rebuild it).
  """
  if scheduler_op is not None and not isinstance(scheduler_op, bool):
    raise TypeError(f"scheduler_op must be None, True or False, got "
                    f"{scheduler_op!r}.")
  if scheduler_op is False:
    return False
  try:
    scheduler_ops._LIBRARY.ops  # pylint: disable=protected-access,pointless-statement
  except scheduler_ops.SchedulerOpsUnavailableError as e:
    if scheduler_op:
      raise
    with _fallback_lock:
      if not _fallback_logged:
        _fallback_logged.append(True)
        logging.warning(
            "tf_preempt: the scheduler op is unavailable, so collectives are "
            "ordered by the ordering token alone (no credit, no telemetry). "
            "%s", e)
    return False
  return True


@dataclasses.dataclass(frozen=True)
class GatedPlan:
  """A bound plan as the scheduler op sees it on every local device.

  Attributes:
    name: the scheduler resource's `shared_name`.
    fingerprint: the plan's fingerprint.
    step_ids: for each step of the `BoundPlan`, its collective id (its
      position among the gated steps), or None if it is not gated.
    nbytes: bytes of each gated collective, by id.
    max_collectives: the collective credit.
    max_bytes: the byte credit (0: none).
  """
  name: str
  fingerprint: str
  step_ids: Tuple[Optional[int], ...]
  nbytes: Tuple[int, ...]
  max_collectives: int
  max_bytes: int

  @property
  def num_collectives(self) -> int:
    return len(self.nbytes)


def _gated_steps(bound: binding.BoundPlan,
                 specs: Sequence[binding.ValueSpec]
                 ) -> Tuple[Tuple[Optional[int], ...], Tuple[int, ...]]:
  """Ids of the steps cut at fixed offsets (issued every step) and bytes."""
  step_ids, nbytes = [], []
  for step in bound.steps:
    if any(count is binding.WHOLE for _, _, count in step):
      step_ids.append(None)
      continue
    step_ids.append(len(nbytes))
    nbytes.append(sum(count * specs[pos].dtype.size
                      for pos, _, count in step))
  return tuple(step_ids), tuple(nbytes)


class OpScheduler:
  """The scheduler resources of one `PreemptiveAllReduce`.

  Thread-safe: replicas bind concurrently in eager mode.
  """

  def __init__(self, devices: Sequence[str], credit: Credit):
    self._devices = tuple(devices)
    self._credit = credit
    self._instance = next(_instances)
    # (fingerprint, ids, bytes, credit) -> GatedPlan, in configuration order.
    self._plans: Dict[Any, GatedPlan] = {}
    self._lock = threading.Lock()

  @property
  def credit(self) -> Credit:
    return self._credit

  @property
  def plans(self) -> List[GatedPlan]:
    """The configured plans, oldest first."""
    with self._lock:
      return list(self._plans.values())

  def prepare(self, bound: binding.BoundPlan,
              specs: Sequence[binding.ValueSpec],
              implementation) -> Optional[GatedPlan]:
    """Returns the gated form of `bound`, configuring it on first use.

    Args:
      bound: the bound plan about to be issued.
      specs: the values' signatures.
      implementation: the collectives' `CommunicationImplementation`.

    Returns:
      The `GatedPlan`, or None if no step of it is gated.
    """
    if bound.plan is None:
      return None
    step_ids, nbytes = _gated_steps(bound, specs)
    if not nbytes:
      return None
    max_collectives = self._credit.max_collectives(implementation,
                                                   self._devices)
    fingerprint = bound.plan.fingerprint()
    key = (fingerprint, step_ids, nbytes, max_collectives)
    with self._lock:
      gated = self._plans.get(key)
      if gated is None:
        digest = hashlib.sha1(repr(key).encode()).hexdigest()[:16]
        gated = GatedPlan(
            name=f"tf_preempt_scheduler_{self._instance}_{digest}",
            fingerprint=fingerprint, step_ids=step_ids, nbytes=nbytes,
            max_collectives=max_collectives, max_bytes=self._credit.nbytes)
        self._configure(gated)
        self._plans[key] = gated
        logging.info(
            "tf_preempt: scheduler op %s configured on %d devices: %d "
            "collectives of plan %s, credit %d collectives / %s bytes.",
            gated.name, len(self._devices), gated.num_collectives,
            fingerprint[:12], max_collectives, gated.max_bytes or "any")
    return gated

  def _configure(self, gated: GatedPlan) -> None:
    # Eagerly even while tracing: the scheduler must hold the plan before
    # the first gate of a step runs, and once, not at every step.
    with tf.init_scope():
      for device in self._devices:
        with tf.device(device):
          scheduler_ops.configure(
              list(range(gated.num_collectives)), list(gated.nbytes),
              max_bytes_in_flight=gated.max_bytes,
              max_collectives_in_flight=gated.max_collectives,
              telemetry_iterations=self._credit.telemetry_iterations,
              scheduler=gated.name)

  def reset(self) -> None:
    """Re-configures every plan: after a failed or cancelled step."""
    with self._lock:
      for gated in self._plans.values():
        self._configure(gated)

  def telemetry(self, num_iterations: int = 0,
                fingerprint: Optional[str] = None
                ) -> Dict[str, List[records_lib.CollectiveRecord]]:
    """Per-device records of one plan's last `num_iterations` iterations.

    Args:
      num_iterations: iterations to return; 0 for all the ring keeps.
      fingerprint: the plan (a prefix of its fingerprint is enough); by
        default the configured plan with the most collectives (the gradient
        plan rather than a metric's), the latest one on ties.

    Returns:
      device -> records, ordered by iteration and collective id; empty if
      no plan has been configured.

    Raises:
      KeyError: if no configured plan has that fingerprint.
    """
    plans = self.plans
    if fingerprint is not None:
      plans = [p for p in plans if p.fingerprint.startswith(fingerprint)]
      if not plans:
        raise KeyError(f"No plan with fingerprint {fingerprint!r} has been "
                       f"configured.")
    if not plans:
      return {}
    gated = max(reversed(plans), key=lambda p: p.num_collectives)
    out = {}
    with tf.init_scope():
      for device in self._devices:
        with tf.device(device):
          matrix = scheduler_ops.telemetry(num_iterations,
                                           scheduler=gated.name)
        out[device] = records_lib.telemetry_records(matrix.numpy())
    return out


def gate(tensor: tf.Tensor, gated: GatedPlan, collective_id: int):
  return scheduler_ops.gate(tensor, collective_id, scheduler=gated.name)


def complete(tensor: tf.Tensor, gated: GatedPlan, collective_id: int):
  return scheduler_ops.complete(tensor, collective_id, scheduler=gated.name)
