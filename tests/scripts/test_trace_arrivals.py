"""Tests of scripts/trace_arrivals.py on two made-up worker traces."""

import json

import pytest

from tf_preempt.testing import scripts

# Loaded once: a second load would define its absl flags again.
trace_arrivals = scripts.load_script("trace_arrivals")


def _trace(origin_ms, starts_ms, dur_ms, blocks=()):
  # blocks: one (start ms, end ms) per batch 0, 1, ...
  return {"otherData": {"origin_ns": origin_ms * 1_000_000},
          "traceEvents": [
              {"cat": "collective", "ph": "X", "ts": s * 1e3,
               "dur": dur_ms * 1e3,
               "args": {"iteration": i, "collective_id": 0}}
              for i, s in enumerate(starts_ms)] + [
              {"cat": "compute", "ph": "X", "ts": s * 1e3,
               "dur": (e - s) * 1e3, "args": {"batch": b}}
              for b, (s, e) in enumerate(blocks)]}


def test_report_counts_the_last_task(tmp_path):
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


def test_report_gives_each_task_its_late_blocks_and_tail(tmp_path):
  (tmp_path / "traces").mkdir()
  # 10 one-step blocks of 50 ms, the first 8 skipped. Collective i starts
  # at 50 i + 10 ms on both and runs 20 ms. Task 0 starts blocks 8 and 9
  # 2 ms late and ends them at 50 i + 48 (tail 18 ms); task 1 starts on
  # time and ends at 50 i + 44 (tail 14 ms).
  starts = [50 * i + 10 for i in range(10)]
  late = [(50 * i + (2 if i >= 8 else 0), 50 * i + 48) for i in range(10)]
  early = [(50 * i, 50 * i + 44) for i in range(10)]
  for task, blocks in ((0, late), (1, early)):
    (tmp_path / "traces" / f"tf_default_k1.worker-{task}.json").write_text(
        json.dumps(_trace(0, starts, 20, blocks)))
  trace_arrivals.flags.FLAGS(["trace_arrivals"])
  text = trace_arrivals.report(str(tmp_path), "tf_default@1")
  assert "2 blocks:" in text
  assert ("task 0 started > 1 ms after the first in 2, median 2.00 ms after "
          "it; tail after its last collective median 18.0 ms") in text
  assert ("task 1 started > 1 ms after the first in 0, median 0.00 ms after "
          "it; tail after its last collective median 14.0 ms") in text
