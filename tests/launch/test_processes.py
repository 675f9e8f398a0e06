"""Tests of tf_preempt.launch.processes: start, wait, kill, always clean up."""

import os
import signal
import sys
import threading
import time

import pytest

from tf_preempt.launch import cleanup
from tf_preempt.launch import processes


def _python(code):
  return [sys.executable, "-c", code]


# A worker that starts a grandchild and sleeps: killing only the worker's pid
# would leave the grandchild running; the process group kill must not.
_SLEEPER = ["bash", "-c", "sleep 300 & sleep 300; wait"]


def test_last_json_object_skips_other_lines():
  text = '{"a": 1}\nlog line\n[1, 2]\n{"b": 2}\n{broken\n  \nI0000 tf log\n'
  assert processes.last_json_object(text) == {"b": 2}
  assert processes.last_json_object("no json\n42\n") is None


def test_assign_cpus():
  assert processes.assign_cpus(2, [0, 1]) == [[0], [1]]
  assert processes.assign_cpus(2, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]
  assert processes.assign_cpus(3, [0, 1]) is None


def test_thread_env():
  assert processes.thread_env() == {}
  assert processes.thread_env(1, 2) == {"TF_NUM_INTRAOP_THREADS": "1",
                                        "OMP_NUM_THREADS": "1",
                                        "TF_NUM_INTEROP_THREADS": "2"}
  with pytest.raises(ValueError, match="intra_op_threads must be >= 1"):
    processes.thread_env(0)


def test_exit_code_of_signal_death():
  result = processes.WorkerResult(0, "w", 1, -9, True, "", "")
  assert result.exit_code == 137


@pytest.mark.slow
def test_failure_kills_sibling_and_grandchild(token, tmp_path):
  env = token.env
  specs = [processes.WorkerSpec(argv=_SLEEPER, env=env),
           processes.WorkerSpec(
               argv=_python("import sys, time; time.sleep(0.5); "
                            "print('{\"step\": 1}'); "
                            "print('boom', file=sys.stderr); sys.exit(3)"),
               env=env)]
  start = time.monotonic()
  result = processes.run_workers(specs, timeout_s=60, log_dir=str(tmp_path))
  elapsed = time.monotonic() - start
  assert elapsed < 5, f"sibling not killed promptly: {elapsed:.1f} s"
  assert result.failed == 1 and result.exit_code == 3 and not result.ok
  sleeper, failing = result.workers
  assert sleeper.killed and sleeper.returncode == -signal.SIGTERM
  assert not failing.killed and failing.returncode == 3
  assert failing.stats == {"step": 1}
  assert failing.tail() == "boom"
  assert os.path.dirname(failing.stderr_path) == str(tmp_path)
  assert not token.wait_gone()


@pytest.mark.slow
def test_sigterm_ignoring_worker_gets_sigkill(token, tmp_path):
  env = token.env
  stubborn = _python("import signal, time; "
                     "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                     "print('ready', flush=True); time.sleep(300)")
  specs = [processes.WorkerSpec(argv=stubborn, env=env),
           processes.WorkerSpec(argv=_python("import time, sys; "
                                             "time.sleep(1); sys.exit(5)"),
                                env=env)]
  result = processes.run_workers(specs, timeout_s=60, log_dir=str(tmp_path),
                                 grace_s=0.5)
  assert result.exit_code == 5
  assert result.workers[0].returncode == -signal.SIGKILL
  assert not token.wait_gone()


@pytest.mark.slow
def test_success_stats_and_pinning(token, tmp_path):
  code = ("import json, os; print('hello'); "
          "print(json.dumps({'cpus': sorted(os.sched_getaffinity(0)), "
          "'threads': os.environ.get('TF_NUM_INTRAOP_THREADS')}))")
  cpus = processes.assign_cpus(2)
  specs = [processes.WorkerSpec(
      argv=_python(code),
      env=dict(processes.thread_env(intra_op_threads=1), **token.env),
      cpus=cpus[i] if cpus else None) for i in range(2)]
  result = processes.run_workers(specs, timeout_s=60, log_dir=str(tmp_path))
  assert result.ok and result.exit_code == 0 and result.failed is None
  for i, worker in enumerate(result.workers):
    assert worker.stats["threads"] == "1"
    if cpus:
      assert worker.stats["cpus"] == cpus[i]
    assert worker.stdout().startswith("hello\n")
  assert sorted(os.listdir(tmp_path)) == [
      "worker-0.stderr.log", "worker-0.stdout.log",
      "worker-1.stderr.log", "worker-1.stdout.log"]


@pytest.mark.slow
def test_timeout_kills_everything(token, tmp_path):
  specs = [processes.WorkerSpec(argv=_SLEEPER, env=token.env)
           for _ in range(2)]
  start = time.monotonic()
  result = processes.run_workers(specs, timeout_s=1, log_dir=str(tmp_path))
  assert time.monotonic() - start < 5
  assert result.timed_out and result.exit_code == processes.TIMEOUT_EXIT_CODE
  assert all(w.killed for w in result.workers)
  assert not token.wait_gone()


@pytest.mark.slow
def test_sigterm_to_launcher_raises_and_cleans_up(token, tmp_path):
  specs = [processes.WorkerSpec(argv=_SLEEPER, env=token.env)
           for _ in range(2)]
  timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
  previous = signal.getsignal(signal.SIGTERM)
  timer.start()
  try:
    with pytest.raises(cleanup.Interrupted) as info:
      processes.run_workers(specs, timeout_s=60, log_dir=str(tmp_path))
  finally:
    timer.cancel()
  assert info.value.exit_code == 128 + signal.SIGTERM
  assert signal.getsignal(signal.SIGTERM) is previous
  assert not token.wait_gone()


@pytest.mark.slow
def test_exception_inside_with_block_kills_workers(token, tmp_path):
  specs = [processes.WorkerSpec(argv=_SLEEPER, env=token.env)]
  with pytest.raises(RuntimeError, match="test failure"):
    with processes.WorkerGroup(specs, log_dir=str(tmp_path)) as group:
      deadline = time.monotonic() + 5
      while len(token.live()) < 3:  # bash and two sleeps
        assert time.monotonic() < deadline
        time.sleep(0.05)
      assert group.poll() == [None]
      raise RuntimeError("test failure")
  assert not token.wait_gone()


def test_bad_command_fails_at_start(tmp_path):
  specs = [processes.WorkerSpec(argv=["/nonexistent/program"])]
  with pytest.raises(FileNotFoundError,
                     match="worker-0: program '/nonexistent/program' not "
                           "found"):
    processes.run_workers(specs, log_dir=str(tmp_path))


@pytest.mark.slow
def test_without_fail_fast_the_others_finish(token, tmp_path):
  specs = [processes.WorkerSpec(argv=_python("import sys; sys.exit(4)"),
                                env=token.env),
           processes.WorkerSpec(argv=_python("import time; time.sleep(1); "
                                             "print('{\"done\": true}')"),
                                env=token.env)]
  result = processes.run_workers(specs, timeout_s=30, log_dir=str(tmp_path),
                                 fail_fast=False)
  assert result.failed == 0 and result.exit_code == 4
  assert result.workers[1].returncode == 0 and not result.workers[1].killed
  assert result.workers[1].stats == {"done": True}
