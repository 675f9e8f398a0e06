"""Tests of scripts/bench_log_reduction.py and its worker."""

import json
import subprocess
import sys

import pytest

from tf_preempt.testing import scripts

bench = scripts.load_script("bench_log_reduction")


def _trace(origin_ms, block_starts_ms):
  return {"otherData": {"origin_ns": origin_ms * 1_000_000},
          "traceEvents": [
              {"cat": "compute", "ph": "X", "ts": s * 1e3, "dur": 10e3,
               "args": {"batch": b}}
              for b, s in enumerate(block_starts_ms)]}


def test_late_starts_count_timed_blocks_over_a_millisecond():
  # Blocks 0-3; block 0 is warm-up. Task 0 starts block 1 2 ms late and
  # block 2 0.5 ms late; task 1 starts block 3 3 ms late.
  traces = [_trace(0, [0, 102, 200.5, 300]), _trace(0, [5, 100, 200, 303])]
  assert bench.late_starts(traces, warmup_blocks=1) == [1, 1]


def test_summarize_takes_medians_and_the_ratio():
  runs = {"reduced": [{"median_step_s": 0.05, "late_starts": [3, 0],
                       "last_batch_losses": [1.0, 1.0]},
                      {"median_step_s": 0.04, "late_starts": [2, 1],
                       "last_batch_losses": [1.1, 1.1]}],
          "local": [{"median_step_s": 0.036, "late_starts": [1, 1],
                     "last_batch_losses": [1.0, 1.2]}]}
  out = bench.summarize(runs)
  assert out["reduced"]["median_step_s"] == pytest.approx(0.045)
  assert out["reduced"]["late_starts"] == [5, 1]
  assert out["local"]["runs_s"] == [0.036]
  assert out["ratio"] == pytest.approx(0.8)


@pytest.mark.slow
def test_local_logs_skip_the_reduction_on_a_real_cluster():
  result = subprocess.run(
      [sys.executable, scripts.script_path("bench_log_reduction"),
       "--bandwidth=", "--batch_size=4", "--steps=8", "--warmup_blocks=2",
       "--repeats=1", "--timeout_s=300", "--json"],
      cwd=scripts.REPO, capture_output=True, text=True, timeout=700)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  for setting in ("reduced", "local"):
    assert len(out[setting]["runs_s"]) == 1
    assert out[setting]["runs_s"][0] > 0
  assert out["ratio"] == pytest.approx(out["local"]["median_step_s"] /
                                       out["reduced"]["median_step_s"])
  # Stock logs are reduced across the workers: both log the same loss.
  # Local logs are each worker's own shard's: they differ.
  reduced = out["reduced"]["last_batch_losses"][0]
  local = out["local"]["last_batch_losses"][0]
  assert reduced[0] == pytest.approx(reduced[1], rel=1e-6)
  assert local[0] != pytest.approx(local[1], rel=1e-6)
