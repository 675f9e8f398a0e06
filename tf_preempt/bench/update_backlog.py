"""The optimizer updates still to run when a block's last collective ends.

A tensor's update (the fused buffer's unpacking, the optimizer's ops per
variable) runs on the worker's one core once the collective that
completes it ends. The updates of a block's last collective follow it in
the block's tail, and so do those of an earlier collective that ended
too shortly before for its own updates to be done: tf_packed's 12-tensor
middle pack ends about 1.5 ms before its 6-tensor last pack at 2 Gbit/s,
and its block tails are 1.5 ms longer than the last pack's tensors
alone explain (benchmarks/simulation/README.md). `backlog_s` is that
work: each collective's updates queued at its end, served one at a time
(first come, first served) by the core.

Pure Python.
"""

from typing import List, Optional, Sequence, Set, Tuple


def completed_tensors(issued: Sequence[Set[int]]) -> List[int]:
  """Per collective, how many tensors it completes (carries their last
  piece), from the tensors of each issued collective in order
  (`row_plans.issued_tensors`): only then can their updates run."""
  last = {}
  for position, tensors in enumerate(issued):
    for t in tensors:
      last[t] = position
  counts = [0] * len(issued)
  for position in last.values():
    counts[position] += 1
  return counts


def backlog_s(ends: Sequence[Tuple[float, int]], per_tensor_s: float,
              at: Optional[float] = None) -> float:
  """Seconds of update work left at time `at`.

  Args:
    ends: per collective of one step, (its end in seconds, the tensors it
      completes).
    per_tensor_s: the core's seconds of update work per tensor, >= 0.
    at: when; None for the last end.

  Returns:
    The work queued by then and not yet served, >= 0 (the core serves it
    from each collective's end at full speed: nothing else runs then in
    the tail, and earlier updates were done long before).

  Raises:
    ValueError: if `per_tensor_s` < 0.
  """
  if per_tensor_s < 0:
    raise ValueError(f"per_tensor_s={per_tensor_s!r} must be >= 0.")
  if not ends:
    return 0.0
  order = sorted(ends)
  at = order[-1][0] if at is None else at
  # Lindley's recursion over the arrivals: the queue after each end.
  left, last = 0.0, None
  for end, tensors in order:
    if end > at:
      break
    if last is not None:
      left = max(0.0, left - (end - last))
    left += per_tensor_s * tensors
    last = end
  return 0.0 if last is None else max(0.0, left - (at - last))


def traced_ends(last_step_ends: Sequence[Tuple[float, Optional[int]]],
                completes: Sequence[int]) -> List[Tuple[float, int]]:
  """A traced block's last step as `backlog_s` takes it.

  Args:
    last_step_ends: (end, collective id) per collective, as
      `trace_calibration.trace_blocks` gives them.
    completes: `completed_tensors` of the plan the row ran (the ids index
      its issued collectives).

  Returns:
    (end, tensors completed) per collective; if an id is missing or not
    the plan's, only the last end, with the plan's last collective's
    tensors (what the trace cannot place, it does not guess).
  """
  if not last_step_ends:
    return []
  if all(i is not None and 0 <= i < len(completes)
         for _, i in last_step_ends):
    return [(end, completes[i]) for end, i in last_step_ends]
  last = max(end for end, _ in last_step_ends)
  return [(last, completes[-1] if completes else 0)]
