"""The plans of the rows on the model's DAG, and what the runtime issues."""

import dataclasses

import pytest

from tf_preempt.bench import row_plans
from tf_preempt.testing import scripts


def test_runtime_plan_is_the_one_the_runtime_ran():
  # The rows of benchmarks/results/2026-12-02-vgg_small-*: collectives of
  # these sizes in this order (their traces, by collective_id).
  dag = scripts.load_script("simulate").model_dag("vgg_small", 24, "v100",
                                                 None)
  sizes = lambda s: [c.nbytes for c in row_plans.runtime_plan(
      dag, s, 2, {}).collectives]
  assert sizes("pace") == [11304, 2098176, 295424, 147968, 115072, 590336]
  assert sizes("horovod") == [2109480, 1148800]
  assert sizes("ddp") == [2108456, 1149824]
  assert sizes("priority")[:4] == [40, 1024, 10240, 2097152]


def _three_layers():
  """A chain of three layers, forward 1 s each, backward b2 (1 s, t2) then
  b1 (1 s, t1) then b0 (2 s, t0); free collectives; and two plans, a
  collective per tensor in FIFO order and one of all three.

  Returns:
    (dag, free cost, its tensors' plan entries, each, one).
  """
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  dag = plan_lib.TrainingDAG.chain([1, 1, 1], [2, 1, 1], [8, 4, 4])
  free = plan_lib.CostModel(0, 0)
  tensors = plan_lib.make_plan(dag, free, "fifo").tensors
  each = plan_lib.plan_from_groups(tensors, [[(2, 0, 4)], [(1, 0, 4)],
                                             [(0, 0, 8)]])
  one = plan_lib.plan_from_groups(tensors, [[(0, 0, 8), (1, 0, 4),
                                             (2, 0, 4)]])
  return dag, free, tensors, each, one


def test_first_ready_fraction_and_issued_tensors():
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  dag, _, tensors, each, one = _three_layers()
  # In priority order the first collective is not the first ready one.
  first_last = plan_lib.plan_from_groups(tensors, [[(0, 0, 8)], [(1, 0, 4)],
                                                   [(2, 0, 4)]])
  assert row_plans.first_ready_fraction(dag, one, None) == 1.0
  assert row_plans.first_ready_fraction(dag, each, None) == 0.25
  assert row_plans.first_ready_fraction(dag, first_last, None) == 0.25
  assert row_plans.issued_tensors(dag, one, None) == [{0, 1, 2}]
  assert row_plans.issued_tensors(dag, each, None) == [{2}, {1}, {0}]
  # A sparse tensor (t2, the first ready) is left out of the runtime's
  # collectives: with workers the first dense one is t1, ready at 2 s.
  sparse = plan_lib.TrainingDAG(dag.ops, dag.edges, list(dag.tensors[:2]) + [
      dataclasses.replace(dag.tensors[2],
                          sparse=plan_lib.SparseGradient(4, 4))])
  assert row_plans.first_ready_fraction(sparse, each, None) == 0.25
  assert row_plans.first_ready_fraction(sparse, each, 2) == 0.5
  assert row_plans.issued_tensors(sparse, one, 2) == [{0, 1}]
  # A collective of sparse pieces only is not issued at all.
  sparse_last = plan_lib.plan_from_groups(tensors, [[(1, 0, 4), (0, 0, 8)],
                                                    [(2, 0, 4)]])
  assert row_plans.issued_tensors(sparse, sparse_last, 2) == [{0, 1}]
  assert row_plans.issued_tensors(sparse, sparse_last, None) == [{0, 1},
                                                                  {2}]
  assert row_plans.first_ready_fraction(sparse, sparse_last, 2) == 1.0


def test_gathering_workers_unless_sparse_as_dense():
  assert row_plans.gathering_workers(["--unroll=2"], 4) == 4
  assert row_plans.gathering_workers(["--sparse_as_dense"], 4) is None


def test_sparse_as_dense_flag():
  assert row_plans.sparse_as_dense(["--sparse_as_dense"])
  assert row_plans.sparse_as_dense(["--sparse_as_dense=true"])
  assert not row_plans.sparse_as_dense(["--sparse_as_dense",
                                            "--nosparse_as_dense"])
  assert not row_plans.sparse_as_dense(["--credit_bytes=1"])


def test_as_ran_takes_the_row_s_k_credit_and_workers():
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  base = execution.ExecutionModel(unroll=1, comm_cpu_share=0.3)
  ran = row_plans.as_ran(base, 2, ["--credit_bytes=1048576"], None,
                         block_startup=0.002)
  assert (ran.unroll, ran.max_bytes, ran.workers, ran.block_startup) == (
      2, 1048576, None, 0.002)
  assert ran.max_collectives == row_plans.DEFAULT_CREDIT_COLLECTIVES
  assert ran.comm_cpu_share == 0.3  # the rest is the model's


def test_queued_updates_follow_the_model_s_collective_ends():
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  # Free collectives end with their gradients: t2 at 4 s, t1 at 5, t0 at
  # 7 (forward 3 s, then backward 1, 1, 2 s).
  dag, free, _, each, one = _three_layers()
  # The block overhead moves nothing: it is left out.
  model = execution.ExecutionModel(unroll=1, block_overhead=5.0)
  assert row_plans.completed_tensors(dag, each, None) == [1, 1, 1]
  # 1.5 s per update: the queue drains between the ends, the last one's
  # update is left. 3 s: 3 at 4 s, 2 + 3 at 5 s, 3 + 3 at 7 s.
  assert row_plans.queued_updates(dag, free, each, model, 1.5) == 1.5
  assert row_plans.queued_updates(dag, free, each, model, 3.0) == 6.0
  # One collective of all three: their three updates.
  assert row_plans.queued_updates(dag, free, one, model, 1.5) == 4.5
  assert row_plans.model_tail(dag, free, each, model) == 0.0


def test_step_gap_from_the_last_collective_to_the_next_step_s_first():
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  # Forward 3 s, then backward 1, 1, 2 s: free collectives end with their
  # gradients, t0's (the last) at 7 s, when step 2's forward pass can
  # start (its first op reads t0).
  dag, free, _, each, one = _three_layers()
  model = execution.ExecutionModel(unroll=2)
  # Step 2's first gradient (t2) is ready 3 + 1 s after 7 s; the one
  # collective of all three only when its backward pass ends, 3 + 4 s.
  for plan, gap in ((each, 4.0), (one, 7.0)):
    run = execution.execute(dag, free, plan, model)
    assert row_plans.step_gap(dag, plan, model, run) == pytest.approx(gap)
  one_step = execution.ExecutionModel(unroll=1)
  assert row_plans.step_gap(dag, each, one_step, execution.execute(
      dag, free, each, one_step)) is None


def test_with_shares_sets_each_op_s_share_of_the_same_total():
  from tf_preempt.plan import TrainingDAG  # pylint: disable=g-import-not-at-top
  dag = TrainingDAG.chain([1, 1], [1, 2], [8, 4])  # f0 f1 1 s, b0 1, b1 2
  shared = row_plans.with_shares(dag, {"f0": 0.5, "b1": 0.25, "b0": 0.25})
  durations = {o.name: o.duration for o in shared.ops}
  assert durations == {"f0": 2.5, "f1": 0.0, "b1": 1.25, "b0": 1.25}
  assert shared.tensors == dag.tensors
  with pytest.raises(ValueError, match="does not have"):
    row_plans.with_shares(dag, {"nope/forward": 1.0})
