"""Discrete-event simulation of one steady-state iteration under a plan.

Model (the same one every scheduler optimises, see `problem.py`):

- The backward pass starts at t=0; an op starts when all its predecessor ops
  have ended (unlimited compute parallelism). A gradient is ready at the end
  of its producer.
- Collectives run one at a time on one channel, strictly in plan order (the
  global order every worker shares). A collective starts at
  max(previous collective's end, time all tensors of its pieces are ready)
  and takes alpha + beta * bytes.
- A forward op of the NEXT iteration starts at the latest of: the end of its
  predecessors, the end of the whole backward pass, and the end of the last
  collective holding any byte of each tensor it reads.
- iteration_time = max(end of the last forward op, end of the last
  collective).

Split plans (DeAR): a reduce-scatter or an all-gather costs
`cost.phase()` (half of alpha and of beta, ring). Reduce-scatters start when
their tensors are ready, like all-reduces; an all-gather comes after its
reduce-scatter in the one channel order, so it cannot start earlier. A
tensor counts as reduced at the end of the last all-reduce or all-gather
holding its bytes: that, not the reduce-scatter, gates its forward readers.
"""

import dataclasses
from typing import Dict, List

import numpy as np

from tf_preempt.plan import cost as cost_lib
from tf_preempt.plan import dag as dag_lib
from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import problem as problem_lib


@dataclasses.dataclass
class Timeline:
  """What happened in one simulated iteration.

  Attributes:
    iteration_time: seconds from the backward start to the end of the next
      forward pass (or of the last collective, if later).
    op_start: op name -> start time.
    op_end: op name -> end time.
    collective_start: start of each collective, in plan order.
    collective_end: end of each collective, in plan order.
    tensor_ready: tensor name -> time its gradient is ready.
    tensor_reduced: tensor name -> end of its last all-reduce or all-gather.
    backward_end: end of the backward pass.
  """
  iteration_time: float
  op_start: Dict[str, float]
  op_end: Dict[str, float]
  collective_start: List[float]
  collective_end: List[float]
  tensor_ready: Dict[str, float]
  tensor_reduced: Dict[str, float]
  backward_end: float


def check_plan_matches(dag: dag_lib.TrainingDAG, plan: plan_lib.Plan) -> None:
  """Raises ValueError unless the plan was made for this DAG's tensors."""
  if len(plan.tensors) != len(dag.tensors):
    raise ValueError(f"Plan has {len(plan.tensors)} tensors, the DAG has "
                     f"{len(dag.tensors)}.")
  for pt, dt in zip(plan.tensors, dag.tensors):
    if pt.name != dt.name or pt.nbytes != dt.nbytes:
      raise ValueError(f"Plan tensor {pt.name!r} ({pt.nbytes} bytes) does not "
                       f"match DAG tensor {dt.name!r} ({dt.nbytes} bytes).")


def simulate(dag: dag_lib.TrainingDAG, cost: cost_lib.CostModel,
             plan: plan_lib.Plan) -> Timeline:
  """Simulates one iteration of `dag` under `plan`.

  Args:
    dag: the training DAG.
    cost: the collective cost model.
    plan: a plan over the DAG's tensors, in the same order.

  Returns:
    The Timeline.

  Raises:
    ValueError: if the plan does not match the DAG.
  """
  check_plan_matches(dag, plan)
  start, end = (a.copy() for a in dag.backward_times())
  ready = dag.ready_times()
  n_coll = plan.num_collectives
  coll_ready = np.array([max(ready[t] for t in c.tensors)
                         for c in plan.collectives])
  phase = cost.phase()
  durations = np.array(
      [(cost if c.kind == plan_lib.ALL_REDUCE else phase).seconds(c.nbytes)
       for c in plan.collectives], dtype=float)
  coll_end = problem_lib.channel_ends(coll_ready, durations)
  coll_start = coll_end - durations
  reduced = np.zeros(len(dag.tensors))
  for k, c in enumerate(plan.collectives):
    if c.kind == plan_lib.REDUCE_SCATTER:
      continue
    for t in c.tensors:
      reduced[t] = max(reduced[t], coll_end[k])

  backward_end = dag.backward_end()
  gate = {}  # forward op index -> latest reduction end it waits for
  for i, t in enumerate(dag.tensors):
    for c in t.consumers:
      j = dag.op_index(c)
      gate[j] = max(gate.get(j, 0.0), reduced[i])
  pred = dag.predecessors()
  last = backward_end
  for i in dag.topological_order():
    if dag.ops[i].phase != "forward":
      continue
    s = max([backward_end, gate.get(i, 0.0)] + [end[j] for j in pred[i]])
    start[i] = s
    end[i] = s + dag.ops[i].duration
    last = max(last, end[i])
  if n_coll:
    last = max(last, float(coll_end[-1]))
  names = [o.name for o in dag.ops]
  return Timeline(
      iteration_time=float(last),
      op_start=dict(zip(names, start.tolist())),
      op_end=dict(zip(names, end.tolist())),
      collective_start=coll_start.tolist(),
      collective_end=coll_end.tolist(),
      tensor_ready={t.name: float(r) for t, r in zip(dag.tensors, ready)},
      tensor_reduced={t.name: float(r) for t, r in zip(dag.tensors, reduced)},
      backward_end=float(backward_end))
