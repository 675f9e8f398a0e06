"""Tests of tf_preempt.bench.runner's rows and repeats (no training run)."""

import json
import os

from absl import app
from absl import flags
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
  assert len(logged) == 1 and logged[0].endswith("fastest run): b")


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


def _training_writing_files(values, workers=2):
  """A training run (`train_once`) that writes each worker's trace (named
  as train.py names them) and a plan that name its step time, and returns
  the next of `values`."""
  steps = iter(values)

  def train_once(scheduler, unroll, **kwargs):
    del scheduler, unroll
    timeline = next(a for a in kwargs["extra_args"]
                    if a.startswith("--timeline="))[len("--timeline="):]
    value = next(steps)
    paths = ([timeline] if workers == 1 else
             [f"{timeline[:-len('.json')]}.worker-{w}.json"
              for w in range(workers)])
    for path in paths:
      with open(path, "w") as f:
        json.dump({"step_s": value}, f)
    return {"median_step_s": value, "plan": None, "final_loss": 0.0,
            "plan_json": json.dumps({"step_s": value})}

  return train_once


def _bench_writing_files(tmp_path, values, workers=2):
  """A Bench of `_training_writing_files`."""
  return runner.Bench(_training_writing_files(values, workers), model="m", batch_size=2, steps=4,
                      warmup_steps=1, num_workers=workers, link=None,
                      timeout_s=1,
                      out_dir=str(tmp_path), train_script="train.py",
                      log=lambda m: None)


def _read(path):
  with open(path) as f:
    return json.load(f)


def test_each_row_keeps_the_files_of_its_run_nearest_the_median(tmp_path):
  # Binary fractions: the ties below are exact.
  bench = _bench_writing_files(tmp_path,
                               [0.1875, 0.5, 0.125, 0.25, 0.125, 0.5])
  packed, pace = runner.Setting("tf_packed@1", "tf_packed", 1), (
      runner.Setting("pace@2", "pace", 2))
  # A pre-pass run at the median is not a repeat's.
  bench.run(packed, tag="pre-pass bytes_per_pack=1 MiB: ")
  for s in (pace, packed, packed, pace, pace):
    bench.run(s, tag="repeat 1/3: ")
  kept = bench.keep_median_runs(["pace@2", "tf_packed@1"])
  # pace: 0.5, 0.125, 0.5, the first run at the median; tf_packed: 0.125
  # and 0.25 are equally near their median, and the earlier is kept.
  assert kept == {"pace@2": 1, "tf_packed@1": 2}
  traces = tmp_path / "traces"
  assert sorted(os.listdir(traces)) == [
      "pace_k2.worker-0.json", "pace_k2.worker-1.json",
      "tf_packed_k1.worker-0.json", "tf_packed_k1.worker-1.json"]
  assert _read(traces / "pace_k2.worker-1.json") == {"step_s": 0.5}
  assert _read(traces / "tf_packed_k1.worker-0.json") == {"step_s": 0.125}
  assert _read(tmp_path / "plans" / "tf_packed@1.json") == {"step_s": 0.125}
  assert _read(tmp_path / "plans" / "pace@2.json") == {"step_s": 0.5}


def test_of_two_middle_runs_the_earlier_is_kept_whatever_the_rounding(
    tmp_path):
  # (0.1 + 0.3) / 2 is not exactly 0.2, and by distance to it rounding
  # picks the later run.
  for values, kept in (([0.1, 0.3], 0), ([0.3, 0.1], 0),
                       ([0.7, 0.5, 0.1, 0.3], 1)):
    out = tmp_path / str(len(values)) / str(values[0])
    out.mkdir(parents=True)
    bench = _bench_writing_files(out, values)
    for _ in values:
      bench.run(runner.Setting("ddp@1", "ddp", 1), tag="repeat 1/2: ")
    assert bench.keep_median_runs(["ddp@1"]) == {"ddp@1": kept}
    assert _read(out / "traces" / "ddp_k1.worker-0.json") == {
        "step_s": values[kept]}


def test_files_an_earlier_failed_bench_left_are_not_taken(tmp_path):
  # A failed bench left run 0's trace of another row, and a plan.
  stale = tmp_path / "traces" / runner.RUN_TRACES / "0"
  stale.mkdir(parents=True)
  (stale / "horovod_k1.worker-0.json").write_text("{}")
  (stale / runner.RUN_PLAN).write_text("{}")
  bench = _bench_writing_files(tmp_path, [0.25])
  bench.run(runner.Setting("ddp@1", "ddp", 1), tag="repeat 1/1: ")
  assert bench.keep_median_runs(["ddp@1"]) == {"ddp@1": 0}
  assert sorted(os.listdir(tmp_path / "traces")) == [
      "ddp_k1.worker-0.json", "ddp_k1.worker-1.json"]
  assert _read(tmp_path / "plans" / "ddp@1.json") == {"step_s": 0.25}


def test_one_workers_trace_keeps_its_name(tmp_path):
  bench = _bench_writing_files(tmp_path, [0.25], workers=1)
  bench.run(runner.Setting("ddp@1", "ddp", 1), tag="repeat 1/1: ")
  bench.keep_median_runs(["ddp@1"])
  assert os.listdir(tmp_path / "traces") == ["ddp_k1.json"]


def test_the_bench_repeats_until_settled_and_says_so(tmp_path, monkeypatch):
  # The references are constant; tf_default@1 runs 100, 200, then 100 ms:
  # settled after a third repeat.
  monkeypatch.setattr(runner.Bench, "_compute_alone",
                      lambda self: (0.05, {}))
  monkeypatch.setattr(runner.Bench, "_comm_alone", lambda self: (0.04, {}))
  monkeypatch.setattr(runner, "speed_reading", lambda *a, **k: 0.7)
  # Its drawing needs real Chrome traces, which these runs do not write.
  monkeypatch.setattr(runner.timeline, "plot_directory", lambda *a, **k: "")
  logged = []
  results = runner.run(
      _training_writing_files([0.1, 0.2, 0.1, 0.1]), model="m",
      num_workers=2, bandwidth=None, steps=4, warmup_steps=1,
      schedulers=["tf_default"], repeats=2, max_repeats=4,
      out_dir=str(tmp_path), unroll=1, batch_size=2, command="bench",
      train_script="train.py", log=logged.append)
  assert results["schedulers"]["tf_default@1"]["step_s"] == [0.1, 0.2, 0.1]
  details = _read(tmp_path / "details.json")
  assert {k: details[k] for k in ("repeats", "min_repeats", "max_repeats",
                                  "settle_tolerance", "unsettled",
                                  "trace_runs")} == {
      "repeats": 3, "min_repeats": 2, "max_repeats": 4,
      "settle_tolerance": runner.SETTLE_TOLERANCE, "unsettled": [],
      "trace_runs": {"tf_default@1": 0}}
  assert details["runs"][-1]["tag"] == "repeat 3 (2 to 4, until settled):"
  assert any(m.endswith("fastest run): tf_default@1") for m in logged)
  assert ("median over 3 interleaved run(s) (at least 2, then repeated "
          "until") in (tmp_path / "results.md").read_text()
  assert sorted(os.listdir(tmp_path / "traces")) == [
      "tf_default_k1.worker-0.json", "tf_default_k1.worker-1.json"]


def test_the_cap_of_repeats_is_checked_before_any_run():
  assert runner.resolved_max_repeats(2, None) == 2
  assert runner.resolved_max_repeats(2, 0) == 2
  assert runner.resolved_max_repeats(2, 5) == 5
  assert runner.resolved_max_repeats(1, 1) == 1
  for repeats, max_repeats in ((1, 3), (3, 2), (0, None)):
    with pytest.raises(ValueError, match="one run is always settled"):
      runner.resolved_max_repeats(repeats, max_repeats)


def test_extra_repeats_need_two_repeats_at_least(tmp_path):
  for repeats, max_repeats in ((1, 3), (3, 2)):
    with pytest.raises(ValueError, match="max_repeats 0 or at least"):
      runner.run(_training_writing_files([]), model="m", num_workers=2,
                 bandwidth=None, steps=4, warmup_steps=1,
                 schedulers=["tf_default"], repeats=repeats,
                 max_repeats=max_repeats, out_dir=str(tmp_path), unroll=1,
                 batch_size=2, command="bench", train_script="train.py")


def test_model_batches_pairs_the_two_flags_and_refuses_a_mismatch():
  assert runner.model_batches(["a", "b"], ["32", "5"]) == [("a", 32),
                                                           ("b", 5)]
  with pytest.raises(ValueError, match="2 values for 1 --models"):
    runner.model_batches(["a"], ["32", "5"])
  for bad in ("x", "0", "-3"):
    with pytest.raises(ValueError, match="no positive integer"):
      runner.model_batches(["a"], [bad])


def test_a_probe_is_written_with_its_machine(tmp_path):
  path = runner.write_probe(str(tmp_path / "new"), "probe.json",
                            {"m": {"share": 0.1}}, [{"model": "m"}])
  assert path == str(tmp_path / "new" / "probe.json")
  with open(path) as f:
    probe = json.load(f)
  assert probe == {"machine": runner.machine(), "models": {"m": {
      "share": 0.1}}, "runs": [{"model": "m"}]}


def test_flagged_model_batches_is_a_usage_error(monkeypatch):
  values = flags.FlagValues()
  flags.DEFINE_list("models", ["a", "b"], "", flag_values=values)
  flags.DEFINE_list("batch_sizes", ["4"], "", flag_values=values)
  values(["prog"])
  monkeypatch.setattr(flags, "FLAGS", values)
  with pytest.raises(app.UsageError, match="1 values for 2 --models"):
    runner.flagged_model_batches()
  values.batch_sizes = ["4", "8"]
  assert runner.flagged_model_batches() == [("a", 4), ("b", 8)]


def test_paired_repeats_groups_a_probe_s_runs_by_model_and_repeat():
  run = lambda model, repeat, unroll, batch=32: {
      "model": model, "repeat": repeat, "unroll": unroll,
      "per_worker_batch": batch}
  runs = [run("m", 1, 2), run("m", 0, 1), run("m", 0, 2), run("m", 1, 1),
          run("v", 0, 2, 5), run("v", 0, 1, 5)]
  paired = runner.paired_repeats(runs)
  assert paired["m"] == ({"per_worker_batch": 32}, [
      (0, {1: runs[1], 2: runs[2]}), (1, {1: runs[3], 2: runs[0]})])
  assert paired["v"][0] == {"per_worker_batch": 5}
  with pytest.raises(ValueError, match="m, repeat 0: runs at K = \\[1\\]"):
    runner.paired_repeats([run("m", 0, 1)])
  with pytest.raises(ValueError, match="m: measured in settings"):
    runner.paired_repeats([run("m", 0, 1), run("m", 0, 2, batch=16)])


def test_paired_run_order_alternates_the_two_k():
  assert list(runner.paired_run_order(2, [("m", 32), ("v", 5)])) == [
      (0, "m", 32, 1), (0, "m", 32, 2), (0, "v", 5, 1), (0, "v", 5, 2),
      (1, "m", 32, 2), (1, "m", 32, 1), (1, "v", 5, 2), (1, "v", 5, 1)]
