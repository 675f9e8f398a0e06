"""Tests of the benchmark's aggregation (tf_preempt.bench.results)."""

import pytest

from tf_preempt.bench import results


def _made_up():
  # tf_default@1 200 ms, the best baseline (ddp@2) 160 ms, pace@2 150 ms.
  return {
      "tf_default@1": [0.21, 0.19, 0.20],
      "tf_default@2": [0.18, 0.18],
      "ddp@1": [0.17],
      "ddp@2": [0.16, 0.16],
      "priority@2": [0.10],  # An ablation: never the best baseline.
      "pace@2": [0.15, 0.149, 0.151],
  }


def test_aggregate_ratios_and_lower_bound():
  out = results.aggregate(_made_up(), compute_s=0.09, comm_s=0.13,
                          command="bench", machine="here")
  results.check_schema(out)
  assert out["lower_bound_s"] == 0.13
  pace = out["schedulers"]["pace@2"]
  assert pace["unroll"] == 2
  assert pace["median_s"] == pytest.approx(0.15)
  assert pace["ratio_vs_tf_default"] == pytest.approx(0.20 / 0.15)
  assert pace["ratio_vs_best_baseline"] == pytest.approx(0.16 / 0.15)
  assert pace["ratio_vs_lower_bound"] == pytest.approx(0.13 / 0.15)
  assert out["schedulers"]["tf_default@1"]["ratio_vs_tf_default"] == 1.0
  # priority is faster than every baseline but is not one.
  assert out["schedulers"]["priority@2"]["ratio_vs_best_baseline"] == (
      pytest.approx(1.6))


def test_lower_bound_is_the_larger_of_compute_and_comm():
  assert results.lower_bound(0.2, 0.1) == 0.2
  assert results.lower_bound(0.1, 0.3) == 0.3
  with pytest.raises(ValueError):
    results.lower_bound(0.0, 0.1)


def test_best_baseline_overall_and_per_k():
  medians = {"tf_default@1": 0.2, "ddp@1": 0.17, "ddp@2": 0.16,
             "horovod@2": 0.165, "pace@2": 0.1, "priority@1": 0.05}
  assert results.best_baseline(medians) == "ddp@2"
  assert results.best_baseline(medians, unroll=1) == "ddp@1"
  assert results.best_baseline(medians, unroll=4) is None


def test_targets():
  out = results.aggregate(_made_up(), 0.09, 0.13, "bench", "here")
  got = {t["label"]: t for t in results.targets(out, "pace@2")}
  assert got["vs tf_default@1"]["measured"] == pytest.approx(0.2 / 0.15)
  assert not got["vs tf_default@1"]["met"]  # 1.33 < 1.35
  assert got["vs best baseline at K=1"]["reference"] == "ddp@1"
  assert not got["vs best baseline at K=1"]["met"]  # 0.17 / 0.15 < 1.15
  assert got["vs best baseline at K=2"]["measured"] == pytest.approx(
      0.16 / 0.15)
  assert got["vs best baseline at K=2"]["met"]
  # 0.15 s is more than 10% above the 0.13 s lower bound.
  assert not got["vs lower bound"]["met"]
  assert got["vs lower bound"]["measured"] == pytest.approx(0.13 / 0.15)


def test_aggregate_needs_the_reference_and_positive_times():
  with pytest.raises(ValueError, match="tf_default@1"):
    results.aggregate({"pace@2": [0.1]}, 0.1, 0.1, "c", "m")
  with pytest.raises(ValueError, match="positive"):
    results.aggregate({"tf_default@1": []}, 0.1, 0.1, "c", "m")
  with pytest.raises(ValueError, match="NAME@K"):
    results.split_name("pace")


def test_markdown_names_settings_and_targets():
  out = results.aggregate(_made_up(), 0.09, 0.13, "bench --x", "here")
  text = results.markdown(
      out, {"settings": {"ddp@2": {"description": "bucket_cap_bytes=25MB"}},
            "prepass": {"tf_packed bytes_per_pack": {str(1 << 20): 0.2}}},
      "pace@2")
  assert "bucket_cap_bytes=25MB" in text
  assert "ddp@2 (best baseline)" in text
  assert "1 MiB: 200.0 ms" in text
  assert "vs best baseline at K=2" in text and "`bench --x`" in text


def test_markdown_says_how_the_repeats_were_chosen():
  out = results.aggregate(_made_up(), 0.09, 0.13, "bench", "here")
  fixed = results.markdown(out, {"repeats": 3, "min_repeats": 3,
                                 "max_repeats": 3, "unsettled": ["ddp@1"]})
  assert "median over 3 interleaved run(s)." in fixed
  assert "settled" not in fixed
  settled = results.markdown(out, {"repeats": 4, "min_repeats": 3,
                                   "max_repeats": 6, "unsettled": [],
                                   "settle_tolerance": 0.05})
  assert "median over 4 interleaved run(s) (at least 3" in settled
  assert "within 5% of its fastest run, up to 6; all settled)" in settled
  capped = results.markdown(out, {"repeats": 6, "min_repeats": 3,
                                  "max_repeats": 6,
                                  "unsettled": ["ddp@1", "pace@2"],
                                  "settle_tolerance": 0.05})
  assert "not settled at the cap: ddp@1, pace@2)" in capped


def test_block_estimate_and_its_report():
  # Compute-bound: 2 steps of 0.1 s compute hide all but one 0.04 s
  # all-reduce; comm-bound alike with the roles swapped.
  assert results.block_estimate(0.1, 0.04, 2) == pytest.approx(0.12)
  assert results.block_estimate(0.04, 0.1, 4) == pytest.approx(0.11)
  out = {"compute_s": 0.1, "comm_s": 0.04, "schedulers": {
      "pace@2": {"unroll": 2, "median_s": 0.126},
      "tf_default@1": {"unroll": 1, "median_s": 0.2}}}
  report = results.block_estimate_report(out, 2)
  assert report.splitlines() == ["estimate 120.0 ms at K=2",
                                 "pace@2 126.0 ms = 1.050 of the estimate"]
