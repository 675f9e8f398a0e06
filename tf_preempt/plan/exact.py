"""The exact order: Pareto dynamic programming over chunk orders.

For a fixed partition (every tensor cut into chunks, one collective per
chunk, no fusion) the best order of chunks is found exactly. A state is the
number of chunks sent of every tensor (chunks of a tensor go in offset order;
they have equal ready time and tail, so any other order is no better). Many
orders reach one state; each is summarised by (t, L): the time the channel is
free and the largest C_p + q_p of the tensors completed so far. Sending the
next chunk of p maps (t, L) to (max(t, r_p) + d, max(L, end + q_p) if p is
complete), which is monotone in both, so a pair dominated in both
coordinates can never lead to a better end and is dropped: the surviving
Pareto front per state is exact. States number prod(k_p + 1), which bounds
the instance size (`MAX_STATES`).
"""

import itertools
from typing import Dict, List, Optional, Tuple

import numpy as np

from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import problem as problem_lib

MAX_STATES = 200_000

Group = problem_lib.Group


def chunks_of(prob: problem_lib.Problem, chunk_bytes: Optional[int]
              ) -> List[List[Tuple[int, int, int]]]:
  """Per tensor, its chunks (tensor, offset, length) in offset order."""
  return [[(p, o, l) for o, l in plan_lib.split_evenly(
      int(prob.nbytes[p]), int(prob.itemsize[p]), chunk_bytes)]
          for p in range(prob.num_tensors)]


def _pareto_insert(front: List[Tuple[float, float, object]],
                   t: float, late: float, back: object) -> None:
  for ft, fl, _ in front:
    if ft <= t and fl <= late:
      return
  front[:] = [f for f in front if not (t <= f[0] and late <= f[1])]
  front.append((t, late, back))


def optimal_order(prob: problem_lib.Problem,
                  chunks: List[List[Tuple[int, int, int]]]
                  ) -> Tuple[float, List[Group]]:
  """The minimum objective over all chunk orders, and one order reaching it.

  Args:
    prob: the instance.
    chunks: per tensor, its chunks in offset order.

  Returns:
    (objective, order as single-piece groups).

  Raises:
    ValueError: if the state space exceeds MAX_STATES.
  """
  counts = [len(c) for c in chunks]
  states = int(np.prod([k + 1 for k in counts], dtype=float))
  if states > MAX_STATES:
    raise ValueError(f"optimal: {states} states exceed the exact solver's "
                     f"limit of {MAX_STATES}; use fewer tensors or chunks.")
  n = len(chunks)
  dur = [[prob.alpha + prob.beta * l for _, _, l in c] for c in chunks]
  fronts: Dict[Tuple[int, ...], list] = {tuple([0] * n): [
      (0.0, prob.floor, None)]}
  total = sum(counts)
  level = [tuple([0] * n)]
  for _ in range(total):
    nxt = {}
    for state in level:
      for idx, (t, late, _) in enumerate(fronts[state]):
        for p in range(n):
          j = state[p]
          if j == counts[p]:
            continue
          end = max(t, prob.ready[p]) + dur[p][j]
          nl = max(late, end + prob.tail[p]) if j + 1 == counts[p] else late
          ns = state[:p] + (j + 1,) + state[p + 1:]
          _pareto_insert(nxt.setdefault(ns, []), end, nl, (state, idx, p))
    fronts.update(nxt)
    level = list(nxt)
  final = tuple(counts)
  best = min(range(len(fronts[final])), key=lambda i: fronts[final][i][1])
  value = max(prob.floor, fronts[final][best][1])
  order = []
  state, idx = final, best
  while fronts[state][idx][2] is not None:
    prev, pidx, p = fronts[state][idx][2]
    order.append([chunks[p][prev[p]]])
    state, idx = prev, pidx
  order.reverse()
  return float(value), order


def all_orders(chunks: List[List[Tuple[int, int, int]]]):
  """Every interleaving of the tensors' chunk sequences (for tests)."""
  labels = [p for p, c in enumerate(chunks) for _ in c]
  for perm in set(itertools.permutations(labels)):
    pos = [0] * len(chunks)
    out = []
    for p in perm:
      out.append([chunks[p][pos[p]]])
      pos[p] += 1
    yield out
