"""Tests of the simulator: hand-computed cases and invariants."""

import numpy as np
import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import Plan
from tf_preempt.plan import SCHEDULERS
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan import make_plan
from tf_preempt.plan import plan_from_groups
from tf_preempt.plan import simulate
from tf_preempt.plan import synthetic
from tf_preempt.plan import problem as problem_lib


def _chain_plan(dag, groups):
  tensors = make_plan(dag, CostModel(0, 0), "fifo").tensors
  return plan_from_groups(tensors, groups)


def test_hand_computed_chain():
  # b1 [0,2] -> t1 ready 2; b0 [2,3] -> t0 ready 3. f0 1s, f1 1s.
  dag = TrainingDAG.chain([1, 1], [1, 2], [8, 4])
  cost = CostModel(alpha=1.0, beta=0.5)
  # FIFO: t1 [2, 2+1+2=5], t0 [5, 5+1+4=10]; f0 [10,11], f1 [11,12].
  tl = simulate(dag, cost, _chain_plan(dag, [[(1, 0, 4)], [(0, 0, 8)]]))
  assert tl.collective_start == [2, 5] and tl.collective_end == [5, 10]
  assert tl.op_start["f0"] == 10 and tl.op_end["f1"] == 12
  assert tl.iteration_time == 12
  # One fused collective (t1, t0): ready 3, ends 3+1+6=10; same here.
  tl = simulate(dag, cost, _chain_plan(dag, [[(1, 0, 4), (0, 0, 8)]]))
  assert tl.collective_end == [10] and tl.iteration_time == 12
  # Priority order: t0 first [3, 8], t1 [8, 11]: f0 [8, 9], f1 [11, 12].
  tl = simulate(dag, cost, _chain_plan(dag, [[(0, 0, 8)], [(1, 0, 4)]]))
  assert tl.op_start["f0"] == 8 and tl.op_start["f1"] == 11
  assert tl.iteration_time == 12


def test_forward_waits_for_backward_end():
  dag = TrainingDAG.chain([1, 1], [5, 1], [4, 4])
  tl = simulate(dag, CostModel(0, 0), _chain_plan(dag, [[(0, 0, 4)],
                                                        [(1, 0, 4)]]))
  assert tl.backward_end == 6 and tl.op_start["f0"] == 6
  assert tl.iteration_time == 8


def _check_invariants(dag, cost, plan):
  tl = simulate(dag, cost, plan)
  # Every byte exactly once (Plan validates; count again).
  for i, t in enumerate(plan.tensors):
    covered = np.zeros(t.nbytes, int)
    for c in plan.collectives:
      for p in c.pieces:
        if p.tensor == i:
          covered[p.offset:p.offset + p.length] += 1
    assert (covered == 1).all()
  # One collective at a time, in plan order, never before its data.
  ready = dag.ready_times()
  for k, c in enumerate(plan.collectives):
    assert tl.collective_start[k] >= max(ready[t] for t in c.tensors) - 1e-12
    assert tl.collective_end[k] - tl.collective_start[k] == pytest.approx(
        cost.seconds(c.nbytes))
    if k:
      assert tl.collective_start[k] >= tl.collective_end[k - 1] - 1e-12
  # No forward op starts before its tensors are reduced.
  for t in dag.tensors:
    for c in t.consumers:
      assert tl.op_start[c] >= tl.tensor_reduced[t.name] - 1e-12
      assert tl.op_start[c] >= tl.backward_end - 1e-12
  # The fast objective agrees with the event simulation.
  prob = problem_lib.Problem.from_dag(dag, cost)
  groups = [[(p.tensor, p.offset, p.length) for p in c.pieces]
            for c in plan.collectives]
  assert prob.evaluate(groups) == pytest.approx(tl.iteration_time, abs=1e-12)
  assert tl.iteration_time >= max(tl.collective_end) - 1e-12


def test_invariants_for_every_scheduler():
  rng = np.random.default_rng(3)
  dags = [synthetic.chain(12, rng), synthetic.residual(3, rng),
          synthetic.transformer(1, rng), synthetic.random_small(rng)]
  cost = CostModel.ring(4, 1.25e9, 2e-5)
  for dag in dags:
    for s in SCHEDULERS:
      if s == "optimal" and len(dag.tensors) > 8:
        continue
      _check_invariants(dag, cost, make_plan(dag, cost, s))


def test_plan_must_match_dag():
  dag = TrainingDAG.chain([1], [1], [4])
  other = Plan.from_json(make_plan(TrainingDAG.chain([1], [1], [8]),
                                   CostModel(0, 0), "fifo").to_json())
  with pytest.raises(ValueError, match="does not match"):
    simulate(dag, CostModel(0, 0), other)
