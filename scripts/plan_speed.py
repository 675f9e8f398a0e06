"""Prints how long make_plan takes on large DAGs (never asserted).

  .venv/bin/python scripts/plan_speed.py
"""

import time

from tf_preempt.plan import CostModel
from tf_preempt.plan import SCHEDULERS
from tf_preempt.plan import make_plan
from tf_preempt.plan import synthetic


def _time(dag, cost, scheduler):
  start = time.perf_counter()
  plan = make_plan(dag, cost, scheduler)
  return time.perf_counter() - start, plan


def main():
  cases = [
      ("resnet50-like", synthetic.resnet50_like()),
      ("chain-1000", synthetic.chain(1000)),
  ]
  costs = [("10GbE x8", CostModel.ring(8, 1.25e9, 5e-6)),
           ("1GbE x8", CostModel.ring(8, 1.25e8, 2.5e-5))]
  for name, dag in cases:
    for cname, cost in costs:
      seconds, plan = _time(dag, cost, "pace")
      best_base = min(
          make_plan(dag, cost, s).predicted_iteration_s
          for s in SCHEDULERS if s not in ("pace", "optimal"))
      print(f"{name:14s} {len(dag.tensors):5d} tensors  {cname:9s} "
            f"pace plans in {seconds:6.3f} s: {plan.num_collectives:5d} "
            f"collectives, {plan.predicted_iteration_s * 1e3:8.2f} ms "
            f"(best baseline {best_base * 1e3:8.2f} ms)")


if __name__ == "__main__":
  main()
