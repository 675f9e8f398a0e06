"""Python wrappers of the preemptive scheduler ops, loaded lazily.

The C++ library `_scheduler_ops.so` (built by setup.py from this folder's
.cc files) is loaded on the first call that needs it, never at import: a
missing library, or one built for another TensorFlow, only fails that call,
with a `SchedulerOpsUnavailableError` that says how to rebuild.

Each device has its own scheduler, named by `scheduler` (the ops'
`shared_name`) and living in that device's resource manager; run the ops
under the same `tf.device` as the collectives they schedule.

Wiring around each collective (what the all-reduce runtime does):

  configure(ids, nbytes, max_collectives_in_flight=1)  # once per device,
                                                        # before the step
  x = gate(x, cid)         # waits until `cid` is next in plan order and
                           # the credit allows; forwards x unchanged
  y = all_reduce(x)        # the collective, on the gate's output
  y = complete(y, cid)     # returns the credit, records the end time

Issue the collectives in plan order too (NCCL and the collective ordering
token chain them in program order). The gate and completion ops are marked
as independent side effects for tf.function's automatic control
dependencies; otherwise every gate would wait for the previous completion
in program order and a gate could not record when its input became ready.
"""

import os
import threading
from typing import Optional, Sequence

import tensorflow as tf

from tf_preempt.ops import records as records_lib

DEFAULT_SCHEDULER = "tf_preempt_scheduler"
DEFAULT_TELEMETRY_ITERATIONS = 16
LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "_scheduler_ops.so")

_REBUILD_HINT = (
    "Rebuild it against the TensorFlow you run, from the repository root: "
    "`pip install --no-build-isolation -e .` (or `make venv`).")


class SchedulerOpsUnavailableError(ImportError, RuntimeError):
  """The scheduler op library is missing or cannot be loaded."""


class OpLibrary:
  """A custom-op library loaded on first use (like tensorflow-addons' LazySO).

  Loading is retried on each use until it succeeds, so a library rebuilt in
  the same process is picked up.
  """

  def __init__(self, path: str = LIBRARY_PATH):
    self._path = path
    self._module = None
    self._lock = threading.Lock()

  @property
  def path(self) -> str:
    return self._path

  @property
  def ops(self):
    """The loaded module of op functions.

    Raises:
      SchedulerOpsUnavailableError: if the library is missing or fails to
        load; the message includes the loader's error.
    """
    if self._module is None:
      with self._lock:
        if self._module is None:
          self._module = self._load()
    return self._module

  def is_available(self) -> bool:
    """Whether the library loads (loads it if it was not yet loaded)."""
    try:
      self.ops  # pylint: disable=pointless-statement
    except SchedulerOpsUnavailableError:
      return False
    return True

  def _load(self):
    if not os.path.exists(self._path):
      raise SchedulerOpsUnavailableError(
          f"The tf_preempt scheduler op library {self._path} does not exist. "
          f"{_REBUILD_HINT}", path=self._path)
    try:
      return tf.load_op_library(self._path)
    except Exception as e:  # pylint: disable=broad-except
      raise SchedulerOpsUnavailableError(
          f"The tf_preempt scheduler op library {self._path} failed to load "
          f"with TensorFlow {tf.__version__}: {type(e).__name__}: {e}. It "
          f"is probably stale or built for another TensorFlow. "
          f"{_REBUILD_HINT}", path=self._path) from e


_LIBRARY = OpLibrary()


def is_available() -> bool:
  """Whether the scheduler op library is built and loads."""
  return _LIBRARY.is_available()


def _run_independently(tensor: tf.Tensor) -> tf.Tensor:
  """Exempts the op of `tensor` from tf.function's stateful-op chaining.

  Automatic control dependencies chain stateful ops without resource inputs
  in program order. The op still runs (it is a control output of the
  function), but in parallel with other side effects.
  """
  if not tf.executing_eagerly():
    acd = getattr(tensor.graph, "experimental_acd_manager", None)
    if acd is not None:
      acd.run_independently(tensor.op)
  return tensor


def configure(collective_ids: Sequence[int], collective_bytes: Sequence[int],
              max_bytes_in_flight: int = 0, max_collectives_in_flight: int = 1,
              telemetry_iterations: int = DEFAULT_TELEMETRY_ITERATIONS,
              scheduler: str = DEFAULT_SCHEDULER,
              library: Optional[OpLibrary] = None) -> tf.Tensor:
  """Creates or resets the current device's scheduler. Returns its generation.

  Args:
    collective_ids: unique collective ids in release order (the plan).
    collective_bytes: bytes of each collective, for the byte credit.
    max_bytes_in_flight: byte credit; 0 for none. A larger collective runs
      alone.
    max_collectives_in_flight: collective credit, >= 1; 1 for NCCL.
    telemetry_iterations: iterations kept by the telemetry ring.
    scheduler: name of the scheduler on the device.
    library: the op library (tests); the package's one by default.

  Returns:
    An int64 scalar, the plan generation (1 for the first plan).
  """
  lib = (library or _LIBRARY).ops
  return lib.preempt_scheduler_configure(
      tf.constant(collective_ids, tf.int64, shape=[len(collective_ids)]),
      tf.constant(collective_bytes, tf.int64, shape=[len(collective_bytes)]),
      max_bytes_in_flight, max_collectives_in_flight, telemetry_iterations,
      shared_name=scheduler)


def gate(tensor, collective_id, scheduler: str = DEFAULT_SCHEDULER,
         library: Optional[OpLibrary] = None):
  """Returns `tensor` once collective `collective_id` may start."""
  lib = (library or _LIBRARY).ops
  return _run_independently(
      lib.preempt_scheduler_gate(tensor, collective_id, shared_name=scheduler))


def complete(tensor, collective_id, scheduler: str = DEFAULT_SCHEDULER,
             library: Optional[OpLibrary] = None):
  """Returns `tensor` (the collective's output) and frees the credit."""
  lib = (library or _LIBRARY).ops
  return _run_independently(
      lib.preempt_scheduler_complete(tensor, collective_id,
                                     shared_name=scheduler))


def telemetry(num_iterations: int = 0, scheduler: str = DEFAULT_SCHEDULER,
              library: Optional[OpLibrary] = None) -> tf.Tensor:
  """The [rows, 6] int64 telemetry matrix of the last `num_iterations`.

  Columns are `records.COLUMNS`; `telemetry_records` converts it.
  """
  lib = (library or _LIBRARY).ops
  return lib.preempt_scheduler_telemetry(num_iterations,
                                         shared_name=scheduler)


def close(scheduler: str = DEFAULT_SCHEDULER,
          library: Optional[OpLibrary] = None):
  """Fails the waiting gates with Cancelled and deletes the scheduler."""
  lib = (library or _LIBRARY).ops
  return lib.preempt_scheduler_close(shared_name=scheduler)


telemetry_records = records_lib.telemetry_records
