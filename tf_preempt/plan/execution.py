"""How the runtime executes a plan: unrolled blocks, credit, a shared core.

`simulator.simulate` is the planner's model: one steady-state iteration,
one collective at a time, communication free for the compute. The measured
runtime (2 CPU workers, ring all-reduce over gRPC) differs in four ways
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
  in the order their fixed parts end). The traces show FIFO rather than
  fair sharing: a 295 KB all-reduce released 20 ms after a 2 MB one ends
  12 ms after it, its own bytes' time at the link's rate. With
  `latency_behind_bytes` the latency part of a fixed cost waits for the
  bytes queued ahead of it (its round trips travel behind them on the
  same connection): in the traces a 40 KB pack released while a 1.1 MB
  one moves ends 1-4 ms after it, not with it.
  With a credit of 1 this is exactly the planner's channel.
- **Token-bucket link.** An emulated link (`tf_preempt.launch.netem`: tc
  tbf) is not a plain rate: a bucket of `link_burst` seconds of traffic
  at the rate refills at the rate while the link is idle, and a
  collective's bytes drain it at once (as fast as their CPU work allows)
  before they go at the rate. So after a pause a small collective's bytes
  cost no link time at all, and a large one's cost `link_burst` less; a
  steady stream of bytes goes at the rate. The bucket is full at the
  start of a block (the forward and backward passes leave the link idle
  for longer than a burst). In the units of `beta`: a collective whose
  bytes take `b = beta * s` seconds at the rate takes `max(f * b, b -
  tokens)` on the link, f its bytes' core share (below; 0 without a CPU
  cost: the burst passes instantly). 0 (the default): a plain rate.
- **CPU contention.** A collective of s bytes needs `cpu.alpha +
  cpu.beta * s` seconds of the compute core (gRPC's threads: set-up,
  serialisation, copies, the reduction). Its fixed cost `alpha` is its CPU
  part `cpu.alpha` (on the core, first) then the rest (latency, no
  resource); its bytes move at the link's speed only while it gets the
  core share `cpu.beta / beta` they need, slower with less. The core is
  shared as a fluid: while compute runs, each collective's CPU work gets at
  most `comm_cpu_share` of it (1: it preempts the compute; 0.5: fair
  time-slicing; less: it mostly waits for the compute thread), its
  per-byte work at most `bytes_cpu_share` (by default the same; below
  the share the bytes need they move slower than the link); on an
  idle core the collectives divide all of it max-min fairly (or, with
  `fixed_cpu_fifo`, the bytes take what they need and the fixed work is
  served one collective at a time in release order); the compute
  gets the rest. So the CPU parts of collectives in flight add up
  instead of overlapping, compute that overlaps communication is slowed by
  its CPU work, and communication on an otherwise idle core costs nothing
  extra.
- **Sparse gradients.** A tensor marked `sparse` in the DAG (an embedding:
  its gradient is `tf.IndexedSlices`) is not all-reduced as planned: the
  runtime drops its pieces from the plan's collectives (a collective left
  empty is not issued) and, after the step's dense collectives, exchanges
  it as stock TensorFlow does (`CollectiveReplicaLauncher.
  all_reduce_indexed_slices`): an all-gather of each worker's row count
  (4 bytes), then, once that has ended, all-gathers of the rows and of
  their indices. These bypass the credit (the scheduler op gates only the
  plan's collectives) but keep the issue order, and the next step's
  forward ops that read the tensor wait for both. A ring all-gather of b
  bytes per worker moves (n-1) b bytes through each link, where an
  all-reduce of s bytes moves 2 (n-1)/n s (the unit of `beta`): it costs
  `alpha + beta * n * b / 2`, a whole collective's fixed cost included
  (gRPC's fixed cost is per launch).

- **Early compute.** Ops that read no trainable variable (dropout's
  random masks) wait for no update: in an unrolled block every step's run
  at the block's start, ahead of the first step's forward pass
  (`early_compute`; measured per machine in real runs by
  `scripts/bench_step_phases.py`, as how much less of its forward pass a
  block's second step waits for; `tf_preempt.bench.probe_inputs.
  early_share` says which probe gives it where).

- **Arrival order (two workers).** The model is one worker. With two,
  TensorFlow's ring is slower when task 0 (rank 0) reaches a collective
  after its peer: rank 0 then serves the peer's pending pull first, and
  its own request waits behind the reply's bytes in its link's queue
  (`scripts/bench_arrival_order.py`, which measured it). That costs
  nothing while a rank's half of the bytes fits the link's token bucket
  and a few milliseconds beyond it. Task 0 is the late one at the start
  of a block more often than not (stock Keras reduces the logs after each
  block, which leaves task 0 behind; how is not traced). Either way the
  probe's collective, released alone, takes longer than one timed back to
  back (what `alpha` and `beta` are fitted to). The model adds a penalty
  (`order_penalty`: seconds, interpolated linearly from 0 at 0, as a
  function of the seconds of traffic by which a rank's half exceeds the
  bucket; times `order_penalty_weight`) to the fixed cost of each
  collective of a block's first step that is released with nothing else
  in flight and no compute running (as the probe measured it; the traces
  show no penalty on collectives released during the backward pass) as
  soon as its gradients are ready (one released when a collective's end
  frees the credit is released by both workers at once); later steps
  start together after the previous step's reductions.

Pure numpy, an event-driven simulation; for validation and what-ifs, not
for the planner's inner loop.
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

from tf_preempt.plan import cost as cost_lib
from tf_preempt.plan import dag as dag_lib
from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import simulator

FORWARD, BACKWARD = "forward", "backward"
# The row count a worker all-gathers before its `IndexedSlices`: the int32
# shape of the indices, one dimension.
SPARSE_COUNT_BYTES = 4


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
    comm_cpu_share: the share of the core each collective's CPU work gets
      while compute also runs, in (0, 1]: 1, it preempts the compute; 0.5,
      fair time-slicing; smaller, the compute thread keeps the core and the
      collective's work waits for it. On an idle core the collectives share
      all of it.
    bytes_cpu_share: the same for the per-byte CPU work while the bytes
      move; None: `comm_cpu_share`. Moving bytes is largely the kernel's
      network processing, which preempts user threads, unlike a
      collective's fixed work, which waits for the compute thread.
    block_overhead: seconds added once per block (needs `unroll`): what
      follows the barrier (the function's return, the training loop's
      callbacks).
    block_startup: seconds before a block's first op (needs `unroll`): the
      training loop dispatching the function and, where it takes them
      eagerly (finite data, and every run before 7 December, night), the
      block's K batches from the distributed iterator. The core computes
      nothing and the link is idle; everything after it shifts by this
      much.
    early_compute: seconds of a step's forward compute that reads no
      trainable variable (needs `unroll`): dropout's random masks, which
      depend only on the step's seed, and whatever else of a later step
      the executor runs before the update it waits for (measured, not
      derived from the ops). In the unrolled block TensorFlow
      runs them for every step as soon as the block starts, not after the
      previous step's updates: each step after the block's first computes
      this much less in its forward pass, and the block's first step
      computes all of it (the later steps' share) before its first op.
      At most the forward compute of a step.
    workers: None: every tensor is reduced as the plan says (the planner's
      model; the DAG's sparse marks are ignored). n >= 1: the DAG's sparse
      tensors are all-gathered over n workers after each step's dense
      collectives, as the runtime does (module doc).
    link_burst: seconds of traffic at the link's rate that its token bucket
      holds (tc tbf's burst over its rate: 4 ms on the benchmark's links
      of >= 131 Mbit/s), >= 0. Bytes that find tokens pass at once (as
      fast as their CPU work allows), the others at the rate; the bucket
      refills at the rate up to this. 0: a plain rate (loopback, or the
      link is not known).
    fixed_cpu_fifo: on an idle core, serve the fixed CPU work of the
      collectives in flight one at a time in release order (all of the
      core the bytes leave goes to the earliest), instead of sharing the
      core among them. Either way the work adds up; with a latency
      (alpha above its CPU part) only this order lets the first end one
      CPU part before the second, as the traces show, and a chain of
      small collectives end one every CPU part. While compute runs the
      per-collective share applies either way.
    order_penalty: points (excess, seconds), excess > 0 in seconds of
      traffic at the link's rate by which a rank's half of a collective's
      bytes (two workers: `beta * bytes / 2`) exceeds `link_burst`,
      seconds a collective released alone at a block's start takes
      beyond the model's own time for it (`lone_seconds`), given how the
      workers reach it (`tf_preempt.bench.probe_inputs.order_penalty`);
      interpolated linearly from (0, 0), flat beyond the last point
      (module doc). Empty: no penalty. Needs `unroll`.
    order_penalty_weight: in [0, 1], by which the penalty is weighted.
    latency_behind_bytes: a collective's latency (the round trips of its
      fixed cost after its CPU part) starts only once no earlier
      collective's bytes are queued for or on the link: its messages
      travel behind those bytes. False: the latency overlaps them.
  """
  unroll: Optional[int] = None
  max_collectives: int = 1
  max_bytes: Optional[int] = None
  cpu: Optional[cost_lib.CostModel] = None
  comm_cpu_share: float = 1.0
  bytes_cpu_share: Optional[float] = None
  block_overhead: float = 0.0
  block_startup: float = 0.0
  early_compute: float = 0.0
  workers: Optional[int] = None
  link_burst: float = 0.0
  fixed_cpu_fifo: bool = False
  order_penalty: Tuple[Tuple[float, float], ...] = ()
  order_penalty_weight: float = 0.0
  latency_behind_bytes: bool = False

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
    if not 0 < self.comm_cpu_share <= 1:
      raise ValueError(f"comm_cpu_share={self.comm_cpu_share!r} must be in "
                       "(0, 1].")
    if self.bytes_cpu_share is not None and not 0 < self.bytes_cpu_share <= 1:
      raise ValueError(f"bytes_cpu_share={self.bytes_cpu_share!r} must be "
                       "None or in (0, 1].")
    for name in ("block_overhead", "block_startup", "early_compute"):
      value = getattr(self, name)
      if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}={value!r} must be finite and >= 0.")
      if value and self.unroll is None:
        raise ValueError(f"{name} needs unroll: the steady-state "
                         "iteration has no block.")
    if self.workers is not None and (
        isinstance(self.workers, bool) or not isinstance(self.workers, int)
        or self.workers < 1):
      raise ValueError(f"workers={self.workers!r} must be None or an int "
                       ">= 1.")
    if isinstance(self.link_burst, bool) or not (
        isinstance(self.link_burst, (int, float)) and
        math.isfinite(self.link_burst) and self.link_burst >= 0):
      raise ValueError(f"link_burst={self.link_burst!r} must be finite and "
                       ">= 0.")
    if not isinstance(self.fixed_cpu_fifo, bool):
      raise ValueError(f"fixed_cpu_fifo={self.fixed_cpu_fifo!r} must be a "
                       "bool.")
    for point in self.order_penalty:
      if (len(point) != 2 or not all(math.isfinite(v) for v in point) or
          point[0] <= 0 or point[1] < 0):
        raise ValueError(f"order_penalty={self.order_penalty!r} must be "
                         "points (excess > 0, seconds >= 0).")
    if self.order_penalty and self.unroll is None:
      raise ValueError("order_penalty needs unroll: it applies to a "
                       "block's first step.")
    if not isinstance(self.latency_behind_bytes, bool):
      raise ValueError(f"latency_behind_bytes={self.latency_behind_bytes!r}"
                       " must be a bool.")
    if not (math.isfinite(self.order_penalty_weight) and
            0 <= self.order_penalty_weight <= 1):
      raise ValueError(f"order_penalty_weight={self.order_penalty_weight!r}"
                       " must be in [0, 1].")

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
                   f"{self.cpu.beta * 1e9:.3f} ns/B on the compute core, "
                   f"{self.comm_cpu_share:.3g} of the core while compute "
                   "runs")
      if self.bytes_cpu_share is not None:
        parts.append(f"{self.bytes_cpu_share:.3g} of it for the bytes")
      if self.fixed_cpu_fifo:
        parts.append("fixed CPU work one collective at a time on an idle "
                     "core")
    if self.block_startup:
      parts.append(f"{self.block_startup * 1e3:.3f} ms per block before "
                   "its first op")
    if self.block_overhead:
      parts.append(f"{self.block_overhead * 1e3:.3f} ms per block after "
                   "the barrier")
    if self.early_compute:
      parts.append(f"{self.early_compute * 1e3:.3f} ms of each later step's "
                   "forward pass at the block's start")
    if self.workers is not None:
      parts.append(f"sparse gradients all-gathered over {self.workers} "
                   "worker(s) after the dense collectives")
    if self.link_burst:
      parts.append(f"link token bucket of {self.link_burst * 1e3:.3f} ms "
                   "of traffic")
    if self.latency_behind_bytes:
      parts.append("a collective's latency waits for the bytes ahead of it")
    if self.order_penalty and self.order_penalty_weight:
      parts.append(f"arrival-order penalty x {self.order_penalty_weight:.2f}"
                   " on a block's first collectives released alone on an "
                   "idle core")
    return "; ".join(parts)


@dataclasses.dataclass
class Execution:
  """What happened in one simulated block (or steady-state iteration).

  Attributes:
    step_time: seconds per training step: block_time / K, or, with
      `unroll=None`, the steady-state iteration time.
    block_time: seconds from the block's start to its last event (its
      start-up included), plus the model's block overhead.
    steps: steps simulated (K; 2 half-steps for the steady state: the
      backward pass of one, the forward pass of the next).
    op_start: per step, op name -> start time (ops of the block only;
      times count from the block's start, before its start-up).
    op_end: per step, op name -> end time.
    collective_launch: per step, the release time of each collective of
      the plan that is issued, in plan order (empty lists for a step
      without a backward pass; with `workers`, a collective of sparse
      pieces only is not issued).
    collective_end: per step, the end time of each of them.
    cpu_seconds: core seconds the collectives took from the compute.
    exchange_launch: per step, the release time of each all-gather of the
      sparse tensors, in issue order (per tensor: row count, rows,
      indices); empty lists without `workers` or sparse tensors.
    exchange_end: per step, the end time of each of them.
  """
  step_time: float
  block_time: float
  steps: int
  op_start: List[Dict[str, float]]
  op_end: List[Dict[str, float]]
  collective_launch: List[List[float]]
  collective_end: List[List[float]]
  cpu_seconds: float
  exchange_launch: List[List[float]] = dataclasses.field(default_factory=list)
  exchange_end: List[List[float]] = dataclasses.field(default_factory=list)


class _Collective:
  """One collective instance of one step, and its progress.

  Stages, in order: "cpu" (the fixed CPU work, on the core), "behind"
  (with `latency_behind_bytes`: waiting for the bytes ahead on the link to
  pass; no resource), "latency" (the
  rest of the fixed cost, no resource), "queued" (waiting for the link),
  "bytes" (on the link; per-byte CPU work on the core), "done".
  """

  __slots__ = ("step", "index", "nbytes", "cpu_s", "latency_s", "bytes_s",
               "f_bytes", "gates", "waiting", "stage", "left", "launch",
               "end", "gated", "then", "ready")

  def __init__(self, step, index, nbytes, cpu_s, latency_s, bytes_s, f_bytes,
               gates, waiting, gated=True):
    self.step, self.index, self.nbytes = step, index, nbytes
    self.cpu_s, self.latency_s, self.bytes_s = cpu_s, latency_s, bytes_s
    self.f_bytes = f_bytes  # core share the bytes need at full link speed
    self.gates = gates  # forward op instances whose reduction this ends
    self.waiting = waiting  # producer ops (and collectives) not yet ended
    self.gated = gated  # released within the credit (the plan's), or not
    self.then = []  # collectives that wait for this one's end
    self.stage = None
    self.left = 0.0
    self.launch = self.end = None
    self.ready = 0.0  # when its producers had all ended


def order_penalty_seconds(points: Sequence[Tuple[float, float]],
                          excess: float) -> float:
  """`ExecutionModel.order_penalty` at `excess` (0 at or below 0)."""
  if excess <= 0 or not points:
    return 0.0
  known = [(0.0, 0.0)] + sorted(points)
  for (x0, y0), (x1, y1) in zip(known, known[1:]):
    if excess <= x1:
      return y0 + (y1 - y0) * (excess - x0) / (x1 - x0)
  return known[-1][1]


def _water_fill(demands: List[float], available: float) -> List[float]:
  """Max-min fair shares of `available` for `demands` (each capped)."""
  out = [0.0] * len(demands)
  left = available
  order = sorted(range(len(demands)), key=lambda i: demands[i])
  for n, i in enumerate(order):
    out[i] = min(demands[i], left / (len(order) - n))
    left -= out[i]
  return out


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

  # Collective instances, in release order: step by step, plan order, then
  # the step's sparse exchange.
  cpu = model.cpu
  phase_cost = cost.phase()
  producer = [dag.op_index(t.producer) for t in dag.tensors]
  consumers = [[dag.op_index(c) for c in t.consumers] for t in dag.tensors]
  sparse = ([i for i, t in enumerate(dag.tensors) if t.sparse is not None]
            if model.workers is not None else [])
  colls: List[_Collective] = []
  by_producer = {}  # (step, op) -> collectives waiting for it
  f_bytes = _bytes_core_share(cost, model)
  cpu_fixed = 0.0 if cpu is None else min(cpu.alpha, cost.alpha)

  def add(coll, tensors):
    colls.append(coll)
    for p in sorted({producer[t] for t in tensors}):
      by_producer.setdefault((coll.step, p), []).append(coll)

  def all_gather(step, nbytes, gates, waiting):
    """An all-gather of `nbytes` per worker; outside the credit."""
    n = model.workers
    bytes_s = cost.beta * n * nbytes / 2 if n > 1 else 0.0
    return _Collective(step, None, nbytes, cpu_fixed, cost.alpha - cpu_fixed,
                       bytes_s, f_bytes, gates, waiting, gated=False)

  for s in range(steps):
    if BACKWARD not in runs[s]:
      continue
    for k, c in enumerate(plan.collectives):
      pieces = [p for p in c.pieces if p.tensor not in sparse]
      if not pieces:
        continue  # sparse pieces only: the runtime issues nothing
      tensors = list(dict.fromkeys(p.tensor for p in pieces))
      nbytes = sum(p.length for p in pieces)
      split = c.kind != plan_lib.ALL_REDUCE
      own = phase_cost if split else cost
      # A split phase does half of the CPU work too, as it does of alpha.
      cpu_s = cpu_fixed * (0.5 if split else 1.0)
      gates = []
      if c.kind != plan_lib.REDUCE_SCATTER and s + 1 < steps:
        for t in tensors:
          gates.extend((s + 1, j) for j in consumers[t])
      prods = {producer[t] for t in tensors}
      add(_Collective(s, k, nbytes, cpu_s, own.alpha - cpu_s,
                      own.beta * nbytes, f_bytes, gates, len(prods)),
          tensors)
    # The sparse tensors, after the dense values (binding.py): the row
    # count, then rows and indices once the count is known.
    for t in sparse:
      info = dag.tensors[t].sparse
      gates = [(s + 1, j) for j in consumers[t]] if s + 1 < steps else []
      row_count = all_gather(s, SPARSE_COUNT_BYTES, [], 0)
      add(row_count, [])
      for nbytes in (info.values_nbytes, info.indices_nbytes):
        # Waits for the gradient (its producer) and for the row count.
        coll = all_gather(s, nbytes, list(gates), 2)
        row_count.then.append(coll)
        add(coll, [t])
  # A forward op waits once per collective that reduces a byte it reads.
  for coll in colls:
    for g in coll.gates:
      waiting[g] += 1

  remaining = {}  # running op instance -> compute seconds left
  op_start = [dict() for _ in range(steps)]
  op_end = [dict() for _ in range(steps)]
  done = {key: 0 for key in count}
  next_release = 0
  in_flight: List[_Collective] = []
  link_queue: List[_Collective] = []  # fixed cost paid, waiting for link
  on_link: List[_Collective] = []  # at most one: the link is FIFO
  # The link's token bucket, in seconds of traffic at the rate: full, the
  # link having been idle through the forward pass.
  tokens = model.link_burst
  # The later steps' early compute runs first: nothing else is ready yet
  # but the first step's forward pass, which it delays by as much.
  t = model.block_startup + model.early_compute * (steps - 1)
  forward_total = sum(o.duration for o in dag.ops if o.phase == FORWARD)
  if model.early_compute > forward_total + 1e-12:
    raise ValueError(f"early_compute={model.early_compute!r} exceeds a "
                     f"step's forward compute ({forward_total!r} s).")
  later_forward_scale = (1.0 - model.early_compute / forward_total
                         if forward_total > 0 else 1.0)
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
      coll.ready = now

  def advance(coll, now):
    """Moves `coll` past every stage of zero work left; True if it moved."""
    moved = False
    while coll.left <= 0 and coll.stage != "done":
      moved = True
      if coll.stage == "cpu":
        if model.latency_behind_bytes and (link_queue or on_link):
          coll.stage, coll.left = "behind", math.inf
        else:
          coll.stage, coll.left = "latency", coll.latency_s
      elif coll.stage == "latency":
        coll.stage, coll.left = "queued", math.inf
        link_queue.append(coll)
      elif coll.stage == "bytes":
        coll.stage, coll.end = "done", now
        on_link.remove(coll)
        in_flight.remove(coll)
        for g in coll.gates:
          resolve(g)
        for other in coll.then:
          other.waiting -= 1
    return moved

  while True:
    # Settle time t: release what the order and the credit allow, start
    # ready ops, and end every op and stage with no work left.
    progressed = True
    while progressed:
      progressed = False
      while ready_ops:
        key = ready_ops.pop()
        op_start[key[0]][names[key[1]]] = t
        remaining[key] = dag.ops[key[1]].duration
        if key[0] > 0 and phase[key[1]] == FORWARD:
          remaining[key] *= later_forward_scale
      for key in [k for k, r in remaining.items() if r <= 0]:
        del remaining[key]
        end_op(key, t)
        progressed = True
      while next_release < len(colls):
        coll = colls[next_release]
        if coll.waiting:
          break
        credited = [c for c in in_flight if c.gated]
        if coll.gated and credited and (
            len(credited) >= model.max_collectives or
            (model.max_bytes is not None and
             sum(c.nbytes for c in credited) + coll.nbytes >
             model.max_bytes)):
          break
        coll.launch = t
        if (coll.gated and coll.step == 0 and not in_flight and
            not remaining and not ready_ops and coll.ready == t):
          # Released by its own gradient (not by credit that a collective's
          # end, which both workers see at once, freed) onto an idle link
          # and core in a block's first step: the peer, ahead since the
          # block's start, may be waiting for it.
          coll.latency_s += model.order_penalty_weight * order_penalty_seconds(
              model.order_penalty, coll.bytes_s / 2 - model.link_burst)
        coll.stage, coll.left = "cpu", coll.cpu_s
        in_flight.append(coll)
        next_release += 1
        progressed = True
      for coll in list(in_flight):
        progressed |= advance(coll, t)
      if model.latency_behind_bytes and not on_link and not link_queue:
        # Nothing ahead on the link: the waiting round trips can go.
        for coll in in_flight:
          if coll.stage == "behind":
            coll.stage, coll.left = "latency", coll.latency_s
            progressed = True
      if not on_link and link_queue:
        coll = link_queue.pop(0)
        coll.stage, coll.left = "bytes", coll.bytes_s
        on_link.append(coll)
        progressed = True
      for coll in on_link:
        if coll.f_bytes <= 0 and tokens > 0 and coll.left > 0:
          # No CPU work per byte: what the tokens cover passes at once.
          if coll.left <= tokens:
            tokens, coll.left = tokens - coll.left, 0.0
          else:
            tokens, coll.left = 0.0, coll.left - tokens
          progressed = True
      progressed |= bool(ready_ops)

    if not remaining and not in_flight:
      break
    # Rates until the next event. The collectives' CPU work gets the share
    # of the core the model gives it while compute runs, all of it else.
    # Bytes that find tokens are not held to the rate: their CPU work
    # takes as much of the core as it gets.
    computing = bool(remaining)
    demand = []
    for coll in in_flight:
      if coll.stage == "cpu":
        demand.append(1.0)
      elif coll.stage == "bytes" and coll.f_bytes > 0:
        demand.append(1.0 if tokens > 0 else coll.f_bytes)
      else:
        demand.append(0.0)
    if computing:
      # Each collective waits for the compute thread on its own (its work
      # is served between compute slices), so the share is per collective.
      bytes_share = (model.comm_cpu_share if model.bytes_cpu_share is None
                     else model.bytes_cpu_share)
      alloc = [min(d, bytes_share if coll.stage == "bytes" else
                   model.comm_cpu_share)
               for coll, d in zip(in_flight, demand)]
      if sum(alloc) > 1.0:
        alloc = _water_fill(demand, 1.0)
    elif model.fixed_cpu_fifo:
      # The bytes' work first (the kernel's), then the fixed work one
      # collective at a time in release order (in_flight keeps it).
      alloc = _water_fill([d if coll.stage == "bytes" else 0.0
                           for coll, d in zip(in_flight, demand)], 1.0)
      left = 1.0 - sum(alloc)
      for i, coll in enumerate(in_flight):
        if coll.stage == "cpu" and left > 0:
          alloc[i] = min(demand[i], left)
          left -= alloc[i]
    else:
      alloc = _water_fill(demand, 1.0)
    used = sum(alloc)
    compute_rate = max(0.0, 1.0 - used)
    rates = []
    for coll, a in zip(in_flight, alloc):
      if coll.stage == "cpu":
        rates.append(a)
      elif coll.stage == "latency":
        rates.append(1.0)
      elif coll.stage == "bytes":
        rates.append(1.0 if coll.f_bytes <= 0 else a / coll.f_bytes)
      else:
        rates.append(0.0)
    dt = math.inf
    if remaining and compute_rate > 0:
      dt = min(remaining.values()) / compute_rate
    for coll, r in zip(in_flight, rates):
      if r > 0:
        dt = min(dt, coll.left / r)
    # The bucket refills at the rate (1 s of traffic per second) and drains
    # at the speed of the bytes on the link; faster than the rate, it
    # empties (an event: the bytes fall back to the rate).
    link_rate = next((r for coll, r in zip(in_flight, rates)
                      if coll.stage == "bytes"), 0.0)
    if tokens > 0 and link_rate > 1.0:
      dt = min(dt, tokens / (link_rate - 1.0))
    if not math.isfinite(dt):
      raise RuntimeError("execute: nothing can progress (a dependency cycle "
                         "between the plan and the DAG?)")
    t_next = t + dt
    cpu_seconds += used * dt
    # Round-off must not leave work a few ulps short of its end.
    eps = 1e-12 * max(1.0, t_next)
    for key in remaining:
      left = remaining[key] - compute_rate * dt
      remaining[key] = 0.0 if left <= eps else left
    for coll, r in zip(in_flight, rates):
      if r > 0:
        left = coll.left - r * dt
        coll.left = 0.0 if left <= eps else left
    if model.link_burst:
      level = tokens + (1.0 - link_rate) * dt
      tokens = 0.0 if level <= eps else min(model.link_burst, level)
    t = t_next

  if next_release < len(colls):
    raise RuntimeError("execute: a collective was never released.")
  ends = [t]
  ends += [e for d in op_end for e in d.values()]
  block = max(ends) + model.block_overhead
  launch = [[] for _ in range(steps)]
  end = [[] for _ in range(steps)]
  x_launch = [[] for _ in range(steps)]
  x_end = [[] for _ in range(steps)]
  for coll in colls:
    if coll.gated:
      launch[coll.step].append(coll.launch)
      end[coll.step].append(coll.end)
    else:
      x_launch[coll.step].append(coll.launch)
      x_end[coll.step].append(coll.end)
  return Execution(
      step_time=block if model.unroll is None else block / model.unroll,
      block_time=block, steps=steps, op_start=op_start, op_end=op_end,
      collective_launch=launch, collective_end=end, cpu_seconds=cpu_seconds,
      exchange_launch=x_launch, exchange_end=x_end)


def repeated_seconds(cost: cost_lib.CostModel, nbytes: float,
                     model: Optional[ExecutionModel] = None) -> float:
  """Seconds of one all-reduce of `nbytes` repeated back to back, alone.

  What timing a collective alone measures (`tf_preempt.bench.comm_worker`:
  the median of calls made one right after the other), as `execute`
  models it in steady state on an idle core: the fixed cost `alpha`, with
  the link idle (the bucket refills by that much), then the bytes, `b =
  beta * nbytes` seconds at the rate, of which the bucket's tokens T pass
  at the speed their CPU work allows (f = cpu.beta / beta of the rate's
  time, the core's share they need): `max(f * b, b - T)`. T is
  `model.link_burst` if a repeat's fixed cost refills what its bytes
  drain (`b (1 - f) <= alpha`), else `min(link_burst, alpha)`. So with a
  bucket of at least `alpha` a collective of `b >= alpha / (1 - f)` takes
  `b`: its fixed cost is hidden, and a linear fit of such samples puts
  alpha near 0. Without a bucket: `alpha + beta * nbytes`.

  Args:
    cost: the collective's cost model (alpha, beta at the link's rate).
    nbytes: its bytes.
    model: `cpu` and `link_burst` are used; None: neither.

  Returns:
    The seconds.
  """
  model = model or ExecutionModel()
  b = cost.beta * nbytes
  f = _bytes_core_share(cost, model)
  burst = model.link_burst
  tokens = burst if b * (1.0 - f) <= cost.alpha else min(burst, cost.alpha)
  return _alone_seconds(cost, b, f, tokens)


def lone_seconds(cost: cost_lib.CostModel, nbytes: float,
                 model: Optional[ExecutionModel] = None) -> float:
  """Seconds of one all-reduce of `nbytes` released alone on an idle core.

  As `execute` runs it after an idle link (a full bucket): the fixed cost
  `alpha`, then the bytes as in `repeated_seconds` with all of
  `model.link_burst`'s tokens: `alpha + max(f * b, b - link_burst)`.

  Args:
    cost: the collective's cost model (alpha, beta at the link's rate).
    nbytes: its bytes.
    model: `cpu` and `link_burst` are used; None: neither.

  Returns:
    The seconds.
  """
  model = model or ExecutionModel()
  return _alone_seconds(cost, cost.beta * nbytes,
                        _bytes_core_share(cost, model), model.link_burst)


def _alone_seconds(cost: cost_lib.CostModel, b: float, f: float,
                   tokens: float) -> float:
  """A collective alone: its fixed cost, then `b` seconds of bytes at the
  rate, of which `tokens` pass as fast as their CPU work (f of the rate's
  time) allows."""
  return cost.alpha + max(f * b, b - tokens)


def _bytes_core_share(cost: cost_lib.CostModel, model: ExecutionModel
                      ) -> float:
  """The core share a collective's bytes need at the link's rate."""
  if model.cpu is not None and cost.beta > 0:
    return min(1.0, model.cpu.beta / cost.beta)
  return 0.0


def exchange_tail(dag: dag_lib.TrainingDAG, cost: cost_lib.CostModel,
                  model: ExecutionModel) -> float:
  """Seconds a step's sparse exchange lasts after its first all-gather.

  A trace that records only the plan's collectives shows this much of the
  exchange after the step's last dense collective: the first all-gather
  (the row count, 4 bytes) is issued with that collective, its fixed cost
  overlaps that collective's bytes and its bytes follow them on the link;
  the rest (rows and indices, for every sparse tensor) comes after.
  Simulated with `model` on an otherwise idle core and link.

  Args:
    dag: the training DAG.
    cost: the cost of one collective timed alone.
    model: the execution model; its `workers` turns the exchange on.

  Returns:
    The seconds; 0 without `model.workers` or sparse tensors.
  """
  tensors = [dataclasses.replace(t, producer="backward",
                                 consumers=("forward",))
             for t in dag.tensors if t.sparse is not None]
  if model.workers is None or not tensors:
    return 0.0
  alone = dag_lib.TrainingDAG(
      [dag_lib.Op("forward", FORWARD, 0.0),
       dag_lib.Op("backward", BACKWARD, 0.0)], [], tensors)
  plan = plan_lib.plan_from_groups(
      [plan_lib.PlanTensor(t.name, t.nbytes, t.itemsize) for t in tensors],
      [[(i, 0, t.nbytes)] for i, t in enumerate(tensors)])
  ends = execute(alone, cost, plan, dataclasses.replace(
      model, unroll=1, block_overhead=0.0)).exchange_end[0]
  return max(ends) - ends[0]
