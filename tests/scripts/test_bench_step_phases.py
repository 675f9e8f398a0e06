"""Tests of scripts/bench_step_phases.py (its parser: tests/bench)."""

import argparse
import json
import os

import pytest

from tf_preempt.bench import block_head
from tf_preempt.bench import probe_inputs
from tf_preempt.bench import results_files
from tf_preempt.testing import scripts
from tf_preempt.testing.profiles import fake_profile

bench = scripts.load_script("bench_step_phases")


def _record(repeat, unroll, heads_ms=(), compute_ms=(),
            later_forward_ms=(), model="transformer_tiny", batch=32,
            heap="tensorflow"):
  return {"model": model, "per_worker_batch": batch, "scheduler":
          "tf_default", "workers": 2, "bandwidth": "2gbit", "heap": heap,
          "repeat": repeat, "unroll": unroll, "heads_ms": list(heads_ms),
          "compute_ms": list(compute_ms),
          "later_forward_ms": list(later_forward_ms)}


def test_summarize_takes_the_second_step_s_saving_over_the_step():
  summary = bench.summarize([
      # Heads of 9 ms at K = 1 over a 16 ms step, a 4 ms later forward.
      _record(0, 1, heads_ms=[9.0, 10.0, 8.0], compute_ms=[16.0, 15.0, 17.0]),
      _record(0, 2, heads_ms=[14.0], later_forward_ms=[4.0, 3.0, 5.0]),
      # A slower machine: 12 of 20 ms, and 6 ms.
      _record(1, 2, heads_ms=[18.0], later_forward_ms=[6.0]),
      _record(1, 1, heads_ms=[12.0], compute_ms=[20.0]),
      _record(2, 1, heads_ms=[9.0], compute_ms=[16.0]),
      _record(2, 2, heads_ms=[14.0], later_forward_ms=[9.0])])
  tiny = summary["transformer_tiny"]
  assert tiny["shares"] == pytest.approx([5 / 16, 6 / 20, 0 / 16])
  assert tiny["early_share"] == pytest.approx(0.3)
  assert tiny["heads_ms"] == [9.0, 12.0, 9.0]
  assert tiny["later_forward_ms"] == [4.0, 6.0, 9.0]
  assert tiny["compute_ms"] == [16.0, 20.0, 16.0]
  assert (tiny["per_worker_batch"], tiny["heap"], tiny["workers"]) == (
      32, "tensorflow", 2)


def test_summarize_refuses_incomplete_or_mixed_runs():
  k1 = _record(0, 1, heads_ms=[9.0], compute_ms=[16.0])
  k2 = _record(0, 2, heads_ms=[14.0], later_forward_ms=[4.0])
  with pytest.raises(ValueError, match="repeat 0: runs at K = \\[2\\]"):
    bench.summarize([k2])
  with pytest.raises(ValueError, match="one per model"):
    bench.summarize([k1, dict(k2, heap="keep")])
  with pytest.raises(ValueError, match="no profiled head, compute or later"):
    bench.summarize([k1, dict(k2, later_forward_ms=[])])


def test_run_record_flattens_the_blocks():
  record = bench.run_record([
      {"head_ms": 9.0, "compute_ms": 16.0, "later_forward_ms": [4.0],
       "block_ms": 40.0},
      {"head_ms": 8.0, "compute_ms": None, "later_forward_ms": [3.0, 2.0],
       "block_ms": 41.0}])
  assert record == {"heads_ms": [9.0, 8.0], "compute_ms": [16.0],
                    "later_forward_ms": [4.0, 3.0, 2.0],
                    "blocks_ms": [40.0, 41.0]}


@pytest.mark.slow
def test_tiny_real_runs_give_the_early_share_of_their_machine(tmp_path):
  out = tmp_path / "2026-12-08-step-phases"
  result = scripts.run_script(
      "bench_step_phases",
      ["--models=transformer_tiny", "--batch_sizes=4", "--repeats=1",
       "--blocks=2", "--warmup_steps=2", "--bandwidth=",
       "--timeout_s=200", f"--out={out}"], timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(out / "step_phases.json") as f:
    probe = json.load(f)
  assert [(r["unroll"], len(r["blocks_ms"])) for r in probe["runs"]] == [
      (1, 2), (2, 2)]
  (run1, run2) = probe["runs"]
  assert len(run2["later_forward_ms"]) == 2 and run1["later_forward_ms"] == []
  assert all(0 < h < c for h, c in zip(run1["heads_ms"], run1["compute_ms"]))
  tiny = probe["models"]["transformer_tiny"]
  assert tiny["shares"] == [pytest.approx(
      (bench.statistics.median(run1["heads_ms"]) -
       bench.statistics.median(run2["later_forward_ms"])) /
      bench.statistics.median(run1["compute_ms"]))]
  # A directory of this machine, batch and heap mode beside it takes it.
  results = tmp_path / "2026-12-09-transformer_tiny"
  results.mkdir()
  share, source = probe_inputs.early_share(
      str(results), "transformer_tiny",
      results_files.machine_identity(probe["machine"]), 4, tiny["heap"],
      None, 2)
  assert share == tiny["early_share"]
  assert source.startswith("the step phases: 2026-12-08-step-phases/")


def test_a_failed_run_is_run_again_and_recorded(monkeypatch, tmp_path):
  calls = []

  def train_once(scheduler, unroll, **kwargs):
    calls.append((scheduler, unroll, kwargs["steps"]))
    if len(calls) == 1:
      raise RuntimeError("`train.py ...` failed (logs in /tmp/x):\n"
                         "worker 1: ...\nFatal Python error: Aborted\n"
                         "  File \"profiler_v2.py\", line 149 in stop\n")
    log_dir = [a for a in kwargs["extra_args"]
               if a.startswith("--tf_profiler_dir=")][0].split("=", 1)[1]
    os.makedirs(os.path.join(log_dir, "worker-0"))
    return {"median_step_s": 0.03}

  space = fake_profile(calls=[(0, 30)], ops=[
      ("compile_loss/x:" + block_head.LOSS_OP_TYPE, 8, 9),
      ("gradient_tape/model/dense/MatMul:MatMul", 9, 15),
      ("sgd/update_0/Mul:Mul", 20, 22),
      ("compile_loss_1/x:" + block_head.LOSS_OP_TYPE, 25, 26)])
  monkeypatch.setattr(bench.demo, "train_once", train_once)
  monkeypatch.setattr(bench.step_profile, "read_profile", lambda d: space)
  flag_values = argparse.Namespace(
      scheduler="tf_default", workers=2, bandwidth="2gbit", heap="tensorflow",
      warmup_steps=3, blocks=4, timeout_s=60)
  record = bench.profiled_run("transformer_tiny", 32, 2, flag_values)
  # 2 warm-up blocks (3 steps, rounded up), 4 profiled, 1 after.
  assert calls == [("tf_default", 2, 14)] * 2
  assert record["failed_runs"] == [[
      "worker 1: ...", "Fatal Python error: Aborted",
      "  File \"profiler_v2.py\", line 149 in stop"]]
  assert record["heads_ms"] == [pytest.approx(9.0)]
  assert record["later_forward_ms"] == [pytest.approx(4.0)]
  assert record["step_ms"] == pytest.approx(30.0)
  calls.clear()
  monkeypatch.setattr(bench.demo, "train_once", lambda *a, **k: (
      calls.append(1), (_ for _ in ()).throw(RuntimeError("failed"))))
  with pytest.raises(RuntimeError, match="all 3 runs failed"):
    bench.profiled_run("transformer_tiny", 32, 2, flag_values)
  assert len(calls) == 3
