"""Tests of scripts/launch.py: `run(...)` in process, the CLI as a subprocess.

The subprocess tests check what a user sees: the exit code, the stats and
summary lines, and that after a worker failure or Ctrl-C no worker process
and no network namespace is left.
"""

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tf_preempt.launch import netem
from tf_preempt.testing import scripts

_REPO = scripts.REPO
_SCRIPT = scripts.script_path("launch")



def _python(code):
  return [sys.executable, "-c", code]


def _start(args, token):
  env = dict(os.environ, **token.env)
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (_REPO, env.get("PYTHONPATH")) if p)
  return subprocess.Popen([sys.executable, _SCRIPT, *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=_REPO)


def _wait_for_workers(launcher, token, count, argv_prefixes, timeout_s=10):
  """Waits until `count` processes with the token run one of the argvs.

  Matching the program matters: the launcher's own short-lived `ip` and `tc`
  children carry the token too, and a worker is not set up (pinned, given
  its parent-death signal) until the wrappers have exec'd its program.
  """
  deadline = time.monotonic() + timeout_s
  while len(token.live(argv_prefixes)) < count:
    assert launcher.poll() is None, launcher.communicate()
    assert time.monotonic() < deadline, "workers did not start"
    time.sleep(0.05)


_STATS = ("import json, os; print('log line'); "
          "t = json.loads(os.environ['TF_CONFIG'])['task']['index']; "
          "print(json.dumps({'worker': t, 'loss': 0.5})); print('bye')")


def test_run_prints_stats_lines_and_summary(tmp_path):
  module = scripts.load_script("launch")
  out = io.StringIO()
  stats = module.run(_python(_STATS), num_workers=2, timeout_s=60,
                     log_dir=str(tmp_path), out=out)
  lines = out.getvalue().splitlines()
  assert lines[0] == '[worker 0] {"worker": 0, "loss": 0.5}'
  assert lines[1] == '[worker 1] {"worker": 1, "loss": 0.5}'
  assert lines[2].startswith("launch: 2 workers exited 0 in ")
  assert f"loopback; logs in {tmp_path}" in lines[2]
  assert len(lines) == 3
  assert stats["exit_code"] == 0
  assert [w["stats"]["worker"] for w in stats["workers"]] == [0, 1]


@pytest.mark.parametrize("kwargs, message", [
    (dict(command=[]), "no command to run"),
    (dict(command=["true"], num_workers=0), "num_workers must be >= 1"),
    (dict(command=["true"], emulate_bandwidth="fast"), "bad rate 'fast'"),
    (dict(command=["true"], emulate_latency="200"), "bad time '200'"),
    (dict(command=["true"], intra_op_threads=0), "intra_op_threads"),
])
def test_run_usage_errors(kwargs, message):
  out = io.StringIO()
  stats = scripts.load_script("launch").run(out=out, **kwargs)
  assert stats["exit_code"] == 2
  assert out.getvalue().startswith("launch: error: ")
  assert message in out.getvalue()


@pytest.mark.slow
def test_failing_worker_sets_exit_code_and_kills_sibling(token, tmp_path):
  worker = ("import json, os, sys, time\n"
            "t = json.loads(os.environ['TF_CONFIG'])['task']['index']\n"
            "if t == 1:\n"
            "  time.sleep(0.5); print('{\"step\": 7}')\n"
            "  print('Traceback: it broke', file=sys.stderr); sys.exit(3)\n"
            "time.sleep(300)\n")
  start = time.monotonic()
  launcher = _start(["--num_workers", "2", "--timeout_s", "60", "--log_dir",
                     str(tmp_path), "--", *_python(worker)], token)
  out, err = launcher.communicate(timeout=60)
  assert time.monotonic() - start < 10
  assert launcher.returncode == 3, err
  lines = out.splitlines()
  assert lines[0] == "[worker 0] (killed; no JSON stats line)"
  assert lines[1] == '[worker 1] {"step": 7}'
  assert lines[2].startswith("launch: worker 1 failed with exit code 3 after")
  assert "killed worker(s) 0" in lines[2]
  assert lines[3] == "  Traceback: it broke"
  assert not token.wait_gone()


@pytest.mark.slow
def test_timeout_exit_code(token, tmp_path):
  launcher = _start(["--num_workers", "2", "--timeout_s", "1", "--log_dir",
                     str(tmp_path), "--", "sleep", "300"], token)
  out, err = launcher.communicate(timeout=30)
  assert launcher.returncode == 124, err
  assert "launch: timed out after" in out
  assert not token.wait_gone()


def _interrupt_test(token, tmp_path, signum, extra_args=()):
  launcher = _start(["--num_workers", "2", "--log_dir", str(tmp_path),
                     *extra_args, "--", "bash", "-c",
                     "sleep 300 & sleep 300; wait"], token)
  # Two workers, each bash plus two sleeps.
  _wait_for_workers(launcher, token, 6, [("bash", "-c"), ("sleep", "300")])
  launcher.send_signal(signum)
  out, err = launcher.communicate(timeout=30)
  assert launcher.returncode == 128 + signum, (out, err)
  assert "all workers were killed" in out
  assert not token.wait_gone()
  return launcher.pid


@pytest.mark.slow
def test_ctrl_c_kills_workers(token, tmp_path):
  _interrupt_test(token, tmp_path, signal.SIGINT)


@pytest.mark.slow
def test_sigterm_kills_workers(token, tmp_path):
  _interrupt_test(token, tmp_path, signal.SIGTERM)


@pytest.mark.slow
def test_ctrl_c_with_emulation_removes_namespaces(token, tmp_path):
  support = netem.check_available()
  if not (support.namespaces and support.rate):
    pytest.skip(" ".join(support.reasons))
  pid = _interrupt_test(token, tmp_path, signal.SIGINT,
                        ["--emulate_bandwidth", "100mbit"])
  assert netem.list_namespaces(f"{netem.NAMESPACE_BASE}-{pid}-") == []


@pytest.mark.slow
def test_emulated_workers_see_their_namespace_addresses(token, tmp_path):
  support = netem.check_available()
  if not (support.namespaces and support.rate):
    pytest.skip(" ".join(support.reasons))
  code = ("import json, os, subprocess; "
          "c = json.loads(os.environ['TF_CONFIG']); "
          "me = c['cluster']['worker'][c['task']['index']]; "
          "addrs = subprocess.run(['ip', '-o', '-4', 'addr'], "
          "capture_output=True, text=True).stdout; "
          "print(json.dumps({'me': me, 'has_addr': me.split(':')[0] + '/' "
          "in addrs}))")
  launcher = _start(["--num_workers", "2", "--emulate_bandwidth", "1gbit",
                     "--log_dir", str(tmp_path), "--", *_python(code)], token)
  out, err = launcher.communicate(timeout=60)
  assert launcher.returncode == 0, (out, err)
  for i in range(2):
    line = out.splitlines()[i]
    assert line.startswith(f"[worker {i}] ")
    stats = json.loads(line.split("] ", 1)[1])
    assert stats == {"me": f"{netem.DEFAULT_SUBNET}.{i + 1}:20000",
                     "has_addr": True}
  assert "emulated rate 1gbit" in out.splitlines()[2]
  assert netem.list_namespaces(
      f"{netem.NAMESPACE_BASE}-{launcher.pid}-") == []


@pytest.mark.slow
def test_sigkilled_launcher_takes_workers_along(token, tmp_path):
  # No clean-up code can run on SIGKILL; the workers die by their
  # parent-death signal, and the namespaces left behind are removed by the
  # next launcher (netem.remove_stale, called here directly).
  support = netem.check_available()
  extra = (["--emulate_bandwidth", "100mbit"]
           if support.namespaces and support.rate else [])
  launcher = _start(["--num_workers", "2", "--log_dir", str(tmp_path),
                     *extra, "--", *_python("import time; time.sleep(300)")],
                    token)
  _wait_for_workers(launcher, token, 2, [(sys.executable, "-c")])
  launcher.kill()
  launcher.communicate(timeout=30)
  assert not token.wait_gone()
  prefix = f"{netem.NAMESPACE_BASE}-{launcher.pid}-"
  if extra:
    assert len(netem.list_namespaces(prefix)) == 3
    ours = set(netem.list_namespaces(prefix))
    assert ours <= set(netem.remove_stale())
  assert netem.list_namespaces(prefix) == []
