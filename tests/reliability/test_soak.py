"""Soak: 300 steps on two workers, random delays, random chunk sizes.

The PACE run changes its plan (random chunk size, fused or not) three times
and delays every gradient randomly on each worker and step; it must finish
(no deadlock: a hang hits the cluster deadline) with the same weights as a
run with stock TensorFlow's order ("tf_default") to 1e-5.
"""

import os
import time

import numpy as np
import pytest

from tf_preempt.testing import cluster

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "workers.py")
STEPS = 300
SEGMENTS = 3


@pytest.mark.slow
def test_soak_no_deadlock_and_same_weights_as_tf_default():
  runs = {}
  for scheduler in ("pace", "tf_default"):
    start = time.monotonic()
    results = cluster.run_workers(f"{WORKERS}:soak", 2,
                                  args=(scheduler, STEPS, SEGMENTS, 11),
                                  timeout=240, pin_cpus=True)
    cluster.check_all_ok(results)
    runs[scheduler] = results
    v = results[0].value
    print(f"[soak] {scheduler}: {v['steps']} steps, median step "
          f"{v['step_s'] * 1e3:.1f} ms, chunk_bytes {v['chunk_bytes']}, "
          f"collectives per plan {v['collectives']}, run "
          f"{time.monotonic() - start:.1f}s")
    assert v["steps"] == STEPS
  for pace, stock in zip(runs["pace"], runs["tf_default"]):
    for got, want in zip(pace.value["weights"], stock.value["weights"]):
      np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5,
                                 atol=1e-5)
  for a, b in zip(runs["pace"][0].value["weights"],
                  runs["pace"][1].value["weights"]):
    np.testing.assert_array_equal(np.array(a), np.array(b))
