"""Tests of scripts/bench_single_worker.py: a tiny real run (slow)."""

import json
import os
import subprocess
import sys
import types

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_SCRIPT = os.path.join(_ROOT, "scripts", "bench_single_worker.py")


@pytest.mark.slow
def test_tiny_run_writes_every_row(tmp_path):
  result = subprocess.run(
      [sys.executable, _SCRIPT, "--model=vgg_small", "--batch_size=4",
       "--steps=4", "--warmup_steps=2", "--repeats=1", "--timeout_s=120",
       f"--out={tmp_path}"], cwd=_ROOT, capture_output=True, text=True,
      timeout=400)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(tmp_path / "results.json") as f:
    out = json.load(f)
  rows = out["rows"]
  assert set(rows) == {"stock", "pace", "tf_default"}
  assert rows["stock"]["flags"] == ["--strategy=stock_mirrored"]
  assert rows["stock"]["ratio_to_stock"] == 1.0
  for row in rows.values():
    assert len(row["step_s"]) == 1 and 0 < row["median_s"] < 60
    assert row["ratio_to_stock"] == pytest.approx(
        row["median_s"] / rows["stock"]["median_s"])
  text = (tmp_path / "results.md").read_text()
  assert "| pace |" in text and "pace / stock =" in text


def _load_script():
  from tf_preempt.testing import scripts  # pylint: disable=g-import-not-at-top
  return scripts.load_script("bench_single_worker")


def _args(**overrides):
  return types.SimpleNamespace(**{
      "model": "vgg_small", "batch_size": 4, "steps": 4, "warmup_steps": 2,
      "timeout_s": 120.0, "repeats": 2, "max_repeats": 0,
      "settle_tolerance": 0.05, **overrides})


def test_repeats_are_added_until_every_row_settled(monkeypatch):
  bench = _load_script()
  # stock's second run is slow: after 2 repeats its median is 25% above
  # its fastest run; a third run at 10 ms settles it.
  times = {"stock": [0.010, 0.015, 0.010, 0.010], "pace": [0.011] * 4,
           "tf_default": [0.012] * 4}
  calls = []

  def run_once(row, args):
    calls.append(row)
    return times[row][calls.count(row) - 1]

  monkeypatch.setattr(bench, "_run_once", run_once)
  logged = []
  out = bench.measure(_args(max_repeats=4), log=logged.append)
  assert out["repeats"] == 3 and out["unsettled"] == []
  # Interleaved: each repeat reverses the last one's order.
  assert calls == ["stock", "pace", "tf_default", "tf_default", "pace",
                   "stock", "stock", "pace", "tf_default"]
  assert out["rows"]["stock"]["step_s"] == [0.010, 0.015, 0.010]
  assert out["rows"]["pace"]["ratio_to_stock"] == pytest.approx(1.1)
  assert "repeat 3 (2 to 4, until settled): stock" in logged[-3]
  assert "Not settled" not in bench.markdown(out)
  # Without --max_repeats, exactly --repeats, and what did not settle is
  # named.
  calls.clear()
  out = bench.measure(_args(), log=logged.append)
  assert out["repeats"] == 2 and out["unsettled"] == ["stock"]
  assert "Not settled after 2 repeat(s)" in bench.markdown(out)
  with pytest.raises(ValueError, match="one run is always settled"):
    bench.measure(_args(repeats=1, max_repeats=3))
