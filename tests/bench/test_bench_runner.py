"""Tests of tf_preempt.bench.runner's rows and repeats (no training run)."""

import pytest

from tf_preempt.bench import runner


def _by_name(rows):
  return {r.name: r for r in rows}


def test_baselines_at_both_k_and_pace_at_its_k():
  rows = _by_name(runner.settings_of(["tf_default", "horovod", "pace"], 2))
  assert set(rows) == {"tf_default@1", "tf_default@2", "horovod@1",
                       "horovod@2", "pace@2"}
  assert all(r.profile_steps == 0 for r in rows.values())


def test_pace_options_apply_to_the_pace_row_only():
  rows = _by_name(runner.settings_of(["tf_default", "pace"], 2,
                                     pace_profile_steps=4,
                                     pace_sparse_as_dense=True))
  assert rows["pace@2"].profile_steps == 4
  assert "--sparse_as_dense" in rows["pace@2"].args
  assert "--sparse_as_dense" in rows["pace@2"].description
  for name in ("tf_default@1", "tf_default@2"):
    assert rows[name].profile_steps == 0
    assert "--sparse_as_dense" not in rows[name].args


def test_interleaved_alternates_the_order():
  assert list(runner.interleaved(["a", "b", "c"], 3)) == [
      (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"),
      (2, "a"), (2, "b"), (2, "c")]


def test_a_setting_settles_when_its_median_is_near_its_fastest_run():
  assert runner.unsettled({"a": [1.0, 1.04, 1.5], "b": [1.0, 1.2, 1.3],
                           "c": [2.0]}, tolerance=0.05) == ["b"]
  # Two runs: the median is their mean.
  assert runner.unsettled({"a": [1.0, 1.2]}, tolerance=0.05) == ["a"]
  assert runner.unsettled({"a": [1.0, 1.2]}, tolerance=0.15) == []


def test_a_setting_without_a_run_is_an_error():
  with pytest.raises(ValueError, match="without a run: b"):
    runner.unsettled({"a": [1.0], "b": []})


class _Timings:
  """Gives each setting's runs from a list, and records the order run."""

  def __init__(self, values):
    self.values = {name: list(v) for name, v in values.items()}
    self.ran = []

  def __call__(self, setting, repeat):
    self.ran.append((repeat, setting.name))
    return self.values[setting.name].pop(0)


def _settings(*names):
  return [runner.Setting(n) for n in names]


def test_repeats_stop_at_the_minimum_when_everything_settled():
  timings = _Timings({"a": [1.0, 1.01, 9.0], "b": [2.0, 2.0, 9.0]})
  by_name, done, left = runner.repeat_until_settled(
      timings, _settings("a", "b"), repeats=2, max_repeats=5,
      tolerance=0.05, log=lambda m: None)
  assert (done, left) == (2, [])
  assert by_name == {"a": [1.0, 1.01], "b": [2.0, 2.0]}
  assert timings.ran == [(0, "a"), (0, "b"), (1, "b"), (1, "a")]


def test_whole_repeats_are_added_until_every_setting_settled():
  # b's second run is disturbed: the median of two is 25% above the
  # fastest; a third run near the fastest settles it.
  timings = _Timings({"a": [1.0, 1.0, 1.0], "b": [2.0, 3.0, 2.05]})
  logged = []
  by_name, done, left = runner.repeat_until_settled(
      timings, _settings("a", "b"), repeats=2, max_repeats=5,
      tolerance=0.05, log=logged.append)
  assert (done, left) == (3, [])
  assert by_name["b"] == [2.0, 3.0, 2.05] and len(by_name["a"]) == 3
  assert timings.ran[-2:] == [(2, "a"), (2, "b")]
  assert len(logged) == 1 and "b" in logged[0] and "a," not in logged[0]


def test_the_cap_stops_the_repeats_and_names_what_did_not_settle():
  timings = _Timings({"a": [1.0, 1.0, 1.0], "b": [2.0, 3.0, 3.1]})
  _, done, left = runner.repeat_until_settled(
      timings, _settings("a", "b"), repeats=2, max_repeats=3,
      tolerance=0.05, log=lambda m: None)
  assert (done, left) == (3, ["b"])


def test_without_extra_repeats_the_unsettled_are_still_named():
  timings = _Timings({"a": [1.0, 1.5]})
  _, done, left = runner.repeat_until_settled(
      timings, _settings("a"), repeats=2, max_repeats=2, log=lambda m: None)
  assert (done, left) == (2, ["a"])
