"""Tests of the PACE scheduler: order vs the exact optimum, vs baselines."""

import numpy as np
import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import SCHEDULERS
from tf_preempt.plan import exact
from tf_preempt.plan import make_plan
from tf_preempt.plan import pace
from tf_preempt.plan import problem as problem_lib
from tf_preempt.plan import synthetic


def _random_instance(rng):
  dag = synthetic.random_small(rng, max_tensors=5)
  # Costs around the compute scale so that neither side always dominates.
  cost = CostModel(alpha=float(rng.choice([0.0, rng.uniform(0, 0.2)])),
                   beta=float(rng.uniform(0.002, 0.05)))
  prob = problem_lib.Problem.from_dag(dag, cost)
  chunk = int(rng.integers(1, 4))
  # At most 3 chunks per tensor: chunk_bytes >= nbytes / 3.
  chunk_bytes = int(np.ceil(prob.nbytes.max() / chunk / 4)) * 4
  chunks = exact.chunks_of(prob, chunk_bytes)
  chunks = [c if len(c) <= 3 else exact.chunks_of(prob, None)[p]
            for p, c in enumerate(chunks)]
  return prob, chunk_bytes, chunks


def test_pace_order_matches_exact_optimum():
  rng = np.random.default_rng(1234)
  trials, matches, worst_gap_in_chunks = 240, 0, 0.0
  for _ in range(trials):
    prob, chunk_bytes, chunks = _random_instance(rng)
    best, best_order = exact.optimal_order(prob, chunks)
    assert prob.evaluate(best_order) == pytest.approx(best, abs=1e-12)
    units = [[c] for per in chunks for c in per]
    got = prob.evaluate(pace.ordering.lookahead_order(prob, units))
    assert got >= best - 1e-9
    if got <= best + 1e-9:
      matches += 1
    else:
      biggest_chunk = max(prob.alpha + prob.beta * c[2]
                          for per in chunks for c in per)
      worst_gap_in_chunks = max(worst_gap_in_chunks,
                                (got - best) / biggest_chunk)
    del chunk_bytes
  rate = matches / trials
  print(f"\npace order vs exact optimum: {matches}/{trials} = {rate:.1%} "
        f"optimal; worst gap {worst_gap_in_chunks:.3f} chunk transfer times")
  assert rate >= 0.95
  assert worst_gap_in_chunks < 1.0


def _suite():
  rng = np.random.default_rng(5)
  dags = [("chain", synthetic.chain(30, rng)),
          ("residual", synthetic.residual(8, rng)),
          ("transformer", synthetic.transformer(3, rng))]
  costs = [CostModel.ring(8, bw, lat) for bw in (1.25e8, 1.25e9, 1.25e10)
           for lat in (5e-6, 1e-4)]
  return [(n, d, c) for n, d in dags for c in costs]


def test_pace_never_slower_than_baselines():
  worst = 0.0
  for name, dag, cost in _suite():
    got = make_plan(dag, cost, "pace").predicted_iteration_s
    for s in SCHEDULERS:
      if s in ("pace", "optimal"):
        continue
      base = make_plan(dag, cost, s).predicted_iteration_s
      assert got <= base + 1e-12, (name, cost, s, got, base)
      worst = max(worst, got / base)
  print(f"\npace / best-case baseline ratio, worst over the suite: "
        f"{worst:.4f}")
