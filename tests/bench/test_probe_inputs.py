"""The probes' measurements as inputs of the execution model."""

import json
import os

import pytest

from tf_preempt.bench import probe_inputs
from tf_preempt.bench import results_files
from tf_preempt.plan import CostModel
from tf_preempt.plan import execution
from tf_preempt.testing import bench_records


def test_arrival_points_from_arrival_order_runs_at_the_link_rate():
  runs = [
      # A rank's half, 1.63 MB, exceeds 2 Gbit/s's 1 MB bucket by 2.52 ms
      # of traffic; two runs of that excess are averaged.
      bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0, 12.0),
      bench_records.arrival_run("2gbit", 3_260_000, 17.0, 13.3, 13.0),
      bench_records.arrival_run("2gbit", 6_520_000, 30.0, 26.0, 25.0),
      # Fits the bucket: no point.
      bench_records.arrival_run("2gbit", 1_048_576, 3.5, 3.6),
      # Late longer than a training block's start lags: left out.
      dict(bench_records.arrival_run("2gbit", 3_260_000, 99.0, 1.0),
           late_ms=16.0),
      # Another rate: another link.
      bench_records.arrival_run("200mbit", 3_260_000, 99.0, 1.0),
      # Not the default link: left out.
      bench_records.arrival_run("2gbit", 3_260_000, 99.0, 1.0,
                                burst_bytes=4_000_000),
      bench_records.arrival_run("2gbit", 3_260_000, 99.0, 1.0,
                                reverse_namespaces=True),
      {"bandwidth": "2gbit", "nbytes": 3_260_000, "by_late_task": {}},
      # The late task computed instead of sleeping: another condition.
      dict(bench_records.arrival_run("2gbit", 3_260_000, 99.0, 1.0),
           late_by="compute"),
  ]
  assert probe_inputs.arrival_points(runs, "2gbit") == (
      (pytest.approx(2.52e-3), 3_260_000, pytest.approx(16.8e-3),
       pytest.approx(12.5e-3)),
      (pytest.approx(2.52e-3 + 6.52e-3), 6_520_000, pytest.approx(30e-3),
       pytest.approx(25e-3)))
  assert probe_inputs.arrival_points(runs, "200mbit") == (
      (pytest.approx((1_630_000 - 100_000) / 25e6), 3_260_000,
       pytest.approx(99e-3), pytest.approx(1e-3)),)
  assert probe_inputs.arrival_points(runs, None) == ()


def test_order_penalty_mixes_the_late_tasks_beyond_the_lone_collective():
  # 2 Gbit/s: 4 ns/B, a 4 ms bucket; 3.26 MB alone in the model takes
  # 1 ms + max(0.5 * 13.04, 13.04 - 4) ms = 10.04 ms.
  cost = CostModel(1e-3, 4e-9)
  model = execution.ExecutionModel(cpu=CostModel(1e-3, 2e-9),
                                    link_burst=4e-3)
  lone = 1e-3 + 13.04e-3 - 4e-3
  assert execution.lone_seconds(cost, 3_260_000, model) == pytest.approx(
      lone)
  points = ((2.52e-3, 3_260_000, 16e-3, 12e-3),
            (9e-3, 6_520_000, 20e-3, 20e-3))
  penalty = probe_inputs.order_penalty(points, 0.25, cost, model)
  assert penalty == (
      (2.52e-3, pytest.approx(0.25 * 16e-3 + 0.75 * 12e-3 - lone)),
      # The model alone is slower than the probe: no penalty.
      (9e-3, 0.0))
  assert probe_inputs.order_penalty(points, 1.0, cost, model)[0][1] == (
      pytest.approx(16e-3 - lone))


def _write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)


@pytest.mark.parametrize("heap", [None, "tensorflow", "keep"])
def test_auto_takes_the_probes_of_the_directory_s_heap_mode(tmp_path, heap):
  results_dir = tmp_path / "2026-12-04-vgg_small-2gbit"
  results_dir.mkdir()
  # Newest name last: each mode has its own probes, and the newest of all
  # is in another mode than two of the three.
  for name, mode in (("2026-12-03-arrival-order", None),
                     ("2026-12-04-arrival-order-heap-tensorflow",
                      "tensorflow"),
                     ("2026-12-05-arrival-order-heap-keep", "keep")):
    run = dict(bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0))
    if mode is not None:
      run["heap"] = mode
    _write(tmp_path / name / "runs.jsonl", json.dumps(run) + "\n")
    _write(tmp_path / name.replace("arrival-order", "contention-2gbit") /
           "cpu_cost.json",
           json.dumps({"alpha": 1e-3, "beta": 3e-9, "bandwidth": "2gbit",
                       **({"heap": mode} if mode else {})}))
  runs, source = probe_inputs.order_penalty_runs(str(results_dir), "auto",
                                                 heap)
  assert [r.get("heap") for r in runs] == [heap]
  assert os.path.basename(os.path.dirname(source)).endswith(
      "heap-" + heap if heap else "arrival-order")
  setup = {"link_bits_per_s": 2e9, "workers": 2, "heap": heap}
  cost = probe_inputs.contention_cost(str(results_dir), setup)
  assert json.loads(open(cost).read()).get("heap") == heap


def test_auto_finds_no_probe_of_another_heap_mode(tmp_path):
  results_dir = tmp_path / "results"
  results_dir.mkdir()
  _write(tmp_path / "2026-12-03-arrival-order" / "runs.jsonl",
         json.dumps(bench_records.arrival_run("2gbit", 3_260_000, 16.6,
                                              13.0)) + "\n")
  runs, source = probe_inputs.order_penalty_runs(str(results_dir), "auto",
                                                 "keep")
  assert runs == [] and "heap mode keep" in source


@pytest.mark.parametrize("kernel, taken", [
    # Its own machine's probe, though one that recorded none and one of
    # another machine are newer.
    ("fc-v1272", "2026-12-04"),
    # No probe of its machine: the one that recorded none (older than
    # the other machine's), never another machine's.
    ("fc-v1252", "2026-12-05"),
    (None, "2026-12-05")])
def test_auto_takes_the_probes_of_the_directory_s_machine(tmp_path, kernel,
                                                          taken):
  results_dir = tmp_path / "results"
  results_dir.mkdir()
  for day, probe_kernel in (("2026-12-04", "fc-v1272"), ("2026-12-05", None),
                            ("2026-12-07", "fc-v1045")):
    recorded = ({"machine": bench_records.machine_line(probe_kernel)}
                if probe_kernel else {})
    run = dict(bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0),
               heap="tensorflow", **recorded)
    _write(tmp_path / f"{day}-arrival-order" / "runs.jsonl",
           json.dumps(run) + "\n")
    _write(tmp_path / f"{day}-contention-2gbit" / "cpu_cost.json",
           json.dumps({"alpha": 1e-3, "beta": 3e-9, "bandwidth": "2gbit",
                       "heap": "tensorflow", **recorded}))
  machine = results_files.machine_identity(
      bench_records.machine_line(kernel) if kernel else None)
  _, source = probe_inputs.order_penalty_runs(str(results_dir), "auto",
                                              "tensorflow", machine)
  assert source.startswith(taken + "-arrival-order")
  setup = {"link_bits_per_s": 2e9, "workers": 2, "heap": "tensorflow",
           "machine": machine}
  cost = probe_inputs.contention_cost(str(results_dir), setup)
  assert os.path.basename(os.path.dirname(cost)) == (
      taken + "-contention-2gbit")


def test_auto_finds_no_probe_of_another_machine(tmp_path):
  results_dir = tmp_path / "results"
  results_dir.mkdir()
  run = dict(bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0),
             machine=bench_records.machine_line("fc-v1272"))
  _write(tmp_path / "2026-12-06-arrival-order" / "runs.jsonl",
         json.dumps(run) + "\n")
  _write(tmp_path / "2026-12-06-contention-2gbit" / "cpu_cost.json",
         json.dumps({"alpha": 1e-3, "beta": 3e-9, "bandwidth": "2gbit",
                     "machine": bench_records.machine_line("fc-v1272")}))
  other = results_files.machine_identity(
      bench_records.machine_line("fc-v1252"))
  runs, source = probe_inputs.order_penalty_runs(str(results_dir), "auto",
                                                 None, other)
  assert runs == [] and "fc-v1252" in source
  # A file of runs on its machine and runs that recorded none is one
  # probe session of neither: not taken.
  unrecorded = bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0)
  with open(tmp_path / "2026-12-06-arrival-order" / "runs.jsonl", "a") as f:
    f.write(json.dumps(unrecorded) + "\n")
  here = results_files.machine_identity(bench_records.machine_line())
  for machine in (here, None):
    runs, source = probe_inputs.order_penalty_runs(str(results_dir), "auto",
                                                   None, machine)
    assert runs == [] and "all none" in source
  assert probe_inputs.contention_cost(str(results_dir), {
      "link_bits_per_s": 2e9, "workers": 2, "heap": None,
      "machine": other}) is None


@pytest.mark.parametrize("speed, taken", [
    # The nearest reading, newer or older.
    (0.65, "2026-12-06-night"), (1.1, "2026-12-06-morning"),
    (3.0, "2026-12-06-morning"),
    # A directory without a reading keeps the probes of unknown speed it
    # was validated with, though they are the oldest.
    (None, "2026-12-06-old")])
def test_auto_takes_the_probe_nearest_in_speed(tmp_path, speed, taken):
  results_dir = tmp_path / "results"
  results_dir.mkdir()
  machine = bench_records.machine_line("fc-v1272")
  for when, probe_speed in (("2026-12-06-old", None),
                            ("2026-12-06-morning", 1.18),
                            ("2026-12-06-night", 0.6)):
    run = dict(bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0),
               machine=machine)
    cost = {"alpha": 1e-3, "beta": 3e-9, "bandwidth": "2gbit",
            "machine": machine}
    if probe_speed is not None:
      run["speed_ms_per_matmul"] = probe_speed
      cost["speed_ms_per_matmul"] = probe_speed
    _write(tmp_path / f"{when}-arrival-order" / "runs.jsonl",
           json.dumps(run) + "\n")
    _write(tmp_path / f"{when}-contention-2gbit" / "cpu_cost.json",
           json.dumps(cost))
  identity = results_files.machine_identity(machine)
  _, source = probe_inputs.order_penalty_runs(str(results_dir), "auto", None,
                                              identity, speed)
  assert source == f"{taken}-arrival-order/runs.jsonl"
  cost = probe_inputs.contention_cost(str(results_dir), {
      "link_bits_per_s": 2e9, "workers": 2, "heap": None,
      "machine": identity, "speed_ms_per_matmul": speed})
  assert cost == str(tmp_path / f"{taken}-contention-2gbit" /
                     "cpu_cost.json")
  expected = {"2026-12-06-old": None, "2026-12-06-morning": 1.18,
              "2026-12-06-night": 0.6}[taken]
  assert probe_inputs.probe_speed(str(results_dir), source) == expected


def test_probe_speed_of_a_cpu_bound_siblings_cost_is_its_benchmarks(
    tmp_path):
  results_dir = tmp_path / "results"
  results_dir.mkdir()
  sibling = tmp_path / "2026-12-06-vgg_small-2gbit"
  _write(sibling / "cost_model.json", json.dumps({"alpha": 1e-3,
                                                  "beta": 5e-9}))
  source = "2026-12-06-vgg_small-2gbit/cost_model.json"
  # Before scripts/bench.py read the speed: none.
  assert probe_inputs.probe_speed(str(results_dir), source) is None
  _write(sibling / "details.json", json.dumps({"speed_ms_per_matmul": 0.7}))
  assert probe_inputs.probe_speed(str(results_dir), source) == 0.7
  assert probe_inputs.probe_speed(str(results_dir), "no/such.json") is None


def test_late_counts_and_expected_lag_from_two_workers_traces(tmp_path):
  traces_dir = tmp_path / "traces"
  traces_dir.mkdir()
  # K=1: task 0 starts batches 4, 5 and 7 late (> 1 ms); 3 is warm-up.
  bench_records.skewed_trace_pair(
      traces_dir, "horovod_k1", {3: 9000, 4: 3000, 5: 2000, 6: 500, 7: 1500})
  # K=2 ("batch" is a block's last step): the block of steps 2-3 is
  # warm-up; of 4-5 and 6-7 task 0 starts one late.
  bench_records.skewed_trace_pair(traces_dir, "ddp_k2",
                                  {3: 9000, 5: 40_000, 7: 0})
  # Worker 0's trace alone: no pair.
  bench_records.skewed_trace_pair(traces_dir, "priority_k1", {4: 0})
  (traces_dir / "priority_k1.worker-1.json").unlink()
  traces = {p.name: json.loads(p.read_text())
            for p in traces_dir.glob("*.worker-0.json")}
  lags = probe_inputs.start_lags(str(tmp_path), traces)
  assert probe_inputs.late_counts(lags, 4) == {
      "horovod_k1.worker-0.json": (1, 3, 4),
      "ddp_k2.worker-0.json": (2, 1, 2)}
  assert lags == {
      "horovod_k1.worker-0.json": {
          3: pytest.approx(9e-3), 4: pytest.approx(3e-3),
          5: pytest.approx(2e-3), 6: pytest.approx(0.5e-3),
          7: pytest.approx(1.5e-3)},
      "ddp_k2.worker-0.json": {3: pytest.approx(9e-3), 5: 0.04, 7: 0.0}}
  # The mean over the timed blocks (3 is warm-up), small lags too.
  assert probe_inputs.expected_lag(
      lags, ["horovod_k1.worker-0.json", "ddp_k2.worker-0.json"], 1,
      4) == pytest.approx((3 + 2 + 0.5 + 1.5) / 4 * 1e-3)
  # A 40 ms lag in one of two blocks counts as what it is.
  assert probe_inputs.expected_lag(
      lags, ["horovod_k1.worker-0.json", "ddp_k2.worker-0.json"], 2,
      4) == pytest.approx(0.5 * 0.04)
  # No trace of K=4: those of any K.
  assert probe_inputs.expected_lag(
      lags, ["ddp_k2.worker-0.json"], 4, 4) == pytest.approx(0.02)
  assert probe_inputs.expected_lag(
      lags, ["priority_k1.worker-0.json"], 1, 4) is None


def _waiting_pair(traces_dir, stem, k, blocks):
  """Both workers' traces of row `stem` (K=`k`): per block (its last step
  "batch", task 0's lateness, then per step the collective's ms from the
  last arrival), task 1 starting each collective first and waiting for
  task 0; both end it together."""
  for task in (0, 1):
    events = []
    for i, (batch, late_us, from_last_ms) in enumerate(blocks):
      start = i * 200_000.0
      events.append({"name": f"block {batch}", "cat": "compute", "ph": "X",
                     "ts": start + (late_us if task == 0 else 0.0),
                     "dur": 190_000.0, "args": {"batch": batch}})
      for step, ms in enumerate(from_last_ms):
        last = start + 50_000 + step * 60_000 + late_us
        begin = last if task == 0 else last - late_us
        events.append(bench_records.collective(
            batch - (k - 1) + step, 0, 1 << 20, begin, begin,
            last + ms * 1e3 - begin))
    (traces_dir / f"{stem}.worker-{task}.json").write_text(
        json.dumps(bench_records.trace(events, [])))


def test_first_collective_in_situ_from_the_last_arrival(tmp_path):
  traces_dir = tmp_path / "traces"
  traces_dir.mkdir()
  # K=1: task 0 arrives 3 ms late in the timed blocks; from the last
  # arrival each collective takes 20 ms (task 1's own spans 23). Batches 2
  # and 3 are warm-up, 50 ms each.
  _waiting_pair(traces_dir, "tf_default_k1", 1,
                [(2, 0, [50]), (3, 0, [50]), (4, 3000, [20]),
                 (5, 3000, [20])])
  # K=2: only a block's first step counts (its workers arrive as the
  # block starts): 30 ms, not the second step's 10.
  _waiting_pair(traces_dir, "tf_default_k2", 2,
                [(5, 3000, [30, 10]), (7, 0, [30, 10]),
                 (9, 3000, [30, 10])])
  # A row of three workers is not a pair.
  bench_records.skewed_trace_pair(traces_dir, "horovod_k1", {4: 0})
  (traces_dir / "horovod_k1.worker-2.json").write_text(
      (traces_dir / "horovod_k1.worker-1.json").read_text())
  traces = {p.name: json.loads(p.read_text())
            for p in traces_dir.glob("*.worker-0.json")}
  assert probe_inputs.first_collective_in_situ(str(tmp_path), traces, 4) == {
      "tf_default_k1.worker-0.json": pytest.approx(20e-3),
      "tf_default_k2.worker-0.json": pytest.approx(30e-3)}
  # From step 2 on the warm-up blocks count too: 50, 50, 20, 20.
  assert probe_inputs.first_collective_in_situ(
      str(tmp_path), traces, 2)["tf_default_k1.worker-0.json"] == (
          pytest.approx(35e-3))


def _step_profile(parent, name, models, layer_shares=None):
  os.makedirs(parent / name)
  with open(parent / name / "step_profile.json", "w") as f:
    json.dump({"models": {m: {"per_worker_batch": 32, "early_share": share,
                              "shares": [share] * 3,
                              "layer_shares": layer_shares or {}}
                          for m, share in models.items()}}, f)


def test_early_share_from_the_newest_probe_that_has_the_model(tmp_path):
  results = tmp_path / "2026-12-03-transformer_tiny-2gbit"
  os.makedirs(results)
  _step_profile(tmp_path, "2026-12-04-step-profile", {"transformer_tiny": 0.2,
                                                   "vgg_small": 0.001})
  _step_profile(tmp_path, "2026-12-05-step-profile", {"vgg_small": 0.002})
  share, source = probe_inputs.early_share(str(results), "transformer_tiny")
  assert share == 0.2
  assert source.startswith("2026-12-04-step-profile/step_profile.json")
  assert "median of 3 runs at a batch of 32" in source
  assert probe_inputs.early_share(str(results), "vgg_small")[0] == 0.002
  share, source = probe_inputs.early_share(str(results), "resnet20")
  assert share == 0.0 and source.startswith("none")


def _block_head(parent, name, machine, models, repeats=5):
  os.makedirs(parent / name)
  with open(parent / name / "block_head.json", "w") as f:
    json.dump({"machine": machine,
               "models": {m: {"per_worker_batch": 32, "delay_share": share,
                              "shares": [share] * repeats}
                          for m, share in models.items()}}, f)


def test_early_share_from_the_block_head_of_the_directory_s_machine(
    tmp_path):
  results = tmp_path / "2026-12-07-transformer_tiny-2gbit"
  os.makedirs(results)
  _step_profile(tmp_path, "2026-12-06-step-profile",
                {"transformer_tiny": 0.12, "vgg_small": 0.001})
  this = bench_records.machine_line("fc-v1300")
  other = bench_records.machine_line("fc-v1272")
  machine = results_files.machine_identity(this)
  _block_head(tmp_path, "2026-12-07-block-head", this,
              {"transformer_tiny": 0.3})
  _block_head(tmp_path, "2026-12-08-block-head", other,
              {"transformer_tiny": 0.5, "vgg_small": 0.2})
  share, source = probe_inputs.early_share(str(results), "transformer_tiny",
                                           machine)
  assert share == 0.3
  assert source.startswith("the block head: 2026-12-07-block-head/")
  assert "median of 5 repeats at a batch of 32" in source
  assert probe_inputs.early_share(str(results), "transformer_tiny",
                                  machine, per_worker_batch=32)[0] == 0.3
  # A probe at another batch per worker is not the directory's.
  share, source = probe_inputs.early_share(
      str(results), "transformer_tiny", machine, per_worker_batch=16)
  assert share == 0.12 and "*block-head*/block_head.json of this" in source
  # Of this machine's, the most repeats first, then the newest name.
  _block_head(tmp_path, "2026-12-07-block-head-few", this,
              {"transformer_tiny": 0.1}, repeats=3)
  assert probe_inputs.early_share(str(results), "transformer_tiny",
                                  machine)[0] == 0.3
  _block_head(tmp_path, "2026-12-07-block-head-b", this,
              {"transformer_tiny": 0.2})
  assert probe_inputs.early_share(str(results), "transformer_tiny",
                                  machine)[0] == 0.2
  _block_head(tmp_path, "2026-12-06-block-head-many", this,
              {"transformer_tiny": 0.25}, repeats=15)
  share, source = probe_inputs.early_share(str(results), "transformer_tiny",
                                           machine)
  assert share == 0.25 and "median of 15 repeats" in source
  # No block head of this machine has vgg_small; none of another machine
  # is taken, nor any without a machine to match.
  for model, machine_of, expected in (
      ("vgg_small", machine, 0.001), ("transformer_tiny", None, 0.12),
      ("transformer_tiny", "AMD EPYC, 2 cores, Linux 6.1", 0.12)):
    share, source = probe_inputs.early_share(str(results), model,
                                             machine_of)
    assert share == expected
    assert source.startswith("2026-12-06-step-profile/step_profile.json")
    assert "the ops that read no weight; no *step-phases*" in source


def _step_phases(parent, name, machine, models, repeats=5,
                 heap="tensorflow", bandwidth="2gbit"):
  os.makedirs(parent / name)
  with open(parent / name / "step_phases.json", "w") as f:
    json.dump({"machine": machine,
               "models": {m: {"per_worker_batch": 32, "heap": heap,
                              "bandwidth": bandwidth, "workers": 2,
                              "early_share": share,
                              "shares": [share] * repeats}
                          for m, share in models.items()}}, f)


def test_early_share_from_the_step_phases_before_the_block_head(tmp_path):
  results = tmp_path / "2026-12-08-transformer_tiny-2gbit"
  os.makedirs(results)
  this = bench_records.machine_line("fc-v1300")
  machine = results_files.machine_identity(this)
  _block_head(tmp_path, "2026-12-07-block-head", this,
              {"transformer_tiny": 0.2, "vgg_small": 0.01}, repeats=15)
  _step_phases(tmp_path, "2026-12-08-step-phases", this,
               {"transformer_tiny": 0.3})
  _step_phases(tmp_path, "2026-12-08-step-phases-keep", this,
               {"transformer_tiny": 0.4}, repeats=9, heap="keep")
  _step_phases(tmp_path, "2026-12-09-step-phases", bench_records.machine_line(
      "fc-v1272"), {"transformer_tiny": 0.5}, repeats=9)
  share, source = probe_inputs.early_share(
      str(results), "transformer_tiny", machine, 32, heap="tensorflow",
      link_rate="2Gbit", workers=2)
  assert share == 0.3
  assert source.startswith("the step phases: 2026-12-08-step-phases/")
  assert "median of 5 repeats of 2-worker runs at a batch of 32" in source
  # Of this machine's, the most repeats first.
  _step_phases(tmp_path, "2026-12-08-step-phases-more", this,
               {"transformer_tiny": 0.35}, repeats=9)
  assert probe_inputs.early_share(str(results), "transformer_tiny", machine,
                                  32, "tensorflow", "2gbit", 2)[0] == 0.35
  # Each in its own heap mode and link.
  assert probe_inputs.early_share(str(results), "transformer_tiny", machine,
                                  32, "keep", "2gbit", 2)[0] == 0.4
  _step_phases(tmp_path, "2026-12-08-step-phases-loopback", this,
               {"transformer_tiny": 0.6}, repeats=9, bandwidth="")
  assert probe_inputs.early_share(str(results), "transformer_tiny", machine,
                                  32, "tensorflow", None, 2)[0] == 0.6
  # Of another heap mode, link, worker count or batch: the block head.
  for batch, heap, link, workers in ((32, None, "2gbit", 2),
                                     (32, "tensorflow", "200mbit", 2),
                                     (32, "tensorflow", "2gbit", 4),
                                     (16, "tensorflow", "2gbit", 2)):
    share, source = probe_inputs.early_share(
        str(results), "transformer_tiny", machine, batch, heap, link,
        workers)
    assert (share, source[:15]) == ((0.2, "the block head:") if batch == 32
                                    else (0.0, "none: no *step-"))
  # A model the step phases lack: its block head.
  assert probe_inputs.early_share(str(results), "vgg_small", machine, 32,
                                  "tensorflow", "2gbit", 2)[0] == 0.01


def test_layer_shares_from_the_step_profile(tmp_path):
  results = tmp_path / "2026-12-03-vgg_small-2gbit"
  os.makedirs(results)
  _step_profile(tmp_path, "2026-12-05-step-profile", {"vgg_small": 0.0},
                {"a/forward": 0.25, "a/backward": 0.75})
  shares, source = probe_inputs.layer_shares(str(results), "vgg_small")
  assert shares == {"a/forward": 0.25, "a/backward": 0.75}
  assert source.startswith("2026-12-05-step-profile/step_profile.json")
  shares, source = probe_inputs.layer_shares(str(results), "resnet20")
  assert shares is None and source.startswith("none")
