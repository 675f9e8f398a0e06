"""Tests of the exact order solver."""

import numpy as np
import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import exact
from tf_preempt.plan import problem as problem_lib
from tf_preempt.plan import synthetic

def test_exact_solver_equals_brute_force():
  rng = np.random.default_rng(7)
  for _ in range(30):
    dag = synthetic.random_small(rng, max_tensors=3)
    cost = CostModel(alpha=float(rng.uniform(0, 0.1)),
                     beta=float(rng.uniform(0.005, 0.05)))
    prob = problem_lib.Problem.from_dag(dag, cost)
    chunks = exact.chunks_of(prob, int(prob.nbytes.max() // 2 // 4 * 4) or 4)
    chunks = [c[:3] if len(c) <= 3 else exact.chunks_of(prob, None)[p]
              for p, c in enumerate(chunks)]
    best, _ = exact.optimal_order(prob, chunks)
    brute = min(prob.evaluate(o) for o in exact.all_orders(chunks))
    assert best == pytest.approx(brute, abs=1e-12)
