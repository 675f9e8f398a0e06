"""Order policies: in which order the channel sends a set of units.

A unit is one future collective: a list of (tensor, offset, length) pieces,
ready when all its tensors are, sent whole. Tensor p is reduced when the last
unit holding it ends (C_p); the objective is max(B + F, max_p C_p + q_p).

`list_order` is priority list scheduling: whenever the channel is free, send
the ready unit with the highest priority, else wait for the next release.
With priority = q (Jackson's rule, the "need time" of the next forward pass)
and units that are chunks, this is preemptive EDD at chunk boundaries: a
newly ready tensor with a larger q overtakes the rest of a lower one.

`lookahead_order` adds a rollout (the pilot method): before starting a unit
while a higher-priority unit will become ready before it would end, it also
tries "idle until that release", completes every alternative with plain list
scheduling and keeps the best; Potts' release adjustment iterates it. Greedy
EDD alone can be one chunk late; these remove most of those cases (see tests/plan/test_ordering.py for the
measured match rate against the exact solver). The rollouts cost
O(units log units) each, so a budget of rollout steps bounds the work on big
instances; past it the policy is plain list scheduling.
"""

import heapq
from typing import List, Optional, Sequence

import numpy as np

from tf_preempt.plan import problem as problem_lib

Group = problem_lib.Group

# Total list-scheduling steps all rollouts of one call may take.
DEFAULT_ROLLOUT_BUDGET = 60_000
# Most Potts passes per order (each is one lookahead schedule); big
# instances get few, since a pass costs a whole schedule.
MAX_PASSES = 16
MAX_PASSES_BIG = 2
BIG = 64


class _Units:
  """Array form of a unit list."""

  def __init__(self, prob: problem_lib.Problem, units: Sequence[Group],
               priority: Optional[np.ndarray] = None,
               release: Optional[np.ndarray] = None):
    self.units = list(units)
    n = len(self.units)
    self.ready = np.empty(n)
    self.dur = np.empty(n)
    self.tensors = []
    for k, u in enumerate(self.units):
      ts = sorted({t for t, _, _ in u})
      self.tensors.append(ts)
      self.ready[k] = max(prob.ready[t] for t in ts)
      self.dur[k] = prob.alpha + prob.beta * sum(l for _, _, l in u)
    tail = prob.tail if priority is None else priority
    self.prio = np.array([max(tail[t] for t in ts) for ts in self.tensors])
    self.q = prob.tail
    self.floor = prob.floor
    self.count = np.zeros(prob.num_tensors, np.int64)
    for ts in self.tensors:
      for t in ts:
        self.count[t] += 1
    # When list scheduling may pick a unit: its ready time, or later when
    # the Potts iteration holds it back (timing always uses `ready`).
    self.release = self.ready if release is None else np.maximum(
        self.ready, release)
    self.by_release = sorted(range(n), key=lambda k: (self.release[k], k))

  def key(self, k: int):
    return (-self.prio[k], self.release[k], k)


class _State:
  """Where a list schedule is: time, lateness, what is left."""

  __slots__ = ("t", "late", "left", "heap", "next_rel", "sent")

  def copy(self) -> "_State":
    s = _State()
    s.t, s.late, s.next_rel = self.t, self.late, self.next_rel
    s.left = self.left.copy()
    s.heap = list(self.heap)
    s.sent = None
    return s


def _start(u: _Units) -> _State:
  s = _State()
  s.t, s.late, s.next_rel = 0.0, u.floor, 0
  s.left = u.count.copy()
  s.heap = []
  s.sent = []
  return s


def _release(u: _Units, s: _State, upto: float) -> None:
  order = u.by_release
  while s.next_rel < len(order) and u.release[order[s.next_rel]] <= upto:
    k = order[s.next_rel]
    heapq.heappush(s.heap, u.key(k))
    s.next_rel += 1


def _send(u: _Units, s: _State, k: int) -> None:
  s.t = max(s.t, u.ready[k]) + u.dur[k]
  for p in u.tensors[k]:
    s.left[p] -= 1
    if s.left[p] == 0:
      s.late = max(s.late, s.t + u.q[p])
  if s.sent is not None:
    s.sent.append(k)


def _step(u: _Units, s: _State) -> Optional[int]:
  """Picks the next unit by plain list scheduling (no send)."""
  _release(u, s, s.t)
  if not s.heap:
    if s.next_rel >= len(u.by_release):
      return None
    _release(u, s, u.release[u.by_release[s.next_rel]])
  return heapq.heappop(s.heap)[2]


def _rollout(u: _Units, s: _State, budget: List[int]) -> float:
  while True:
    k = _step(u, s)
    if k is None:
      return s.late
    budget[0] -= 1
    _send(u, s, k)


def list_order(prob: problem_lib.Problem, units: Sequence[Group],
               priority: Optional[np.ndarray] = None) -> List[Group]:
  """Priority list scheduling of units.

  Args:
    prob: the instance.
    units: the units to order.
    priority: per-tensor priority (a unit takes its tensors' max); larger is
      sent first. Defaults to the tail q (Jackson's rule). Ties go to the
      earlier-ready, then the earlier-listed unit.

  Returns:
    The units in send order.
  """
  u = _Units(prob, units, priority)
  s = _start(u)
  while True:
    k = _step(u, s)
    if k is None:
      break
    _send(u, s, k)
  return [u.units[k] for k in s.sent]


def lookahead_order(prob: problem_lib.Problem, units: Sequence[Group],
                    budget: int = DEFAULT_ROLLOUT_BUDGET,
                    max_waits: int = 2) -> List[Group]:
  """The PACE order: `_lookahead` refined by Potts' release adjustment.

  Potts (1980) for 1|r_j|Lmax: take the unit c that attains the objective
  and the block of back-to-back units that ends with it; if a unit of lower
  priority than c starts in that block (it "interferes"), hold it back until
  c is released and schedule again. Each pass costs one lookahead schedule;
  at most MAX_PASSES passes (MAX_PASSES_BIG above BIG units), fewer when the budget runs out; the best
  schedule seen is returned.

  Args:
    prob: the instance.
    units: the units to order.
    budget: total list-scheduling steps of all rollouts and passes.
    max_waits: alternatives of each kind per rollout decision.

  Returns:
    The units in send order.
  """
  left = [budget]
  release = None
  best, best_val = None, np.inf
  passes = MAX_PASSES if len(units) <= BIG else MAX_PASSES_BIG
  for _ in range(max(1, min(len(units), passes))):
    u = _Units(prob, units, release=release)
    sent, val, crit, block = _lookahead(u, left, max_waits)
    if val < best_val - 1e-12:
      best, best_val = sent, val
    if left[0] <= 0 or crit is None:
      break
    hold = [k for k in block if u.prio[k] < u.prio[crit]]
    if not hold:
      break
    release = u.release.copy()
    h = hold[-1]
    # Later chunks of the same tensor(s) move with it, so chunks of a tensor
    # keep their offset order.
    same = [k for k in range(h, len(units)) if u.tensors[k] == u.tensors[h]]
    release[same] = np.maximum(release[same], u.release[crit])
    left[0] -= len(units)
  return [units[k] for k in best]


def _lookahead(u: _Units, left: List[int], max_waits: int):
  """One lookahead schedule: (order, objective, critical unit, its block)."""
  """List scheduling by q with a rollout before each risky start.

  Args:
    prob: the instance.
    units: the units to order.
    budget: total rollout steps allowed; when spent, plain list scheduling.
    max_waits: how many "idle until release" alternatives to try per start.

  Returns:
    The units in send order.
  """
  s = _start(u)
  order = u.by_release
  while True:
    k = _step(u, s)
    if k is None:
      break
    if left[0] > 0:
      k = _maybe_wait(u, s, k, left, max_waits, order)
      if k is None:
        continue
    _send(u, s, k)
  # Replay with true times to find the critical unit and its block.
  sent = s.sent
  t, late, crit, ends, starts = 0.0, u.floor, None, [], []
  left_count = u.count.copy()
  for k in sent:
    st = max(t, u.ready[k])
    t = st + u.dur[k]
    starts.append(st)
    ends.append(t)
    for p in u.tensors[k]:
      left_count[p] -= 1
      if left_count[p] == 0 and t + u.q[p] > late + 1e-15:
        late, crit = t + u.q[p], len(ends) - 1
  if crit is None:
    return sent, late, None, []
  first = crit
  while first > 0 and starts[first] <= ends[first - 1] + 1e-15:
    first -= 1
  return sent, late, sent[crit], sent[first:crit]


def _maybe_wait(u, s, k, left, max_waits, order):
  """Returns the unit to send now, or None after idling s.t to a release.

  Alternatives: k (the list-scheduling choice), the next `max_waits` ready
  units of other priorities, and idling until each of the next `max_waits`
  releases of a higher-priority unit that would land during k. Each is
  completed by plain list scheduling; ties keep k.
  """
  start = max(s.t, u.ready[k])
  finish = start + u.dur[k]
  waits = []
  i = s.next_rel
  while i < len(order) and len(waits) < max_waits:
    j = order[i]
    r = u.release[j]
    if r >= finish:
      break
    if u.prio[j] > u.prio[k] and r > start and (not waits or
                                                 r > waits[-1]):
      waits.append(r)
    i += 1
  others = []
  seen = {u.prio[k]}
  for key in sorted(s.heap)[:4 * max_waits]:
    if len(others) >= max_waits:
      break
    if key[0] not in seen and -key[0] not in seen:
      seen.add(-key[0])
      others.append(key[2])
  if not waits and not others:
    return k
  now = s.copy()
  _send(u, now, k)
  best_val, best = _rollout(u, now, left), ("send", k)
  for j in others:
    alt = s.copy()
    alt.heap.remove(u.key(j))
    heapq.heapify(alt.heap)
    heapq.heappush(alt.heap, u.key(k))
    _send(u, alt, j)
    val = _rollout(u, alt, left)
    if val < best_val - 1e-12:
      best_val, best = val, ("send", j)
  for r in waits:
    alt = s.copy()
    heapq.heappush(alt.heap, u.key(k))
    alt.t = r
    val = _rollout(u, alt, left)
    if val < best_val - 1e-12:
      best_val, best = val, ("wait", r)
  if best == ("send", k):
    return k
  heapq.heappush(s.heap, u.key(k))
  if best[0] == "wait":
    s.t = best[1]
    return None
  j = best[1]
  s.heap.remove(u.key(j))
  heapq.heapify(s.heap)
  return j


def fifo_order(prob: problem_lib.Problem, units: Sequence[Group]
               ) -> List[Group]:
  """Units by ready time (ties: listed order)."""
  return list_order(prob, units, priority=np.zeros(prob.num_tensors))


def lateness(prob: problem_lib.Problem, order: Sequence[Group]) -> float:
  """The objective of a unit order (same as `Problem.evaluate`)."""
  return prob.evaluate(order)
