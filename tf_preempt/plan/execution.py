"""How the runtime executes a plan: unrolled blocks, credit, a shared core.

`simulator.simulate` is the planner's model: one steady-state iteration,
one collective at a time, communication free for the compute. The measured
runtime (2 CPU workers, ring all-reduce over gRPC) differs in three ways
that this module can model, each optional (`ExecutionModel`'s defaults give
`simulator.simulate`'s iteration time; tested):

- **Unrolled blocks.** K training steps are traced into one function: the
  forward op of step k+1 waits for the end of step k's backward pass and
  for the reduction of the tensors it reads (only those, not every
  reduction), and the backward pass of step k waits for its forward pass.
  Between blocks there is a full barrier: the function returns when its
  last op and its last collective have ended. The step time is the block
  time over K.
- **Collectives in flight.** The runtime releases collectives in plan
  order within a credit: at most `max_collectives` in flight and, with a
  byte credit, at most `max_bytes` bytes in flight unless nothing else is
  (the rule of the scheduler op, `tf_preempt/ops/scheduler.cc`). A
  collective costs `alpha + beta * bytes` alone; in flight, its fixed part
  `alpha` (start-up, handshakes) overlaps whatever else is in flight, but
  its bytes queue behind earlier collectives' bytes on the one link (FIFO,
  in release order). The traces show FIFO rather than fair sharing: a
  295 KB all-reduce released 20 ms after a 2 MB one ends after it.
  With a credit of 1 this is exactly the planner's channel.
- **CPU contention.** A collective of s bytes takes `cpu.alpha +
  cpu.beta * s` seconds of the compute core (gRPC serialisation, copies,
  the reduction), spread evenly over its fixed part and its byte part
  respectively. The collectives' CPU work has priority (it is woken by the
  network; the OS favours woken threads), so while a collective runs every
  compute op progresses at rate 1 - (sum of the running collectives' CPU
  fractions), at least 0; the collectives are not slowed. A step whose
  compute overlaps the collectives is therefore longer by their CPU time,
  while communication that runs when the core is idle costs nothing extra.

Pure numpy, an event-driven simulation; for validation and what-ifs, not
for the planner's inner loop.
"""

import dataclasses
import heapq
import math
from typing import Dict, List, Optional

from tf_preempt.plan import cost as cost_lib
from tf_preempt.plan import dag as dag_lib
from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import simulator

FORWARD, BACKWARD = "forward", "backward"


@dataclasses.dataclass(frozen=True)
class ExecutionModel:
  """What of the runtime to model; the defaults are the planner's model.

  Attributes:
    unroll: None: one steady-state iteration, from the start of a backward
      pass to the end of the next forward pass, without a barrier (the
      planner's objective). K >= 1: a block of K unrolled steps (forward,
      backward, collectives of each) ending with a barrier; the step time
      is the block time / K.
    max_collectives: collectives in flight at once, >= 1.
    max_bytes: byte credit, None or > 0: a collective is released only if
      nothing is in flight or the bytes in flight plus its own fit.
    cpu: seconds of the compute core a collective takes, as a cost model of
      its size; None: communication takes no compute time. Its fixed and
      per-byte parts are capped at the collective's own (`cost`) parts: the
      work of a collective cannot outlast the collective timed alone.
    block_overhead: seconds added once per block (needs `unroll`): what
      follows the barrier before the next block's first op (the function's
      return, the training loop, the next call's dispatch).
  """
  unroll: Optional[int] = None
  max_collectives: int = 1
  max_bytes: Optional[int] = None
  cpu: Optional[cost_lib.CostModel] = None
  block_overhead: float = 0.0

  def __post_init__(self):
    if self.unroll is not None and (not isinstance(self.unroll, int) or
                                    self.unroll < 1):
      raise ValueError(f"unroll={self.unroll!r} must be None or an int >= 1.")
    if not isinstance(self.max_collectives, int) or self.max_collectives < 1:
      raise ValueError(f"max_collectives={self.max_collectives!r} must be an "
                       "int >= 1.")
    if self.max_bytes is not None and not self.max_bytes > 0:
      raise ValueError(f"max_bytes={self.max_bytes!r} must be None or > 0.")
    if self.cpu is not None and not isinstance(self.cpu, cost_lib.CostModel):
      raise ValueError(f"cpu={self.cpu!r} must be None or a CostModel.")
    if not (math.isfinite(self.block_overhead) and self.block_overhead >= 0):
      raise ValueError(f"block_overhead={self.block_overhead!r} must be "
                       "finite and >= 0.")
    if self.block_overhead and self.unroll is None:
      raise ValueError("block_overhead needs unroll: the steady-state "
                       "iteration has no block.")

  def describe(self) -> str:
    """One line naming the settings, for reports."""
    parts = ["steady-state iteration, no barrier" if self.unroll is None
             else f"blocks of K={self.unroll} unrolled steps with a barrier"]
    credit = f"{self.max_collectives} collective(s) in flight"
    if self.max_bytes is not None:
      credit += f", byte credit {self.max_bytes} B"
    parts.append(credit)
    if self.cpu is None:
      parts.append("communication takes no compute time")
    else:
      parts.append(f"collective CPU cost {self.cpu.alpha * 1e3:.3f} ms + "
                   f"{self.cpu.beta * 1e9:.3f} ns/B on the compute core")
    if self.block_overhead:
      parts.append(f"{self.block_overhead * 1e3:.3f} ms per block after "
                   "the barrier")
    return "; ".join(parts)


@dataclasses.dataclass
class Execution:
  """What happened in one simulated block (or steady-state iteration).

  Attributes:
    step_time: seconds per training step: block_time / K, or, with
      `unroll=None`, the steady-state iteration time.
    block_time: seconds from the block's start to its last event, plus the
      model's block overhead.
    steps: steps simulated (K; 2 half-steps for the steady state: the
      backward pass of one, the forward pass of the next).
    op_start: per step, op name -> start time (ops of the block only).
    op_end: per step, op name -> end time.
    collective_launch: per step, the release time of each collective, in
      plan order (empty lists for a step without a backward pass).
    collective_end: per step, the end time of each collective.
    cpu_seconds: core seconds the collectives took from the compute.
  """
  step_time: float
  block_time: float
  steps: int
  op_start: List[Dict[str, float]]
  op_end: List[Dict[str, float]]
  collective_launch: List[List[float]]
  collective_end: List[List[float]]
  cpu_seconds: float


class _Collective:
  """One collective instance of one step, and its progress."""

  __slots__ = ("step", "index", "nbytes", "fixed", "bytes_s", "gates",
               "waiting", "launch", "fixed_end", "bytes_start", "end",
               "cpu_fixed", "cpu_bytes")

  def __init__(self, step, index, nbytes, fixed, bytes_s, gates, waiting,
               cpu_fixed, cpu_bytes):
    self.step, self.index, self.nbytes = step, index, nbytes
    self.fixed, self.bytes_s = fixed, bytes_s
    self.gates = gates  # forward op instances whose reduction this ends
    self.waiting = waiting  # producer ops not yet ended
    self.cpu_fixed, self.cpu_bytes = cpu_fixed, cpu_bytes
    self.launch = self.fixed_end = self.bytes_start = self.end = None


def _fraction(cpu: float, own: float) -> float:
  """Share of the core a collective's part takes while it runs."""
  if own <= 0:
    return 0.0
  return min(1.0, cpu / own)


def execute(dag: dag_lib.TrainingDAG, cost: cost_lib.CostModel,
            plan: plan_lib.Plan,
            model: Optional[ExecutionModel] = None) -> Execution:
  """Simulates the runtime executing `plan` on `dag`; see the module doc.

  Args:
    dag: the training DAG (one step).
    cost: the cost of one collective timed alone.
    plan: a plan over the DAG's tensors.
    model: what to model; None for the defaults (the planner's model).

  Returns:
    The Execution.

  Raises:
    ValueError: if the plan does not match the DAG.
  """
  simulator.check_plan_matches(dag, plan)
  model = model or ExecutionModel()
  n_ops = len(dag.ops)
  names = [o.name for o in dag.ops]
  phase = [o.phase for o in dag.ops]
  pred = dag.predecessors()
  succ = [[] for _ in range(n_ops)]
  for j, ps in enumerate(pred):
    for i in ps:
      succ[i].append(j)

  # The block: which phases each step runs.
  if model.unroll is None:
    steps = 2
    runs = [(BACKWARD,), (FORWARD,)]
  else:
    steps = model.unroll
    runs = [(FORWARD, BACKWARD)] * steps
  count = {(s, p): sum(1 for q in phase if q == p)
           for s in range(steps) for p in runs[s]}

  # Op instances (step, op): dependencies still unmet.
  waiting = {}
  for s in range(steps):
    for i in range(n_ops):
      if phase[i] not in runs[s]:
        continue
      w = len(pred[i])
      if phase[i] == BACKWARD and FORWARD in runs[s]:
        w += 1  # the step's whole forward pass (the loss needs it)
      if phase[i] == FORWARD and s > 0:
        w += 1  # the previous step's whole backward pass
      waiting[(s, i)] = w

  # Collective instances, in release order: step by step, plan order.
  cpu = model.cpu
  phase_cost = cost.phase()
  producer = [dag.op_index(t.producer) for t in dag.tensors]
  consumers = [[dag.op_index(c) for c in t.consumers] for t in dag.tensors]
  colls: List[_Collective] = []
  by_producer = {}  # (step, op) -> collectives waiting for it
  for s in range(steps):
    if BACKWARD not in runs[s]:
      continue
    for k, c in enumerate(plan.collectives):
      own = cost if c.kind == plan_lib.ALL_REDUCE else phase_cost
      fixed, bytes_s = own.alpha, own.beta * c.nbytes
      f_fixed = _fraction(cpu.alpha, cost.alpha) if cpu else 0.0
      f_bytes = _fraction(cpu.beta, cost.beta) if cpu else 0.0
      gates = []
      if c.kind != plan_lib.REDUCE_SCATTER and s + 1 < steps:
        for t in c.tensors:
          gates.extend((s + 1, j) for j in consumers[t])
      prods = sorted({producer[t] for t in c.tensors})
      coll = _Collective(s, k, c.nbytes, fixed, bytes_s, gates, len(prods),
                         f_fixed, f_bytes)
      colls.append(coll)
      for p in prods:
        by_producer.setdefault((s, p), []).append(coll)
  # A forward op waits once per collective that reduces a byte it reads.
  for coll in colls:
    for g in coll.gates:
      waiting[g] += 1

  remaining = {}  # running op instance -> compute seconds left
  op_start = [dict() for _ in range(steps)]
  op_end = [dict() for _ in range(steps)]
  done = {key: 0 for key in count}
  events = []  # (time, seq, kind, collective): collective phase ends
  seq = 0
  next_release = 0
  in_flight: List[_Collective] = []
  link_queue: List[_Collective] = []  # fixed part done, waiting for link
  link_busy = None
  t = 0.0
  cpu_seconds = 0.0
  ready_ops = [key for key, w in waiting.items() if w == 0]

  def resolve(key):
    waiting[key] -= 1
    if waiting[key] == 0:
      ready_ops.append(key)

  def end_op(key, now):
    s, i = key
    op_end[s][names[i]] = now
    for j in succ[i]:
      if (s, j) in waiting:
        resolve((s, j))
    done[(s, phase[i])] += 1
    if done[(s, phase[i])] == count[(s, phase[i])]:
      if phase[i] == FORWARD and BACKWARD in runs[s]:
        for j in range(n_ops):
          if phase[j] == BACKWARD:
            resolve((s, j))
      if phase[i] == BACKWARD and s + 1 < steps:
        for j in range(n_ops):
          if phase[j] == FORWARD:
            resolve((s + 1, j))
    for coll in by_producer.get(key, ()):
      coll.waiting -= 1

  def push(time, kind, coll):
    nonlocal seq
    heapq.heappush(events, (time, seq, kind, coll))
    seq += 1

  def start_bytes(coll, now):
    nonlocal link_busy
    link_busy = coll
    coll.bytes_start = now
    push(now + coll.bytes_s, "end", coll)

  while True:
    # Release what the order and the credit allow, start what is ready.
    progressed = True
    while progressed:
      progressed = False
      while ready_ops:
        key = ready_ops.pop()
        op_start[key[0]][names[key[1]]] = t
        remaining[key] = dag.ops[key[1]].duration
      while next_release < len(colls):
        coll = colls[next_release]
        if coll.waiting:
          break
        if in_flight and (
            len(in_flight) >= model.max_collectives or
            (model.max_bytes is not None and
             sum(c.nbytes for c in in_flight) + coll.nbytes >
             model.max_bytes)):
          break
        coll.launch = t
        in_flight.append(coll)
        push(t + coll.fixed, "fixed", coll)
        next_release += 1
      # Zero-length ops and phases end now.
      for key in [k for k, r in remaining.items() if r <= 0]:
        del remaining[key]
        end_op(key, t)
        progressed = True
      while events and events[0][0] <= t:
        _, _, kind, coll = heapq.heappop(events)
        progressed = True
        if kind == "fixed":
          coll.fixed_end = t
          link_queue.append(coll)
        else:
          coll.end = t
          link_busy = None
          in_flight.remove(coll)
          for g in coll.gates:
            resolve(g)
        if link_busy is None and link_queue:
          start_bytes(link_queue.pop(0), t)
      if ready_ops:
        progressed = True

    if not remaining and not events:
      break
    # The compute rate until the next event.
    stolen = 0.0
    for coll in in_flight:
      if coll.fixed_end is None:
        stolen += coll.cpu_fixed
      elif coll.bytes_start is not None:
        stolen += coll.cpu_bytes
    rate = max(0.0, 1.0 - stolen)
    t_next = events[0][0] if events else math.inf
    if remaining and rate > 0:
      t_next = min(t_next, t + min(remaining.values()) / rate)
    if not math.isfinite(t_next):
      raise RuntimeError("execute: no event can happen (a dependency cycle "
                         "between the plan and the DAG?)")
    dt = t_next - t
    cpu_seconds += min(stolen, 1.0) * dt
    for key in remaining:
      left = remaining[key] - rate * dt
      # Round-off must not leave an op a few ulps short of its end.
      remaining[key] = 0.0 if left <= 1e-12 * max(1.0, t_next) else left
    t = t_next

  if next_release < len(colls):
    raise RuntimeError("execute: a collective was never released.")
  ends = [t]
  ends += [e for d in op_end for e in d.values()]
  block = max(ends) + model.block_overhead
  launch = [[] for _ in range(steps)]
  end = [[] for _ in range(steps)]
  for coll in colls:
    launch[coll.step].append(coll.launch)
    end[coll.step].append(coll.end)
  return Execution(
      step_time=block if model.unroll is None else block / model.unroll,
      block_time=block, steps=steps, op_start=op_start, op_end=op_end,
      collective_launch=launch, collective_end=end, cpu_seconds=cpu_seconds)
