"""Smoke tests of scripts/demo.py (`make demo`) with tiny settings."""

import os
import re
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_DEMO = os.path.join(_ROOT, "scripts", "demo.py")


def _demo(args, timeout):
  return subprocess.run([sys.executable, _DEMO] + list(args), cwd=_ROOT,
                        capture_output=True, text=True, timeout=timeout)


def test_bad_flags_fail_fast():
  result = _demo(["--steps=5", "--unroll=2"], timeout=60)
  assert result.returncode != 0
  assert "--unroll" in result.stderr


def test_simulate_keeps_the_planner_tables():
  result = _demo(["--simulate"], timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  for model in ("resnet50", "vgg16", "transformer"):
    assert f"{model}:" in result.stdout
  assert "SIMULATION" in result.stdout and "pace" in result.stdout


@pytest.mark.slow
def test_tiny_demo():
  result = _demo(["--steps=6", "--warmup_steps=2", "--unroll=2",
                  "--batch_size=4", "--noattribution", "--rounds=1",
                  "--timeout_s=120"],
                 timeout=240)
  out = result.stdout
  assert result.returncode == 0, out + result.stderr[-3000:]
  assert re.search(r"Network: (emulated 200mbit|plain loopback)", out), out
  assert "stock reduction (tf_default), unroll 1" in out
  assert "PACE plan (pace), unroll 2" in out
  assert re.search(r"Speed-up of PACE \+ unroll 2 over stock reduction: "
                   r"\d+\.\d\dx", out), out
  assert "final losses agree" in out
  assert "cannot run Keras 3 fit" in out
