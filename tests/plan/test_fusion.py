"""Tests of the fusion DP (exact for a fixed order)."""

import itertools

import numpy as np
import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import fusion
from tf_preempt.plan import pace
from tf_preempt.plan import problem as problem_lib
from tf_preempt.plan import synthetic

def _all_groupings(units):
  m = len(units)
  for cuts in itertools.product((False, True), repeat=m - 1):
    groups, cur = [], [units[0]]
    for u, cut in zip(units[1:], cuts):
      if cut:
        groups.append(fusion.merge_pieces(cur))
        cur = []
      cur.append(u)
    groups.append(fusion.merge_pieces(cur))
    yield groups


def test_fusion_dp_equals_exhaustive_search():
  rng = np.random.default_rng(99)
  checked = 0
  for _ in range(60):
    dag = synthetic.random_small(rng, max_tensors=5)
    cost = CostModel(alpha=float(rng.uniform(0.01, 0.3)),
                     beta=float(rng.uniform(0.002, 0.05)))
    prob = problem_lib.Problem.from_dag(dag, cost)
    chunk_bytes = int(rng.choice([0, int(prob.nbytes.max() // 2 // 4 * 4)]))
    order = pace.pace_order(prob, chunk_bytes or None)
    if len(order) > 12:
      continue
    dp = prob.evaluate(fusion.fuse(prob, order))
    brute = min(prob.evaluate(g) for g in _all_groupings(order))
    assert dp == pytest.approx(brute, abs=1e-12)
    checked += 1
  print(f"\nfusion DP equals exhaustive search on {checked} instances")
  assert checked >= 40
