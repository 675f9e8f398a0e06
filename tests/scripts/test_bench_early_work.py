"""Tests of scripts/bench_early_work.py (its worker: tests/bench)."""

import pytest

from tf_preempt.testing import scripts

bench = scripts.load_script("bench_early_work")


def _record(model, batch, share):
  return {"model": model, "per_worker_batch": batch, "early_share": share}


def test_summarize_takes_each_model_s_median_share():
  summary = bench.summarize([_record("transformer_tiny", 32, 0.09),
                             _record("vgg_small", 5, 0.001),
                             _record("transformer_tiny", 32, 0.12),
                             _record("transformer_tiny", 32, 0.10)])
  assert summary["transformer_tiny"] == {
      "per_worker_batch": 32, "early_share": 0.10,
      "shares": [0.09, 0.12, 0.10]}
  assert summary["vgg_small"]["early_share"] == 0.001


def test_summarize_refuses_two_batch_sizes_of_one_model():
  with pytest.raises(ValueError, match="one per model"):
    bench.summarize([_record("vgg_small", 5, 0.0),
                     _record("vgg_small", 10, 0.0)])
