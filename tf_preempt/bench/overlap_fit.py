"""The core share a collective's bytes get while the compute runs, from traces.

Where a row releases a collective during the backward pass, its trace says
how the worker's one core was shared while both ran: when the backward pass
ended (the compute's progress) and when that first collective ended (the
bytes'). The execution model gives both times for the row's plan and a
bytes share s (`ExecutionModel.bytes_cpu_share`); `fit_bytes_share` picks
the s of `BYTES_SHARES` whose model times are closest to the traces'
(least absolute deviations over the rows). At 2 Gbit/s the bytes need
0.4-0.75 of the core to move at the link's rate; in the traces of heap
mode "keep" the backward pass loses far less than that and the collective
ends later than the rate allows: the compute keeps most of the core (fits
of 0.05-0.25; 0.4-1 with TensorFlow's heap, in
benchmarks/simulation/README.md).

Pure Python; the planner's execution model on first use.
"""

import dataclasses
from typing import Any, Optional, Sequence, Tuple

# Candidate shares, 0.05 to 1 (1: the bytes take all the core they need).
BYTES_SHARES = tuple(i / 20 for i in range(1, 21))


@dataclasses.dataclass(frozen=True)
class OverlapSample:
  """What one traced row says about a collective overlapping the compute.

  Attributes:
    plan: the plan the row ran.
    model: the `ExecutionModel` of the row (its K, credit, start-up); its
      bytes share is what the fit varies.
    backward_end_s: the median time from a block's start to the last
      gradient of its first step (the backward pass's end).
    first_end_s: the median time from a block's start to the end of the
      first collective of its first step.
  """
  plan: Any
  model: Any
  backward_end_s: float
  first_end_s: float


def model_overlap(dag, cost, plan, model) -> Tuple[float, float]:
  """(backward pass's end, first collective's end) of the first step.

  Times from the block's start, its start-up included, as the traces
  measure them.
  """
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  run = execution.execute(dag, cost, plan, model)
  return backward_end(dag, run), run.collective_end[0][0]


def backward_end(dag, run) -> float:
  """When the first step's backward pass ends in `run` (an `Execution` of
  `dag`), from the block's start."""
  backward = {o.name for o in dag.ops if o.phase == "backward"}
  return max(t for name, t in run.op_end[0].items() if name in backward)


def fit_bytes_share(dag, cost, samples: Sequence[OverlapSample],
                    shares: Sequence[float] = BYTES_SHARES
                    ) -> Optional[float]:
  """The bytes share closest to the samples' two times: `fit_share` of
  `ExecutionModel.bytes_cpu_share`."""
  return fit_share(dag, cost, samples, "bytes_cpu_share", shares)


def fit_share(dag, cost, samples: Sequence[OverlapSample], field: str,
              shares: Sequence[float] = BYTES_SHARES) -> Optional[float]:
  """The core share closest to the samples' two times.

  Args:
    dag: the training DAG (per-op times as the row's model has them).
    cost: the cost model of a collective alone.
    samples: the other rows' `OverlapSample`s.
    field: the `ExecutionModel` share varied, "bytes_cpu_share" or
      "comm_cpu_share" (the share of a collective's fixed CPU work); the
      samples' models keep the other.
    shares: candidates, each in (0, 1].

  Returns:
    The share with the least sum of absolute deviations of both times over
    the samples (the largest of equals: without evidence the collectives
    keep the core they need); None without samples.
  """
  if not samples:
    return None

  def deviation(share):
    total = 0.0
    for s in samples:
      backward_end, first_end = model_overlap(
          dag, cost, s.plan, dataclasses.replace(s.model, **{field: share}))
      total += (abs(backward_end - s.backward_end_s) +
                abs(first_end - s.first_end_s))
    return total

  return min(sorted(shares, reverse=True), key=deviation)
