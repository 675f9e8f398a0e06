"""Tests of scripts/bench.py: flag checks, and a tiny real run (slow)."""

import json
import os
import subprocess
import sys

import pytest

from tf_preempt.bench import results
from tf_preempt.plan.plan import Plan

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_BENCH = os.path.join(_ROOT, "scripts", "bench.py")


def _bench(args, timeout):
  return subprocess.run([sys.executable, _BENCH] + list(args), cwd=_ROOT,
                        capture_output=True, text=True, timeout=timeout)


def test_latency_is_rejected_with_the_reason(tmp_path):
  result = _bench(["--latency=5ms", f"--out={tmp_path}"], timeout=60)
  assert result.returncode != 0
  assert "netem" in result.stderr and "--latency" in result.stderr


def test_schedulers_must_include_the_reference(tmp_path):
  result = _bench(["--schedulers=pace", f"--out={tmp_path}"], timeout=60)
  assert result.returncode != 0
  assert "tf_default" in result.stderr


def test_profiling_must_fit_in_the_untimed_steps(tmp_path):
  result = _bench(["--pace_profile_steps=4", "--warmup_steps=4",
                   "--unroll=2", f"--out={tmp_path}"], timeout=60)
  assert result.returncode != 0
  assert "--pace_profile_steps" in result.stderr


def test_bad_repeat_settings_are_rejected(tmp_path):
  result = _bench(["--repeats=3", "--max_repeats=2", f"--out={tmp_path}"],
                  timeout=60)
  assert result.returncode != 0
  assert "--max_repeats (2) must be 0 or at least --repeats (3)" in (
      result.stderr)
  one = _bench(["--repeats=1", "--max_repeats=3", f"--out={tmp_path}"],
               timeout=60)
  assert one.returncode != 0 and "one run is always settled" in one.stderr
  zero = _bench(["--repeats=2", "--max_repeats=3", "--settle_tolerance=0",
                 f"--out={tmp_path}"], timeout=60)
  assert zero.returncode != 0
  assert "--settle_tolerance must be positive" in zero.stderr


@pytest.mark.slow
def test_tiny_bench_writes_every_output(tmp_path):
  # Loopback: the smoke test must not need root or tc.
  result = _bench(["--bandwidth=", "--schedulers=tf_default,pace",
                   "--repeats=1", "--steps=8", "--warmup_steps=4",
                   "--pace_profile_steps=2",
                   "--unroll=2", "--batch_size=4", "--timeout_s=90",
                   "--heap=keep", f"--out={tmp_path}"], timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(tmp_path / "results.json") as f:
    out = json.load(f)
  results.check_schema(out)
  assert set(out["schedulers"]) == {"tf_default@1", "tf_default@2", "pace@2"}
  assert out["lower_bound_s"] == max(out["compute_s"], out["comm_s"])
  assert out["schedulers"]["tf_default@1"]["ratio_vs_tf_default"] == 1.0
  assert "scripts/bench.py" in out["command"]
  assert (tmp_path / "results.md").read_text().count("| pace@2") == 1
  assert (tmp_path / "timeline.png").stat().st_size > 0
  assert (tmp_path / "traces" / "pace_k2.worker-0.json").exists()
  # What the simulator's validation reads: the plans that ran, the cost
  # model of all-reduces timed alone, the pace row's profile.
  for row, scheduler in (("tf_default@2", "tf_default"), ("pace@2", "pace")):
    plan = Plan.from_json((tmp_path / "plans" / f"{row}.json").read_text())
    assert plan.scheduler == scheduler and plan.tensors
  with open(tmp_path / "cost_model.json") as f:
    cost_model = json.load(f)
  assert len(cost_model["samples"]) == 4
  assert cost_model["alpha"] >= 0 and cost_model["beta"] > 0
  with open(tmp_path / "details.json") as f:
    details = json.load(f)
  (pace_run,) = [r for r in details["runs"] if r["name"] == "pace@2"]
  assert pace_run["profile"]["cost_model"]["beta"] >= 0
  assert pace_run["profile"]["forward_s"] > 0
  assert "profiled steps" in details["settings"]["pace@2"]["description"]
  # The host's speed was read beside the references (once: one repeat).
  speeds = [r["value_s"] for r in details["runs"]
            if r["name"] == "speed reading"]
  assert len(speeds) == 1 and speeds[0] > 0
  assert details["speed_ms_per_matmul"] == speeds[0] * 1e3
  assert "ms per matmul" in (tmp_path / "results.md").read_text()
  # --heap reached the training workers, as they report it.
  assert details["heap"] == "keep"
  # One repeat, as asked (no extra repeats without --max_repeats).
  assert (details["repeats"], details["max_repeats"]) == (1, 1)
  # The traces kept are those of each row's run (its only one here), and
  # no other run's are left.
  for row, index in details["trace_runs"].items():
    assert details["runs"][index]["name"] == row
    assert details["runs"][index]["tag"].startswith("repeat 1/1")
  assert set(details["trace_runs"]) == set(out["schedulers"])
  assert not (tmp_path / "traces" / "runs").exists()
  assert {r["heap"] for r in details["runs"] if "@" in r["name"]} == {"keep"}
  # The trace holds the collectives of the plan that ran last (the
  # re-planned one), so they reach into the last step block, not only the
  # warm-up's.
  with open(tmp_path / "traces" / "pace_k2.worker-0.json") as f:
    events = json.load(f)["traceEvents"]
  last_block = max(e["ts"] for e in events if e.get("cat") == "compute")
  assert max(e["ts"] + e["dur"] for e in events
             if e.get("cat") == "collective") >= last_block
