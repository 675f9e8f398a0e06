"""PreemptiveMultiWorkerMirroredStrategy with two real worker processes."""

import os
import time

import numpy as np
import pytest

from tf_preempt.testing import cluster

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "workers.py")


def _run(function, args=(), timeout=150):
  return cluster.run_workers(f"{WORKERS}:{function}", 2, args=args,
                             timeout=timeout, pin_cpus=True)


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["pace", "tf_default"])
def test_all_reduce_equals_stock_across_workers(scheduler):
  results = _run("reduce_equal_to_stock", args=(1, scheduler))
  cluster.check_all_ok(results)
  from tests.strategies import workers  # pylint: disable=g-import-not-at-top
  expected = [sum(workers._gradients(1, task, workers.SHAPES)[i]  # pylint: disable=protected-access
                  for task in range(2)) for i in range(len(workers.SHAPES))]
  for r in results:
    for key in ("preemptive", "stock", "eager"):
      for e, g in zip(expected, r.value[key]):
        # Integer-valued inputs: every implementation is exact.
        np.testing.assert_array_equal(np.array(g, np.float32), e)
  if scheduler == "pace":
    assert results[0].value["collectives"] > 1  # chunked, not stock's one


@pytest.mark.slow
def test_training_equals_stock_multi_worker():
  stock = _run("train", args=("stock", 5))
  cluster.check_all_ok(stock)
  mine = _run("train", args=("preemptive", 5, "pace"))
  cluster.check_all_ok(mine)
  assert len(mine[0].value["losses"]) == 5
  for s, m in zip(stock, mine):
    for e, g in zip(s.value["weights"], m.value["weights"]):
      np.testing.assert_allclose(np.array(g), np.array(e), rtol=1e-6,
                                 atol=1e-6)
  for e, g in zip(mine[0].value["weights"], mine[1].value["weights"]):
    np.testing.assert_array_equal(np.array(g), np.array(e))


@pytest.mark.slow
def test_plan_mismatch_fails_fast_on_every_worker():
  start = time.monotonic()
  results = _run("mismatched_plans", timeout=90)
  elapsed = time.monotonic() - start
  assert not any(r.timed_out for r in results), [r.describe() for r in results]
  for r in results:
    assert r.returncode != 0, r.describe()
    assert "PlanMismatchError" in r.stderr, r.describe()
    assert "first differing field: 'num_collectives'" in r.stderr
    assert "workers 0 and 1" in r.stderr
  assert elapsed < 60
