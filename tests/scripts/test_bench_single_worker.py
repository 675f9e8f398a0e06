"""Tests of scripts/bench_single_worker.py: a tiny real run (slow)."""

import json
import os
import subprocess
import sys

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
