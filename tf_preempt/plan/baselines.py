"""The comparison policies, each reproduced in the planner's model.

Every function takes a `Problem` plus its own keyword options and returns
collectives as lists of (tensor, offset, length), in issue order. Tensor
"index" means position in the DAG's tensor list (forward/variable order).

- fifo: one collective per tensor, in ready order.
- priority: one collective per tensor, list-scheduled by the tail q (the
  next forward pass's need), non-preemptive, no fusion.
- tf_default: stock TF CollectiveAllReduce with bytes_per_pack=0: one
  collective of all tensors, pieces in REVERSED tensor order.
- tf_packed: TF's `cross_device_utils.group_by_size` on the reversed list: a
  new pack starts when the current one already holds MORE than
  bytes_per_pack bytes, so packs err on the large side.
- horovod: fusion buffer. A background cycle every `cycle_time_s` takes the
  tensors ready by then (ready order) and fuses runs up to
  `fusion_threshold` bytes (a larger tensor goes alone); the next cycle
  starts after the current one's collectives end. Defaults: 64 MiB and 5 ms
  (Horovod's pre-0.21 defaults; 0.21 moved to 128 MiB and 1 ms). The cycle
  shapes the grouping only: the simulator starts a fused collective once its
  tensors are ready, not at the cycle tick, so this is slightly optimistic.
- ddp: PyTorch DDP buckets over the reversed tensor list, first bucket
  capped at 1 MiB then 25 MiB; a bucket closes once it reaches its cap (a
  tensor is never split); buckets are reduced in bucket order.
- bytescheduler: tensors cut into partitions of `partition_elements`
  elements, sent by tensor index (forward order) with a credit of
  `credit_elements` elements in flight. Defaults are ByteScheduler's
  (`bytecore.py`: BYTESCHEDULER_PARTITION=1000000,
  BYTESCHEDULER_CREDIT=4000000, both counted in parameters). A dispatched
  partition is committed to the shared order, so credit is how far ahead the
  order is frozen.
"""

import collections
import heapq
import math
from typing import List

from tf_preempt.plan import ordering
from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import problem as problem_lib

Group = problem_lib.Group
MiB = 1 << 20


def _whole(prob: problem_lib.Problem) -> List[Group]:
  return [[(p, 0, int(prob.nbytes[p]))] for p in range(prob.num_tensors)]


def fifo(prob: problem_lib.Problem) -> List[Group]:
  """One collective per tensor in ready order (ties: reversed index)."""
  units = _whole(prob)[::-1]
  return ordering.fifo_order(prob, units)


def priority(prob: problem_lib.Problem) -> List[Group]:
  """One collective per tensor, list-scheduled by tail q."""
  return ordering.list_order(prob, _whole(prob))


def tf_default(prob: problem_lib.Problem) -> List[Group]:
  """A single collective of all tensors, reversed order."""
  return [[(p, 0, int(prob.nbytes[p]))
           for p in reversed(range(prob.num_tensors))]]


def group_by_size(sizes: List[int], bytes_per_pack: int) -> List[List[int]]:
  """TF's packing rule on positions 0..n-1 of `sizes`.

  Mirrors tensorflow/python/distribute/cross_device_utils.py group_by_size:
  0 means one pack; otherwise open a new pack when the last one holds more
  than bytes_per_pack bytes.
  """
  if bytes_per_pack == 0:
    return [list(range(len(sizes)))]
  packs, last = [], 0
  for i, size in enumerate(sizes):
    if not packs or last > bytes_per_pack:
      packs.append([])
      last = 0
    packs[-1].append(i)
    last += size
  return packs


def tf_packed(prob: problem_lib.Problem, bytes_per_pack: int = 32 * MiB
              ) -> List[Group]:
  """TF CollectiveAllReduce with CommunicationOptions(bytes_per_pack)."""
  if bytes_per_pack < 0:
    raise ValueError(f"bytes_per_pack={bytes_per_pack} must be >= 0.")
  rev = list(reversed(range(prob.num_tensors)))
  packs = group_by_size([int(prob.nbytes[p]) for p in rev], int(bytes_per_pack))
  return [[(rev[i], 0, int(prob.nbytes[rev[i]])) for i in pack]
          for pack in packs]


# The shortest background cycle the horovod baseline accepts (1 ns).
MIN_CYCLE_TIME_S = 1e-9


def horovod(prob: problem_lib.Problem, fusion_threshold: int = 64 * MiB,
            cycle_time_s: float = 0.005) -> List[Group]:
  """Horovod's fusion buffer driven by its background cycle."""
  # NaN fails every comparison, so these checks reject it too; a cycle below
  # a nanosecond (e.g. a subnormal) would overflow the count of idle cycles.
  if not fusion_threshold >= 0:
    raise ValueError(f"horovod: fusion_threshold must be >= 0, got "
                     f"{fusion_threshold!r}.")
  if not (cycle_time_s == 0 or MIN_CYCLE_TIME_S <= cycle_time_s < math.inf):
    raise ValueError(f"horovod: cycle_time_s must be 0 or a finite number of "
                     f"seconds >= {MIN_CYCLE_TIME_S}, got {cycle_time_s!r}.")
  n = prob.num_tensors
  by_ready = sorted(range(n), key=lambda p: (prob.ready[p], -p))
  groups: List[Group] = []
  sent, tick, free = 0, 0.0, 0.0
  while sent < n:
    nxt = prob.ready[by_ready[sent]]
    if nxt > tick:
      # Idle cycles until one sees the next ready tensor.
      tick = (math.ceil((nxt - tick) / cycle_time_s - 1e-12) * cycle_time_s
              + tick) if cycle_time_s > 0 else nxt
      tick = max(tick, nxt)
    batch = []
    while sent < n and prob.ready[by_ready[sent]] <= tick:
      batch.append(by_ready[sent])
      sent += 1
    cur: Group = []
    cur_bytes = 0
    for p in batch:
      size = int(prob.nbytes[p])
      if cur and cur_bytes + size > fusion_threshold:
        groups.append(cur)
        cur, cur_bytes = [], 0
      cur.append((p, 0, size))
      cur_bytes += size
    if cur:
      groups.append(cur)
    # The cycle executes its collectives before the next one starts.
    for g in _tail_groups(groups, batch):
      start = max(free, max(prob.ready[t] for t, _, _ in g))
      free = start + prob.alpha + prob.beta * sum(l for _, _, l in g)
    tick = max(tick + cycle_time_s, free)
  return groups


def _tail_groups(groups: List[Group], batch: List[int]) -> List[Group]:
  """The groups that hold the tensors of the last batch."""
  want = set(batch)
  out = []
  for g in reversed(groups):
    if not want:
      break
    out.append(g)
    want -= {t for t, _, _ in g}
  return out[::-1]


def ddp(prob: problem_lib.Problem, bucket_cap_bytes: int = 25 * MiB,
        first_bucket_bytes: int = 1 * MiB) -> List[Group]:
  """PyTorch DDP's gradient buckets."""
  if bucket_cap_bytes <= 0 or first_bucket_bytes <= 0:
    raise ValueError("ddp: bucket sizes must be > 0.")
  groups: List[Group] = []
  cur: Group = []
  size = 0
  limit = first_bucket_bytes
  for p in reversed(range(prob.num_tensors)):
    cur.append((p, 0, int(prob.nbytes[p])))
    size += int(prob.nbytes[p])
    if size >= limit:
      groups.append(cur)
      cur, size, limit = [], 0, bucket_cap_bytes
  if cur:
    groups.append(cur)
  return groups


def bytescheduler(prob: problem_lib.Problem,
                  partition_elements: int = 1_000_000,
                  credit_elements: int = 4_000_000) -> List[Group]:
  """ByteScheduler: index priority, fixed partitions, credit."""
  if partition_elements <= 0 or credit_elements <= 0:
    raise ValueError("bytescheduler: partition_elements and credit_elements "
                     "must be > 0.")
  units = []
  for p in range(prob.num_tensors):
    item = int(prob.itemsize[p])
    for o, l in plan_lib.split_evenly(int(prob.nbytes[p]), item,
                                      partition_elements * item):
      units.append((p, o, l))
  by_release = sorted(range(len(units)),
                      key=lambda k: (prob.ready[units[k][0]], k))
  heap, order = [], []
  inflight = collections.deque()
  credit = float(credit_elements)
  now, free, nxt = 0.0, 0.0, 0
  while len(order) < len(units):
    while inflight and inflight[0][0] <= now:
      credit = min(float(credit_elements), credit + inflight.popleft()[1])
    if credit <= 0:
      now = inflight[0][0]
      continue
    while nxt < len(by_release) and prob.ready[
        units[by_release[nxt]][0]] <= now:
      k = by_release[nxt]
      heapq.heappush(heap, (units[k][0], units[k][1], k))
      nxt += 1
    if not heap:
      now = prob.ready[units[by_release[nxt]][0]]
      continue
    k = heapq.heappop(heap)[2]
    p, _, length = units[k]
    free = max(free, prob.ready[p]) + prob.alpha + prob.beta * length
    elements = length // int(prob.itemsize[p])
    credit -= elements
    inflight.append((free, elements))
    order.append([units[k]])
  return order

