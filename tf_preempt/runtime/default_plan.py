"""Plans made at run time when the user gives none.

Without a measured DAG the runtime knows only the gradients' sizes and order.
It assumes what holds for most models: the list is in forward order, so the
last gradient is ready first (reverse-order readiness) and the first one is
needed first by the next forward pass (forward-order priority), and compute
time grows with a layer's size. The planner makes the plan from that chain
DAG and a nominal ring cost model.

Two schedulers are not planned but copied from stock TensorFlow, because
their point is to be bit-identical to it: "tf_default" packs exactly as
`CollectiveAllReduce` does with the given `bytes_per_pack` (0: everything in
one pack) and "tf_packed" does the same with its own `bytes_per_pack` option.
Both reverse the list first, as stock does, and -- also as stock does --
issue one collective per tensor, unpacked, when executing eagerly.

One plan is made per dtype group (collectives never mix dtypes and nothing
is ever cast); the groups' collectives are issued one group after the other,
in the order the dtypes first appear.
"""

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from tf_preempt import plan as plan_lib
from tf_preempt.plan.plan import Plan
from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.plan import plan_from_groups
from tf_preempt.runtime import binding
from tf_preempt.runtime import tf_internals

# Schedulers the planner implements (tf_preempt.plan.make_plan).
PLANNER_SCHEDULERS = tuple(plan_lib.SCHEDULERS)
# Schedulers whose plan is copied from stock TensorFlow's packing.
STOCK_SCHEDULERS = ("tf_default", "tf_packed")
SCHEDULERS = PLANNER_SCHEDULERS

# The nominal machine a default plan assumes: 10 Gbit/s links, 50 us per
# ring step, and compute of 1 ns per gradient byte forward, twice that
# backward (a layer's FLOPs grow with its parameter count). Only the ratios
# matter to the planner's choices.
DEFAULT_BANDWIDTH_BYTES_PER_S = 1.25e9
DEFAULT_LATENCY_S = 50e-6
FORWARD_S_PER_BYTE = 1e-9
BACKWARD_S_PER_BYTE = 2e-9
MIN_OP_S = 1e-6


def check_scheduler(scheduler: str) -> str:
  """Returns the scheduler name, or raises ValueError listing valid ones."""
  if scheduler not in SCHEDULERS:
    raise ValueError(f"Unknown scheduler {scheduler!r}; valid schedulers: "
                     f"{', '.join(SCHEDULERS)}.")
  return scheduler


def _plan_tensor(spec: binding.ValueSpec) -> PlanTensor:
  return PlanTensor(name=spec.name,
                    nbytes=spec.num_elements * spec.dtype.size,
                    itemsize=spec.dtype.size, dtype=spec.dtype.name,
                    shape=tuple(spec.shape.as_list()))


def stock_groups(specs: Sequence[binding.ValueSpec], positions: Sequence[int],
                 bytes_per_pack: int, eager: bool) -> List[List[int]]:
  """The packs stock `CollectiveAllReduce` makes, as lists of positions.

  Args:
    specs: the signature of every value.
    positions: the dense values to pack, in list order.
    bytes_per_pack: stock's `CommunicationOptions.bytes_per_pack`.
    eager: whether executing eagerly (stock does not pack then).

  Returns:
    The packs in issue order; a pack mixing dtypes is split into one pack per
    dtype, in order (stock would fail to concatenate it).
  """
  order = list(reversed(positions))
  if eager:
    return [[p] for p in order]
  # TF's own helper, so the packing cannot drift from stock's; TensorSpecs
  # carry the shape and dtype it reads.
  tagged = [tf.TensorSpec(specs[p].shape, specs[p].dtype, name=str(p))
            for p in order]
  packs = []
  for pack in tf_internals.group_by_size(tagged, bytes_per_pack):
    by_dtype = binding.group_by_dtype([int(t.name) for t in pack], specs)
    packs.extend(by_dtype.values())
  return packs


def make_default_plan(specs: Sequence[binding.ValueSpec],
                      positions: Sequence[int], scheduler: str,
                      num_workers: int, bytes_per_pack: int = 0,
                      eager: bool = False,
                      scheduler_options: Optional[Dict[str, Any]] = None
                      ) -> Optional[Plan]:
  """Makes a plan for the values at `positions` from their sizes alone.

  Args:
    specs: the signature of every value.
    positions: the plannable values (dense, known shape, non-empty).
    scheduler: one of `SCHEDULERS`.
    num_workers: the all-reduce group size.
    bytes_per_pack: `CommunicationOptions.bytes_per_pack` (read by
      "tf_default" only, as stock reads it).
    eager: whether executing eagerly (read by the stock schedulers only).
    scheduler_options: extra options for the planner (e.g. "bytes_per_pack"
      for "tf_packed", a chunk size for "pace").

  Returns:
    A `Plan` whose tensors are `specs[p] for p in positions`, in that order,
    or None if `positions` is empty.

  Raises:
    ValueError: on an unknown scheduler.
  """
  check_scheduler(scheduler)
  if not positions:
    return None
  options = dict(scheduler_options or {})
  local = {p: i for i, p in enumerate(positions)}
  tensors = [_plan_tensor(specs[p]) for p in positions]
  if scheduler in STOCK_SCHEDULERS:
    if scheduler == "tf_packed":
      # Its own option first, then the communication options' (as stock
      # reads them), then the planner's default for the baseline.
      pack = int(options.get("bytes_per_pack") or bytes_per_pack or
                 plan_lib.options_of("tf_packed")["bytes_per_pack"])
    else:
      pack = int(bytes_per_pack)
    groups = [[(local[p], 0, tensors[local[p]].nbytes) for p in pack_]
              for pack_ in stock_groups(specs, positions, pack, eager)]
    return plan_from_groups(tensors, groups, scheduler=scheduler,
                            options={"bytes_per_pack": pack, "eager": eager})

  cost = plan_lib.CostModel.ring(max(1, num_workers),
                                DEFAULT_BANDWIDTH_BYTES_PER_S,
                                DEFAULT_LATENCY_S)
  groups = []
  for dtype_positions in binding.group_by_dtype(positions, specs).values():
    sizes = [tensors[local[p]].nbytes for p in dtype_positions]
    dag = plan_lib.TrainingDAG.chain(
        forward_s=[max(MIN_OP_S, s * FORWARD_S_PER_BYTE) for s in sizes],
        backward_s=[max(MIN_OP_S, s * BACKWARD_S_PER_BYTE) for s in sizes],
        nbytes=sizes, itemsize=specs[dtype_positions[0]].dtype.size)
    sub = plan_lib.make_plan(dag, cost, scheduler=scheduler, **options)
    for coll in sub.collectives:
      groups.append([(local[dtype_positions[p.tensor]], p.offset, p.length)
                     for p in coll.pieces])
  return plan_from_groups(tensors, groups, scheduler=scheduler,
                          options=options)
