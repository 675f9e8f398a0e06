"""Tests of scripts/bench_step_profile.py (its worker: tests/bench)."""

import pytest

from tf_preempt.testing import scripts

bench = scripts.load_script("bench_step_profile")


def _record(model, batch, share, layer_ms=None):
  return {"model": model, "per_worker_batch": batch, "early_share": share,
          "layer_ms": layer_ms or {}}


def test_summarize_takes_each_model_s_median_share():
  summary = bench.summarize([_record("transformer_tiny", 32, 0.09),
                             _record("vgg_small", 5, 0.001),
                             _record("transformer_tiny", 32, 0.12),
                             _record("transformer_tiny", 32, 0.10)])
  assert summary["transformer_tiny"] == {
      "per_worker_batch": 32, "early_share": 0.10,
      "shares": [0.09, 0.12, 0.10], "layer_shares": {}}
  assert summary["vgg_small"]["early_share"] == 0.001


def test_summarize_refuses_two_batch_sizes_of_one_model():
  with pytest.raises(ValueError, match="one per model"):
    bench.summarize([_record("vgg_small", 5, 0.0),
                     _record("vgg_small", 10, 0.0)])


def test_summarize_takes_each_layer_s_median_share_of_the_layers_time():
  summary = bench.summarize([
      _record("m", 4, 0.0, {"a/forward": 1.0, "a/backward": 3.0}),
      _record("m", 4, 0.0, {"a/forward": 2.0, "a/backward": 2.0}),
      _record("m", 4, 0.0, {"a/forward": 1.0, "a/backward": 1.0,
                            "b/forward": 2.0})])
  # a/forward: 0.25, 0.5, 0.25; b/forward is 0 where not profiled.
  assert summary["m"]["layer_shares"] == {
      "a/backward": 0.5, "a/forward": 0.25, "b/forward": 0.0}
