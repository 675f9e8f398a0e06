"""Builds and validates TF_CONFIG, the cluster description every worker reads.

`tf.distribute.cluster_resolver.TFConfigClusterResolver` accepts a malformed
TF_CONFIG silently and fails much later, typically as a gRPC connection that
never comes up. The launcher therefore checks the JSON here, before any
process starts, and each problem is a `ValueError` that says what is wrong.

Pure Python: nothing here imports TensorFlow.
"""

import json
import re
from typing import Any, Dict, List, Mapping, Sequence

# The task types that tf.distribute knows. "evaluator" is special: it is not a
# job of the cluster (it reads checkpoints on the side), so a task of that type
# need not appear in `cluster`.
TASK_TYPES = ("chief", "worker", "ps", "evaluator")

# host:port, where host is a name, an IPv4 address or a bracketed IPv6
# address. The port is checked numerically below.
_ADDRESS_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d+)$")


def worker_cluster(addresses: Sequence[str]) -> Dict[str, List[str]]:
  """Returns the cluster spec of a workers-only (MultiWorkerMirrored) cluster.

  Args:
    addresses: "host:port" of each worker, worker 0 first.

  Returns:
    {"worker": [addresses...]}, validated.

  Raises:
    ValueError: if an address is malformed or appears twice.
  """
  cluster = {"worker": list(addresses)}
  validate_cluster(cluster)
  return cluster


def build_tf_config(cluster: Mapping[str, Sequence[str]], task_type: str,
                    task_index: int) -> Dict[str, Any]:
  """Returns the TF_CONFIG dictionary of one task, validated.

  Args:
    cluster: job name -> list of "host:port".
    task_type: the job of this task, e.g. "worker".
    task_index: the index of this task within its job.

  Returns:
    {"cluster": ..., "task": {"type": ..., "index": ...}}.

  Raises:
    ValueError: if the result would not be a valid TF_CONFIG.
  """
  config = {
      "cluster": {job: list(tasks) for job, tasks in cluster.items()},
      "task": {"type": task_type, "index": task_index},
  }
  validate_tf_config(config)
  return config


def worker_tf_configs(addresses: Sequence[str]) -> List[str]:
  """Returns the TF_CONFIG JSON string of each worker of a workers-only cluster.

  Args:
    addresses: "host:port" of each worker, worker 0 first.

  Returns:
    One JSON string per worker, in the order of `addresses`.

  Raises:
    ValueError: if an address is malformed or appears twice.
  """
  cluster = worker_cluster(addresses)
  return [json.dumps(build_tf_config(cluster, "worker", i))
          for i in range(len(addresses))]


def parse_tf_config(text: str) -> Dict[str, Any]:
  """Parses and validates a TF_CONFIG string.

  Args:
    text: the JSON text, as found in the TF_CONFIG environment variable.

  Returns:
    The decoded dictionary.

  Raises:
    ValueError: if the text is not JSON or not a valid TF_CONFIG.
  """
  if not isinstance(text, str) or not text.strip():
    raise ValueError("TF_CONFIG is empty; expected a JSON object with "
                     "'cluster' and 'task'")
  try:
    config = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"TF_CONFIG is not valid JSON: {e.msg} at line "
                     f"{e.lineno} column {e.colno}") from e
  validate_tf_config(config)
  return config


def validate_cluster(cluster: Any) -> None:
  """Checks a cluster spec: job name -> non-empty list of unique host:port.

  Args:
    cluster: the value of TF_CONFIG's "cluster".

  Raises:
    ValueError: naming the first problem found.
  """
  if not isinstance(cluster, Mapping):
    raise ValueError(f"TF_CONFIG 'cluster' must be an object mapping job "
                     f"names to address lists, got {type(cluster).__name__}")
  if not cluster:
    raise ValueError("TF_CONFIG 'cluster' has no jobs")
  seen: Dict[str, str] = {}
  for job, tasks in cluster.items():
    if job not in TASK_TYPES or job == "evaluator":
      valid = ", ".join(repr(t) for t in TASK_TYPES if t != "evaluator")
      raise ValueError(f"TF_CONFIG 'cluster' has unknown job {job!r}; valid "
                       f"jobs are {valid}")
    if isinstance(tasks, str) or not isinstance(tasks, Sequence):
      raise ValueError(f"TF_CONFIG job {job!r} must be a list of "
                       f"'host:port' strings, got {type(tasks).__name__}")
    if not tasks:
      raise ValueError(f"TF_CONFIG job {job!r} has no tasks")
    for i, address in enumerate(tasks):
      where = f"{job}[{i}]"
      _check_address(address, where)
      if address in seen:
        raise ValueError(f"TF_CONFIG has duplicate address {address!r}: "
                         f"used by {seen[address]} and {where}")
      seen[address] = where
  if "chief" in cluster and len(cluster["chief"]) != 1:
    raise ValueError(f"TF_CONFIG job 'chief' must have exactly one task, got "
                     f"{len(cluster['chief'])}")


def validate_tf_config(config: Any) -> None:
  """Checks a decoded TF_CONFIG.

  Args:
    config: the decoded JSON value.

  Raises:
    ValueError: naming the first problem found: not an object, missing
      'cluster' or 'task', bad cluster (see `validate_cluster`), unknown task
      type, task type not in the cluster, task index missing, not an integer
      or out of range.
  """
  if not isinstance(config, Mapping):
    raise ValueError(f"TF_CONFIG must be a JSON object, got "
                     f"{type(config).__name__}")
  if "cluster" not in config:
    raise ValueError("TF_CONFIG is missing 'cluster'")
  if "task" not in config:
    raise ValueError("TF_CONFIG is missing 'task'")
  cluster = config["cluster"]
  validate_cluster(cluster)
  task = config["task"]
  if not isinstance(task, Mapping):
    raise ValueError(f"TF_CONFIG 'task' must be an object with 'type' and "
                     f"'index', got {type(task).__name__}")
  if "type" not in task:
    raise ValueError("TF_CONFIG 'task' is missing 'type'")
  if "index" not in task:
    raise ValueError("TF_CONFIG 'task' is missing 'index'")
  task_type, index = task["type"], task["index"]
  if task_type not in TASK_TYPES:
    valid = ", ".join(repr(t) for t in TASK_TYPES)
    raise ValueError(f"TF_CONFIG task type {task_type!r} is unknown; valid "
                     f"types are {valid}")
  # bool is an int in Python; an index of `true` is a typo, not task 1.
  if isinstance(index, bool) or not isinstance(index, int):
    raise ValueError(f"TF_CONFIG task index must be an integer, got "
                     f"{index!r}")
  if task_type == "evaluator":
    # The evaluator runs outside the cluster; TF allows exactly one.
    if index != 0:
      raise ValueError(f"TF_CONFIG task index {index} is out of range for "
                       f"type 'evaluator' (only index 0)")
    return
  if task_type not in cluster:
    raise ValueError(f"TF_CONFIG task type {task_type!r} is not a job of the "
                     f"cluster (jobs: {', '.join(sorted(cluster))})")
  size = len(cluster[task_type])
  if not 0 <= index < size:
    raise ValueError(f"TF_CONFIG task index {index} is out of range for job "
                     f"{task_type!r} with {size} task(s) (0..{size - 1})")


def _check_address(address: Any, where: str) -> None:
  if not isinstance(address, str):
    raise ValueError(f"TF_CONFIG address of {where} must be a 'host:port' "
                     f"string, got {address!r}")
  match = _ADDRESS_RE.match(address)
  if not match:
    raise ValueError(f"TF_CONFIG address of {where} is {address!r}; expected "
                     f"'host:port'")
  port = int(match.group(2))
  if not 0 < port < 65536:
    raise ValueError(f"TF_CONFIG address of {where} has port {port}, outside "
                     f"1..65535")
