"""The probes' measurements as inputs of the execution model."""

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
