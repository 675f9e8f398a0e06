"""Tests of tf_preempt.launch.tf_config: built configs and validation errors."""

import json

import pytest

from tf_preempt.launch import tf_config


def _config(cluster=None, task_type="worker", index=0):
  cluster = cluster or {"worker": ["127.0.0.1:1000", "127.0.0.1:1001"]}
  return json.dumps({"cluster": cluster,
                     "task": {"type": task_type, "index": index}})


def test_worker_tf_configs_one_per_worker_same_cluster():
  addresses = ["127.0.0.1:1000", "127.0.0.1:1001", "127.0.0.1:1002"]
  configs = [json.loads(c) for c in tf_config.worker_tf_configs(addresses)]
  assert [c["task"] for c in configs] == [
      {"type": "worker", "index": i} for i in range(3)]
  assert all(c["cluster"] == {"worker": addresses} for c in configs)


def test_parse_round_trips_a_valid_config():
  text = _config(index=1)
  assert tf_config.parse_tf_config(text) == json.loads(text)


def test_chief_and_evaluator_are_valid():
  cluster = {"chief": ["h:1"], "worker": ["h:2", "h:3"]}
  tf_config.parse_tf_config(_config(cluster, "chief", 0))
  tf_config.parse_tf_config(_config(cluster, "evaluator", 0))
  tf_config.parse_tf_config(_config({"worker": ["[::1]:5"]}))


@pytest.mark.parametrize("text, message", [
    ("", "TF_CONFIG is empty"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object, got list"),
    ('{"task": {"type": "worker", "index": 0}}', "missing 'cluster'"),
    ('{"cluster": {"worker": ["h:1"]}}', "missing 'task'"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"index": 0}}',
     "'task' is missing 'type'"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}}',
     "'task' is missing 'index'"),
    ('{"cluster": [], "task": {"type": "worker", "index": 0}}',
     "'cluster' must be an object"),
    ('{"cluster": {}, "task": {"type": "worker", "index": 0}}',
     "'cluster' has no jobs"),
])
def test_structural_errors(text, message):
  with pytest.raises(ValueError, match=message):
    tf_config.parse_tf_config(text)


def test_index_out_of_range_names_the_range():
  with pytest.raises(ValueError,
                     match=r"index 2 is out of range for job 'worker' with 2 "
                           r"task\(s\) \(0\.\.1\)"):
    tf_config.parse_tf_config(_config(index=2))
  with pytest.raises(ValueError, match="index -1 is out of range"):
    tf_config.parse_tf_config(_config(index=-1))
  with pytest.raises(ValueError, match="out of range for type 'evaluator'"):
    tf_config.parse_tf_config(_config(task_type="evaluator", index=1))


def test_index_must_be_an_integer():
  for bad in ('"0"', "true", "1.0"):
    text = ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", '
            f'"index": {bad}}}}}')
    with pytest.raises(ValueError, match="index must be an integer"):
      tf_config.parse_tf_config(text)


def test_unknown_task_type_lists_valid_types():
  with pytest.raises(ValueError, match=r"task type 'wroker' is unknown; valid "
                                       r"types are 'chief', 'worker'"):
    tf_config.parse_tf_config(_config(task_type="wroker"))


def test_task_type_not_in_cluster():
  with pytest.raises(ValueError, match=r"'chief' is not a job of the cluster "
                                       r"\(jobs: worker\)"):
    tf_config.parse_tf_config(_config(task_type="chief"))


def test_unknown_job_in_cluster():
  with pytest.raises(ValueError, match="unknown job 'workers'"):
    tf_config.parse_tf_config(_config({"workers": ["h:1"]}))


def test_duplicate_addresses_name_both_tasks():
  with pytest.raises(ValueError,
                     match=r"duplicate address '127.0.0.1:1000': used by "
                           r"worker\[0\] and worker\[1\]"):
    tf_config.worker_tf_configs(["127.0.0.1:1000", "127.0.0.1:1000"])
  with pytest.raises(ValueError, match=r"used by chief\[0\] and worker\[0\]"):
    tf_config.parse_tf_config(_config({"chief": ["h:1"], "worker": ["h:1"]}))


@pytest.mark.parametrize("address, message", [
    ("localhost", "expected 'host:port'"),
    ("h:0", "port 0, outside 1..65535"),
    ("h:70000", "port 70000"),
    (5, "must be a 'host:port' string"),
])
def test_bad_addresses(address, message):
  with pytest.raises(ValueError, match=message):
    tf_config.parse_tf_config(_config({"worker": [address]}))


def test_job_must_be_a_nonempty_list():
  with pytest.raises(ValueError, match="job 'worker' must be a list"):
    tf_config.parse_tf_config(_config({"worker": "h:1"}))
  with pytest.raises(ValueError, match="job 'worker' has no tasks"):
    tf_config.parse_tf_config(_config({"worker": []}))


def test_two_chiefs_rejected():
  with pytest.raises(ValueError, match="'chief' must have exactly one task"):
    tf_config.parse_tf_config(_config({"chief": ["h:1", "h:2"]}, "chief"))
