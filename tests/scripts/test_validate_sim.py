"""Tests of scripts/validate_sim.py on a made-up benchmark results directory.

The directory has the layout and schema `scripts/bench.py` writes
(results.json, details.json, traces/*.worker-0.json); the step times are
invented, so only the mechanics are tested, not the simulator's accuracy.
"""

import json
import os
import subprocess
import sys

import pytest

from tf_preempt.testing import scripts

_REPO = scripts.REPO
_SCRIPT = scripts.script_path("validate_sim")



def _row(median):
  return {"unroll": 1, "step_s": [median], "median_s": median,
          "ratio_vs_tf_default": 1.0, "ratio_vs_best_baseline": 1.0,
          "ratio_vs_lower_bound": 1.0}


def _make_results(path, traces=True, cost=None):
  os.makedirs(path / "traces")
  results = {
      "schedulers": {"tf_default@1": _row(0.30), "tf_packed@1": _row(0.27),
                     "pace@1": _row(0.25), "pace@2": dict(_row(0.22),
                                                          unroll=2)},
      "compute_s": 0.12, "comm_s": 0.15, "lower_bound_s": 0.15,
      "command": "scripts/bench.py --model=vgg_small --workers=2 "
                 "--batch_size=8",
      "machine": "made up"}
  (path / "results.json").write_text(json.dumps(results))
  (path / "details.json").write_text(json.dumps({"settings": {
      "tf_packed@1": {"args": ["--bytes_per_pack=4194304"],
                      "description": ""}}}))
  if traces:
    events = [{"cat": "collective", "ph": "X", "ts": 0, "dur": d,
               "args": {"bytes": b}}
              for b, d in ((1 << 20, 12_000.0), (4 << 20, 40_000.0),
                           (1 << 20, 11_000.0))]
    trace = {"traceEvents": events, "metadata": {"stats": {
        "model": "vgg_small", "workers": 2, "global_batch_size": 8}}}
    (path / "traces" / "pace_k1.worker-0.json").write_text(json.dumps(trace))
  if cost:
    (path / "cost_model.json").write_text(json.dumps(cost))
  return results


def test_validate_with_traces(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path)
  report = validate_sim.validate(str(tmp_path))
  rows = report["rows"]
  assert set(rows) == {"tf_default@1", "tf_packed@1", "pace@1", "pace@2"}
  for r in rows.values():
    assert r["predicted_s"] > 0
    assert r["error"] == pytest.approx(
        (r["predicted_s"] - r["measured_s"]) / r["measured_s"])
  assert report["max_abs_error"] == max(abs(r["error"])
                                        for r in rows.values())
  assert "unrolling not modelled" in rows["pace@2"]["note"]
  inputs = report["inputs"]
  assert inputs["setup"]["model"] == "vgg_small"
  assert inputs["setup"]["source"] == "trace metadata"
  assert inputs["cost_source"].startswith("fit over 3 traced collectives")
  # The fit of the three made-up collectives: ~8.6 ms per MiB.
  assert inputs["cost_model"]["beta"] == pytest.approx(28e-3 / (3 << 20),
                                                       rel=0.2)
  # Compute was scaled to the measured step with no all-reduce.
  assert inputs["compute_scale"] > 0
  assert [m.split(":")[0] for m in report["missing"]] == [
      "profile.json", "cost_model.json", "plans/NAME@K.json"]
  table = validate_sim.format_table(report)
  assert "| pace@1 |" in table and "max |error|" in table


def test_validate_from_command_and_given_cost(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path, traces=False, cost={"alpha": 1e-3, "beta": 1e-8})
  report = validate_sim.validate(str(tmp_path))
  assert report["inputs"]["setup"]["source"].startswith("results.json")
  assert report["inputs"]["setup"]["workers"] == 2
  assert report["inputs"]["cost_source"] == "cost_model.json"
  assert [m.split(":")[0] for m in report["missing"]] == [
      "profile.json", "plans/NAME@K.json"]


def test_recorded_plan_is_simulated(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path, cost={"alpha": 1e-3, "beta": 1e-8})
  first = validate_sim.validate(str(tmp_path))
  # Record, for pace@1, the plan of another scheduler: its prediction must
  # follow the recorded plan, not a re-plan.
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  dag = scripts.load_script("simulate").model_dag("vgg_small", 4, "v100",
                                                 None)
  scale = first["inputs"]["compute_scale"]
  dag = validate_sim._scaled(dag, scale)
  cost = plan_lib.CostModel(alpha=1e-3, beta=1e-8)
  recorded = plan_lib.make_plan(dag, cost, "tf_default")
  os.makedirs(tmp_path / "plans")
  (tmp_path / "plans" / "pace@1.json").write_text(recorded.to_json())
  report = validate_sim.validate(str(tmp_path))
  row = report["rows"]["pace@1"]
  assert row["plan"] == "recorded"
  assert row["predicted_s"] == pytest.approx(
      report["rows"]["tf_default@1"]["predicted_s"])


def test_json_output_and_table_file(tmp_path):
  _make_results(tmp_path)
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (_REPO, env.get("PYTHONPATH")) if p)
  proc = subprocess.run([sys.executable, _SCRIPT, str(tmp_path), "--json"],
                        capture_output=True, text=True, env=env, cwd=_REPO,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().count("\n") == 0
  report = json.loads(proc.stdout)
  assert isinstance(report["max_abs_error"], float)
  assert set(report["rows"]["pace@1"]) >= {"measured_s", "predicted_s",
                                           "error"}
  assert (tmp_path / "validation.md").read_text().startswith(
      "Simulator vs measured: vgg_small")
