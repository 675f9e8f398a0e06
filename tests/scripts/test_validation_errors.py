"""Tests of scripts/validation_errors.py on made-up validation reports (and
one committed report)."""

import json
import math
import os
import statistics
import subprocess
import sys

import pytest

from tf_preempt.testing import scripts

validation_errors = scripts.load_script("validation_errors")


def _report(path, errors):
  path.write_text(json.dumps({"rows": {
      name: {"error": e} for name, e in errors.items()}}))
  return str(path)


def _cli(*args, check=True):
  """scripts/validation_errors.py with `args`, run from the repository."""
  return subprocess.run(
      [sys.executable, scripts.script_path("validation_errors"), *args],
      capture_output=True, text=True, check=check, cwd=scripts.REPO)


def test_errors_per_row_over_the_reports(tmp_path):
  paths = [_report(tmp_path / "a.json", {"pace@2": -0.10, "ddp@1": 0.02}),
           _report(tmp_path / "b.json", {"pace@2": -0.04, "ddp@1": None}),
           _report(tmp_path / "c.json", {"pace@2": 0.02})]
  errors = validation_errors.row_errors(paths)
  assert errors == {"pace@2": [-0.10, -0.04, 0.02], "ddp@1": [0.02]}
  table = validation_errors.format_errors(errors)
  assert "ddp@1: 1, 0, +2.0% / +2.0% / +2.0% / +2.0%" in table
  assert "pace@2: 3, 2, -4.0% / -4.0% / -10.0% / +2.0%" in table


def test_cli_reads_a_glob_and_refuses_none(tmp_path):
  _report(tmp_path / "x-2gbit.json", {"pace@2": -0.05})
  _report(tmp_path / "x-200mbit.json", {"pace@2": 0.5})
  out = _cli(str(tmp_path / "*-2gbit.json")).stdout
  assert out.splitlines()[0] == "1 reports"
  assert "pace@2: 1, 1, -5.0%" in out
  done = _cli(str(tmp_path / "none-*.json"), check=False)
  assert done.returncode == 2 and "no report matches" in done.stderr



def _benchmark(tmp_path, name, repeats):
  results_dir = tmp_path / name
  results_dir.mkdir()
  (results_dir / "results.json").write_text(json.dumps({"schedulers": {
      row: {"step_s": steps} for row, steps in repeats.items()}}))
  return str(results_dir)


def _full_report(path, results_dir, rows):
  path.write_text(json.dumps({
      "target": 0.10, "inputs": {"results_dir": results_dir},
      "rows": {name: {"error": None if predicted is None else
                      (predicted - measured) / measured,
                      "predicted_s": predicted}
               for name, (predicted, measured) in rows.items()}}))
  return str(path)


def test_misses_with_their_repeats(tmp_path):
  results_dir = _benchmark(tmp_path, "run", {
      "ddp@1": [0.020, 0.030], "pace@2": [0.100, 0.102, 0.104],
      "tf_default@1": [0.050, 0.051]})
  path = _full_report(tmp_path / "run.json", results_dir, {
      "ddp@1": (0.021, 0.025),        # -16%, 5% above the fast repeat
      "pace@2": (0.080, 0.102),       # -21.6%, tight repeats
      "tf_default@1": (0.052, 0.0505),  # within the target
      "priority@1": (None, 0.2)})     # no prediction
  misses = validation_errors.row_misses([path])
  assert [m["row"] for m in misses] == ["ddp@1", "pace@2"]
  ddp, pace = misses
  assert ddp["spread"] == pytest.approx(0.5)
  assert ddp["nearest_error"] == pytest.approx(0.05)
  assert pace["spread"] == pytest.approx(0.04)
  assert pace["nearest_error"] == pytest.approx(-0.2)
  text = validation_errors.format_misses(misses)
  assert "run.json ddp@1: -16.0%, 20.0, 30.0 (50%), +5.0%" in text
  assert text.splitlines()[-1] == (
      "2 rows miss; 1 have repeats further apart than the target; 1 are "
      "within it of a repeat")


def test_misses_need_the_benchmark_directory(tmp_path):
  path = tmp_path / "bare.json"
  path.write_text(json.dumps({"rows": {"ddp@1": {"error": 0.5}}}))
  with pytest.raises(ValueError, match="results_dir"):
    validation_errors.row_misses([str(path)])
  results_dir = _benchmark(tmp_path, "run", {"ddp@1": [0.02]})
  path = _full_report(tmp_path / "run.json", results_dir,
                      {"pace@2": (0.05, 0.02)})
  with pytest.raises(ValueError, match="'pace@2' has no positive repeats"):
    validation_errors.row_misses([path])


def test_cli_lists_the_misses(tmp_path):
  results_dir = _benchmark(tmp_path, "run", {"ddp@1": [0.020, 0.030]})
  _full_report(tmp_path / "run.json", results_dir, {"ddp@1": (0.021, 0.025)})
  out = _cli("--misses", str(tmp_path / "*.json")).stdout
  assert "run.json ddp@1: -16.0%, 20.0, 30.0 (50%), +5.0%" in out
  assert out.splitlines()[-1].startswith("1 rows miss; 1 have repeats")


def test_misses_find_a_repository_directory_from_elsewhere(
    tmp_path, monkeypatch):
  results_dir = "benchmarks/results/2026-12-06-transformer_tiny-2gbit-heldout-5"
  path = _full_report(tmp_path / "r.json", results_dir,
                      {"pace@2": (0.050, 0.0677)})
  monkeypatch.chdir(tmp_path)
  (miss,) = validation_errors.row_misses([path])
  assert len(miss["repeats_s"]) == 5
  assert miss["error"] == pytest.approx(0.050 / 0.0677 - 1)


def _details(results_dir, repeats):
  """details.json of `repeats`: one {name: seconds} per repeat."""
  runs = [{"name": name, "value_s": seconds,
           "tag": f"repeat {i + 1}/{len(repeats)}:"}
          for i, repeat in enumerate(repeats)
          for name, seconds in repeat.items()]
  # A pre-pass run is no repeat's.
  runs.append({"name": "tf_packed@1", "value_s": 9.0,
               "tag": "pre-pass bytes_per_pack=1 MiB:"})
  with open(f"{results_dir}/details.json", "w") as f:
    json.dump({"runs": runs}, f)


def test_repeat_correlation_follows_the_repeats_references(tmp_path):
  # Rows slowed with their repeat's compute alone: +1; communication
  # alone moves against them: -1.
  drifting = _benchmark(tmp_path, "drifting", {})
  _details(drifting, [
      {"compute alone": c, "communication alone": 0.04 / c,
       "ddp@1": 2 * c, "pace@2": 3 * c}
      for c in (0.010, 0.012, 0.015, 0.011)])
  # Two repeats only: left out. A row missing from a repeat: left out.
  short = _benchmark(tmp_path, "short", {})
  _details(short, [{"compute alone": 0.01, "ddp@1": 0.5},
                   {"compute alone": 0.02, "ddp@1": 0.1}])
  partial = _benchmark(tmp_path, "partial", {})
  _details(partial, [{"compute alone": c, "communication alone": 0.02,
                      "ddp@1": c + 0.01, **({"pace@2": 0.3} if i else {})}
                     for i, c in enumerate((0.01, 0.02, 0.03))])
  paths = [_full_report(tmp_path / f"{name}.json", d, {})
           for name, d in (("drifting", drifting), ("short", short),
                           ("partial", partial))]
  got = validation_errors.repeat_correlation(paths)
  compute = got["compute alone"]
  assert compute["directories"] == {"drifting": pytest.approx(1.0),
                                    "partial": pytest.approx(1.0, abs=0.05)}
  assert compute["runs"] == 8 + 3 and compute["pooled"] > 0.9
  comm = got["communication alone"]
  # partial's communication alone never moves: no correlation there.
  assert comm["directories"] == {"drifting": pytest.approx(-1.0),
                                 "partial": None}
  text = validation_errors.format_correlation(got)
  assert "compute alone: pooled +" in text
  assert "  partial: -" in text.splitlines()


def test_time_correlation_follows_the_runs_in_their_order(tmp_path):
  # Every second repeat slows both settings twice over: the deviations in
  # run order are 0 0 d d 0 0 d d 0 0 (d = log 2), against themselves 2
  # runs later -1 and 4 runs later +1.
  slow_pairs = _benchmark(tmp_path, "slow_pairs", {})
  _details(slow_pairs, [{"ddp@1": f * 0.1, "compute alone": f * 0.02}
                        for f in (1, 2, 1, 2, 1)])
  short = _benchmark(tmp_path, "short", {})  # Two repeats: left out.
  _details(short, [{"ddp@1": 0.1}, {"ddp@1": 0.3}])
  paths = [_full_report(tmp_path / f"{name}.json", d, {})
           for name, d in (("slow_pairs", slow_pairs), ("short", short))]
  got = validation_errors.time_correlation(paths, lags=(2, 4))
  assert got["runs"] == 10  # The pre-pass run is not counted.
  assert got["directories"] == {"slow_pairs": {2: pytest.approx(-1.0),
                                               4: pytest.approx(1.0)}}
  assert got["pooled"] == {2: pytest.approx(-1.0), 4: pytest.approx(1.0)}
  text = validation_errors.format_time_correlation(got)
  assert "runs apart:     2     4" in text
  assert "pooled:     -1.00 +1.00 over 10 runs in 1 directory" in text
  assert "  slow_pairs: -1.00 +1.00" in text.splitlines()
  # A second directory whose runs alternate run by run (0 d 0 d 0 d with
  # one setting): 2 runs apart +1, 4 runs apart +1. Pooled, each
  # directory's pairs stay its own: no pair spans the two.
  alternating = _benchmark(tmp_path, "alternating", {})
  _details(alternating, [{"ddp@1": f * 0.1} for f in (1, 2, 1, 2, 1, 2)])
  paths.append(_full_report(tmp_path / "alternating.json", alternating, {}))
  both = validation_errors.time_correlation(paths, lags=(2, 4))
  assert both["runs"] == 16
  assert both["directories"]["alternating"] == {2: pytest.approx(1.0),
                                                4: pytest.approx(1.0)}
  # slow_pairs' 8 pairs at 2 runs apart are -1, alternating's 4 are +1.
  assert -1.0 < both["pooled"][2] < 0.0
  assert both["pooled"][4] == pytest.approx(1.0)


def test_cli_prints_the_correlations(tmp_path):
  results_dir = _benchmark(tmp_path, "run", {})
  _details(results_dir, [{"compute alone": c, "communication alone": c,
                          "ddp@1": 2 * c} for c in (0.01, 0.02, 0.03)])
  _full_report(tmp_path / "run.json", results_dir, {})
  reports = str(tmp_path / "*.json")
  out = _cli("--repeat_correlation", reports).stdout
  assert "compute alone: pooled +1.00 over 3 row runs in 1 directory" in out
  out = _cli("--time_correlation", reports).stdout
  assert "over 9 runs in 1 directory" in out
  for flag in ("--repeat_correlation", "--time_correlation"):
    both = _cli(flag, "--misses", reports, check=False)
    assert both.returncode != 0 and "mutually exclusive" in both.stderr


def test_repeats_needed_draws_whole_repeats(tmp_path):
  # pace@2's fifth repeat is twice as slow: a draw that takes it misses
  # unless the others outvote it. ddp@1 is within the target in any draw.
  results_dir = _benchmark(tmp_path, "five", {
      "pace@2": [1.0, 1.0, 1.0, 1.0, 2.0],
      "ddp@1": [1.0, 1.05, 1.0, 1.0, 1.0],
      "priority@1": [9.0, 9.0, 9.0, 9.0, 9.0]})
  five = _full_report(tmp_path / "five.json", results_dir, {
      "pace@2": (1.0, 1.0), "ddp@1": (1.0, 1.0),
      "priority@1": (None, 9.0)})  # No prediction: not judged.
  # Fewer repeats than MIN_SUBSAMPLE_REPEATS: not drawn.
  short = _full_report(tmp_path / "short.json", _benchmark(
      tmp_path, "short", {"pace@2": [1.0, 2.0, 3.0]}),
                       {"pace@2": (1.0, 2.0)})
  got = validation_errors.repeats_needed([five, short])
  assert list(got) == [five, short] and got[short]["by_k"] == {}
  by_k = got[five]["by_k"]
  assert got[five]["repeats"] == 5 and list(by_k) == [1, 2, 3, 4, 5]
  assert got[five]["reference"] == "median"
  # Alone, the slow repeat misses by 50%; in 4 of the 10 pairs it pulls
  # the median to 1.5 (a third off); from 3 repeats on it is outvoted.
  assert by_k[1] == {"draws": 5, "met": 0.8, "median_max": 0.0}
  assert by_k[2]["draws"] == 10 and by_k[2]["met"] == pytest.approx(0.6)
  # The middle two of the pairs' largest errors: pairs with ddp@1's 1.05
  # (median 1.025) and not the slow repeat.
  assert by_k[2]["median_max"] == pytest.approx(1 - 1 / 1.025)
  assert by_k[3]["met"] == 1.0 and by_k[5]["draws"] == 1
  text = validation_errors.format_repeats_needed(got)
  assert "five.json: 5 repeats, target 10% of each row's median" in text
  assert "   2:  60.0%    2.4%  10" in text.splitlines()
  assert text.splitlines()[-1] == (
      "1 report left out (fewer than 5 repeats)")


def test_repeats_needed_of_all_repeats_is_the_report(tmp_path):
  # A committed report of 9 repeats: drawing all 9 gives its own error.
  path = os.path.join(
      scripts.REPO, "benchmarks", "simulation", "validation",
      "2026-12-07-vgg_small-2gbit-heap-tensorflow-settled-b.json")
  with open(path) as f:
    report = json.load(f)
  (got,) = validation_errors.repeats_needed([path]).values()
  assert got["repeats"] == 9
  assert got["by_k"][9]["median_max"] == pytest.approx(
      report["max_abs_error"], abs=1e-12)
  assert got["by_k"][9]["met"] == (report["max_abs_error"] <= 0.10)
  # Judged by the fastest run of a draw, as validate_sim's
  # --reference=fastest judges a row.
  results_dir = _benchmark(tmp_path, "fast", {"pace@2": [1.0, 1.2, 1.1,
                                                         1.3, 1.4]})
  fastest = _full_report(tmp_path / "fast.json", results_dir,
                         {"pace@2": (1.05, 1.0)})
  with open(fastest) as f:
    report = json.load(f)
  report["inputs"]["settings"] = {"reference": "fastest"}
  with open(fastest, "w") as f:
    json.dump(report, f)
  got = validation_errors.repeats_needed([fastest])[fastest]
  assert got["reference"] == "fastest"
  assert got["by_k"][5]["median_max"] == pytest.approx(0.05)


def test_repeats_needed_refuses_rows_of_unequal_repeats(tmp_path):
  results_dir = _benchmark(tmp_path, "ragged", {
      "pace@2": [1.0] * 5, "ddp@1": [1.0] * 4})
  path = _full_report(tmp_path / "ragged.json", results_dir,
                      {"pace@2": (1.0, 1.0), "ddp@1": (1.0, 1.0)})
  with pytest.raises(ValueError, match=r"ran \[4, 5\] repeats"):
    validation_errors.repeats_needed([path])


def test_repeats_needed_samples_when_there_are_many_draws(tmp_path):
  results_dir = _benchmark(tmp_path, "six", {"pace@2": [1.0] * 5 + [3.0]})
  path = _full_report(tmp_path / "six.json", results_dir,
                      {"pace@2": (1.0, 1.0)})
  other = _full_report(tmp_path / "other.json", results_dir,
                       {"pace@2": (2.0, 1.0)})
  # 6 choose 2 is 15 pairs: with at most 7 draws, 7 are drawn, the same
  # ones for the same seed whatever other reports are given.
  got = validation_errors.repeats_needed([path], draws=7, seed=3)
  assert got[path]["by_k"][2]["draws"] == 7
  assert got[path]["by_k"][6]["draws"] == 1
  assert got == validation_errors.repeats_needed([path], draws=7, seed=3)
  assert validation_errors.repeats_needed(
      [other, path], draws=7, seed=3)[path] == got[path]
  # A pair misses when it holds the slow repeat (5 of the 15): which
  # pairs are drawn follows the seed.
  shares = {validation_errors.repeats_needed(
      [path], draws=7, seed=s)[path]["by_k"][2]["met"] for s in range(10)}
  assert len(shares) > 1 and shares <= {i / 7 for i in range(8)}
  # A 3-subset holds the slow repeat at most once: its median is always
  # 1.0; a single draw misses when it is the slow one.
  assert got[path]["by_k"][3]["met"] == 1.0
  assert got[path]["by_k"][1]["met"] == pytest.approx(5 / 6)


def test_cli_prints_the_repeats_needed(tmp_path):
  results_dir = _benchmark(tmp_path, "run", {"ddp@1": [1.0, 1.2, 1.0, 1.0,
                                                       1.0]})
  _full_report(tmp_path / "run.json", results_dir, {"ddp@1": (1.2, 1.0)})
  reports = str(tmp_path / "*.json")
  out = _cli("--repeats_needed", reports).stdout
  # Predicted 20% high: only the draw of the slow repeat alone meets it.
  assert "   1:  20.0%   20.0%  5" in out.splitlines()
  both = _cli("--repeats_needed", "--misses", reports, check=False)
  assert both.returncode != 0 and "mutually exclusive" in both.stderr


def _step_report(path, rows, gaps=None):
  """A report of rows {name: (error, traced, modelled backward end)}, and
  of gaps {name: (traced, modelled gap between steps)}."""
  report = {"rows": {
      name: {"error": e, "first_step": {
          "trace": None if traced is None else {"backward_end_s": traced},
          "model": {"backward_end_s": modelled}}}
      for name, (e, traced, modelled) in rows.items()}}
  for name, (traced, modelled) in (gaps or {}).items():
    step = report["rows"][name]["first_step"]
    step["trace"]["step_gap_s"] = traced
    step["model"]["step_gap_s"] = modelled
  path.write_text(json.dumps(report))
  return str(path)


def test_offsets_follow_the_traced_backward_pass(tmp_path):
  e = math.expm1
  paths = [
      # Traces 10% ahead of the model: rows 5% high, 1% and 9% of a log.
      _step_report(tmp_path / "fast.json", {
          "a@1": (e(0.01), 0.09, 0.10), "b@2": (e(0.09), 0.018, 0.02),
          "c@2": (e(0.05), None, 0.03)}, gaps={"b@2": (0.010, 0.013)}),
      # Traces 20% behind: rows 10% low.
      _step_report(tmp_path / "slow.json", {
          "a@1": (e(-0.10), 0.12, 0.10)}),
      # As the model: no offset.
      _step_report(tmp_path / "even.json", {
          "a@1": (e(-0.02), 0.10, 0.10), "b@1": (e(0.02), 0.2, 0.2)}),
      # No trace: an offset but no ratio, out of the fit.
      _step_report(tmp_path / "untraced.json", {"a@1": (0.5, None, 0.1)})]
  found = validation_errors.offsets(paths)
  fast = found["reports"][paths[0]]
  assert fast["rows"] == 3
  assert fast["offset"] == pytest.approx(0.05)
  assert fast["spread"] == pytest.approx(0.04)
  assert fast["traced_over_modelled"] == pytest.approx(0.9)
  assert fast["step_gap_excess_s"] == pytest.approx(0.003)
  assert found["reports"][paths[1]]["step_gap_excess_s"] is None
  assert found["reports"][paths[1]]["spread"] is None
  assert found["reports"][paths[3]]["traced_over_modelled"] is None
  assert found["pairs"] == 3
  xs = [math.log(0.9), math.log(1.2), 0.0]
  ys = [0.05, -0.10, 0.0]
  assert found["correlation"] == pytest.approx(
      statistics.correlation(xs, ys))
  assert found["correlation"] < -0.9
  assert found["slope"] == pytest.approx(
      statistics.linear_regression(xs, ys).slope)
  # One report with a gap: too few to correlate.
  assert (found["gap_reports"], found["gap_correlation"]) == (1, None)
  text = validation_errors.format_offsets(found)
  assert "fast.json: 3, +5.0%, 4.0%, 0.900, +3.0 ms" in text
  assert "untraced.json: 1, +40.5%, -, -, -" in text
  assert f"slope {found['slope']:+.2f} over 3 reports\n" in text
  assert text.endswith("between steps: correlation - over 1 reports")


def test_offsets_against_the_gap_between_steps(tmp_path):
  e = math.expm1
  excess = {"long": (0.004, e(0.06)), "short": (-0.002, e(-0.03)),
            "even": (0.001, e(0.02))}
  paths = [_step_report(tmp_path / f"{name}.json",
                        {"a@2": (error, 0.1, 0.1)},
                        gaps={"a@2": (0.010, 0.010 + gap)})
           for name, (gap, error) in excess.items()]
  found = validation_errors.offsets(paths)
  assert found["gap_reports"] == 3
  assert found["gap_correlation"] == pytest.approx(statistics.correlation(
      [0.004, -0.002, 0.001], [0.06, -0.03, 0.02]))
  assert found["gap_correlation"] > 0.9


def test_cli_prints_the_offsets(tmp_path):
  _step_report(tmp_path / "a.json", {"a@1": (0.0, 0.1, 0.1)})
  out = _cli("--offsets", str(tmp_path / "a.json")).stdout
  assert "a.json: 1, +0.0%, -, 1.000, -" in out
  assert "correlation -, slope - over 1 reports" in out
  done = _cli("--offsets", "--misses", str(tmp_path / "a.json"),
              check=False)
  assert done.returncode != 0 and "mutually exclusive" in done.stderr


def test_reports_against_the_same_reports_of_other_settings(tmp_path):
  here, there = tmp_path / "here", tmp_path / "there"
  here.mkdir()
  there.mkdir()
  paths = [_report(here / "a.json", {"x@1": 0.05, "y@1": -0.12}),
           _report(here / "b.json", {"x@1": 0.02, "y@1": 0.03}),
           _report(here / "c.json", {"x@1": 0.2})]
  _report(there / "a.json", {"x@1": 0.07, "y@1": -0.08})
  _report(there / "b.json", {"x@1": 0.15, "y@1": 0.03})
  found = validation_errors.against(paths, str(there))
  assert found["reports"]["a.json"] == {
      "max": (pytest.approx(0.12), pytest.approx(0.08)), "within": (1, 2),
      "rows": 2, "meets": (False, True)}
  assert found["missing"] == ["c.json"]
  assert (found["meets"], found["within"], found["rows"]) == (
      (1, 1), (3, 3), 4)
  assert (found["lower"], found["higher"]) == (1, 1)
  text = validation_errors.format_against(found, str(there))
  assert "a.json: 12.0% (1 of 2) -> 8.0% (2 of 2)" in text
  assert f"not in {there}: c.json" in text
  assert text.endswith("every row within the target: 1 -> 1 of 2 "
                       "reports; rows within it: 3 -> 3 of 4; largest "
                       "error lower in 1, higher in 1")
  out = _cli(f"--against={there}", str(here / "*.json")).stdout
  assert "b.json: 3.0% (2 of 2) -> 15.0% (1 of 2)" in out
  both = _cli(f"--against={there}", "--offsets", str(here / "*.json"),
              check=False)
  assert both.returncode != 0 and "mutually exclusive" in both.stderr


def test_against_compares_the_k2_rows_with_the_k1_rows_and_input_work(
    tmp_path):
  here, there = tmp_path / "here", tmp_path / "there"
  here.mkdir()
  there.mkdir()
  paths = [_report(here / "a.json", {"x@1": 0.02, "x@2": 0.06}),
           _report(here / "b.json", {"x@1": 0.04, "y@1": 0.0, "x@2": 0.0})]
  # In `there` the rows of K = 2 lost their input work: 1 ms a step in
  # a.json, 3 ms in b.json (the median over its rows; one row has none).
  for name, errors, work in (("a.json", {"x@1": 0.02, "x@2": 0.0},
                              {"x@1": 0.001, "x@2": 0.001}),
                             ("b.json", {"x@1": 0.04, "y@1": 0.0,
                                         "x@2": -0.05},
                              {"x@1": 0.002, "y@1": None, "x@2": 0.004})):
    (there / name).write_text(json.dumps({"rows": {
        row: {"error": e, "calibration": {"input_work_s": work[row]}}
        for row, e in errors.items()}}))
  found = validation_errors.against(paths, str(there))
  # K >= 2 less K = 1: here +4 and -2 points, there -2 and -7.
  here_k, there_k = found["unroll_offset"]
  assert (here_k["median"], here_k["below"], here_k["of"]) == (
      pytest.approx(0.01), 1, 2)
  assert (there_k["median"], there_k["below"], there_k["of"]) == (
      pytest.approx(-0.045), 2, 2)
  assert found["input_work"][0] is None
  assert (found["input_work"][1]["median"], found["input_work"][1]["above"]
          ) == (pytest.approx(0.002), 2)
  text = validation_errors.format_against(found, str(there))
  assert ("here: the K >= 2 rows' mean error less the K = 1 rows': median "
          "+1.0 points, below in 1 of 2 reports") in text
  assert (f"in {there}: input work per step (the median over a report's "
          "rows): above 0 in 2 of 2 reports, median 2.0 ms") in text


def test_offsets_give_the_start_up_growth_and_the_batches_taken(tmp_path):
  path = tmp_path / "r.json"
  calib = lambda startup: {"block_startup_s": startup}
  path.write_text(json.dumps({
      "rows": {"a@1": {"error": 0.0, "calibration": calib(0.001)},
               "b@1": {"error": 0.0, "calibration": calib(0.003)},
               "a@2": {"error": 0.0, "calibration": calib(0.006)},
               "b@2": {"error": 0.0, "calibration": {}}},
      "inputs": {"input_taken_s": {"a@2": 0.002, "b@2": 0.003}}}))
  found = validation_errors.offsets([str(path)])
  r = found["reports"][str(path)]
  # K = 2's 6 ms less K = 1's median 2 ms; b@2 has no start-up.
  assert r["startup_growth_s"] == pytest.approx(0.004)
  assert r["input_taken_s"] == pytest.approx(0.0025)
  assert "r.json: 4, +0.0%, 0.0%, -, -, +4.0 ms, 2.5 ms" in (
      validation_errors.format_offsets(found))
  # Reports without them (before 7 December, evening) show "-".
  path.write_text(json.dumps({"rows": {"a@1": {"error": 0.0}}}))
  text = validation_errors.format_offsets(
      validation_errors.offsets([str(path)]))
  assert "r.json: 1, +0.0%, -, -, -, -, -" in text
