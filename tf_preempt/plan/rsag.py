"""PACE with split all-reduces: reduce-scatter now, all-gather later (DeAR).

DeAR (Zhang et al., ICDCS 2023) decouples an all-reduce into its two ring
phases: the reduce-scatter of a gradient runs as soon as the backward pass
produces it, and the all-gather, which rebuilds the full reduced gradient on
every worker, is deferred until the next forward pass needs the layer. In
our one-channel model (`simulator.py`) each phase costs `cost.phase()`,
half of alpha and of beta for a ring, so a reduce-scatter followed at once
by its all-gather costs exactly one all-reduce. The gain is freedom: the
phase boundary is a preemption point that costs no extra start-up, and the
all-gathers can be ordered by when the forward pass needs them,
independently of when the gradients became ready.

`pace_rsag` keeps the best (by the simulator's objective) of:

1. PACE's own plan with every collective split in place (reduce-scatter,
   then its all-gather at once): the same iteration time as plain PACE, so
   the split plan is never worse in simulation.
2. A two-phase preemptive list schedule (Jackson's rule extended to the two
   phases) over several unit sets: PACE's fused groups, whole tensors, and
   chunks of each size of `pace.chunk_candidates`. At every channel-free
   instant it runs the released phase with the largest tail: an
   all-gather's tail is q of its unit, a reduce-scatter's is q plus its
   all-gather's duration (the work still between it and the forward pass).
3. DeAR's own order over the same units: every reduce-scatter in ready
   order during the backward pass, then every all-gather by decreasing
   tail (the forward pass's order).

A fused reduce-scatter and its all-gather carry the same pieces: a ring
reduce-scatter leaves each worker one shard of the concatenated buffer, and
only an all-gather of that buffer rebuilds it (`plan.Plan.validate`).

Simulation only: the runtime issues all-reduces (`plan.Plan.is_all_reduce`).
TensorFlow has the collectives a runtime would need
(`CollectiveReduceScatterV2`, `CollectiveGatherV2`), see
benchmarks/simulation/README.md.
"""

import heapq
from typing import List, Optional, Sequence, Tuple

from tf_preempt.plan import exact
from tf_preempt.plan import ordering
from tf_preempt.plan import pace as pace_lib
from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import problem as problem_lib

Group = problem_lib.Group
# A split schedule: (kind, group) in issue order; kind from `plan.KINDS`.
Op = Tuple[str, Group]

RS = plan_lib.REDUCE_SCATTER
AG = plan_lib.ALL_GATHER


def split_in_place(groups: Sequence[Group]) -> List[Op]:
  """Each collective becomes its reduce-scatter followed by its all-gather."""
  return [op for g in groups for op in ((RS, g), (AG, g))]


def _unit_numbers(prob: problem_lib.Problem, units: Sequence[Group]):
  """(release, tail, phase seconds) of each unit."""
  out = []
  for g in units:
    size = sum(length for _, _, length in g)
    out.append((max(prob.ready[t] for t, _, _ in g),
                max(prob.tail[t] for t, _, _ in g),
                (prob.alpha + prob.beta * size) / 2))
  return out


def two_phase_jackson(prob: problem_lib.Problem, units: Sequence[Group],
                      rs_bonus: bool = True) -> List[Op]:
  """Preemptive list schedule of the two phases of every unit.

  Args:
    prob: the instance.
    units: the collectives to split, each kept whole in both phases.
    rs_bonus: rank a reduce-scatter by q plus its all-gather's duration
      (the delivery time Jackson's rule uses for a two-operation chain);
      False ranks it by q alone.

  Returns:
    The (kind, group) schedule.
  """
  nums = _unit_numbers(prob, units)
  by_release = sorted(range(len(units)), key=lambda u: (nums[u][0], u))
  heap: List[Tuple[float, int, int, str]] = []
  out: List[Op] = []
  t, i = 0.0, 0
  while i < len(by_release) or heap:
    while i < len(by_release) and nums[by_release[i]][0] <= t:
      u = by_release[i]
      _, q, d = nums[u]
      heapq.heappush(heap, (-(q + (d if rs_bonus else 0.0)), 0, u, RS))
      i += 1
    if not heap:
      t = nums[by_release[i]][0]
      continue
    _, _, u, kind = heapq.heappop(heap)
    out.append((kind, units[u]))
    t += nums[u][2]
    if kind == RS:
      # On equal rank a reduce-scatter goes first (second key 0 < 1): the
      # all-gather loses nothing by waiting for one more reduce-scatter
      # whose chain is at least as urgent.
      heapq.heappush(heap, (-nums[u][1], 1, u, AG))
  return out


def dear_order(prob: problem_lib.Problem, units: Sequence[Group]
               ) -> List[Op]:
  """DeAR's order: reduce-scatters in ready order, then all-gathers by tail."""
  nums = _unit_numbers(prob, units)
  idx = range(len(units))
  rs = sorted(idx, key=lambda u: (nums[u][0], u))
  ag = sorted(idx, key=lambda u: (-nums[u][1], nums[u][0], u))
  return [(RS, units[u]) for u in rs] + [(AG, units[u]) for u in ag]


def evaluate(prob: problem_lib.Problem, ops: Sequence[Op]) -> float:
  """The simulator's iteration time of a split schedule."""
  return prob.evaluate([g for _, g in ops], kinds=[k for k, _ in ops])


def pace_rsag(prob: problem_lib.Problem, chunk_bytes: Optional[int] = None,
              fuse: bool = True, window: int = 128, max_front: int = 24,
              rollout_budget: int = ordering.DEFAULT_ROLLOUT_BUDGET
              ) -> List[Op]:
  """The best split schedule found (see the module docstring).

  Args:
    prob: the instance.
    chunk_bytes, fuse, window, max_front, rollout_budget: passed to
      `pace.pace` for the all-reduce plan the split starts from;
      chunk_bytes also fixes the chunk units of steps 2 and 3.

  Returns:
    (kind, group) pairs in issue order.
  """
  base = pace_lib.pace(prob, chunk_bytes=chunk_bytes, fuse=fuse,
                       window=window, max_front=max_front,
                       rollout_budget=rollout_budget)
  unit_sets = [base]
  sizes = ([chunk_bytes] if chunk_bytes
           else pace_lib.chunk_candidates(prob))
  for c in sizes:
    unit_sets.append([[u] for per in exact.chunks_of(prob, c) for u in per])
  cands = [split_in_place(base)]
  for units in unit_sets:
    cands.append(two_phase_jackson(prob, units, rs_bonus=True))
    cands.append(two_phase_jackson(prob, units, rs_bonus=False))
    cands.append(dear_order(prob, units))
  # min keeps the first of equal values: the in-place split of PACE's plan
  # wins ties, so an equal-time split never replaces it.
  return min(cands, key=lambda ops: evaluate(prob, ops))
