"""Tests of scripts/bench_contention.py and its worker (contention_worker)."""

import json
import subprocess
import sys

import pytest

from tf_preempt.testing import scripts

bench = scripts.load_script("bench_contention")


def _round(compute_s, comm_s, together_compute_s, together_comm_s):
  return {"compute": [0.0, compute_s, None], "comm": [0.0, None, comm_s],
          "both": [1.0, 1.0 + together_compute_s, 1.0 + together_comm_s]}


def test_summarize_pairs_the_chain_within_each_round():
  # Round 0 is warm-up. The chain's loss is paired within its round.
  w0 = [_round(0.5, 0.5, 0.9, 0.9), _round(0.030, 0.009, 0.036, 0.037),
        _round(0.031, 0.010, 0.038, 0.038)]
  w1 = [_round(0.5, 0.5, 0.9, 0.9), _round(0.030, 0.009, 0.037, 0.037),
        _round(0.032, 0.010, 0.039, 0.039)]
  row = bench.summarize([{"task": 0, "rounds": w0},
                         {"task": 1, "rounds": w1}], warmup_rounds=1)
  assert row["rounds"] == 2
  assert row["compute_ms"] == pytest.approx(30.5)
  assert row["comm_ms"] == pytest.approx(9.5)
  assert row["loss_ms"] == pytest.approx(7.0)
  assert row["comm_end_ms"] == pytest.approx(37.5)
  # Per round, the all-reduce's end after the chain's (together): 1, 0,
  # 0, 0 ms.
  assert row["after_compute_ms"] == pytest.approx(0.0)
  # An all-reduce that outlasts the chain in every round.
  long = [_round(0.030, 0.040, 0.036, 0.036 + d) for d in (0.0, 0.008,
                                                           0.012)]
  row = bench.summarize([{"task": 0, "rounds": long},
                         {"task": 1, "rounds": long}], warmup_rounds=1)
  assert row["after_compute_ms"] == pytest.approx(10.0)


def test_summarize_refuses_what_it_cannot_use():
  one = {"task": 0, "rounds": [_round(1, 1, 1, 1)]}
  with pytest.raises(ValueError, match="different numbers of rounds"):
    bench.summarize([one, {"task": 1, "rounds": []}], warmup_rounds=0)
  with pytest.raises(ValueError, match="no rounds after"):
    bench.summarize([one, dict(one, task=1)], warmup_rounds=1)


def test_fit_takes_the_slope_and_the_smallest_sizes_fixed_part():
  # 1 ms fixed + 2 ns/B up to 1 MB, 4 ns/B beyond: the least-squares line
  # is steeper than the small sizes and meets 0 bytes below 1 ms.
  def loss_ms(n):
    return 1.0 + 2e-6 * min(n, 10**6) + 4e-6 * max(0, n - 10**6)
  rows = [{"nbytes": n, "loss_ms": loss_ms(n)}
          for n in (100_000, 1_000_000, 2_000_000, 4_000_000)]
  cpu = bench.fit_cpu_cost(rows)
  slope = cpu["beta"]
  assert 2e-9 < slope < 4e-9
  assert cpu["alpha"] == pytest.approx(1e-3 + 0.2e-3 - slope * 100_000)
  assert cpu["samples"]["2000000"] == pytest.approx(loss_ms(2e6) * 1e-3)
  # The source names the compute that lost the time (rows from before
  # --compute recorded none: the chain).
  assert "(chain) lost" in cpu["source"]
  model_rows = [dict(r, compute="model:vgg_small") for r in rows]
  assert "(model:vgg_small) lost" in bench.fit_cpu_cost(model_rows)["source"]
  # One fit is of one compute.
  with pytest.raises(ValueError, match="different computes"):
    bench.fit_cpu_cost(rows[:2] + model_rows[2:])
  with pytest.raises(ValueError, match="two sizes"):
    bench.fit_cpu_cost(rows[:1])


def test_fit_takes_each_repeated_size_by_its_median_loss():
  # Three launches per size, one of them disturbed (twice the loss): the
  # fit is the one of the undisturbed losses, the medians.
  def loss_ms(n):
    return 1.0 + 3e-6 * n
  sizes = (100_000, 500_000, 2_000_000)
  clean = [{"nbytes": n, "loss_ms": loss_ms(n)} for n in sizes]
  repeated = clean + [dict(r) for r in clean] + [
      {"nbytes": n, "loss_ms": 2 * loss_ms(n)} for n in sizes]
  cpu = bench.fit_cpu_cost(repeated)
  assert cpu == bench.fit_cpu_cost(clean)
  assert cpu["beta"] == pytest.approx(3e-9)
  assert cpu["alpha"] == pytest.approx(1e-3)
  assert cpu["samples"] == {str(n): pytest.approx(loss_ms(n) * 1e-3)
                            for n in sizes}
  # One size however often launched is not a fit.
  with pytest.raises(ValueError, match="two sizes"):
    bench.fit_cpu_cost([r for r in repeated if r["nbytes"] == 100_000])


@pytest.mark.parametrize("bad, says", [
    ("--sizes=2", "--sizes must be"), ("--ops=0", "--sizes must be"),
    ("--passes=0", "--sizes must be"), ("--warmup_rounds=40",
                                        "--sizes must be"),
    ("--sizes=x", "--sizes must be"), ("--passes=2", "--passes is of")])
def test_bad_flags_are_refused_before_launching(bad, says):
  result = subprocess.run(
      [sys.executable, scripts.script_path("bench_contention"), bad],
      cwd=scripts.REPO, capture_output=True, text=True, timeout=120)
  assert result.returncode != 0
  assert says in result.stderr


@pytest.mark.slow
def test_two_workers_on_loopback(tmp_path):
  result = subprocess.run(
      [sys.executable, scripts.script_path("bench_contention"),
       "--bandwidth=", "--sizes=40000,400000", "--ops=20", "--matrix=200",
       "--rounds=8", "--warmup_rounds=2", "--timeout_s=240",
       f"--out={tmp_path}", "--json"], cwd=scripts.REPO,
      capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert [r["nbytes"] for r in out["rows"]] == [40000, 400000]
  for row in out["rows"]:
    assert row["rounds"] == 6
    assert row["compute_ms"] > 0 and row["comm_ms"] > 0
    # Together, the all-reduce cannot end before it would alone.
    assert row["comm_end_ms"] >= 0.9 * row["comm_ms"]
  written = json.loads((tmp_path / "cpu_cost.json").read_text())
  assert written["bandwidth"] is None
  assert written["beta"] == out["cpu_cost"]["beta"]
  assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 2


@pytest.mark.slow
def test_model_compute_on_loopback(tmp_path):
  result = subprocess.run(
      [sys.executable, scripts.script_path("bench_contention"),
       "--bandwidth=", "--sizes=40000,400000", "--compute=model",
       "--model=vgg_small", "--batch_size=2", "--passes=2", "--rounds=6",
       "--warmup_rounds=2", "--timeout_s=240", f"--out={tmp_path}", "--json"],
      cwd=scripts.REPO, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  for row in out["rows"]:
    assert row["compute"] == "model:vgg_smallx2" and row["rounds"] == 4
    assert row["compute_ms"] > 0 and row["comm_end_ms"] > 0
  written = json.loads((tmp_path / "cpu_cost.json").read_text())
  assert written["compute"] == "model:vgg_smallx2"
