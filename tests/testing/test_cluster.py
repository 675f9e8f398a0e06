"""The multi-process test helper itself (no TensorFlow in the workers)."""

import json
import os
import sys
import time

from tf_preempt.testing import cluster

HERE = os.path.abspath(__file__)


def echo(x):
  config = json.loads(os.environ["TF_CONFIG"])
  return {"x": x, "task": config["task"], "cluster": config["cluster"]}


def fail_on_one():
  if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
    raise RuntimeError("worker one fails")
  return "fine"


def fail_or_sleep():
  if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
    sys.exit(3)
  time.sleep(3600)


def sleep_forever():
  time.sleep(3600)


def test_runs_workers_and_collects_values():
  results = cluster.run_workers(f"{HERE}:echo", 3, args=(7,), timeout=60)
  cluster.check_all_ok(results)
  assert [r.value["task"]["index"] for r in results] == [0, 1, 2]
  assert all(r.value["x"] == 7 for r in results)
  assert len(set(results[0].value["cluster"]["worker"])) == 3


def test_failures_are_reported():
  results = cluster.run_workers(f"{HERE}:fail_on_one", 2, timeout=60)
  assert results[0].ok and results[0].value == "fine"
  assert results[1].returncode != 0 and "worker one fails" in results[1].stderr
  try:
    cluster.check_all_ok(results)
  except AssertionError as e:
    assert "worker 1" in str(e)
  else:
    raise AssertionError("check_all_ok passed a failed worker")


def test_timeout_kills_workers():
  start = time.monotonic()
  results = cluster.run_workers(f"{HERE}:sleep_forever", 2, timeout=3)
  assert time.monotonic() - start < 30
  assert all(r.timed_out and r.returncode != 0 for r in results)


def test_fail_fast_kills_the_others():
  start = time.monotonic()
  results = cluster.run_workers(f"{HERE}:fail_or_sleep", 2, timeout=120,
                                fail_fast=True)
  assert time.monotonic() - start < 60
  assert results[1].returncode == 3
  assert results[0].returncode != 0 and not results[0].timed_out
