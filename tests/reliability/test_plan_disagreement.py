"""Workers that would execute different all-reduces fail at the start.

Different plans are covered by
tests/strategies/test_multi_worker.py::test_plan_mismatch_fails_fast_on_every_worker
(not repeated here). These cases add a different model on one worker and a
different TensorFlow release (simulated: worker 1 reports another version
in its plan summary, the `tensorflow_version` field of
`tf_preempt.runtime.agreement`). Every worker must raise
`PlanMismatchError` on its first step, naming the field that differs.
"""

import os
import time

import pytest

from tf_preempt.testing import cluster

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "workers.py")


@pytest.mark.slow
@pytest.mark.parametrize("difference,field", [
    ("model", "num_tensors"),
    ("tensorflow_version", "tensorflow_version"),
])
def test_workers_that_differ_fail_at_start_naming_the_difference(
    difference, field):
  start = time.monotonic()
  results = cluster.run_workers(f"{WORKERS}:disagreeing_worker", 2,
                                args=(difference,), timeout=120,
                                pin_cpus=True)
  wall = time.monotonic() - start
  cluster.check_all_ok(results)
  for r in results:
    v = r.value
    print(f"[disagreement] {difference}: worker {r.task_id} "
          f"failed after {v['elapsed_s']:.2f}s (run {wall:.1f}s): "
          f"{_first_line_with(v['error'], 'first differing field')}")
    # Raised while tracing the step, so it arrives wrapped (StagingError).
    assert "PlanMismatchError" in v["error"], v
    assert f"first differing field: {field!r}" in v["error"], v["error"]
    assert "workers 0 and 1" in v["error"]
    assert v["elapsed_s"] < 30
  if difference == "tensorflow_version":
    assert "this worker runs" in results[0].value["error"]


def _first_line_with(text, needle):
  for line in text.splitlines():
    if needle in line:
      return line.strip()[:300]
  return text[:300]
