"""Runs a function in N worker processes that form a TF_CONFIG cluster.

Multi-worker tests need real processes: TensorFlow's collective runtime is
configured once per process. `run_workers` picks free loopback ports, gives
each worker its TF_CONFIG, starts the processes, waits for all of them with
one deadline, and always kills whatever is still running (the whole process
group of each worker, never anything it did not start). Each worker calls
`target(*args)`; its JSON-serialisable return value comes back in
`WorkerResult.value`.

```python
results = cluster.run_workers("tests/strategies/workers.py:train", 2,
                              args=(5,), timeout=120)
cluster.check_all_ok(results)
weights = [r.value for r in results]
```
"""

import dataclasses
import json
import os
import sys
import tempfile
from typing import Any, List, Optional, Sequence

from tf_preempt.launch import launcher
from tf_preempt.launch import processes

# The worker prints its return value on one line after this marker.
RESULT_MARKER = "TF_PREEMPT_WORKER_RESULT:"

_BOOTSTRAP = r"""
import importlib, importlib.util, json, os, sys
target, args = sys.argv[1], json.loads(sys.argv[2])
where, _, name = target.rpartition(":")
if where.endswith(".py"):
  spec = importlib.util.spec_from_file_location("_tf_preempt_worker", where)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
else:
  module = importlib.import_module(where)
value = getattr(module, name)(*args)
sys.stdout.flush()
print(%r + json.dumps(value), flush=True)
""" % RESULT_MARKER


@dataclasses.dataclass
class WorkerResult:
  """What one worker process did.

  Attributes:
    task_id: its index in the "worker" job.
    returncode: the exit status (negative: killed by that signal).
    stdout: its standard output.
    stderr: its standard error.
    timed_out: whether it was killed at the deadline.
    value: the target's return value, if it returned.
  """
  task_id: int
  returncode: Optional[int]
  stdout: str
  stderr: str
  timed_out: bool = False
  value: Any = None

  @property
  def ok(self) -> bool:
    return self.returncode == 0 and not self.timed_out

  def describe(self, tail: int = 3000) -> str:
    return (f"worker {self.task_id}: returncode={self.returncode} "
            f"timed_out={self.timed_out}\n--- stdout (tail) ---\n"
            f"{self.stdout[-tail:]}\n--- stderr (tail) ---\n"
            f"{self.stderr[-tail:]}")


def run_workers(target: str,
                num_workers: int = 2,
                args: Sequence[Any] = (),
                timeout: float = 180.0,
                env: Optional[dict] = None,
                pin_cpus: bool = False,
                python: str = sys.executable,
                fail_fast: bool = False) -> List[WorkerResult]:
  """Runs `target(*args)` in `num_workers` processes forming one cluster.

  The processes are started, watched and killed by `tf_preempt.launch`, the
  launcher users run: free loopback ports, one TF_CONFIG each, one process
  group each, killed (SIGTERM, then SIGKILL) at the deadline, on failure
  when `fail_fast`, and in every case before this function returns.

  Args:
    target: "package.module:function" or "/path/to/file.py:function".
    num_workers: the number of worker processes.
    args: JSON-serialisable positional arguments for the target.
    timeout: seconds for all workers together; at the deadline every worker
      still running is killed and reported `timed_out`.
    env: extra environment variables for every worker.
    pin_cpus: give each worker its own share of the CPUs, so that workers do
      not compete for one core.
    python: the interpreter to run.
    fail_fast: kill the others as soon as one worker fails; otherwise wait
      for each to end on its own (for tests in which every worker must
      report its own error).

  Returns:
    One `WorkerResult` per worker, by task id.
  """
  worker_env = dict(env or {})
  # Workers import what this process imports, from the same places.
  worker_env.setdefault("PYTHONPATH", os.pathsep.join(
      p for p in [os.getcwd()] + sys.path if p))
  worker_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  specs = launcher.local_worker_specs(
      [python, "-c", _BOOTSTRAP, target, json.dumps(list(args))],
      num_workers, pin_cpus=pin_cpus, extra_env=worker_env)
  with tempfile.TemporaryDirectory() as log_dir:
    group = processes.run_workers(specs, timeout_s=timeout, log_dir=log_dir,
                                  fail_fast=fail_fast)
    results = []
    for worker in group.workers:
      stdout = worker.stdout()
      value = None
      for line in stdout.splitlines():
        if line.startswith(RESULT_MARKER):
          value = json.loads(line[len(RESULT_MARKER):])
      results.append(WorkerResult(
          task_id=worker.index, returncode=worker.returncode, stdout=stdout,
          stderr=worker.stderr(), timed_out=group.timed_out and worker.killed,
          value=value))
  return results


def check_all_ok(results: Sequence[WorkerResult]) -> None:
  """Raises AssertionError with every worker's output unless all exited 0."""
  if not all(r.ok for r in results):
    raise AssertionError("worker(s) failed:\n" +
                         "\n".join(r.describe() for r in results))
