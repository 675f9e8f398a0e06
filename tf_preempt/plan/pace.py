"""PACE: preemptive priority order plus fusion and partition by DP.

Algorithm (per candidate chunk size c; c=None means whole tensors):

1. Partition: cut every tensor into element-aligned chunks of at most c
   bytes (`plan.split_evenly`).
2. Order (`ordering.lookahead_order`): list scheduling by the tail q_p, the
   longest path of the next forward pass from p's consumers (largest q =
   needed earliest), so a newly ready tensor with a larger q preempts the
   rest of a lower one at the next chunk boundary; before starting a chunk
   while a higher-priority tensor becomes ready during it, a rollout
   compares "send now" with "idle until that release" and keeps the better.
   Without the rollout this is Jackson's preemptive EDD, optimal for
   1|r_j,pmtn|Lmax in the fluid limit and at most one chunk late with chunk
   boundaries. Potts' release adjustment (hold back the lower-priority unit
   that delays the critical one, reschedule, keep the best) runs on top.
   Measured against the exact solver (`exact.py`) on 240 random small DAGs
   (<= 5 tensors, <= 3 chunks each) it reached the optimum on 229 (95.4%),
   worst gap 0.48 of a chunk's transfer time (tests/plan/test_pace.py prints
   the figures). The misses need several idles in a row, which a one-step
   rollout over a greedy base policy cannot see.
3. Fusion (`fusion.fuse`): over that send order, a Pareto-front DP picks
   which consecutive units become one collective. For a FIXED order the DP is
   exact (it equals exhaustive search over all consecutive groupings; the
   simulator's objective is a monotone left-to-right scan in (channel free
   time, lateness)). Merging a tensor's adjacent chunks is how the DP picks
   per-tensor chunk sizes.
4. Re-order the fused groups with step 2 and fuse again (fusion changes the
   ready times and costs the order was chosen for).

Every candidate (each chunk size, before and after fusion, and, when
chunk_bytes is not forced, every baseline's plan with and without the fusion
DP over its order) is evaluated with the simulator's objective and the best
is kept, so pace is never slower in simulation than a baseline at its
defaults.

Exactness, honestly: the order step is a heuristic (1|r_j|Lmax with chunk
boundaries is NP-hard in general; the rollout is a one-step pilot method);
the fusion DP is exact for the order it is given but the joint problem
(order x grouping x chunk size) is not solved exactly: fusion is restricted
to runs that are consecutive in the send order, and chunk sizes to the
candidate grid refined by merging. On large instances `window` and
`max_front` bound the DP and the rollout budget bounds step 2.
"""

from typing import List, Optional

from tf_preempt.plan import baselines
from tf_preempt.plan import exact
from tf_preempt.plan import fusion
from tf_preempt.plan import ordering
from tf_preempt.plan import problem as problem_lib

Group = problem_lib.Group
MiB = 1 << 20

# Chunk sizes tried when none is given, largest first.
CHUNK_CANDIDATES = (64 * MiB, 16 * MiB, 4 * MiB, 1 * MiB, 256 << 10)
# Most chunks a candidate may have (bounds planning time).
MAX_UNITS = 4000

_BASELINES = (baselines.fifo, baselines.priority, baselines.tf_default,
              baselines.tf_packed, baselines.horovod, baselines.ddp,
              baselines.bytescheduler)


def chunk_candidates(prob: problem_lib.Problem) -> List[Optional[int]]:
  """Whole tensors plus every grid size that splits something."""
  out: List[Optional[int]] = [None]
  biggest = int(prob.nbytes.max())
  for c in CHUNK_CANDIDATES:
    if c >= biggest:
      continue
    units = int(sum(-(-int(b) // c) for b in prob.nbytes))
    if units <= max(MAX_UNITS, prob.num_tensors):
      out.append(c)
  return out


def _units(prob: problem_lib.Problem, chunk_bytes: Optional[int]
           ) -> List[Group]:
  return [[c] for per in exact.chunks_of(prob, chunk_bytes) for c in per]


def pace(prob: problem_lib.Problem, chunk_bytes: Optional[int] = None,
         fuse: bool = True, window: int = 128, max_front: int = 24,
         rollout_budget: int = ordering.DEFAULT_ROLLOUT_BUDGET
         ) -> List[Group]:
  """The PACE plan (see the module docstring).

  Args:
    prob: the instance.
    chunk_bytes: force this partition; None lets the planner choose.
    fuse: run the fusion DP.
    window: most units one fused collective may hold.
    max_front: Pareto points kept per DP prefix.
    rollout_budget: total rollout steps of the order step.

  Returns:
    Collectives in issue order.

  Raises:
    ValueError: on a non-positive chunk_bytes or window.
  """
  if chunk_bytes is not None and chunk_bytes <= 0:
    raise ValueError(f"pace: chunk_bytes={chunk_bytes} must be > 0 or None.")
  if window < 1 or max_front < 1:
    raise ValueError("pace: window and max_front must be >= 1.")
  sizes = [chunk_bytes] if chunk_bytes else chunk_candidates(prob)
  cands: List[List[Group]] = []

  def add(order: List[Group], refine: bool) -> None:
    cands.append(order)
    if fuse:
      fused = fusion.fuse(prob, order, window=window, max_front=max_front)
      cands.append(fused)
      if refine:
        again = ordering.lookahead_order(prob, fused, budget=rollout_budget)
        cands.append(fusion.fuse(prob, again, window=window,
                                 max_front=max_front))

  for c in sizes:
    add(ordering.lookahead_order(prob, _units(prob, c),
                                 budget=rollout_budget), refine=True)
  if not chunk_bytes:
    for policy in _BASELINES:
      add(policy(prob), refine=False)
  return min(cands, key=prob.evaluate)


def pace_order(prob: problem_lib.Problem, chunk_bytes: Optional[int],
               rollout_budget: int = ordering.DEFAULT_ROLLOUT_BUDGET
               ) -> List[Group]:
  """Step 2 alone: PACE's chunk order for a fixed partition, no fusion."""
  return ordering.lookahead_order(prob, _units(prob, chunk_bytes),
                                  budget=rollout_budget)
