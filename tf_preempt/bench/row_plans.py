"""The plan each benchmark row ran, on the model's DAG, and what it issues.

A row's recorded plan put on the DAG's tensors, or the stand-in the runtime
or stock TensorFlow would make; the DAG scaled to the measured compute; the
row's flags as execution-model arguments (credit, --sparse_as_dense); and
what the runtime issues of a plan (its dense collectives, where the first
becomes ready, the tensors each completes, what follows the last and the
updates still queued then, and the gap between a block's steps). Pure
Python; the planner on first use.
"""

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence

from tf_preempt.bench import update_backlog

# The runtime's credit on CPUs (tf_preempt.runtime.scheduling).
DEFAULT_CREDIT_COLLECTIVES = 2


def _with_durations(dag, duration_of):
  """`dag` with each op's duration `duration_of(op)`."""
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  ops = [plan_lib.Op(o.name, o.phase, duration_of(o)) for o in dag.ops]
  return plan_lib.TrainingDAG(ops, dag.edges, dag.tensors)


def scaled(dag, factor: float, forward_factor: Optional[float] = None):
  """`dag` with every op x factor (forward ops x forward_factor if given)."""
  fwd = factor if forward_factor is None else forward_factor
  return _with_durations(dag, lambda o: o.duration * (
      fwd if o.phase == "forward" else factor))


def with_shares(dag, shares: Dict[str, float]):
  """`dag` with each op's duration its share of the whole (ops missing from
  `shares` take 0), times the dag's own forward + backward length."""
  total = dag.forward_length() + dag.backward_end()
  unknown = sorted(set(shares) - {o.name for o in dag.ops})
  if unknown:
    raise ValueError(f"shares of ops the DAG does not have: {unknown[:5]}")
  return _with_durations(dag, lambda o: shares.get(o.name, 0.0) * total)


def with_forward_share(dag, share: float):
  """`dag` with the forward pass `share` of forward + backward, same sum."""
  forward, backward = dag.forward_length(), dag.backward_end()
  total = forward + backward
  return scaled(dag, (1 - share) * total / backward,
                 share * total / forward)


def _dense(dag) -> List[int]:
  """Positions of the DAG's dense tensors (the ones the runtime plans)."""
  return [i for i, t in enumerate(dag.tensors) if t.sparse is None]


def _on_dag(dag, positions: Sequence[int], plan):
  """`plan`, made for the DAG's tensors at `positions` (in order), as a
  plan over all of the DAG's tensors: the others (the sparse ones) are
  appended, one collective each, as the runtime issues them after the
  plan's; the execution model replaces those by its all-gathers."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan.plan import ALL_REDUCE
  # pylint: enable=g-import-not-at-top
  tensors = plan_lib.make_plan(dag, plan_lib.CostModel(0, 0), "fifo").tensors
  groups = [[(positions[p.tensor], p.offset, p.length) for p in c.pieces]
            for c in plan.collectives]
  kinds = [c.kind for c in plan.collectives]
  for i in sorted(set(range(len(dag.tensors))) - set(positions)):
    groups.append([(i, 0, dag.tensors[i].nbytes)])
    kinds.append(ALL_REDUCE)
  return plan_lib.plan_from_groups(tensors, groups, scheduler=plan.scheduler,
                                   options=plan.options, kinds=kinds)


def recorded_plan(plans_dir: str, name: str, dag):
  """(The plan row `name` ran, or None; how it was read).

  The runtime names a plan's tensors after graph tensors ("value[3]"), not
  the DAG's layers, and its own plans cover only the dense gradients (it
  all-gathers `IndexedSlices` outside the plan). A plan whose tensor sizes
  equal the DAG's, or its dense tensors', in order (both follow the
  model's trainable variables), is put on the DAG's tensors. Otherwise the
  recorded plan is not usable here: (None, why).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan import simulator
  # pylint: enable=g-import-not-at-top
  path = os.path.join(plans_dir, name + ".json")
  if not os.path.isfile(path):
    return None, "not recorded"
  with open(path) as f:
    plan = plan_lib.Plan.from_json(f.read())
  try:
    simulator.check_plan_matches(dag, plan)
    return plan, "recorded"
  except ValueError as e:
    error = e
  sizes = [t.nbytes for t in plan.tensors]
  dense = _dense(dag)
  if sizes == [t.nbytes for t in dag.tensors]:
    return (_on_dag(dag, range(len(dag.tensors)), plan),
            "recorded (tensors matched by position and size)")
  if len(dense) < len(dag.tensors) and sizes == [dag.tensors[i].nbytes
                                                  for i in dense]:
    return (_on_dag(dag, dense, plan),
            "recorded (the dense tensors, matched by position and size)")
  return None, f"recorded for other tensors ({error})"


def runtime_plan(dag, scheduler: str, workers: int, options: Dict[str, Any]):
  """The plan the runtime makes for `dag`'s tensors from their sizes alone.

  Mirrors `tf_preempt.runtime.default_plan.make_default_plan` for one
  float32 group and a planner scheduler (that function needs the runtime's
  value specs): a chain DAG with one layer per dense tensor (the runtime
  plans no `IndexedSlices`), compute growing with its size, and the
  nominal ring cost model. The sparse tensors are appended (`_on_dag`).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.runtime import default_plan
  # pylint: enable=g-import-not-at-top
  dense = _dense(dag)
  sizes = [dag.tensors[i].nbytes for i in dense]
  chain = plan_lib.TrainingDAG.chain(
      forward_s=[max(default_plan.MIN_OP_S,
                     s * default_plan.FORWARD_S_PER_BYTE) for s in sizes],
      backward_s=[max(default_plan.MIN_OP_S,
                      s * default_plan.BACKWARD_S_PER_BYTE) for s in sizes],
      nbytes=sizes, itemsize=dag.tensors[0].itemsize)
  nominal = plan_lib.CostModel.ring(
      max(1, workers), default_plan.DEFAULT_BANDWIDTH_BYTES_PER_S,
      default_plan.DEFAULT_LATENCY_S)
  sub = plan_lib.make_plan(chain, nominal, scheduler=scheduler, **options)
  return _on_dag(dag, dense, dataclasses.replace(sub, options=options))


def row_plan(plans_dir, name, scheduler, args, dag, cost, workers):
  """(The plan row `name` ran, or the best stand-in; where it came from).

  Args:
    plans_dir: RESULTS_DIR/plans (`recorded_plan`).
    name: the row, NAME@K.
    scheduler: its NAME.
    args: its bench.py flags (details.json's settings).
    dag: the training DAG.
    cost: the cost model of a collective, for stock TensorFlow's packing.
    workers: the benchmark's, for the runtime's nominal ring.

  Returns:
    (the recorded plan, or stock packing for tf_default / tf_packed, else
    `runtime_plan`; a description of where it came from).
  """
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  plan, how = recorded_plan(plans_dir, name, dag)
  if plan is not None:
    return plan, how
  given = given_flags(args)
  if scheduler in ("tf_default", "tf_packed"):
    options = {}
    if scheduler == "tf_packed" and "bytes_per_pack" in given:
      options["bytes_per_pack"] = int(given["bytes_per_pack"])
    # Stock packs the dense gradients; IndexedSlices are all-gathered.
    dense = _dense(dag)
    sub_dag = plan_lib.TrainingDAG(dag.ops, dag.edges,
                                   [dag.tensors[i] for i in dense])
    plan, source = (_on_dag(dag, dense, plan_lib.make_plan(
        sub_dag, cost, scheduler, **options)),
                    "stock packing (planner's copy)")
  else:
    plan, source = (runtime_plan(dag, scheduler, workers, {}),
                    "runtime's plan from gradient sizes (rebuilt)")
  if how != "not recorded":
    source += f"; plans/{name}.json {how}"
  return plan, source


def given_flags(args: Sequence[str]) -> Dict[str, str]:
  """{name: value} of a row's flags written --name=value (others left out)."""
  return dict(a[2:].split("=", 1) for a in args if a.startswith("--") and
              "=" in a)


def gathering_workers(args: Sequence[str], workers: int) -> Optional[int]:
  """`ExecutionModel.workers` of a row run with bench.py flags `args` on
  `workers` workers: None with --sparse_as_dense (nothing all-gathered)."""
  return None if sparse_as_dense(args) else workers


def sparse_as_dense(args: Sequence[str]) -> bool:
  """Whether a row ran with --sparse_as_dense: its `IndexedSlices` were
  densified and reduced as its plan says, not all-gathered after it."""
  value = None
  for a in args:
    if a == "--sparse_as_dense":
      value = True
    elif a == "--nosparse_as_dense":
      value = False
    elif a.startswith("--sparse_as_dense="):
      value = a.split("=", 1)[1].lower() in ("true", "1", "yes")
  return bool(value)


def credit(given: Dict[str, str]) -> Dict[str, Any]:
  """`ExecutionModel` credit arguments of a row's --credit_* flags (the
  runtime's default on CPUs where absent)."""
  return {"max_collectives": int(given.get("credit_collectives",
                                           DEFAULT_CREDIT_COLLECTIVES)),
          "max_bytes": (int(given["credit_bytes"]) if "credit_bytes" in given
                        else None)}


def as_ran(model, unroll: int, args: Sequence[str],
           workers: Optional[int], **changes):
  """`model` (an `ExecutionModel`) as a row ran: its K, the credit of its
  bench.py flags `args` and its `workers` (None with --sparse_as_dense);
  `changes` replace more fields."""
  return dataclasses.replace(model, unroll=unroll,
                             **credit(given_flags(args)), workers=workers,
                             **changes)


def issued_tensors(dag, plan, workers: Optional[int]) -> List[set]:
  """The tensors of each collective of `plan` the runtime issues, in order.

  Args:
    dag: the training DAG.
    plan: a plan over it.
    workers: as `ExecutionModel.workers`: with workers the DAG's sparse
      tensors are all-gathered instead, their pieces dropped from the
      plan (a collective left empty is not issued); None keeps them.
  """
  sparse = set()
  if workers is not None:
    sparse = {i for i, t in enumerate(dag.tensors) if t.sparse is not None}
  issued = [{p.tensor for p in c.pieces} - sparse for c in plan.collectives]
  return [tensors for tensors in issued if tensors]


def step_gap(dag, plan, model, run) -> Optional[float]:
  """From the first step's last collective's end to the second step's
  first ready one in `run` (an `Execution` of `dag` and `plan` under
  `model`), as `trace_calibration.trace_blocks` measures it in a trace
  ("step_gap_s"); None with fewer than two steps or collectives."""
  if run.steps < 2 or not run.collective_end[0]:
    return None
  issued = issued_tensors(dag, plan, model.workers)
  if not issued:
    return None
  ready = min(max(run.op_end[1][dag.tensors[t].producer] for t in tensors)
              for tensors in issued)
  return ready - max(run.collective_end[0])


def per_tensor_collectives(dag, plan) -> bool:
  """Whether `plan` issues a collective per dense tensor or more (chunks,
  as priority and bytescheduler do) rather than fusing tensors."""
  return dense_collectives(dag, plan) >= len(_dense(dag))


def dense_collectives(dag, plan) -> int:
  """Collectives of `plan` the runtime issues: those with a dense piece."""
  return len(issued_tensors(dag, plan, workers=1))


def first_ready_fraction(dag, plan, workers: Optional[int]
                         ) -> Optional[float]:
  """Where in the backward pass a step's first collective becomes ready.

  A trace's block head (block start to the first ready gradient) is the
  start-up, the forward pass and this fraction of the backward pass: the
  time until every tensor of the earliest-ready collective is produced.
  The same at any forward share (`with_forward_share` scales each pass
  as a whole).

  Args:
    dag: the training DAG.
    plan: the row's plan over it.
    workers: as in `issued_tensors`.

  Returns:
    The fraction in [0, 1], or None if the plan issues no collective.
  """
  ready = dag.ready_times()
  readies = [max(ready[t] for t in tensors)
             for tensors in issued_tensors(dag, plan, workers)]
  if not readies:
    return None
  return float(min(readies) / dag.backward_end())


def completed_tensors(dag, plan, workers: Optional[int]) -> List[int]:
  """Per collective the runtime issues for `plan`, the tensors it
  completes (`update_backlog.completed_tensors` of `issued_tensors`)."""
  return update_backlog.completed_tensors(issued_tensors(dag, plan, workers))


def _without_overhead(dag, cost, plan, model):
  """The model's run without the block overhead (which moves no event),
  and the ends of its planned collectives."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  ex = execution.execute(dag, cost, plan,
                         dataclasses.replace(model, block_overhead=0.0))
  return ex, [e for step in ex.collective_end for e in step]


def model_tail(dag, cost, plan, model) -> float:
  """Seconds the execution model puts after a block's last planned
  collective: what a trace's block tail holds of the model (the sparse
  all-gathers follow the dense collectives and are not traced); 0 without
  them. Simulated without the block overhead."""
  ex, ends = _without_overhead(dag, cost, plan, model)
  return ex.block_time - max(ends) if ends else 0.0


def queued_updates(dag, cost, plan, model, per_tensor_s: float) -> float:
  """Seconds of update work the execution model leaves queued when a
  block's last planned collective ends (`update_backlog.backlog_s` over
  its last step's collectives, `per_tensor_s` per completed tensor); 0
  without collectives."""
  ex, ends = _without_overhead(dag, cost, plan, model)
  if not ends:
    return 0.0
  return update_backlog.backlog_s(
      list(zip(ex.collective_end[-1],
               completed_tensors(dag, plan, model.workers))),
      per_tensor_s, at=max(ends))
