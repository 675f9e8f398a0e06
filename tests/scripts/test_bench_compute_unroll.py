"""Tests of scripts/bench_compute_unroll.py: its repeats and ratios with the
measurement stubbed, and a tiny real run (slow)."""

import json
import subprocess
import sys

import pytest

from tf_preempt.testing import scripts

_ROOT = scripts.REPO
_SCRIPT = scripts.script_path("bench_compute_unroll")


def _stub(times, calls):
  def measure(train_script, model, batch_size, steps, warmup_steps,
              workers, unroll, heap_args, timeout_s):
    assert train_script.endswith("train.py") and workers == 2
    assert (model, batch_size, steps, warmup_steps) == ("vgg_small", 10, 8, 4)
    assert heap_args == ("--heap=tensorflow",) and timeout_s == 60.0
    calls.append(unroll)
    return times[unroll][calls.count(unroll) - 1], {"per_worker_batch": 5}
  return measure


def test_every_k_runs_interleaved_until_settled_and_ratios_to_the_first():
  bench = scripts.load_script("bench_compute_unroll")
  # K=2's first run is slow: after 2 repeats its median is 25% above its
  # fastest; a third at 16 ms settles it.
  times = {1: [0.020] * 3, 2: [0.024, 0.016, 0.016], 4: [0.018] * 3}
  calls, lines = [], []
  summary = bench.run("vgg_small", 10, 2, 8, 4, [1, 2, 4], 2, max_repeats=4,
                      heap_mode="tensorflow", timeout_s=60.0,
                      measure=_stub(times, calls), log=lines.append)
  assert calls == [1, 2, 4, 4, 2, 1, 1, 2, 4]
  assert summary["repeats"] == 3 and summary["unsettled"] == []
  assert summary["medians"] == {"compute alone, K=1": pytest.approx(0.020),
                                "compute alone, K=2": pytest.approx(0.016),
                                "compute alone, K=4": pytest.approx(0.018)}
  assert summary["ratios"]["compute alone, K=2"] == pytest.approx(0.8)
  assert summary["ratios"]["compute alone, K=1"] == 1.0
  table = "\n".join(bench.table(summary))
  assert "| compute alone, K=2 | 16.00 | 0.800 | 24.00, 16.00, 16.00 |" in table
  assert any("until settled" in line for line in lines)
  assert [len(v) for v in summary["load_before"].values()] == [3, 3, 3]


def test_bad_unrolls_are_refused_before_any_run():
  bench = scripts.load_script("bench_compute_unroll")
  calls = []
  with pytest.raises(ValueError, match=r"multiples of every K; not of \[4\]"):
    bench.run("vgg_small", 10, 2, 8, 2, [1, 2, 4], 2,
              measure=_stub({}, calls))
  with pytest.raises(ValueError, match="names a K twice"):
    bench.run("vgg_small", 10, 2, 8, 4, [1, 2, 1], 2,
              measure=_stub({}, calls))
  assert not calls


@pytest.mark.slow
def test_tiny_real_run_writes_every_k(tmp_path):
  result = subprocess.run(
      [sys.executable, _SCRIPT, "--model=vgg_small", "--batch_size=4",
       "--steps=4", "--warmup_steps=2", "--unrolls=1,2", "--repeats=1",
       "--timeout_s=120", f"--out={tmp_path}"], cwd=_ROOT,
      capture_output=True, text=True, timeout=400)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(tmp_path / "results.json") as f:
    out = json.load(f)
  assert set(out["medians"]) == {"compute alone, K=1", "compute alone, K=2"}
  for name, runs in out["runs"].items():
    assert len(runs) == 1 and 0 < runs[0] < 60
    assert out["ratios"][name] == pytest.approx(
        runs[0] / out["runs"]["compute alone, K=1"][0])
  assert "| compute alone, K=2 |" in (tmp_path / "results.md").read_text()
