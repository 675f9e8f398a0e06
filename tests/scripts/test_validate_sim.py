"""Tests of scripts/validate_sim.py on a made-up benchmark results directory.

The directory has the layout and schema `scripts/bench.py` writes
(results.json, details.json, traces/*.worker-0.json); the step times are
invented, so only the mechanics are tested, not the simulator's accuracy.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import statistics
import sys

import pytest

from tf_preempt.bench import collective_cost
from tf_preempt.bench import overlap_fit
from tf_preempt.bench import results_files
from tf_preempt.bench import row_plans
from tf_preempt.bench import trace_calibration
from tf_preempt.bench import update_backlog
from tf_preempt.testing import bench_records
from tf_preempt.testing import scripts

_REPO = scripts.REPO
_SCRIPT = scripts.script_path("validate_sim")


def _row(median):
  return {"unroll": 1, "step_s": [median], "median_s": median,
          "ratio_vs_tf_default": 1.0, "ratio_vs_best_baseline": 1.0,
          "ratio_vs_lower_bound": 1.0}


def _write_bench_files(path, results, args_by_row):
  """results.json, and details.json with each row's bench.py flags."""
  (path / "results.json").write_text(json.dumps(results))
  (path / "details.json").write_text(json.dumps({"settings": {
      row: {"args": args, "description": ""}
      for row, args in args_by_row.items()}}))


def _write_vgg_rows(path, rows, bandwidth, args_by_row=None):
  """A vgg_small directory (2 workers, batch 8) of `rows` {name: row}:
  results.json and details.json; a traces/ directory for the caller's."""
  os.makedirs(path / "traces")
  results = {"schedulers": rows,
             "compute_s": 0.05, "comm_s": 0.04, "lower_bound_s": 0.05,
             "command": "scripts/bench.py --model=vgg_small --workers=2 "
                        f"--batch_size=8 --bandwidth={bandwidth}",
             "machine": "made up"}
  _write_bench_files(path, results, args_by_row or {})


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
  _write_bench_files(path, results,
                     {"tf_packed@1": ["--bytes_per_pack=4194304"]})
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
  report = validate_sim.validate(str(tmp_path), cost_fallback="trace")
  rows = report["rows"]
  assert set(rows) == {"tf_default@1", "tf_packed@1", "pace@1", "pace@2"}
  for r in rows.values():
    assert r["predicted_s"] > 0
    assert r["error"] == pytest.approx(
        (r["predicted_s"] - r["measured_s"]) / r["measured_s"])
  assert report["max_abs_error"] == max(abs(r["error"])
                                        for r in rows.values())
  # Unrolling is modelled: blocks of K steps, the runtime's CPU credit.
  assert "K=2" in rows["pace@2"]["model"]
  assert "K=1" in rows["pace@1"]["model"]
  # The gap between a block's steps, for reading, where there are two.
  assert rows["pace@2"]["first_step"]["model"]["step_gap_s"] > 0
  assert "step_gap_s" not in rows["pace@1"]["first_step"]["model"]
  assert "2 collective(s) in flight" in rows["pace@1"]["model"]
  # Round trips wait for the bytes ahead of them, unless told otherwise.
  assert "waits for the bytes ahead" in rows["pace@1"]["model"]
  old = validate_sim.validate(str(tmp_path), cost_fallback="trace",
                              latency_behind_bytes=False)
  assert "waits for the bytes ahead" not in old["rows"]["pace@1"]["model"]
  assert old["inputs"]["settings"]["latency_behind_bytes"] is False
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
      "profile.json", "cost_model.json",
      "*step-profile*/step_profile.json beside the results",
      "plans/NAME@K.json"]
  table = validate_sim.format_table(report)
  assert "| pace@1 |" in table and "max |error|" in table


def test_early_work_beside_the_results_is_modelled(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  results_dir = tmp_path / "2026-12-01-vgg_small"
  results = _make_results(results_dir)
  without = validate_sim.validate(str(results_dir), cost_fallback="trace")
  os.makedirs(tmp_path / "2026-12-05-step-profile")
  (tmp_path / "2026-12-05-step-profile" / "step_profile.json").write_text(
      json.dumps({"models": {"vgg_small": {
          "per_worker_batch": 4, "early_share": 0.2, "shares": [0.2]}}}))
  report = validate_sim.validate(str(results_dir), cost_fallback="trace")
  inputs = report["inputs"]
  assert inputs["early_share"] == 0.2
  # A fifth of the step's compute (scaled to the measured compute_s).
  assert inputs["early_compute_s"] == pytest.approx(0.2 * results["compute_s"])
  assert not any("step_profile" in m for m in report["missing"])
  rows, before = report["rows"], without["rows"]
  assert "later step's forward pass" in rows["pace@2"]["model"]
  assert "later step's" not in before["pace@2"]["model"]
  # K=1 has no later step.
  assert rows["pace@1"]["predicted_s"] == before["pace@1"]["predicted_s"]
  assert "Early compute" in validate_sim.format_table(report)


def test_the_block_head_of_the_directory_s_machine_is_the_early_work(
    tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  results_dir = tmp_path / "2026-12-01-vgg_small"
  results = _make_results(results_dir)
  results["machine"] = bench_records.machine_line("fc-v1300")
  (results_dir / "results.json").write_text(json.dumps(results))
  os.makedirs(tmp_path / "2026-12-05-step-profile")
  (tmp_path / "2026-12-05-step-profile" / "step_profile.json").write_text(
      json.dumps({"models": {"vgg_small": {
          "per_worker_batch": 4, "early_share": 0.2, "shares": [0.2]}}}))
  for name, kernel, share in (("2026-12-06-block-head", "fc-v1300", 0.1),
                              ("2026-12-07-block-head", "fc-v1272", 0.3)):
    os.makedirs(tmp_path / name)
    (tmp_path / name / "block_head.json").write_text(json.dumps({
        "machine": bench_records.machine_line(kernel),
        "models": {"vgg_small": {"per_worker_batch": 4,
                                 "delay_share": share, "shares": [share]}}}))
  report = validate_sim.validate(str(results_dir), cost_fallback="trace")
  inputs = report["inputs"]
  assert inputs["early_share"] == 0.1
  assert inputs["early_source"].startswith(
      "the block head: 2026-12-06-block-head/block_head.json")
  assert inputs["early_compute_s"] == pytest.approx(0.1 * results["compute_s"])
  assert "2026-12-06-block-head" in validate_sim.format_table(report)


def test_layer_shares_of_the_step_profile_are_the_per_op_times(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  results_dir = tmp_path / "2026-12-01-vgg_small"
  _make_results(results_dir)
  os.makedirs(tmp_path / "2026-12-05-step-profile")
  (tmp_path / "2026-12-05-step-profile" / "step_profile.json").write_text(
      json.dumps({"models": {"vgg_small": {
          "per_worker_batch": 4, "early_share": 0.0, "shares": [0.0],
          "layer_shares": {"block1_conv1/forward": 0.3,
                           "block1_conv1/backward": 0.7}}}}))
  flops = validate_sim.validate(str(results_dir), cost_fallback="trace")
  assert flops["inputs"]["compute"].startswith("v100 FLOPs model")
  report = validate_sim.validate(str(results_dir), cost_fallback="trace",
                                 layer_times="measured")
  assert report["inputs"]["compute"].startswith(
      "each layer's measured share of the step (2026-12-05-step-profile")
  assert report["inputs"]["settings"]["layer_times"] == "measured"
  assert report["inputs"]["compute_scale"] > 0
  for row in report["rows"].values():
    # Without heads to fit it to, the forward share is the layers'.
    assert row["calibration"]["forward_share"] == pytest.approx(0.3)
  assert "the step profile's shares stand in" in " ".join(report["missing"])
  with pytest.raises(ValueError, match="layer_times"):
    validate_sim.validate(str(results_dir), layer_times="gpu")


def test_validate_from_command_and_given_cost(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path, traces=False, cost={"alpha": 1e-3, "beta": 1e-8})
  report = validate_sim.validate(str(tmp_path))
  assert report["inputs"]["setup"]["source"].startswith("results.json")
  assert report["inputs"]["setup"]["workers"] == 2
  assert report["inputs"]["cost_source"] == "cost_model.json"
  assert [m.split(":")[0] for m in report["missing"]] == [
      "profile.json", "*step-profile*/step_profile.json beside the results",
      "plans/NAME@K.json"]


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
  dag = row_plans.scaled(dag, scale)
  cost = plan_lib.CostModel(alpha=1e-3, beta=1e-8)
  recorded = plan_lib.make_plan(dag, cost, "tf_default")
  os.makedirs(tmp_path / "plans")
  row, reference = _pace_row_with_plan(validate_sim, tmp_path, recorded)
  assert row["plan"] == "recorded"
  assert row["predicted_s"] == pytest.approx(reference)
  # The runtime names tensors after graph tensors: matched by position and
  # size, the same plan.
  renamed = plan_lib.plan_from_groups(
      [dataclasses.replace(t, name=f"value[{i}]")
       for i, t in enumerate(recorded.tensors)],
      [[(p.tensor, p.offset, p.length) for p in c.pieces]
       for c in recorded.collectives])
  row, reference = _pace_row_with_plan(validate_sim, tmp_path, renamed)
  assert row["plan"] == "recorded (tensors matched by position and size)"
  assert row["predicted_s"] == pytest.approx(reference)
  # A plan for other tensors is not used, and the table says so.
  other = plan_lib.plan_from_groups(
      [dataclasses.replace(t, nbytes=t.nbytes * 2)
       for t in recorded.tensors],
      [[(p.tensor, 0, recorded.tensors[p.tensor].nbytes * 2)]
       for c in recorded.collectives for p in c.pieces])
  row, _ = _pace_row_with_plan(validate_sim, tmp_path, other)
  assert row["plan"].startswith("runtime's plan from gradient sizes")
  assert "recorded for other tensors" in row["plan"]


def _pace_row_with_plan(validate_sim, results_dir, plan):
  """Validates with `plan` recorded as pace@1's; (pace@1's row, the
  predicted seconds of tf_default@1)."""
  (results_dir / "plans" / "pace@1.json").write_text(plan.to_json())
  report = validate_sim.validate(str(results_dir))
  return (report["rows"]["pace@1"],
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


def test_default_cost_is_alpha_alone_and_comm_s(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path)
  report = validate_sim.validate(str(tmp_path))
  inputs = report["inputs"]
  assert inputs["cost_source"].startswith("alpha 1.8 ms")
  alpha = collective_cost.GRPC_ALPHA_S
  assert inputs["cost_model"]["alpha"] == pytest.approx(alpha)
  # The whole gradient in one all-reduce costs exactly comm_s.
  assert inputs["simulated_comm_s"] == pytest.approx(0.15)


def _bench_dir(path, bandwidth, comm_s=0.15, model="vgg_small", workers=2,
               machine="made up"):
  os.makedirs(path)
  results = {"schedulers": {"tf_default@1": _row(0.30),
                            "pace@2": dict(_row(0.22), unroll=2)},
             "compute_s": 0.12, "comm_s": comm_s, "lower_bound_s": 0.15,
             "command": f"scripts/bench.py --model={model} "
                        f"--workers={workers} --batch_size=8 "
                        f"--bandwidth={bandwidth}",
             "machine": machine}
  (path / "results.json").write_text(json.dumps(results))


def test_cpu_cost_from_the_fastest_cpu_bound_sibling(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _bench_dir(tmp_path / "slow", "200mbit")
  _bench_dir(tmp_path / "fast", "2gbit", comm_s=0.02)
  # Another worker count is another ring: never used.
  _bench_dir(tmp_path / "faster_4_workers", "10gbit", workers=4)
  # Another model on the same link loses the tie to the same model.
  _bench_dir(tmp_path / "fast_other_model", "2gbit", comm_s=0.03,
             model="resnet20")
  _bench_dir(tmp_path / "mid", "500mbit", comm_s=0.05)
  report = validate_sim.validate(str(tmp_path / "slow"))
  inputs = report["inputs"]
  assert inputs["cpu_source"].startswith("fast:")
  nbytes = sum(t.nbytes for t in scripts.load_script("simulate").model_dag(
      "vgg_small", 4, "v100", None).tensors)
  assert inputs["cpu_cost"]["alpha"] == pytest.approx(1.8e-3)
  assert inputs["cpu_cost"]["beta"] == pytest.approx((0.02 - 1.8e-3) /
                                                     nbytes)
  for row in report["rows"].values():
    assert "ns/B on the compute core" in row["model"]
  # A cost_model.json there wins over its comm_s.
  (tmp_path / "fast" / "cost_model.json").write_text(
      json.dumps({"alpha": 1e-3, "beta": 2e-9}))
  report = validate_sim.validate(str(tmp_path / "slow"))
  assert report["inputs"]["cpu_cost"] == {"alpha": 1e-3, "beta": 2e-9}
  # On a CPU-bound link the directory's own cost model is the CPU cost.
  fast = validate_sim.validate(str(tmp_path / "fast"))
  assert fast["inputs"]["cpu_cost"] == fast["inputs"]["cost_model"]
  # And "none" turns contention off.
  off = validate_sim.validate(str(tmp_path / "slow"), cpu_cost="none")
  assert off["inputs"]["cpu_cost"] is None
  # The CPU cost is the machine's, not the model's: a model measured only
  # on the slow link takes it from the other model's directory.
  _bench_dir(tmp_path / "slow_other_model", "200mbit", model="resnet20")
  other = validate_sim.validate(str(tmp_path / "slow_other_model"))
  assert other["inputs"]["cpu_source"].startswith("fast/cost_model.json")


def test_cpu_cost_from_a_sibling_of_the_same_machine(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  here = bench_records.machine_line("fc-v1272") + "; link rate 200mbit"
  _bench_dir(tmp_path / "slow", "200mbit", machine=here)
  # A faster link on another machine loses to a CPU-bound link on this one.
  _bench_dir(tmp_path / "faster_elsewhere", "10gbit", comm_s=0.01,
             machine=here.replace("fc-v1272", "fc-v1252"))
  _bench_dir(tmp_path / "fast_here", "2gbit", comm_s=0.02, machine=here)
  report = validate_sim.validate(str(tmp_path / "slow"))
  assert report["inputs"]["cpu_source"].startswith("fast_here:")
  # Without it, one that recorded no machine; never another machine's.
  shutil.rmtree(tmp_path / "fast_here")
  report = validate_sim.validate(str(tmp_path / "slow"))
  assert report["inputs"]["cpu_source"].startswith("none:")
  _bench_dir(tmp_path / "fast_unrecorded", "1gbit", comm_s=0.03)
  report = validate_sim.validate(str(tmp_path / "slow"))
  assert report["inputs"]["cpu_source"].startswith("fast_unrecorded:")


def test_cpu_contention_lengthens_the_prediction(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _bench_dir(tmp_path / "fast", "2gbit", comm_s=0.02)
  on = validate_sim.validate(str(tmp_path / "fast"))
  off = validate_sim.validate(str(tmp_path / "fast"), cpu_cost="none")
  # pace@2 overlaps communication with compute: sharing the core costs.
  assert (on["rows"]["pace@2"]["predicted_s"] >
          off["rows"]["pace@2"]["predicted_s"])


def test_reference_fastest(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path, traces=False, cost={"alpha": 1e-3, "beta": 1e-8})
  results = json.loads((tmp_path / "results.json").read_text())
  results["schedulers"]["pace@1"]["step_s"] = [0.25, 0.21, 0.30]
  (tmp_path / "results.json").write_text(json.dumps(results))
  details = json.loads((tmp_path / "details.json").read_text())
  details["runs"] = [{"name": "compute alone", "value_s": 0.13},
                     {"name": "compute alone", "value_s": 0.10}]
  (tmp_path / "details.json").write_text(json.dumps(details))
  report = validate_sim.validate(str(tmp_path), reference="fastest")
  assert report["rows"]["pace@1"]["measured_s"] == 0.21
  assert report["inputs"]["measured_compute_s"] == 0.10
  assert report["inputs"]["measured_comm_s"] == 0.15  # no runs: results'
  assert "repeat_spread" in report["rows"]["pace@1"]
  with pytest.raises(ValueError):
    validate_sim.validate(str(tmp_path), reference="best")


def test_fixed_cost_is_at_least_its_cpu_part(tmp_path):
  # A fit with alpha 0 (its smallest size already link-bound): every row's
  # alpha becomes the CPU part measured in the other rows' traces, and the
  # core share follows from the small collectives during the backward pass.
  validate_sim = scripts.load_script("validate_sim")
  _make_results(tmp_path, traces=False, cost={"alpha": 0.0, "beta": 1e-8})
  ms = 1000.0
  colls = [
      bench_records.collective(3, 0, 2 << 20, 1030 * ms, 1030 * ms, 40 * ms),
      bench_records.collective(3, 1, 1024, 1031 * ms, 1031 * ms, 12 * ms),
      bench_records.collective(3, 2, 512, 1060 * ms, 1080 * ms, 2 * ms),
      bench_records.collective(3, 3, 512, 1060 * ms, 1081 * ms, 2.5 * ms),
  ]
  trace = bench_records.trace([bench_records.block(0, 0, 1000 * ms),
                               bench_records.block(1, 1000 * ms, 100 * ms)],
                              colls)
  for name in ("tf_default_k1", "tf_packed_k1", "pace_k1"):
    (tmp_path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(trace))
  (tmp_path / "cpu.json").write_text(json.dumps({"alpha": 2e-3,
                                                 "beta": 1e-9}))
  report = validate_sim.validate(str(tmp_path),
                                 cpu_cost=str(tmp_path / "cpu.json"))
  calib = report["rows"]["pace@1"]["calibration"]
  assert calib["cpu_fixed_s"] == pytest.approx(1.5e-3)  # 1081+2.5 - 1082
  assert calib["alpha_s"] == pytest.approx(1.5e-3)
  assert calib["comm_cpu_share"] == pytest.approx(1.5 / 12)
  assert report["inputs"]["cost_model"]["alpha"] == 0.0
  table = validate_sim.format_table(report)
  assert "| 1.50 / 1.50 |" in table
  # The CPU part is capped by a collective's fixed cost alone: the larger
  # of the CPU cost's own (0.5 ms here) and this run's (0 here: 0.5 ms).
  (tmp_path / "cpu.json").write_text(json.dumps({"alpha": 5e-4,
                                                 "beta": 1e-9}))
  capped = validate_sim.validate(str(tmp_path),
                                 cpu_cost=str(tmp_path / "cpu.json"))
  assert capped["rows"]["pace@1"]["calibration"]["cpu_fixed_s"] == (
      pytest.approx(5e-4))
  # A run whose own fixed cost (2 ms) exceeds it: the traces' 1.5 ms stand.
  (tmp_path / "cost_model.json").write_text(json.dumps(
      {"alpha": 2e-3, "beta": 1e-8}))
  own = validate_sim.validate(str(tmp_path),
                              cpu_cost=str(tmp_path / "cpu.json"))
  assert own["rows"]["pace@1"]["calibration"]["cpu_fixed_s"] == (
      pytest.approx(1.5e-3))
  # --comm_cpu_share=overlaps (a check): the share fitted to the rows that
  # overlap the backward pass instead of the small collectives' times.
  fitted = validate_sim.validate(str(tmp_path),
                                 cpu_cost=str(tmp_path / "cpu.json"),
                                 comm_cpu_share="overlaps")
  calib = fitted["rows"]["pace@1"]["calibration"]
  # No row here releases a collective before its backward pass ends: no
  # evidence, and the small collectives' share stands
  # (tests/bench/test_overlap_fit.py fits one).
  assert calib["overlap_traces"] == 0
  assert calib["comm_cpu_share"] == (
      own["rows"]["pace@1"]["calibration"]["comm_cpu_share"])
  assert fitted["inputs"]["settings"]["comm_cpu_share"] == "overlaps"


def test_sparse_gradients_are_all_gathered_not_block_overhead(tmp_path):
  # transformer_tiny's embedding gradient is IndexedSlices: the runtime's
  # plans cover the 34 dense gradients only, and the all-gather after
  # them is not in the traces, whose block tail (20 ms) holds it.
  validate_sim = scripts.load_script("validate_sim")
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  os.makedirs(tmp_path / "traces")
  os.makedirs(tmp_path / "plans")
  results = {"schedulers": {"tf_default@1": _row(0.10),
                            "horovod@1": _row(0.10)},
             "compute_s": 0.012, "comm_s": 0.02, "lower_bound_s": 0.02,
             "command": "scripts/bench.py --model=transformer_tiny "
                        "--workers=2 --batch_size=8 --bandwidth=200mbit",
             "machine": "made up"}
  (tmp_path / "results.json").write_text(json.dumps(results))
  (tmp_path / "cost_model.json").write_text(json.dumps(
      {"alpha": 1e-3, "beta": 4e-8}))
  ms = 1000.0
  trace = bench_records.trace(
      [bench_records.block(0, 0, 1000 * ms),
       bench_records.block(1, 1000 * ms, 100 * ms)],
      [bench_records.collective(3, 0, 268296, 1030 * ms, 1030 * ms, 50 * ms)])
  trace["metadata"]["stats"]["model"] = "transformer_tiny"
  for name in ("tf_default_k1", "horovod_k1"):
    (tmp_path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(trace))
  dag = scripts.load_script("simulate").model_dag("transformer_tiny", 4,
                                                 "v100", None)
  dense = [t for t in dag.tensors if t.sparse is None]
  assert len(dense) == len(dag.tensors) - 1
  recorded = plan_lib.plan_from_groups(
      [plan_lib.PlanTensor(f"value[{i}]", t.nbytes)
       for i, t in enumerate(dense)],
      [[(i, 0, t.nbytes) for i, t in reversed(list(enumerate(dense)))]],
      scheduler="horovod")
  (tmp_path / "plans" / "horovod@1.json").write_text(recorded.to_json())

  report = validate_sim.validate(str(tmp_path), cpu_cost="none")
  (sparse,) = report["inputs"]["sparse"]
  assert sparse == {"name": "embedding/embeddings", "nbytes": 256000,
                    "values_nbytes": 4 * 32 * 64 * 4,
                    "indices_nbytes": 4 * 32 * 4}
  row = report["rows"]["horovod@1"]
  assert row["plan"] == ("recorded (the dense tensors, matched by position "
                         "and size)")
  assert row["collectives"] == 1
  assert "all-gathered over 2 worker(s)" in row["model"]
  # The modelled all-gather after the last dense collective (of the other
  # row, tf_default@1: one 268 KB all-reduce that empties the 200 Mbit/s
  # link's bucket of 4 ms) comes out of the measured tail: the row
  # count's 4 bytes queue behind it; rows and indices then pay 1 ms of
  # fixed cost, during which the idle link refills 1 ms of tokens, and
  # their 32768 + 512 bytes at 40 ns/B, 1 ms of it at once.
  calib = row["calibration"]
  assert calib["trace_tail_s"] == pytest.approx(0.020)
  assert calib["sparse_tail_s"] == pytest.approx(
      4e-8 * 4 + 1e-3 + 4e-8 * (32768 + 512) - 1e-3)
  assert calib["block_overhead_s"] == pytest.approx(
      0.020 - calib["sparse_tail_s"])
  assert "Sparse gradients" in validate_sim.format_table(report)
  # Stock packing and the runtime's own plans leave the embedding out too:
  # it is appended alone, where the execution model all-gathers it.
  stock = report["rows"]["tf_default@1"]
  assert stock["plan"].startswith("stock packing")
  assert stock["collectives"] == 1
  priority = row_plans.runtime_plan(dag, "priority", 2, {})
  assert priority.collectives[-1].tensors == (0,)
  assert all(0 not in c.tensors for c in priority.collectives[:-1])
  # The prediction is the execution model's, the all-gathers included.
  model = execution.ExecutionModel(unroll=1, max_collectives=2, workers=2,
                                   block_overhead=calib["block_overhead_s"],
                                   block_startup=calib["block_startup_s"],
                                   link_burst=4e-3)
  plan, _ = row_plans.recorded_plan(str(tmp_path / "plans"), "horovod@1",
                                     dag)
  assert plan.collectives[-1].tensors == (0,)
  ex = execution.execute(
      row_plans.with_forward_share(row_plans.scaled(
          dag, report["inputs"]["compute_scale"]), calib["forward_share"]),
      plan_lib.CostModel(1e-3, 4e-8), plan, model)
  assert len(ex.exchange_end[0]) == 3
  assert row["predicted_s"] == pytest.approx(ex.step_time)


def test_validate_models_the_link_token_bucket(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  cpu = plan_lib.CostModel(1.28e-3, 3.78e-9)
  (tmp_path / "cpu.json").write_text(json.dumps(cpu.to_dict()))
  true = plan_lib.CostModel(1.8e-3, 42e-9)
  sizes = [8192, 32768, 131072, 524296]
  seconds = bench_records.repeated_samples(true, 4e-3, cpu, sizes)
  linear = plan_lib.CostModel.fit(sizes, seconds)
  given = dict(linear.to_dict(), samples={str(s): t for s, t in
                                          zip(sizes, seconds)})

  def bench(name, bandwidth, cpu_cost=str(tmp_path / "cpu.json")):
    _bench_dir(tmp_path / name, bandwidth)
    (tmp_path / name / "cost_model.json").write_text(json.dumps(given))
    return validate_sim.validate(str(tmp_path / name), cpu_cost=cpu_cost)

  shaped = bench("shaped", "200mbit")
  inputs = shaped["inputs"]
  assert inputs["link"] == {"rate": "200mbit", "burst_bytes": 100_000,
                            "burst_s": pytest.approx(4e-3),
                            "cpu_bound": False}
  assert "refitted with the link's token bucket" in inputs["cost_source"]
  assert inputs["cost_model"]["alpha"] == pytest.approx(true.alpha)
  assert inputs["cost_model"]["beta"] == pytest.approx(true.beta)
  # The whole gradient alone, as comm_worker times it: the model's own.
  nbytes = sum(t.nbytes for t in scripts.load_script("simulate").model_dag(
      "vgg_small", 4, "v100", None).tensors)
  assert inputs["simulated_comm_s"] == pytest.approx(
      execution.repeated_seconds(true, nbytes, execution.ExecutionModel(
          cpu=cpu, link_burst=4e-3)))
  for row in shaped["rows"].values():
    assert "token bucket of 4.000 ms" in row["model"]
    assert "fixed CPU work one collective at a time" in row["model"]
  assert "a token bucket (tc tbf" in validate_sim.format_table(shaped)
  # Loopback: a plain rate and the linear fit as given.
  plain = bench("loopback", "")
  assert plain["inputs"]["link"]["burst_s"] == 0.0
  assert plain["inputs"]["cost_source"] == "cost_model.json"
  assert plain["inputs"]["cost_model"] == linear.to_dict()
  for row in plain["rows"].values():
    assert "token bucket" not in row["model"]
  assert "a plain rate (no token bucket)" in validate_sim.format_table(plain)
  # A CPU-bound link (its own cost is the CPU cost): the bytes need the
  # whole core at the rate, the bucket cannot speed them; no refit.
  fast = bench("fast", "2gbit", cpu_cost="auto")
  assert fast["inputs"]["cpu_cost"] == fast["inputs"]["cost_model"]
  assert fast["inputs"]["cost_source"] == "cost_model.json"
  assert fast["inputs"]["link"]["cpu_bound"]
  assert "inert here" in validate_sim.format_table(fast)


def test_results_without_scheduler_rows_are_refused(tmp_path):
  # scripts/bench_single_worker.py writes a results.json of other rows.
  validate_sim = scripts.load_script("validate_sim")
  (tmp_path / "results.json").write_text(json.dumps(
      {"rows": {"stock": {"median_s": 0.09}}, "command": "x"}))
  with pytest.raises(ValueError, match="not a scripts/bench.py"):
    validate_sim.validate(str(tmp_path))


def test_sparse_as_dense_rows_reduce_the_embedding_as_planned(tmp_path):
  # bench.py --pace_sparse_as_dense: pace densifies the embedding gradient
  # and its plan reduces it; the other rows all-gather it.
  validate_sim = scripts.load_script("validate_sim")
  os.makedirs(tmp_path / "traces")
  results = {"schedulers": {"tf_default@1": _row(0.05),
                            "pace@2": dict(_row(0.05), unroll=2)},
             "compute_s": 0.012, "comm_s": 0.02, "lower_bound_s": 0.02,
             "command": "scripts/bench.py --model=transformer_tiny "
                        "--workers=2 --batch_size=8 --bandwidth=200mbit",
             "machine": "made up"}
  _write_bench_files(tmp_path, results, {"pace@2": ["--sparse_as_dense"]})
  (tmp_path / "cost_model.json").write_text(json.dumps(
      {"alpha": 1e-3, "beta": 4e-8}))
  report = validate_sim.validate(str(tmp_path), cpu_cost="none")
  assert "all-gathered" in report["rows"]["tf_default@1"]["model"]
  pace = report["rows"]["pace@2"]
  assert "all-gathered" not in pace["model"]
  # Its plan's every collective is issued, the embedding's included.
  dag = scripts.load_script("simulate").model_dag("transformer_tiny", 4,
                                                 "v100", None)
  plan = row_plans.runtime_plan(dag, "pace", 2, {})
  assert pace["collectives"] == len(plan.collectives)
  assert pace["collectives"] == row_plans.dense_collectives(dag, plan) + 1


def _write_ddp_disturbed(path):
  """Two rows whose traced blocks last 100 ms, one step each: horovod@1's
  fastest repeat took 100 ms (its trace is of a run like it), ddp@1's 80 ms
  (its traced run was 25% slower: disturbed). The traces are the caller's.
  """
  _write_vgg_rows(path, {"horovod@1": dict(_row(0.10), step_s=[0.1, 0.1]),
                         "ddp@1": dict(_row(0.09), step_s=[0.08, 0.1])},
                  "200mbit")


def test_traces_of_disturbed_runs_calibrate_nothing(tmp_path):
  # ddp@1's traced run was disturbed: its trace is left out.
  validate_sim = scripts.load_script("validate_sim")
  _write_ddp_disturbed(tmp_path)
  ms = 1000.0
  for name, tail_ms in (("horovod_k1", 5), ("ddp_k1", 15)):
    trace = bench_records.trace(
        [bench_records.block(0, 0, 1000 * ms),
         bench_records.block(1, 1000 * ms, 100 * ms)],
        [bench_records.collective(3, 0, 2 << 20, 1050 * ms, 1050 * ms,
                                  (50 - tail_ms) * ms)])
    (tmp_path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(trace))
  report = validate_sim.validate(str(tmp_path), cpu_cost="none")
  assert report["inputs"]["disturbed_traces"] == ["ddp_k1.worker-0.json"]
  # horovod@1 has no undisturbed trace to learn from; ddp@1 learns from
  # horovod's (its tail of 5 ms is the overhead: no sparse gradients).
  assert report["rows"]["horovod@1"]["calibration"]["from_traces"] == []
  ddp = report["rows"]["ddp@1"]["calibration"]
  assert ddp["from_traces"] == ["horovod_k1.worker-0.json"]
  assert ddp["block_overhead_s"] == pytest.approx(0.005)


def test_traces_of_median_runs_are_disturbed_only_beyond_the_median(
    tmp_path):
  # ddp@1's repeats: 80, 100 and 100 ms, and its trace's blocks 100 ms.
  # Of its last run, a trace like it is 25% above the fastest: disturbed.
  # Of its median run (details.json's trace_runs), it is the median run.
  validate_sim = scripts.load_script("validate_sim")
  ms = 1000.0
  for median_traces in (False, True):
    path = tmp_path / str(median_traces)
    path.mkdir()
    _write_vgg_rows(path, {
        "horovod@1": dict(_row(0.10), step_s=[0.1, 0.1, 0.1]),
        "ddp@1": dict(_row(0.10), step_s=[0.08, 0.1, 0.1])}, "200mbit")
    if median_traces:
      details = json.loads((path / "details.json").read_text())
      details["trace_runs"] = {"horovod@1": 0, "ddp@1": 2}
      (path / "details.json").write_text(json.dumps(details))
    for name in ("horovod_k1", "ddp_k1"):
      trace = bench_records.trace(
          [bench_records.block(0, 0, 1000 * ms),
           bench_records.block(1, 1000 * ms, 100 * ms)],
          [bench_records.collective(3, 0, 2 << 20, 1050 * ms, 1050 * ms,
                                    45 * ms)])
      (path / "traces" / f"{name}.worker-0.json").write_text(
          json.dumps(trace))
    report = validate_sim.validate(str(path), cpu_cost="none")
    assert report["inputs"]["disturbed_traces"] == (
        [] if median_traces else ["ddp_k1.worker-0.json"])
    assert report["inputs"].get("traces_of_median_runs") == (
        True if median_traces else None)
    assert ("they are of its median run" in
            validate_sim.format_table(report)) == median_traces


def test_small_collective_figures_fall_back_to_disturbed_traces(tmp_path):
  # ddp@1's traced run was disturbed (25% slower than its fastest repeat)
  # and is the only trace with small collectives: horovod@1 takes the
  # small-collective figures from it, and says so, but nothing else.
  validate_sim = scripts.load_script("validate_sim")
  _write_ddp_disturbed(tmp_path)
  ms = 1000.0
  blocks = [bench_records.block(0, 0, 1000 * ms),
            bench_records.block(1, 1000 * ms, 100 * ms)]
  with_small = [  # as in test_blocks_measure_head_tail_and_small_collectives
      bench_records.collective(3, 0, 2 << 20, 1030 * ms, 1030 * ms, 40 * ms),
      bench_records.collective(3, 1, 1024, 1031 * ms, 1031 * ms, 10 * ms),
      bench_records.collective(3, 2, 512, 1060 * ms, 1080 * ms, 10 * ms),
      bench_records.collective(3, 3, 512, 1060 * ms, 1081 * ms, 10.5 * ms),
      bench_records.collective(3, 4, 4 << 20, 1060 * ms, 1091.5 * ms, 3.5 * ms)]
  one_large = [bench_records.collective(3, 0, 2 << 20, 1050 * ms, 1050 * ms,
                                        45 * ms)]
  for name, colls in (("horovod_k1", one_large), ("ddp_k1", with_small)):
    (tmp_path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(bench_records.trace(blocks, colls)))
  report = validate_sim.validate(str(tmp_path), cpu_cost="none")
  assert report["inputs"]["disturbed_traces"] == ["ddp_k1.worker-0.json"]
  horovod = report["rows"]["horovod@1"]
  assert horovod["calibration"]["from_traces"] == []
  assert horovod["calibration"]["small_collective_s"] == pytest.approx(0.010)
  assert horovod["calibration"]["from_disturbed_traces"] == ["small_s",
                                                             "interval_s"]
  assert "disturbed traces" in horovod["note"]
  # ddp@1 never learns from its own trace, disturbed or not.
  ddp = report["rows"]["ddp@1"]
  assert ddp["calibration"]["small_collective_s"] is None
  assert "from_disturbed_traces" not in ddp["calibration"]


def test_validate_weights_the_order_penalty_by_late_blocks(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  bench = tmp_path / "bench"
  os.makedirs(bench / "traces")
  (bench / "results.json").write_text(json.dumps({
      "schedulers": {"tf_default@1": _row(0.30), "horovod@1": _row(0.28),
                     "priority@1": _row(0.40),
                     "pace@2": dict(_row(0.22), unroll=2)},
      # The gradient (3.26 MB) alone: 1.8 ms + 14.2 ms of bytes at
      # 2 Gbit/s, CPU-bound (the CPU cost is the link's own).
      "compute_s": 0.12, "comm_s": 0.016, "lower_bound_s": 0.15,
      "command": "scripts/bench.py --model=vgg_small --workers=2 "
                 "--batch_size=8 --bandwidth=2gbit --warmup_steps=4",
      "machine": "made up"}))
  # horovod@1: task 0 starts 3 of the 4 timed blocks (batch >= 4) more
  # than 1 ms late; the warm-up block (batch 3) does not count.
  bench_records.skewed_trace_pair(
      bench / "traces", "horovod_k1",
      {3: 5000, 4: 3000, 5: 2000, 6: 500, 7: 1500})
  # priority@1 (one collective per tensor) keeps the workers together.
  bench_records.skewed_trace_pair(bench / "traces", "priority_k1",
                                  {4: 0, 5: 200, 6: 0, 7: 0})
  os.makedirs(tmp_path / "2026-12-03-arrival-order")
  (tmp_path / "2026-12-03-arrival-order" / "runs.jsonl").write_text(
      json.dumps(bench_records.arrival_run("2gbit", 3_260_000, 20.0, 17.0))
      + "\n" + json.dumps(bench_records.arrival_run("200mbit", 3_260_000,
                                                   99.0, 99.0)) + "\n")
  with_penalty = validate_sim.validate(str(bench))
  without = validate_sim.validate(str(bench), order_penalty="none")
  inputs = with_penalty["inputs"]
  assert inputs["order_penalty_source"] == (
      "2026-12-03-arrival-order/runs.jsonl")
  # The 2 Gbit/s run only (the directory's rate): excess, bytes, from the
  # last arrival with task 0 late, with task 1 late.
  assert inputs["order_penalty"] == [[pytest.approx(2.52e-3), 3_260_000,
                                      pytest.approx(20e-3),
                                      pytest.approx(17e-3)]]
  assert without["inputs"]["order_penalty"] == []
  rows, base = with_penalty["rows"], without["rows"]
  # tf_default@1 learns the share from horovod@1 (the other K=1 row that
  # fuses tensors; priority@1's are not alike), pace@2 too (no other K=2
  # row); priority@1 from the others, none of its kind: horovod@1's.
  assert rows["tf_default@1"]["calibration"]["task0_late_share"] == 0.75
  assert rows["pace@2"]["calibration"]["task0_late_share"] == 0.75
  assert rows["priority@1"]["calibration"]["task0_late_share"] == 0.75
  assert rows["horovod@1"]["calibration"]["task0_late_share"] == 0
  # The penalty: the probe's mix less the model's collective alone, its
  # bytes CPU-bound here (the whole core at the rate: alpha + beta * b).
  cost = inputs["cost_model"]
  lone = cost["alpha"] + cost["beta"] * 3_260_000
  for name, share in (("tf_default@1", 0.75), ("horovod@1", 0.0)):
    assert rows[name]["calibration"]["order_penalty"] == [[
        pytest.approx(2.52e-3),
        pytest.approx(share * 20e-3 + (1 - share) * 17e-3 - lone)]]
  # tf_default@1's one all-reduce of every gradient after the backward
  # pass (a rank's half beyond the bucket by more than the point's excess:
  # the penalty is flat there) is on the critical path.
  assert (rows["tf_default@1"]["predicted_s"] -
          base["tf_default@1"]["predicted_s"]) == pytest.approx(
              0.75 * 20e-3 + 0.25 * 17e-3 - lone, rel=1e-6)
  assert "arrival-order penalty x 1.00" in rows["tf_default@1"]["model"]
  # Task 0's mean start lag in the timed blocks of the rows alike (K=1,
  # fused: horovod@1's 3, 2, 0.5 and 1.5 ms) is part of tf_default@1's
  # block overhead; horovod@1 has none alike but its own: priority@1's
  # (0.2 ms in one of 4 blocks).
  tf_default = rows["tf_default@1"]["calibration"]
  assert tf_default["task0_expected_lag_s"] == pytest.approx(1.75e-3)
  assert tf_default["block_overhead_s"] >= 1.75e-3
  assert rows["horovod@1"]["calibration"][
      "task0_expected_lag_s"] == pytest.approx(0.05e-3)
  # horovod@1's first fused collective is released while the backward
  # pass computes, the second while the first is in flight: neither
  # alone, no penalty.
  assert (rows["horovod@1"]["predicted_s"] ==
          base["horovod@1"]["predicted_s"])
  table = validate_sim.format_table(with_penalty)
  assert "2.5 -> 20.0 / 17.0 ms (2026-12-03-arrival-order" in table
  assert "| 0.75 | 3.2 |" in table
  with pytest.raises(ValueError, match="no such file"):
    validate_sim.validate(str(bench), order_penalty=str(tmp_path / "nope"))


def test_cpu_cost_from_a_contention_measurement_of_the_same_link(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _bench_dir(tmp_path / "slow", "200mbit")
  _bench_dir(tmp_path / "fast", "2gbit", comm_s=0.02)
  for name, rate, beta in (("a-contention-200mbit", "200mbit", 6e-9),
                           ("b-contention-2gbit", "2gbit", 3e-9)):
    os.makedirs(tmp_path / name)
    (tmp_path / name / "cpu_cost.json").write_text(json.dumps(
        {"alpha": 1e-3, "beta": beta, "bandwidth": rate}))
  slow = validate_sim.validate(str(tmp_path / "slow"))["inputs"]
  assert slow["cpu_cost"] == {"alpha": 1e-3, "beta": 6e-9}
  assert slow["cpu_source"] == "a-contention-200mbit/cpu_cost.json"
  # On the CPU-bound link too it wins over the directory's own cost; the
  # cost alone is then refitted with the token bucket.
  fast = validate_sim.validate(str(tmp_path / "fast"))["inputs"]
  assert fast["cpu_cost"] == {"alpha": 1e-3, "beta": 3e-9}
  assert not fast["link"]["cpu_bound"]
  # Another worker count: not this ring.
  _bench_dir(tmp_path / "four", "2gbit", workers=4)
  four = validate_sim.validate(str(tmp_path / "four"))["inputs"]
  assert "contention" not in four["cpu_source"]
  # Named explicitly, from anywhere.
  named = validate_sim.validate(str(tmp_path / "fast"), cpu_cost=str(
      tmp_path / "a-contention-200mbit" / "cpu_cost.json"))["inputs"]
  assert named["cpu_cost"]["beta"] == 6e-9


def test_bytes_share_is_fitted_to_the_rows_that_overlap(tmp_path):
  # horovod@1 releases a 2 MB collective 20 ms into its 50 ms backward
  # pass; tf_default@1 one collective after it (no evidence of sharing).
  validate_sim = scripts.load_script("validate_sim")
  _write_vgg_rows(tmp_path, {"horovod@1": _row(0.10), "ddp@1": _row(0.10),
                             "tf_default@1": _row(0.11)}, "2gbit")
  ms = 1000.0
  blocks = [bench_records.block(0, 0, 1000 * ms),
            bench_records.block(1, 1000 * ms, 100 * ms)]
  overlapping = [
      bench_records.collective(3, 0, 2 << 20, 1020 * ms, 1020 * ms, 40 * ms),
      bench_records.collective(3, 1, 1 << 20, 1052 * ms, 1060 * ms, 20 * ms)]
  after = [bench_records.collective(3, 0, 3 << 20, 1055 * ms, 1055 * ms,
                                    30 * ms)]
  for name, colls in (("horovod_k1", overlapping), ("ddp_k1", overlapping),
                      ("tf_default_k1", after)):
    (tmp_path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(bench_records.trace(blocks, colls)))
  report = validate_sim.validate(str(tmp_path), cpu_cost="none")
  rows = report["rows"]
  # Each row learns from the others that overlap: horovod's and ddp's
  # traces; tf_default's says nothing and is not a sample.
  assert rows["tf_default@1"]["calibration"]["overlap_traces"] == 2
  assert rows["horovod@1"]["calibration"]["overlap_traces"] == 1
  for r in rows.values():
    assert r["calibration"]["bytes_cpu_share"] in overlap_fit.BYTES_SHARES
    # Without a CPU cost no share changes the times: the largest is kept.
    assert r["calibration"]["bytes_cpu_share"] == 1.0
  assert "| bytes |" in validate_sim.format_table(report)
  # Each row's first step, the model's beside its own trace's medians.
  horovod = rows["horovod@1"]["first_step"]
  assert horovod["trace"]["backward_end_s"] == pytest.approx(0.052)
  assert horovod["trace"]["collectives_s"] == [
      pytest.approx((0.020, 0.060)), pytest.approx((0.060, 0.080))]
  assert len(horovod["model"]["collectives_s"]) == len(
      horovod["trace"]["collectives_s"])
  assert horovod["model"]["backward_end_s"] > 0
  # A given share is used as it is, for every row.
  given = validate_sim.validate(str(tmp_path), cpu_cost="none",
                                bytes_cpu_share="0.5")
  for r in given["rows"].values():
    assert r["calibration"]["bytes_cpu_share"] == 0.5
    assert r["calibration"]["overlap_traces"] == 0
  for bad in ("0", "1.5", "half"):
    with pytest.raises(ValueError, match="bytes_cpu_share"):
      validate_sim.validate(str(tmp_path), bytes_cpu_share=bad)


def test_block_overhead_counts_the_updates_still_queued(tmp_path):
  # horovod@1's and ddp@1's blocks end 3 ms plus the updates still queued
  # when their last collective ends (0.2 ms per tensor, each collective's
  # tensors queued at its end): gaps of 0.5-8 ms between their two
  # collectives' ends tell the work per tensor from the fixed part.
  # tf_packed@1's overhead is the same 3 ms plus its model's backlog.
  validate_sim = scripts.load_script("validate_sim")
  _write_vgg_rows(tmp_path, {"horovod@1": _row(0.10), "ddp@1": _row(0.10),
                             "tf_packed@1": _row(0.10)}, "200mbit",
                  {"tf_packed@1": ["--bytes_per_pack=1048576"]})
  dag = scripts.load_script("simulate").model_dag("vgg_small", 4, "v100",
                                                 None)

  def completes(scheduler, options):
    return update_backlog.completed_tensors(row_plans.issued_tensors(
        dag, row_plans.runtime_plan(dag, scheduler, 2, options), 2))

  ms, per_tensor, fixed = 1000.0, 2e-4, 3e-3
  for scheduler in ("horovod", "ddp"):
    counts = completes(scheduler, {})
    assert len(counts) == 2
    blocks, colls = [bench_records.block(0, 0, 1000 * ms)], []
    for i, gap_ms in enumerate((0.5, 1.0, 2.0, 4.0, 8.0)):
      start = (1000 + 100 * i) * ms
      last_end = start + 60 * ms
      colls += [
          bench_records.collective(3 + i, 0, 2 << 20, start + 20 * ms,
                                   start + 20 * ms, 40 * ms - gap_ms * ms),
          bench_records.collective(3 + i, 1, 1 << 20, start + 30 * ms,
                                   start + 30 * ms, 30 * ms)]
      tail = fixed + update_backlog.backlog_s(
          [(0.060 - gap_ms * 1e-3, counts[0]), (0.060, counts[1])],
          per_tensor)
      blocks.append(bench_records.block(i + 1, start,
                                        last_end - start + tail * 1e6))
    (tmp_path / "traces" / f"{scheduler}_k1.worker-0.json").write_text(
        json.dumps(bench_records.trace(blocks, colls)))
  report = validate_sim.validate(str(tmp_path), cpu_cost="none")
  packed = report["rows"]["tf_packed@1"]
  assert packed["calibration"]["overhead_per_tensor_s"] == pytest.approx(
      per_tensor)
  ends = [end for _, end in packed["first_step"]["model"]["collectives_s"]]
  counts = completes("tf_packed", {"bytes_per_pack": 1048576})
  assert len(ends) == len(counts) == 3
  assert packed["calibration"]["block_overhead_s"] == pytest.approx(
      fixed + update_backlog.backlog_s(list(zip(ends, counts)), per_tensor))


def _lone_collective_bench(path, collective_us):
  """A vgg_small directory at 2 Gbit/s (the whole gradient alone, from
  comm_s: 40 ms) whose tf_default rows' traces show their one collective
  taking collective_us[stem] from the last arrival (two workers, past the
  default warm-up of 8 steps)."""
  _write_vgg_rows(path, {"tf_default@1": _row(0.30),
                         "tf_default@2": dict(_row(0.28), unroll=2),
                         "pace@2": dict(_row(0.22), unroll=2)}, "2gbit")
  for stem, batches, k in (("tf_default_k1", (8, 9, 10, 11), 1),
                           ("tf_default_k2", (9, 11, 13), 2)):
    bench_records.skewed_trace_pair(path / "traces", stem,
                                    dict.fromkeys(batches, 0),
                                    nbytes=3_260_000,
                                    collective_us=collective_us[stem],
                                    unroll=k)


def test_inputs_alone_are_rescaled_to_the_lone_collective_in_situ(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  fast = tmp_path / "fast"
  _lone_collective_bench(fast, {"tf_default_k1": 12e3,
                                "tf_default_k2": 13e3})
  report = validate_sim.validate(str(fast), cpu_cost="none")
  as_measured = validate_sim.validate(str(fast), cpu_cost="none",
                                      lone_collective="none")
  assert report["inputs"]["lone_in_situ"] == {
      "tf_default_k1.worker-0.json": pytest.approx(12e-3),
      "tf_default_k2.worker-0.json": pytest.approx(13e-3)}
  assert as_measured["inputs"]["lone_in_situ"] == {}
  rows, base = report["rows"], as_measured["rows"]
  # Leave-one-out: each tf_default row learns from the other's trace.
  assert list(rows["tf_default@1"]["calibration"]["lone_from_traces"]) == [
      "tf_default_k2.worker-0.json"]
  assert list(rows["pace@2"]["calibration"]["lone_from_traces"]) == [
      "tf_default_k1.worker-0.json", "tf_default_k2.worker-0.json"]
  for name in rows:
    c = rows[name]["calibration"]
    # The traces' collective takes about a third of the model's: the
    # inputs are scaled down until the model gives it what they show.
    first = c["lone_from_traces"]
    assert max(first.values()) < 1 - validate_sim.LONE_TOLERANCE
    assert c["lone_scale"] < 0.6
    assert abs(c["lone_ratio"] - 1) <= validate_sim.LONE_CONVERGED
    assert c["alpha_s"] == pytest.approx(
        c["lone_scale"] * base[name]["calibration"]["alpha_s"])
    assert rows[name]["predicted_s"] < base[name]["predicted_s"]
  assert (f"| {rows['pace@2']['calibration']['lone_scale']:.2f} |" in
          validate_sim.format_table(report))
  # Traces within the tolerance of what the model gives (+10% here, the
  # model's own time from the ratios above): the inputs are kept.
  model_us = {t.split(".")[0]: 12e3 / r if t.startswith("tf_default_k1")
              else 13e3 / r
              for t, r in rows["pace@2"]["calibration"][
                  "lone_from_traces"].items()}
  near = tmp_path / "near"
  _lone_collective_bench(near, {t: 1.1 * us for t, us in model_us.items()})
  kept = validate_sim.validate(str(near), cpu_cost="none")
  near_base = validate_sim.validate(str(near), cpu_cost="none",
                                    lone_collective="none")["rows"]
  for name, row in kept["rows"].items():
    c = row["calibration"]
    assert c["lone_scale"] == 1.0
    assert list(c["lone_from_traces"].values()) == pytest.approx(
        [1.1] * len(c["lone_from_traces"]), abs=0.02)
    assert row["predicted_s"] == near_base[name]["predicted_s"]


def test_lone_scale_converges_where_the_model_grows_faster_than_it():
  validate_sim = scripts.load_script("validate_sim")
  # The modelled time grows as scale**1.8 (the penalty's excess scales
  # too): scale * ratio would overshoot to 0.73 -> 1.30 and oscillate.
  ratio = lambda scale: 0.73 / scale ** 1.8
  tried = [(1.0, ratio(1.0))]
  for _ in range(validate_sim.LONE_PASSES - 1):
    scale = validate_sim._next_lone_scale(tried)
    if abs(ratio(scale) - 1) <= validate_sim.LONE_CONVERGED:
      break
    tried.append((scale, ratio(scale)))
  assert abs(ratio(scale) - 1) <= validate_sim.LONE_CONVERGED
  assert scale == pytest.approx(0.73 ** (1 / 1.8), rel=0.01)
  # The first step is scale * ratio, at most a factor of 2.
  assert validate_sim._next_lone_scale([(1.0, 0.6)]) == pytest.approx(0.6)
  assert validate_sim._next_lone_scale([(1.0, 5.0)]) == pytest.approx(2.0)
  # And the factor stays within LONE_MAX_SCALE of 1 however many passes.
  bound = validate_sim.LONE_MAX_SCALE
  assert validate_sim._next_lone_scale([(3.0, 5.0)]) == pytest.approx(bound)
  assert validate_sim._next_lone_scale(
      [(0.3, 0.1)]) == pytest.approx(1 / bound)


def test_lone_ratio_reported_is_the_final_scale_s(tmp_path, monkeypatch):
  validate_sim = scripts.load_script("validate_sim")
  _lone_collective_bench(tmp_path, {"tf_default_k1": 12e3,
                                    "tf_default_k2": 13e3})
  # One rescale only: the model is then built at the first step's scale
  # (scale * ratio, at most a factor of 2) and its own ratio, not the
  # first one, is reported.
  monkeypatch.setattr(validate_sim, "LONE_PASSES", 1)
  c = validate_sim.validate(str(tmp_path), cpu_cost="none")["rows"][
      "pace@2"]["calibration"]
  first = sorted(c["lone_from_traces"].values())
  first_ratio = (first[0] + first[1]) / 2
  assert first_ratio < 0.5
  assert c["lone_scale"] == pytest.approx(0.5)
  assert abs(c["lone_ratio"] - 1) < abs(first_ratio - 1)
  assert c["lone_ratio"] != pytest.approx(first_ratio)


def test_lone_tolerance_decides_which_differences_rescale(tmp_path):
  validate_sim = scripts.load_script("validate_sim")
  _lone_collective_bench(tmp_path, {"tf_default_k1": 12e3,
                                    "tf_default_k2": 13e3})
  first = validate_sim.validate(str(tmp_path), cpu_cost="none")["rows"][
      "pace@2"]["calibration"]["lone_from_traces"]
  off = abs(statistics.median(first.values()) - 1)
  # Just above and just below the traces' difference from the model.
  for tolerance, rescaled in ((off * 1.05, False), (off * 0.95, True)):
    report = validate_sim.validate(str(tmp_path), cpu_cost="none",
                                   lone_tolerance=tolerance)
    assert report["inputs"]["settings"]["lone_tolerance"] == tolerance
    assert (report["rows"]["pace@2"]["calibration"]["lone_scale"] != 1.0
            ) == rescaled
  with pytest.raises(ValueError, match="lone_tolerance"):
    validate_sim.validate(str(tmp_path), lone_tolerance=0)


def _backward_pass_bench(path, backward_end_ms):
  """horovod@1 and ddp@1 of a vgg_small directory, each traced with one
  block whose last gradient is ready `backward_end_ms` into it."""
  _write_vgg_rows(path, {"horovod@1": _row(0.10), "ddp@1": _row(0.10)},
                  "200mbit")
  ms = 1000.0
  for name in ("horovod_k1", "ddp_k1"):
    trace = bench_records.trace(
        [bench_records.block(0, 0, 1000 * ms),
         bench_records.block(1, 1000 * ms, 100 * ms)],
        [bench_records.collective(3, 0, 1 << 20, 1010 * ms, 1010 * ms,
                                  10 * ms),
         bench_records.collective(3, 1, 1 << 20, (1000 + backward_end_ms) *
                                  ms, (1000 + backward_end_ms) * ms,
                                  10 * ms)])
    (path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(trace))


def _with_and_without(path, compute_from):
  """validate_sim, and its reports on `path` by default and with
  `compute_from`."""
  validate_sim = scripts.load_script("validate_sim")
  return (validate_sim, validate_sim.validate(str(path), cpu_cost="none"),
          validate_sim.validate(str(path), cpu_cost="none",
                                compute_from=compute_from))


def test_compute_from_traces_matches_the_traced_backward_pass(tmp_path):
  # The compute alone is 50 ms; the traces' backward passes end 60 ms in.
  _backward_pass_bench(tmp_path, 60)
  validate_sim, alone, traced = _with_and_without(tmp_path, "traces")
  # Without the flag the report and table are as before it.
  assert "compute_from_traces" not in alone["inputs"]
  assert "compute_from" not in alone["inputs"]["settings"]
  assert "Compute from the traces" not in validate_sim.format_table(alone)
  passes = traced["inputs"]["compute_from_traces"]
  # The first pass is the default's model; the compute grows until the
  # model's backward pass ends where the traces' do.
  assert passes[0]["factor"] == 1.0
  assert passes[0]["traced_over_modelled"] == pytest.approx(
      trace_calibration.traced_over_modelled(alone["rows"].values()))
  # No start-up before the blocks' first ready gradient (10 ms in, within
  # the forward pass): the model's backward pass ends at the compute
  # alone, 50 ms, and one pass at 60/50 brings it to the traces'.
  assert passes[0]["traced_over_modelled"] == pytest.approx(60 / 50)
  assert len(passes) == 2
  assert passes[1]["traced_over_modelled"] == pytest.approx(1.0)
  factor = passes[-1]["factor"]
  assert factor == pytest.approx(60 / 50)
  assert traced["inputs"]["compute_scale"] == pytest.approx(
      factor * alone["inputs"]["compute_scale"])
  assert f"times {factor:.3f} (--compute_from)" in (
      traced["inputs"]["compute"])
  for name, row in traced["rows"].items():
    assert row["first_step"]["model"]["backward_end_s"] > (
        alone["rows"][name]["first_step"]["model"]["backward_end_s"])
    assert row["predicted_s"] > alone["rows"][name]["predicted_s"]
  assert traced["inputs"]["settings"]["compute_from"] == "traces"
  assert "Compute from the traces" in validate_sim.format_table(traced)
  with pytest.raises(ValueError, match="compute_from"):
    validate_sim.validate(str(tmp_path), compute_from="trace")


def test_compute_from_traces_stops_after_its_passes(tmp_path, monkeypatch):
  validate_sim = scripts.load_script("validate_sim")
  _backward_pass_bench(tmp_path, 60)
  monkeypatch.setattr(validate_sim, "COMPUTE_PASSES", 1)
  report = validate_sim.validate(str(tmp_path), cpu_cost="none",
                                 compute_from="traces")
  passes = report["inputs"]["compute_from_traces"]
  assert len(passes) == 1 and passes[0]["factor"] == 1.0
  assert "NOT 1: the rows above are at x1.000" in (
      validate_sim.format_table(report))


def test_compute_from_traces_stops_where_a_pass_does_not_move_it(
    tmp_path, monkeypatch):
  # Where the fitted start-ups absorb the factor the backward end stays
  # put: the second pass finds the same ratio, and a third would too.
  validate_sim = scripts.load_script("validate_sim")
  _backward_pass_bench(tmp_path, 60)
  monkeypatch.setattr(trace_calibration, "traced_over_modelled",
                      lambda rows, measure: 0.9)
  report = validate_sim.validate(str(tmp_path), cpu_cost="none",
                                 compute_from="traces")
  assert report["inputs"]["compute_from_traces"] == [
      {"factor": 1.0, "traced_over_modelled": 0.9},
      {"factor": 0.9, "traced_over_modelled": 0.9}]
  assert ("NOT 1: the rows above are at x0.900, the measure did not follow "
          "the compute (the fitted block start-ups absorb it)") in (
              validate_sim.format_table(report))


def _step_gap_bench(path, gap_ms):
  """horovod@2 and ddp@2 of a vgg_small directory, each traced with two
  blocks of K = 2 whose second step's first gradient is ready `gap_ms`
  after the first step's collective ends (40 ms into the block)."""
  _write_vgg_rows(path, {"horovod@2": dict(_row(0.10), unroll=2),
                         "ddp@2": dict(_row(0.10), unroll=2)}, "200mbit")
  ms = 1000.0
  for name in ("horovod_k2", "ddp_k2"):
    colls = []
    for i, start in enumerate((1000, 1200)):
      colls += [
          bench_records.collective(3 + 2 * i, 0, 1 << 20, (start + 30) * ms,
                                   (start + 30) * ms, 10 * ms),
          bench_records.collective(4 + 2 * i, 0, 1 << 20,
                                   (start + 40 + gap_ms) * ms,
                                   (start + 40 + gap_ms) * ms, 10 * ms)]
    trace = bench_records.trace(
        [bench_records.block(0, 0, 1000 * ms),
         bench_records.block(1, 1000 * ms, 200 * ms),
         bench_records.block(2, 1200 * ms, 200 * ms)], colls)
    (path / "traces" / f"{name}.worker-0.json").write_text(
        json.dumps(trace))


def test_compute_from_step_gaps_matches_the_traced_gaps(tmp_path):
  # The traces' 12 ms before the second step ask for a smaller compute
  # than the compute alone's gap in the model.
  _step_gap_bench(tmp_path, 12)
  validate_sim, alone, gaps = _with_and_without(tmp_path, "step_gaps")
  passes = gaps["inputs"]["compute_from_traces"]
  assert passes[0]["factor"] == 1.0
  assert passes[0]["traced_over_modelled"] == pytest.approx(
      trace_calibration.traced_over_modelled(alone["rows"].values(),
                                             "step_gap_s"))
  assert passes[0]["traced_over_modelled"] < 0.8
  # The passes end where the model's gaps are the traces'.
  last = passes[-1]
  assert abs(last["traced_over_modelled"] - 1) <= (
      validate_sim.COMPUTE_CONVERGED)
  assert last["factor"] < 1
  modelled = [row["first_step"]["model"]["step_gap_s"]
              for row in gaps["rows"].values()]
  assert statistics.median(modelled) == pytest.approx(
      0.012, rel=2 * validate_sim.COMPUTE_CONVERGED)
  for name, gap in zip(gaps["rows"], modelled):
    assert gap < alone["rows"][name]["first_step"]["model"]["step_gap_s"]
  assert gaps["inputs"]["settings"]["compute_from"] == "step_gaps"
  assert ("Compute from the traces (--compute_from=step_gaps), the rows' "
          "median gap before a block's second step") in (
              validate_sim.format_table(gaps))
  assert f"times {last['factor']:.3f} (--compute_from)" in (
      gaps["inputs"]["compute"])


def test_compute_factor_bisects_once_bracketed():
  validate_sim = scripts.load_script("validate_sim")
  # Before a pass on each side of 1: the last factor times its ratio.
  assert validate_sim._next_compute_factor(
      [{"factor": 1.0, "traced_over_modelled": 0.6}]) == pytest.approx(0.6)
  # 0.6 overshot (ratio above 1): the geometric middle of the closest
  # factors on either side, not 0.6 * 1.3.
  passes = [{"factor": 1.0, "traced_over_modelled": 0.6},
            {"factor": 0.6, "traced_over_modelled": 1.3},
            {"factor": 0.8, "traced_over_modelled": 0.9}]
  assert validate_sim._next_compute_factor(passes[:2]) == pytest.approx(
      (0.6 * 1.0) ** 0.5)
  assert validate_sim._next_compute_factor(passes) == pytest.approx(
      (0.6 * 0.8) ** 0.5)


def _input_work_bench(path, head_ms, extra_ms, gap_ms=30, input_ms=None):
  """tf_default and tf_packed of a vgg_small directory at K = 1 and 2 (each
  one collective of the whole gradient per step, so that every head is
  the start-up and the whole step), traced with two blocks
  whose first gradient is ready `head_ms` after the block's start, and
  `extra_ms` later in the blocks of K = 2 (their start-up takes one more
  batch); a K = 2 block's second step's gradient `gap_ms` after the first
  step's collective (10 ms) ends. With `input_ms` {row: per block}, those
  rows' blocks record the time they took to take their batches."""
  rows = {f"{s}@{k}": dict(_row(0.15), unroll=k)
          for s in ("tf_default", "tf_packed") for k in (1, 2)}
  one_pack = ["--bytes_per_pack=1073741824"]
  _write_vgg_rows(path, rows, "200mbit",
                  {"tf_packed@1": one_pack, "tf_packed@2": one_pack})
  ms = 1000.0
  for name, row in rows.items():
    # Blocks of the row's median step time (150 ms a step).
    unroll, colls = row["unroll"], []
    head, block = head_ms + (extra_ms if unroll == 2 else 0), 150 * unroll
    for i in range(2):
      ready = 1000 + i * block + head
      colls.append(bench_records.collective(
          3 + unroll * i, 0, 1 << 20, ready * ms, ready * ms, 10 * ms))
      if unroll == 2:
        colls.append(bench_records.collective(
            4 + 2 * i, 0, 1 << 20, (ready + 10 + gap_ms) * ms,
            (ready + 10 + gap_ms) * ms, 10 * ms))
    blocks = [bench_records.block(0, 0, 1000 * ms),
              bench_records.block(1, 1000 * ms, block * ms),
              bench_records.block(2, (1000 + block) * ms, block * ms)]
    for b, taken in zip(blocks, (input_ms or {}).get(name, ())):
      b["args"] = {"batch": 0, "input_us": taken * ms}
    trace = bench_records.trace(blocks, colls)
    (path / "traces" / results_files.trace_name(name)).write_text(
        json.dumps(trace))


def test_time_taking_the_batches_is_reported_where_traced(tmp_path):
  _input_work_bench(tmp_path / "before", head_ms=70, extra_ms=6)
  _input_work_bench(tmp_path / "after", head_ms=70, extra_ms=6, input_ms={
      "tf_default@2": (3.0, 5.0, 4.0), "tf_packed@2": (2.0, 2.0, 2.0)})
  validate_sim = scripts.load_script("validate_sim")
  before = validate_sim.validate(str(tmp_path / "before"), cpu_cost="none")
  after = validate_sim.validate(str(tmp_path / "after"), cpu_cost="none")
  # Earlier directories' reports stay as they were.
  assert "input_taken_s" not in before["inputs"]
  assert "Batches taken" not in validate_sim.format_table(before)
  # The steady blocks' median (the first block, tracing, left out).
  assert after["inputs"]["input_taken_s"] == {
      "tf_default@2": pytest.approx(0.0045),
      "tf_packed@2": pytest.approx(0.002)}
  table = validate_sim.format_table(after)
  assert ("tf_default@2 4.50 ms, tf_packed@2 2.00 ms; over the rows K=2 "
          "3.25 ms.") in table
  # For reading only: the table is otherwise the same, but for its
  # directory's name.
  table = table.replace(str(tmp_path / "after"), str(tmp_path / "before"))
  lines = [line for line in table.splitlines()
           if not line.startswith("- Batches taken")]
  assert lines == validate_sim.format_table(before).splitlines()


def test_input_work_moves_the_later_steps_input_to_the_block_start(
    tmp_path):
  # Every head of K = 2 is 6 ms longer than K = 1's: the start-ups grow by
  # 6 ms a later step, which the compute alone holds in every step.
  _input_work_bench(tmp_path, head_ms=70, extra_ms=6)
  validate_sim = scripts.load_script("validate_sim")
  alone = validate_sim.validate(str(tmp_path), cpu_cost="none")
  moved = validate_sim.validate(str(tmp_path), cpu_cost="none",
                                input_work="startups")
  assert "input_work" not in alone["inputs"]["settings"]
  assert moved["inputs"]["settings"]["input_work"] == "startups"
  for name, row in moved["rows"].items():
    before, calib = alone["rows"][name], row["calibration"]
    assert before["calibration"]["input_work_s"] is None
    assert calib["input_work_s"] == pytest.approx(0.006, abs=1e-6)
    if row["unroll"] == 1:
      # Nothing of a K = 1 block moves.
      assert row["predicted_s"] == pytest.approx(before["predicted_s"])
      assert calib["block_startup_s"] == pytest.approx(
          before["calibration"]["block_startup_s"])
      continue
    # The refitted start-up of K = 2 is K = 1's; the 6 ms run as early
    # compute at the block's start, and the second step runs without them.
    assert calib["block_startup_s"] == pytest.approx(
        before["calibration"]["block_startup_s"] - 0.006, abs=1e-6)
    assert "early" not in before["model"]
    assert ("6.000 ms of each later step's forward pass at the block's "
            "start") in row["model"]
    gap, gap_before = (r["first_step"]["model"]["step_gap_s"]
                       for r in (row, before))
    assert gap == pytest.approx(gap_before - 0.006, abs=5e-4)
    assert row["predicted_s"] < before["predicted_s"]
  with pytest.raises(ValueError, match="input_work"):
    validate_sim.validate(str(tmp_path), cpu_cost="none", input_work="all")
  with pytest.raises(ValueError, match="block_startup_ms='traces'"):
    validate_sim.validate(str(tmp_path), cpu_cost="none",
                          input_work="startups", block_startup_ms="2")


def test_input_work_from_gaps_takes_what_the_other_rows_gaps_exceed(
    tmp_path):
  # As above, but the traces' second steps start 48 ms after the first
  # step's collective ends, 2 ms before the model's without input work.
  # Each row takes the start-ups' growth (6 ms) at most, and no more than
  # the other K = 2 rows' modelled gaps exceed their traced ones (the
  # median, from the reports without input work).
  _input_work_bench(tmp_path, head_ms=70, extra_ms=6, gap_ms=48)
  validate_sim = scripts.load_script("validate_sim")
  alone = validate_sim.validate(str(tmp_path), cpu_cost="none")
  gaps = validate_sim.validate(str(tmp_path), cpu_cost="none",
                               input_work="gaps")
  assert gaps["inputs"]["settings"]["input_work"] == "gaps"
  excess = {name: (row["first_step"]["model"]["step_gap_s"] -
                   row["first_step"]["trace"]["step_gap_s"])
            for name, row in alone["rows"].items() if row["unroll"] == 2}
  assert len(excess) == 2
  assert 0 < max(excess.values()) < 0.006
  for name, row in gaps["rows"].items():
    others = [e for n, e in excess.items() if n != name]
    expected = min(0.006, max(0.0, statistics.median(others)))
    assert row["calibration"]["input_work_s"] == pytest.approx(
        expected, abs=1e-9)
    if row["unroll"] == 1:
      assert row["predicted_s"] == pytest.approx(
          alone["rows"][name]["predicted_s"])
  with pytest.raises(ValueError, match="block_startup_ms='traces'"):
    validate_sim.validate(str(tmp_path), cpu_cost="none",
                          input_work="gaps", block_startup_ms="2")
