"""Per-collective records of the scheduler's telemetry matrix.

The telemetry op returns an int64 matrix with one row per released collective
and the columns of `COLUMNS`; `telemetry_records` turns it into
`CollectiveRecord`s. Pure numpy: nothing here loads the op library, so traces
can be post-processed anywhere.
"""

import dataclasses
from typing import Any, Dict, List, Optional

import numpy as np

# Column order of the telemetry matrix (see PreemptSchedulerTelemetry).
COLUMNS = ("iteration", "collective_id", "nbytes", "ready_ns", "released_ns",
           "done_ns")


@dataclasses.dataclass(frozen=True)
class CollectiveRecord:
  """When one collective of one iteration was ready, released and done.

  Times are nanoseconds of the steady clock (CLOCK_MONOTONIC on Linux, the
  clock of `time.monotonic_ns()`), comparable within one machine.

  Attributes:
    iteration: iteration of the plan, counted from the last configure.
    collective_id: the collective's id in the plan.
    nbytes: bytes the plan says it moves.
    ready_ns: when its input reached the gate.
    released_ns: when the gate let it start.
    done_ns: when the completion op ran; None while in flight.
  """
  iteration: int
  collective_id: int
  nbytes: int
  ready_ns: int
  released_ns: int
  done_ns: Optional[int]

  @property
  def wait_ns(self) -> int:
    """Time spent waiting at the gate (plan order and credit)."""
    return self.released_ns - self.ready_ns

  @property
  def duration_ns(self) -> Optional[int]:
    """Time from release to completion, None while in flight."""
    if self.done_ns is None:
      return None
    return self.done_ns - self.released_ns

  def as_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def telemetry_records(matrix) -> List[CollectiveRecord]:
  """Converts a telemetry matrix into records, in the matrix's row order.

  Args:
    matrix: the output of `tf_preempt.ops.telemetry` (a tensor or an array
      of shape [rows, 6]).

  Returns:
    One `CollectiveRecord` per row.

  Raises:
    ValueError: if the matrix does not have 6 columns.
  """
  array = np.asarray(matrix, dtype=np.int64)
  if array.size == 0:
    return []
  if array.ndim != 2 or array.shape[1] != len(COLUMNS):
    raise ValueError(f"telemetry matrix must have shape [rows, "
                     f"{len(COLUMNS)}], got {array.shape}")
  records = []
  for row in array.tolist():
    iteration, collective_id, nbytes, ready, released, done = row
    records.append(
        CollectiveRecord(iteration=iteration, collective_id=collective_id,
                         nbytes=nbytes, ready_ns=ready, released_ns=released,
                         done_ns=None if done < 0 else done))
  return records
