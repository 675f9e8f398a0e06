"""The scheduler registry and `make_plan`.

A scheduler is one function `policy(problem, **options) -> collectives`
(lists of (tensor, offset, length) in issue order). It sees only the
numpy `Problem`, never TensorFlow. `make_plan` checks the name and options,
wraps the result in a `Plan` and stores the simulator's prediction.

Split schedulers (`SPLIT_SCHEDULERS`, DeAR-style reduce-scatter + all-gather,
`rsag.py`) return (kind, collective) pairs instead. They are for simulation
only and are kept out of `SCHEDULERS`, the list the runtime accepts.
"""

import dataclasses
import inspect
from typing import Callable, Dict, List

from tf_preempt.plan import baselines
from tf_preempt.plan import cost as cost_lib
from tf_preempt.plan import dag as dag_lib
from tf_preempt.plan import exact
from tf_preempt.plan import pace as pace_lib
from tf_preempt.plan import plan as plan_lib
from tf_preempt.plan import problem as problem_lib
from tf_preempt.plan import rsag
from tf_preempt.plan import simulator

Policy = Callable[..., List[problem_lib.Group]]


def optimal(prob: problem_lib.Problem, chunk_bytes=None
            ) -> List[problem_lib.Group]:
  """Exact best order of one-chunk collectives for a fixed partition.

  No fusion. Raises ValueError above `exact.MAX_STATES` states.
  """
  return exact.optimal_order(prob, exact.chunks_of(prob, chunk_bytes))[1]


_POLICIES: Dict[str, Policy] = {
    "pace": pace_lib.pace,
    "priority": baselines.priority,
    "fifo": baselines.fifo,
    "tf_default": baselines.tf_default,
    "tf_packed": baselines.tf_packed,
    "horovod": baselines.horovod,
    "ddp": baselines.ddp,
    "bytescheduler": baselines.bytescheduler,
    "optimal": optimal,
}

SCHEDULERS = tuple(_POLICIES)

_SPLIT_POLICIES: Dict[str, Callable[..., List[rsag.Op]]] = {
    "pace_rsag": rsag.pace_rsag,
}

SPLIT_SCHEDULERS = tuple(_SPLIT_POLICIES)


def _policy(scheduler: str) -> Callable[..., list]:
  policy = _POLICIES.get(scheduler) or _SPLIT_POLICIES.get(scheduler)
  if policy is None:
    raise ValueError(f"Unknown scheduler {scheduler!r}; valid: "
                     f"{', '.join(SCHEDULERS + SPLIT_SCHEDULERS)}.")
  return policy


def options_of(scheduler: str) -> Dict[str, object]:
  """The options a scheduler takes, with their defaults.

  Raises:
    ValueError: for an unknown scheduler, listing the valid ones.
  """
  params = list(inspect.signature(_policy(scheduler)).parameters.values())
  return {p.name: p.default for p in params[1:]}


def make_plan(dag: dag_lib.TrainingDAG, cost: cost_lib.CostModel,
              scheduler: str = "pace", **options) -> plan_lib.Plan:
  """Plans the all-reduce of `dag`'s gradients.

  Args:
    dag: the training DAG.
    cost: the collective cost model.
    scheduler: one of SCHEDULERS, or of SPLIT_SCHEDULERS for a split
      (reduce-scatter + all-gather) plan.
    **options: the scheduler's options (see `options_of`).

  Returns:
    A Plan over dag.tensors (same order and names) with
    predicted_iteration_s from the simulator and the options recorded.

  Raises:
    ValueError: for an unknown scheduler or option, or invalid values.
  """
  valid = options_of(scheduler)
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(f"Unknown option(s) {unknown} for scheduler "
                     f"{scheduler!r}; valid: {sorted(valid) or 'none'}.")
  prob = problem_lib.Problem.from_dag(dag, cost)
  result = _policy(scheduler)(prob, **options)
  if scheduler in _SPLIT_POLICIES:
    kinds = [k for k, _ in result]
    groups = [g for _, g in result]
  else:
    kinds, groups = None, result
  tensors = [plan_lib.PlanTensor(t.name, t.nbytes, t.itemsize)
             for t in dag.tensors]
  plan = plan_lib.plan_from_groups(tensors, groups, scheduler=scheduler,
                                   options=dict(options), kinds=kinds)
  timeline = simulator.simulate(dag, cost, plan)
  return dataclasses.replace(plan,
                             predicted_iteration_s=timeline.iteration_time)
