"""Tests of the baseline policies against their reference rules."""

import numpy as np

from tf_preempt.plan import CostModel
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan import baselines
from tf_preempt.plan import problem as problem_lib

MiB = 1 << 20


def _prob(sizes, cost=CostModel(1e-4, 1e-9), backward=None):
  n = len(sizes)
  dag = TrainingDAG.chain([1e-3] * n, backward or [1e-3] * n, sizes)
  return problem_lib.Problem.from_dag(dag, cost)


def _tensor_lists(groups):
  return [[t for t, _, _ in g] for g in groups]


def test_group_by_size_matches_tensorflow_rule():
  # New pack only once the last one holds MORE than bytes_per_pack.
  assert baselines.group_by_size([4, 4, 4, 4], 8) == [[0, 1, 2], [3]]
  assert baselines.group_by_size([10, 1, 1], 8) == [[0], [1, 2]]
  assert baselines.group_by_size([1, 2, 3], 0) == [[0, 1, 2]]


def test_tf_policies_reverse_the_list():
  prob = _prob([4, 8, 12, 16])
  assert _tensor_lists(baselines.tf_default(prob)) == [[3, 2, 1, 0]]
  assert _tensor_lists(baselines.tf_packed(prob, bytes_per_pack=20)) == [
      [3, 2], [1, 0]]


def test_ddp_buckets():
  prob = _prob([4 * MiB, 20 * MiB, 8 * MiB, 512 << 10, 768 << 10])
  # Reversed: 768K+512K >= 1 MiB closes bucket 1; then 8M+20M >= 25M; 4M.
  assert _tensor_lists(baselines.ddp(prob)) == [[4, 3], [2, 1], [0]]


def test_fifo_and_priority_orders():
  prob = _prob([4, 4, 4], cost=CostModel(1.0, 0.0))
  assert _tensor_lists(baselines.fifo(prob)) == [[2], [1], [0]]
  # With slow collectives the queue holds 1 and 0 when 2 ends: 0 first.
  assert _tensor_lists(baselines.priority(prob)) == [[2], [0], [1]]


def test_horovod_fuses_what_is_ready_per_cycle():
  # All gradients ready within one 5 ms cycle -> one buffer, ready order.
  prob = _prob([4, 4, 4], backward=[1e-4] * 3)
  assert _tensor_lists(baselines.horovod(prob)) == [[2, 1, 0]]
  # Threshold splits the buffer.
  assert _tensor_lists(baselines.horovod(prob, fusion_threshold=8)) == [
      [2, 1], [0]]


def test_bytescheduler_partitions_by_index_priority():
  prob = _prob([4 * 2_500_000, 4 * 10], cost=CostModel(0.0, 1e-12))
  groups = baselines.bytescheduler(prob)
  pieces = [g[0] for g in groups]
  assert sum(1 for t, _, _ in pieces if t == 0) == 3
  assert all(l <= 4 * 1_000_000 for _, _, l in pieces)
  np.testing.assert_array_equal(sorted(o for t, o, _ in pieces if t == 0),
                                [o for t, o, _ in pieces if t == 0])
