"""The probes' measurements as inputs of the execution model."""

import json
import os

import pytest

from tf_preempt.bench import probe_inputs
from tf_preempt.testing import bench_records


def test_order_penalty_points_from_arrival_order_runs():
  runs = [
      # A rank's half, 1.63 MB, exceeds 2 Gbit/s's 1 MB bucket by 2.52 ms
      # of traffic; two runs of that excess are averaged (3.6 and 4.4).
      bench_records.arrival_run("2gbit", 3_260_000, 16.6, 13.0),
      dict(bench_records.arrival_run("2gbit", 3_260_000, 17.7, 13.3),
           late_ms=16.0),
      # Fits the bucket: no point. Task 0 faster: a point at 0.
      bench_records.arrival_run("2gbit", 1_048_576, 3.5, 3.6),
      bench_records.arrival_run("200mbit", 1_048_576, 42.0, 42.7),
      # Not the default link: left out.
      bench_records.arrival_run("200mbit", 3_260_000, 99.0, 1.0,
                                burst_bytes=4_000_000),
      bench_records.arrival_run("200mbit", 3_260_000, 99.0, 1.0,
                                reverse_namespaces=True),
      bench_records.arrival_run(None, 3_260_000, 8.4, 7.4),
      {"bandwidth": "2gbit", "nbytes": 3_260_000, "by_late_task": {}},
      # The late task computed instead of sleeping: another condition.
      dict(bench_records.arrival_run("2gbit", 3_260_000, 99.0, 1.0),
           late_by="compute"),
  ]
  assert probe_inputs.order_penalty_points(runs) == (
      (pytest.approx(2.52e-3), pytest.approx(4.0e-3)),
      (pytest.approx((524_288 - 100_000) / 25e6), 0.0))


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
