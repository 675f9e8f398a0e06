"""Tests of scripts/simulate_sweep.py on a tiny grid."""

import json
import os
import subprocess
import sys

from tf_preempt.testing import scripts

_REPO = scripts.REPO
_SCRIPT = scripts.script_path("simulate_sweep")



def test_tiny_sweep_in_process(tmp_path):
  sweep = scripts.load_script("simulate_sweep")
  result = sweep.run_sweep(
      models=("transformer",), workers=(2, 16), bandwidths_gbps=(1.0, 10.0),
      schedulers=("tf_default", "horovod", "pace", "pace_rsag"))
  points = result["points"]
  assert [(p["workers"], p["bandwidth_gbps"]) for p in points] == [
      (2, 1.0), (2, 10.0), (16, 1.0), (16, 10.0)]
  # The Keras model was built once for the four points.
  assert sweep.simulate.model_dag.cache_info().misses == 1
  for p in points:
    assert set(p["pace_speedup"]) == {"tf_default", "horovod"}
    # pace keeps the best of the baselines' plans among its candidates.
    assert min(p["pace_speedup"].values()) >= 1.0 - 1e-12
    assert p["pace_speedup_vs_best"] == min(p["pace_speedup"].values())
    assert p["rsag_speedup_vs_pace"] >= 1.0 - 1e-9
  assert result["setup"]["gpu_description"] == "NVIDIA Tesla V100 SXM2"
  assert result["setup"]["efficiency"] == 0.4

  paths = sweep.write_outputs(result, str(tmp_path), plot_workers=2,
                              plot_bandwidth_gbps=10.0)
  names = sorted(os.path.basename(p) for p in paths)
  assert names == ["speedup_vs_bandwidth.png", "speedup_vs_workers.png",
                   "sweep.json", "sweep.md"]
  with open(tmp_path / "sweep.json") as f:
    assert json.load(f)["points"] == json.loads(json.dumps(points))
  table = (tmp_path / "sweep.md").read_text()
  assert "### transformer" in table
  assert table.count("\n| 16 |") == 2
  assert "NVIDIA Tesla V100 SXM2 at 0.4 of peak" in table


def test_json_output_is_one_object(tmp_path):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (_REPO, env.get("PYTHONPATH")) if p)
  proc = subprocess.run(
      [sys.executable, _SCRIPT, "--models=transformer", "--workers=4",
       "--bandwidths_gbps=25", f"--out_dir={tmp_path}", "--json"],
      capture_output=True, text=True, env=env, cwd=_REPO, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().count("\n") == 0
  result = json.loads(proc.stdout)
  (point,) = result["points"]
  assert point["workers"] == 4 and point["bandwidth_gbps"] == 25.0
  assert set(point["iteration_s"]) == {
      "tf_default", "tf_packed", "fifo", "priority", "horovod", "ddp",
      "bytescheduler", "pace", "pace_rsag"}
  assert len(result["written"]) == 4
