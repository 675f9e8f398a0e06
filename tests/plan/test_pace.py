"""Tests of the PACE scheduler: order optimality, fusion DP, baselines."""

import itertools

import numpy as np
import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import SCHEDULERS
from tf_preempt.plan import exact
from tf_preempt.plan import fusion
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
