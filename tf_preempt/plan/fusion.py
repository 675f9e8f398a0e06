"""Fusion by dynamic programming over a fixed send order.

Input: units in the order the channel will send them. Output: cut points
that fuse runs of consecutive units into one collective (pieces of the same
tensor that end up adjacent are merged into one piece, which is how the DP
also chooses chunk sizes: a run of a tensor's small chunks is one bigger
chunk).

With the order fixed the objective is a left-to-right scan: a prefix of
groups leaves the channel free at t and has lateness L = max(B + F,
C_p + q_p over tensors whose last unit is in the prefix); appending the
group of units i..j-1 gives t' = max(t, R_ij) + alpha + beta * S_ij and
L' = max(L, t' + Q_ij), with R the latest ready time, S the bytes and Q the
largest q of tensors completed in the group. Both maps are monotone in
(t, L), so keeping per prefix the Pareto front of (t, L) pairs is EXACT: the
DP returns the best of all 2^(m-1) consecutive groupings of this order while
visiting O(m * window * |front|) transitions. Two knobs trade exactness for
speed on large instances only: `window` (most units per group) and
`max_front` (front points kept per prefix, thinned evenly in t). With
m <= window and fronts below max_front the result is exact; the tests check
it against exhaustive search.
"""

from typing import List, Sequence

import numpy as np

from tf_preempt.plan import problem as problem_lib

Group = problem_lib.Group


def _pareto(t: np.ndarray, late: np.ndarray, max_front: int) -> np.ndarray:
  """Indices of the non-dominated (t, late) points, by increasing t."""
  order = np.lexsort((late, t))
  ls = late[order]
  prev_min = np.minimum.accumulate(np.concatenate(([np.inf], ls[:-1])))
  keep = order[ls < prev_min]
  if len(keep) > max_front:
    pick = np.unique(np.linspace(0, len(keep) - 1, max_front).astype(int))
    keep = keep[pick]
  return keep


def merge_pieces(units: Sequence[Group]) -> Group:
  """Concatenates units into one group, joining contiguous pieces."""
  out: Group = []
  for u in units:
    for t, o, l in u:
      if out and out[-1][0] == t and out[-1][1] + out[-1][2] == o:
        out[-1] = (t, out[-1][1], out[-1][2] + l)
      else:
        out.append((t, o, l))
  return out


def fuse(prob: problem_lib.Problem, units: Sequence[Group],
         window: int = 128, max_front: int = 24,
         max_group_bytes: float = float("inf")) -> List[Group]:
  """Best consecutive grouping of units sent in the given order.

  Args:
    prob: the instance.
    units: units in send order.
    window: the most units one group may hold.
    max_front: the most Pareto points kept per prefix.
    max_group_bytes: the largest fused collective (a single unit may exceed
      it).

  Returns:
    The fused groups in send order.
  """
  m = len(units)
  if m == 0:
    return []
  ready = np.empty(m)
  size = np.empty(m)
  qdone = np.full(m, -np.inf)
  seen = set()
  for k in range(m - 1, -1, -1):
    u = units[k]
    ready[k] = max(prob.ready[t] for t, _, _ in u)
    size[k] = sum(l for _, _, l in u)
    for t, _, _ in u:
      if t not in seen:
        seen.add(t)
        qdone[k] = max(qdone[k], prob.tail[t])
  csize = np.concatenate(([0.0], np.cumsum(size)))
  # All fronts live in flat growing arrays; prefix i owns [begin[i], begin[i+1])
  # so the candidates of prefix j are one contiguous slice.
  cap = 1024
  ft = np.empty(cap)
  fl = np.empty(cap)
  fowner = np.empty(cap, np.int64)
  fback = np.empty(cap, np.int64)
  ft[0], fl[0], fowner[0], fback[0] = 0.0, prob.floor, 0, -1
  begin = np.zeros(m + 2, np.int64)
  begin[1] = 1
  alpha, beta = prob.alpha, prob.beta
  for j in range(1, m + 1):
    lo = max(0, j - window)
    # Group i..j-1 for i in [lo, j): latest ready, largest completed q.
    rmax = np.maximum.accumulate(ready[lo:j][::-1])[::-1]
    qmax = np.maximum.accumulate(qdone[lo:j][::-1])[::-1]
    gbytes = csize[j] - csize[lo:j]
    a, b = begin[lo], begin[j]
    own = fowner[a:b] - lo
    end = np.maximum(ft[a:b], rmax[own]) + alpha + beta * gbytes[own]
    late = np.maximum(fl[a:b], end + qmax[own])
    ok = (gbytes[own] <= max_group_bytes) | (own == j - 1 - lo)
    cand = np.nonzero(ok)[0]
    keep = cand[_pareto(end[cand], late[cand], max_front)]
    n = len(keep)
    if b + n > cap:
      cap = 2 * (b + n)
      ft, fl, fowner, fback = (np.resize(x, cap) for x in (ft, fl, fowner,
                                                           fback))
    ft[b:b + n] = end[keep]
    fl[b:b + n] = late[keep]
    fowner[b:b + n] = j
    fback[b:b + n] = a + keep
    begin[j + 1] = b + n
  # Best end state, then walk the back pointers.
  a, b = begin[m], begin[m + 1]
  p = a + int(np.argmin(fl[a:b]))
  cuts = []
  j = m
  while j > 0:
    prev = int(fback[p])
    i = int(fowner[prev])
    cuts.append((i, j))
    j, p = i, prev
  cuts.reverse()
  return [merge_pieces(units[i:j]) for i, j in cuts]
