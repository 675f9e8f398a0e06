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
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

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


def pick_free_ports(count: int, host: str = "127.0.0.1") -> List[int]:
  """Returns `count` distinct ports that were free on `host` a moment ago.

  All sockets are held open until every port is chosen, so the ports are
  distinct; another process may still take one before the worker binds it,
  which is as good as it gets without passing sockets to TensorFlow.
  """
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      s.bind((host, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def make_tf_config(ports: Sequence[int], task_id: int,
                   task_type: str = "worker",
                   host: str = "127.0.0.1") -> Dict[str, Any]:
  """Returns the TF_CONFIG dict of one worker of a loopback cluster."""
  return {
      "cluster": {"worker": [f"{host}:{p}" for p in ports]},
      "task": {"type": task_type, "index": task_id},
  }


def _kill_group(proc: subprocess.Popen) -> None:
  """Kills the process group that `proc` leads (it was started by us)."""
  if proc.poll() is not None:
    return
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  try:
    proc.wait(timeout=10)
  except subprocess.TimeoutExpired:
    pass


def run_workers(target: str,
                num_workers: int = 2,
                args: Sequence[Any] = (),
                timeout: float = 180.0,
                env: Optional[Dict[str, str]] = None,
                pin_cpus: bool = False,
                python: str = sys.executable) -> List[WorkerResult]:
  """Runs `target(*args)` in `num_workers` processes forming one cluster.

  Args:
    target: "package.module:function" or "/path/to/file.py:function".
    num_workers: the number of worker processes.
    args: JSON-serialisable positional arguments for the target.
    timeout: seconds for all workers together; at the deadline every worker
      still running is killed and reported `timed_out`.
    env: extra environment variables for every worker.
    pin_cpus: pin worker i to CPU i modulo the CPUs this process may use, so
      that workers do not compete for one core.
    python: the interpreter to run.

  Returns:
    One `WorkerResult` per worker, by task id.
  """
  ports = pick_free_ports(num_workers)
  args_json = json.dumps(list(args))
  cpus = sorted(os.sched_getaffinity(0)) if pin_cpus else []
  base_env = dict(os.environ)
  # Workers import what this process imports, from the same places.
  base_env["PYTHONPATH"] = os.pathsep.join(
      p for p in [os.getcwd()] + sys.path if p)
  base_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  base_env.update(env or {})
  procs, outputs = [], []
  try:
    for task_id in range(num_workers):
      worker_env = dict(base_env)
      worker_env["TF_CONFIG"] = json.dumps(make_tf_config(ports, task_id))
      out = tempfile.TemporaryFile(mode="w+")
      err = tempfile.TemporaryFile(mode="w+")
      outputs.append((out, err))
      preexec = None
      if cpus:
        cpu = cpus[task_id % len(cpus)]
        preexec = lambda cpu=cpu: os.sched_setaffinity(0, {cpu})
      procs.append(subprocess.Popen(
          [python, "-c", _BOOTSTRAP, target, args_json], stdout=out,
          stderr=err, stdin=subprocess.DEVNULL, env=worker_env,
          start_new_session=True, preexec_fn=preexec))
    deadline = time.monotonic() + timeout
    timed_out = [False] * num_workers
    for i, proc in enumerate(procs):
      try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        timed_out[i] = True
        _kill_group(proc)
  finally:
    for proc in procs:
      _kill_group(proc)
  results = []
  for i, (proc, (out, err)) in enumerate(zip(procs, outputs)):
    out.seek(0)
    err.seek(0)
    stdout, stderr = out.read(), err.read()
    out.close()
    err.close()
    value = None
    for line in stdout.splitlines():
      if line.startswith(RESULT_MARKER):
        value = json.loads(line[len(RESULT_MARKER):])
    results.append(WorkerResult(task_id=i, returncode=proc.returncode,
                                stdout=stdout, stderr=stderr,
                                timed_out=timed_out[i], value=value))
  return results


def check_all_ok(results: Sequence[WorkerResult]) -> None:
  """Raises AssertionError with every worker's output unless all exited 0."""
  if not all(r.ok for r in results):
    raise AssertionError("worker(s) failed:\n" +
                         "\n".join(r.describe() for r in results))
