"""Tests of make_plan and the scheduler registry."""

import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import SCHEDULERS
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan import make_plan
from tf_preempt.plan import options_of
from tf_preempt.plan import simulate
from tf_preempt.plan import synthetic


def test_all_schedulers_listed():
  assert set(SCHEDULERS) == {"pace", "priority", "fifo", "tf_default",
                             "tf_packed", "horovod", "ddp", "bytescheduler",
                             "optimal"}


def test_unknown_scheduler_and_option():
  dag = TrainingDAG.chain([1], [1], [4])
  with pytest.raises(ValueError, match="pace"):
    make_plan(dag, CostModel(0, 0), "nope")
  with pytest.raises(ValueError, match="chunk_bytes"):
    make_plan(dag, CostModel(0, 0), "pace", bogus=1)


def test_plan_fields():
  dag = synthetic.residual(2)
  cost = CostModel.ring(4, 1.25e9, 2e-5)
  plan = make_plan(dag, cost, "pace", chunk_bytes=1 << 20)
  assert [t.name for t in plan.tensors] == [t.name for t in dag.tensors]
  assert [t.itemsize for t in plan.tensors] == [4] * len(dag.tensors)
  assert plan.options == {"chunk_bytes": 1 << 20}
  assert plan.scheduler == "pace"
  assert plan.predicted_iteration_s == simulate(dag, cost, plan
                                                ).iteration_time
  assert "bytes_per_pack" in options_of("tf_packed")


def test_optimal_refuses_big_instances():
  dag = synthetic.chain(30)
  with pytest.raises(ValueError, match="exact"):
    make_plan(dag, CostModel(1e-5, 1e-9), "optimal", chunk_bytes=4096)
