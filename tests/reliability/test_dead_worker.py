"""A worker killed mid-step: the survivors fail fast and name it.

Each run starts a cluster of a tiny model training in a loop; one worker
SIGKILLs itself at a random moment after its first step (from a thread, so
anywhere in a step). Every survivor must fail -- never hang -- with an error
that names the lost task, within 2x the collectives' timeout when one is
set and within 60 s when none is (the default: then only the coordination
service's heartbeat, which MultiWorkerMirroredStrategy turns on, or a closed
socket gives the error).

The launcher case runs `scripts/launch.py` over a worker program that dies
by SIGKILL: it must exit non-zero, name the worker, and leave no process and
no network namespace behind.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from tf_preempt.runtime import failure_detection
from tf_preempt.testing import cluster

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers.py")
REPO = os.path.dirname(os.path.dirname(HERE))

# Detection limit when no collective timeout is configured.
NO_TIMEOUT_LIMIT_S = 60.0

# A lost peer is reported by name by a closed socket (at once, when a
# transfer with it is open) or by the coordination service, whose heartbeat
# timeout the strategy sets to a third of the collective timeout (1-10 s;
# tf_preempt.runtime.failure_detection), so that TF's anonymous "Collective
# has timed out during execution" does not fire first.

# (workers, victim, collective timeout or None): 8 kills here and 2 through
# the launcher make the 10. Victims include task 0, which also leads the
# coordination service. Each run costs ~6-20 s on 2 cores, mostly start-up.
RUNS = [
    (2, 1, 20.0), (2, 0, 20.0), (2, 1, None), (2, 0, None),
    (3, 2, 20.0), (3, 0, None), (3, 1, 3.0), (2, 0, 3.0),
]


def _peer_names(error, task):
  return bool(re.search(rf"task:{task}\b", error))


@pytest.mark.slow
@pytest.mark.parametrize("run", range(len(RUNS)))
def test_survivors_fail_fast_naming_the_dead_worker(run):
  num_workers, victim, timeout_s = RUNS[run]
  kill_after_s = float(np.random.default_rng(run).uniform(0.0, 1.5))
  limit = NO_TIMEOUT_LIMIT_S if timeout_s is None else 2 * timeout_s
  with tempfile.TemporaryDirectory() as tmp:
    start = time.monotonic()
    results = cluster.run_workers(
        f"{WORKERS}:train_until_peer_dies", num_workers,
        args=(victim, kill_after_s, timeout_s, os.path.join(tmp, "stamp"),
              num_workers),
        timeout=limit + 120, pin_cpus=True)
    wall = time.monotonic() - start
  assert not any(r.timed_out for r in results), [r.describe() for r in results]
  assert results[victim].returncode == -9, results[victim].describe()
  for r in results:
    if r.task_id == victim:
      continue
    assert r.value is not None, r.describe()
    print(f"[dead worker] workers={num_workers} victim={victim} "
          f"timeout={timeout_s} kill_after={kill_after_s:.2f}s "
          f"survivor={r.task_id} steps={r.value['steps']} "
          f"failed_after={r.value['detect_s']:.2f}s "
          f"({r.value['error_type']}) run_wall={wall:.1f}s")
    assert r.value["detect_s"] is not None
    assert r.value["heartbeat_ms"] == round(
        1e3 * failure_detection.heartbeat_timeout_s(timeout_s)), r.value
    assert r.value["detect_s"] < limit, r.value
    # Also with a collective timeout shorter than TensorFlow's default
    # 10 s heartbeat: the strategy shortens the heartbeat, so the
    # coordination service names the peer before the anonymous
    # "Collective has timed out" error can fire.
    assert _peer_names(r.value["error"], victim), r.value["error"]


_DYING_WORKER = r"""
import json, os, signal, sys, time
sys.path[:0] = [%r]
task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
if task == 1:
  time.sleep(2)
  os.kill(os.getpid(), signal.SIGKILL)
time.sleep(120)
"""


def _descendants_alive(marker):
  """Pids of processes whose command line holds `marker`."""
  alive = []
  for pid in os.listdir("/proc"):
    if not pid.isdigit():
      continue
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        if marker.encode() in f.read():
          alive.append(int(pid))
    except OSError:
      pass
  return alive


def _netns():
  try:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True,
                         text=True, check=False).stdout
  except FileNotFoundError:
    return set()
  return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.mark.slow
@pytest.mark.parametrize("emulate", [False, True])
def test_launch_script_names_the_dead_worker_and_cleans_up(emulate):
  if emulate and (os.geteuid() != 0 or not _netns_available()):
    pytest.skip("network namespaces need root and iproute2")
  marker = f"tf-preempt-reliability-{os.getpid()}-{int(emulate)}"
  with tempfile.TemporaryDirectory() as tmp:
    program = os.path.join(tmp, f"{marker}.py")
    with open(program, "w") as f:
      f.write(_DYING_WORKER % REPO)
    cmd = [sys.executable, os.path.join(REPO, "scripts", "launch.py"),
           "--num_workers", "3", "--timeout_s", "60", "--log_dir", tmp]
    if emulate:
      cmd += ["--emulate_bandwidth", "1gbit"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd + ["--", sys.executable, program],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    stdout, stderr = proc.communicate(timeout=90)
    elapsed = time.monotonic() - start
  output = stdout + stderr
  print(f"[dead worker] launch.py emulate={emulate}: exit={proc.returncode} "
        f"after {elapsed:.1f}s; last line: {output.strip().splitlines()[-1]}")
  assert proc.returncode != 0, output
  assert elapsed < 30, output
  assert re.search(r"worker[- ]1\b", output), output
  time.sleep(0.5)
  assert not _descendants_alive(marker), _descendants_alive(marker)
  # Other jobs on the machine make namespaces too: only the launcher's own
  # (named after its pid) must be gone.
  ours = {n for n in _netns() if n.startswith(f"tfpre-{proc.pid}-")}
  assert not ours, ours


def _netns_available():
  try:
    return subprocess.run(["ip", "netns", "list"], capture_output=True,
                          check=False).returncode == 0
  except FileNotFoundError:
    return False
