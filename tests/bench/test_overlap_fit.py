"""The bytes' core share fitted through the execution model."""

import dataclasses

import pytest

from tf_preempt.bench import overlap_fit
from tf_preempt.plan import cost as cost_lib
from tf_preempt.plan import dag as dag_lib
from tf_preempt.plan import execution
from tf_preempt.plan import plan as plan_lib

# 2 Gbit/s-like: 4 ns/B on the link, the bytes need 0.4 of the core.
_COST = cost_lib.CostModel(alpha=1e-3, beta=4e-9)
_CPU = cost_lib.CostModel(alpha=0.5e-3, beta=1.6e-9)


def _dag():
  # Three layers: the last layer's 2 MB gradient is ready 1 ms into the
  # 10 ms backward pass, the others at its end.
  return dag_lib.TrainingDAG.chain([2e-3, 2e-3, 2e-3], [4e-3, 5e-3, 1e-3],
                                   [4096, 512 << 10, 2 << 20])


def _plan(dag, groups):
  tensors = tuple(plan_lib.PlanTensor(t.name, t.nbytes) for t in dag.tensors)
  return plan_lib.Plan(tensors, tuple(
      plan_lib.Collective(tuple(plan_lib.Piece(i, 0, dag.tensors[i].nbytes)
                                for i in group)) for group in groups))


def _model(**kw):
  kw = dict(dict(unroll=1, max_collectives=2, cpu=_CPU, comm_cpu_share=0.2,
                 link_burst=0.5e-3, fixed_cpu_fifo=True), **kw)
  return execution.ExecutionModel(**kw)


def test_a_smaller_share_keeps_the_compute_and_slows_the_bytes():
  dag = _dag()
  plan = _plan(dag, [[2], [1, 0]])
  whole = overlap_fit.model_overlap(dag, _COST, plan,
                                    _model(bytes_cpu_share=1.0))
  small = overlap_fit.model_overlap(dag, _COST, plan,
                                    _model(bytes_cpu_share=0.1))
  # The backward pass ends earlier, the overlapping collective later.
  assert small[0] < whole[0]
  assert small[1] > whole[1]
  # Both times count from the block's start, its start-up included.
  later = overlap_fit.model_overlap(
      dag, _COST, plan, _model(bytes_cpu_share=0.1, block_startup=3e-3))
  assert later == pytest.approx((small[0] + 3e-3, small[1] + 3e-3))


def test_fit_recovers_the_share_that_made_the_times():
  dag = _dag()
  samples = []
  for groups, k in (([[2], [1, 0]], 1), ([[2], [1], [0]], 2)):
    plan = _plan(dag, groups)
    model = _model(unroll=k)
    times = overlap_fit.model_overlap(
        dag, _COST, plan, dataclasses.replace(model, bytes_cpu_share=0.3))
    samples.append(overlap_fit.OverlapSample(plan, model, *times))
  assert overlap_fit.fit_bytes_share(dag, _COST, samples) == pytest.approx(
      0.3)


def test_without_evidence_the_bytes_keep_the_core():
  dag = _dag()
  assert overlap_fit.fit_bytes_share(dag, _COST, []) is None
  # One collective after the backward pass: no share changes its times,
  # and the largest of the equals is taken.
  plan = _plan(dag, [[2, 1, 0]])
  times = overlap_fit.model_overlap(dag, _COST, plan, _model())
  sample = overlap_fit.OverlapSample(plan, _model(), *times)
  assert overlap_fit.fit_bytes_share(dag, _COST, [sample]) == 1.0


def test_fit_recovers_the_fixed_work_s_share_too():
  dag = _dag()
  samples = []
  for groups, k in (([[2], [1, 0]], 1), ([[2], [1], [0]], 2)):
    plan = _plan(dag, groups)
    model = _model(unroll=k, bytes_cpu_share=0.5)
    times = overlap_fit.model_overlap(
        dag, _COST, plan, dataclasses.replace(model, comm_cpu_share=0.05))
    samples.append(overlap_fit.OverlapSample(plan, model, *times))
  assert overlap_fit.fit_share(
      dag, _COST, samples, "comm_cpu_share") == pytest.approx(0.05)
