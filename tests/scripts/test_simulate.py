"""Tests of scripts/simulate.py, run as a user runs it: a subprocess."""

import json
import os
import subprocess
import sys

import pytest

from tf_preempt.testing import scripts

_REPO = scripts.REPO
_SCRIPT = scripts.script_path("simulate")
_SCHEDULERS = {"pace", "priority", "fifo", "tf_default", "tf_packed",
               "horovod", "ddp", "bytescheduler"}


def _run(*args):
  env = dict(os.environ)
  # The source tree first, so the test checks this checkout's code.
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (_REPO, env.get("PYTHONPATH")) if p)
  return subprocess.run([sys.executable, _SCRIPT, *args], capture_output=True,
                        text=True, env=env, cwd=_REPO, timeout=300)



@pytest.mark.parametrize("model", ["resnet50", "vgg16", "transformer"])
def test_json_output(model):
  proc = _run(f"--model={model}", "--json")
  assert proc.returncode == 0, proc.stderr[-3000:]
  # Exactly one JSON object and nothing else on stdout.
  stats = json.loads(proc.stdout)
  assert isinstance(stats, dict)
  assert proc.stdout.strip().count("\n") == 0
  assert set(stats["schedulers"]) == _SCHEDULERS
  for name, row in stats["schedulers"].items():
    assert row["iteration_s"] > 0, name
    assert row["speedup_vs_tf_default"] > 0, name
  assert stats["schedulers"]["tf_default"]["speedup_vs_tf_default"] == 1.0
  # The planner never does worse than a baseline in simulation.
  assert stats["schedulers"]["pace"]["speedup_vs_tf_default"] >= 1.0
  assert stats["model"] == model
  assert stats["workers"] == 8
  assert stats["bandwidth_gbps"] == 10.0
  assert stats["plan_seconds"] > 0
  assert isinstance(stats["tensors"], int) and stats["tensors"] > 0
  assert isinstance(stats["total_bytes"], int)
  # Tensor sizes are those of the real models (float32).
  expected_params = {"resnet50": 25_557_032, "vgg16": 138_357_544}
  if model in expected_params:
    assert stats["total_bytes"] == 4 * expected_params[model]


def test_flags_reach_run_and_profile_is_used(tmp_path):
  path = tmp_path / "profile.json"
  path.write_text(json.dumps({"conv1_conv/forward": 1.0}))
  proc = _run("--model=resnet50", "--workers=4", "--bandwidth_gbps=25",
              "--batch_size=16", "--gpu=a100", f"--profile={path}", "--json")
  assert proc.returncode == 0, proc.stderr[-3000:]
  stats = json.loads(proc.stdout)
  assert (stats["workers"], stats["bandwidth_gbps"], stats["batch_size"],
          stats["gpu"]) == (4, 25.0, 16, "a100")
  # The measured 1 s forward op is on every path of the next forward pass.
  assert stats["compute_s"] > 1.0


@pytest.mark.parametrize("flag", [
    "--workers=1", "--bandwidth_gbps=0", "--model=alexnet", "--gpu=h900",
    "--latency_us=-5", "--profile=/nonexistent/profile.json",
])
def test_bad_flag_fails_naming_it(flag):
  proc = _run(flag, "--json")
  assert proc.returncode != 0
  assert flag.split("=")[0] in proc.stderr
  assert not proc.stdout.strip()


def test_table_is_aligned():
  module = scripts.load_script("simulate")
  stats = {
      "model": "resnet50", "tensors": 2, "total_bytes": 3 << 20,
      "workers": 8, "bandwidth_gbps": 10.0, "gpu": "v100", "batch_size": 64,
      "compute_s": 0.1, "plan_seconds": 0.01,
      "schedulers": {
          "tf_default": {"iteration_s": 0.2, "speedup_vs_tf_default": 1.0},
          "pace": {"iteration_s": 0.1, "speedup_vs_tf_default": 2.0},
      },
  }
  lines = module.format_table(stats).splitlines()
  header, rows = lines[1], lines[2:4]
  assert "iteration (ms)" in header and "speed-up vs tf_default" in header
  assert rows[0].split() == ["tf_default", "200.0", "1.00x"]
  assert rows[1].split() == ["pace", "100.0", "2.00x"]
  assert len({len(line) for line in (header, *rows)}) == 1


def test_run_validates_arguments():
  module = scripts.load_script("simulate")
  with pytest.raises(ValueError, match="workers"):
    module.run(workers=1)
  with pytest.raises(ValueError, match="model"):
    module.run(model="alexnet")
