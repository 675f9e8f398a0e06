"""Tests of scripts/bench_block_head.py (its worker: tests/bench)."""

import json
import statistics

import pytest

from tf_preempt.bench import probe_inputs
from tf_preempt.bench import results_files
from tf_preempt.testing import scripts

bench = scripts.load_script("bench_block_head")


def _record(model, repeat, unroll, heads_ms, blocks_ms, batch=32):
  return {"model": model, "per_worker_batch": batch, "repeat": repeat,
          "unroll": unroll, "heads_ms": heads_ms, "blocks_ms": blocks_ms,
          "head_ms": statistics.median(heads_ms),
          "block_ms": statistics.median(blocks_ms)}


def test_summarize_takes_each_run_s_heads_over_its_own_blocks():
  summary = bench.summarize([
      # Head fractions 0.5 (K = 1) and 0.4 of half blocks of 0.2 s ...
      _record("transformer_tiny", 0, 1, [8.0, 10.0, 9.0],
              [16.0, 20.0, 18.0]),
      _record("transformer_tiny", 0, 2, [14.0, 12.0], [40.0, 40.0]),
      # ... and, with a machine twice as slow for K = 1, 0.6 and 0.4.
      _record("transformer_tiny", 1, 2, [6.0, 6.0], [20.0, 20.0]),
      _record("transformer_tiny", 1, 1, [12.0], [20.0]),
      _record("transformer_tiny", 2, 1, [5.0], [10.0]),
      _record("transformer_tiny", 2, 2, [8.0], [20.0]),
      _record("vgg_small", 0, 1, [9.0], [20.0], batch=5),
      _record("vgg_small", 0, 2, [9.0], [40.0], batch=5)])
  tiny = summary["transformer_tiny"]
  assert tiny["per_worker_batch"] == 32
  # 2 * 0.325 - 0.5, 2 * 0.3 - 0.6, 2 * 0.4 - 0.5.
  assert tiny["shares"] == pytest.approx([0.15, 0.0, 0.3])
  assert tiny["delay_share"] == pytest.approx(0.15)
  # The heads in ms less the K = 1 run's: the slow K = 1 run's is longer.
  assert tiny["delays_ms"] == [4.0, -6.0, 3.0]
  # 9 ms of 20 and 9 ms of half of 40: no delay.
  assert summary["vgg_small"]["delay_share"] == pytest.approx(0.0)


def test_summarize_refuses_an_incomplete_repeat_or_two_batches():
  with pytest.raises(ValueError, match="repeat 0: runs at K = \\[2\\]"):
    bench.summarize([_record("m", 0, 2, [12.0], [30.0])])
  with pytest.raises(ValueError, match="one per model"):
    bench.summarize([_record("m", 0, 1, [8.0], [16.0]),
                     _record("m", 0, 2, [12.0], [30.0], batch=4)])


@pytest.mark.slow
def test_tiny_real_run_is_the_early_share_of_its_machine(tmp_path):
  out = tmp_path / "2026-12-07-block-head"
  result = scripts.run_script(
      "bench_block_head",
      ["--models=transformer_tiny", "--batch_sizes=4", "--repeats=1",
       "--blocks=2", "--timeout_s=200", f"--out={out}"], timeout=500)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(out / "block_head.json") as f:
    probe = json.load(f)
  assert [(r["unroll"], len(r["heads_ms"])) for r in probe["runs"]] == [
      (1, 2), (2, 2)]
  tiny = probe["models"]["transformer_tiny"]
  (run1, run2) = probe["runs"]
  assert tiny["delays_ms"] == [run2["head_ms"] - run1["head_ms"]]
  assert tiny["shares"] == [pytest.approx(
      2 * bench.head_fraction(run2) - bench.head_fraction(run1))]
  # A directory of this machine beside it takes the probe's share.
  results = tmp_path / "2026-12-08-transformer_tiny"
  results.mkdir()
  share, source = probe_inputs.early_share(
      str(results), "transformer_tiny",
      results_files.machine_identity(probe["machine"]))
  assert share == tiny["delay_share"]
  assert source.startswith("the block head: 2026-12-07-block-head/")
