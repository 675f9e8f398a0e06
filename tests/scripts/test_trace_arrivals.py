"""Tests of scripts/trace_arrivals.py on two made-up worker traces."""

import json

import pytest

from tf_preempt.testing import scripts


def _trace(origin_ms, starts_ms, dur_ms):
  return {"otherData": {"origin_ns": origin_ms * 1_000_000},
          "traceEvents": [
              {"cat": "collective", "ph": "X", "ts": s * 1e3,
               "dur": dur_ms * 1e3,
               "args": {"iteration": i, "collective_id": 0}}
              for i, s in enumerate(starts_ms)]}


def test_report_counts_the_last_task(tmp_path):
  trace_arrivals = scripts.load_script("trace_arrivals")
  (tmp_path / "traces").mkdir()
  # Iterations 0-9, the first 8 skipped. Task 0 starts at 10 ms in both,
  # task 1 at 8 ms (iteration 8) and 12 ms (iteration 9); each runs 20 ms.
  starts = {0: [10] * 10, 1: [10] * 8 + [8, 12]}
  for task, s in starts.items():
    (tmp_path / "traces" / f"tf_default_k1.worker-{task}.json").write_text(
        json.dumps(_trace(0, s, 20)))
  flags = trace_arrivals.flags.FLAGS
  flags(["trace_arrivals"])
  text = trace_arrivals.report(str(tmp_path), "tf_default@1")
  assert "2 iterations" in text
  assert "task 0 last in 1: from its start to the end median 20.0 ms" in text
  assert "task 1 last in 1: from its start to the end median 20.0 ms" in text
  with pytest.raises(ValueError, match="fewer than two worker traces"):
    trace_arrivals.report(str(tmp_path), "pace@2")
