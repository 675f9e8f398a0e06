"""Starts a group of worker processes, waits for them and always kills them.

Rules of the group:

- Each worker is the leader of its own process group (`start_new_session`),
  so killing the group also kills what it started (a shell's children, a
  `ip netns exec` wrapper's program, TensorFlow's helper processes).
- Each worker writes stdout and stderr to its own files in the log
  directory; nothing is piped, so a chatty worker can never block on a full
  pipe while the launcher waits.
- The first worker that exits non-zero fails the group: the others are
  killed (SIGTERM to the process group, SIGKILL after a grace period)
  because a collective whose peer is gone hangs rather than fails.
- Clean-up always runs: on leaving the `with` block (normally, on an
  exception, on SIGINT/SIGTERM via `cleanup.raise_on_signals`) and at
  interpreter exit (`atexit`) for groups used without `with`.
- If the launcher itself dies by SIGKILL (no clean-up code runs), each
  worker gets SIGKILL from the kernel too (`setpriv --pdeathsig`, when
  util-linux is installed). The parent-death signal fires when the *thread*
  that started the worker exits, so start groups from a thread that outlives
  them (the main thread, normally), or pass `die_with_parent=False`.
- CPU pinning is applied before the worker's program starts (`taskset`
  prefix) so that every thread it creates inherits it; without `taskset` it
  falls back to `os.sched_setaffinity` right after the spawn.

Pure Python: nothing here imports TensorFlow.
"""

import atexit
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from tf_preempt.launch import cleanup

# Exit code of a group that hit its timeout, as coreutils' `timeout` uses.
TIMEOUT_EXIT_CODE = 124
_POLL_INTERVAL_S = 0.05


@dataclasses.dataclass
class WorkerSpec:
  """How to start one worker.

  Attributes:
    argv: the program and its arguments.
    env: variables set on top of the launcher's environment (TF_CONFIG, ...).
    cpus: CPU ids to pin the worker to, or None for no pinning.
    prefix: argv prepended to `argv`, e.g. ["ip", "netns", "exec", "ns0"].
    name: a name for logs and messages; "worker-<index>" if empty.
    cwd: working directory, or None for the launcher's.
  """
  argv: Sequence[str]
  env: Mapping[str, str] = dataclasses.field(default_factory=dict)
  cpus: Optional[Sequence[int]] = None
  prefix: Sequence[str] = ()
  name: str = ""
  cwd: Optional[str] = None


@dataclasses.dataclass
class WorkerResult:
  """What became of one worker.

  Attributes:
    index: position of the worker in the group.
    name: the worker's name.
    pid: its process id (also its process-group id).
    returncode: exit code; negative -N if it died of signal N; None if it
      never started.
    killed: True if the launcher killed it (a sibling failed, timeout,
      interrupt) rather than it exiting on its own.
    stdout_path: file with its stdout.
    stderr_path: file with its stderr.
    cpus: the CPUs it was pinned to, or None.
  """
  index: int
  name: str
  pid: Optional[int]
  returncode: Optional[int]
  killed: bool
  stdout_path: str
  stderr_path: str
  cpus: Optional[List[int]] = None

  @property
  def ok(self) -> bool:
    return self.returncode == 0

  def stdout(self) -> str:
    return _read(self.stdout_path)

  def stderr(self) -> str:
    return _read(self.stderr_path)

  @property
  def stats(self) -> Optional[Dict[str, Any]]:
    """The last stdout line that parses as a JSON object, or None."""
    return last_json_object(self.stdout())

  def tail(self, num_lines: int = 20) -> str:
    """The last lines of stderr (where tracebacks go), else of stdout."""
    text = self.stderr().strip() or self.stdout().strip()
    return "\n".join(text.splitlines()[-num_lines:])

  @property
  def exit_code(self) -> int:
    """The returncode as a shell exit code: death by signal N is 128 + N."""
    if self.returncode is None:
      return 1
    return 128 - self.returncode if self.returncode < 0 else self.returncode


@dataclasses.dataclass
class GroupResult:
  """What became of a group of workers.

  Attributes:
    workers: one result per worker, in order.
    failed: index of the first worker that exited non-zero, or None.
    timed_out: True if the group was killed because of the timeout.
    elapsed_s: seconds from the start to the end of the wait.
  """
  workers: List[WorkerResult]
  failed: Optional[int]
  timed_out: bool
  elapsed_s: float

  @property
  def ok(self) -> bool:
    return self.failed is None and not self.timed_out

  @property
  def exit_code(self) -> int:
    """0; else the first failing worker's exit code; else 124 on timeout."""
    if self.failed is not None:
      return self.workers[self.failed].exit_code
    if self.timed_out:
      return TIMEOUT_EXIT_CODE
    return 0


def last_json_object(text: str) -> Optional[Dict[str, Any]]:
  """Returns the last line of `text` that parses as a JSON object, or None.

  Args:
    text: a worker's output. Lines that are not JSON objects (log lines, JSON
      lists or numbers) are skipped.

  Returns:
    The decoded object of the last such line.
  """
  for line in reversed(text.splitlines()):
    line = line.strip()
    if not line.startswith("{"):
      continue
    try:
      value = json.loads(line)
    except ValueError:
      continue
    if isinstance(value, dict):
      return value
  return None


def assign_cpus(num_workers: int,
                cpus: Optional[Sequence[int]] = None
               ) -> Optional[List[List[int]]]:
  """Splits the CPUs into one disjoint, equal share per worker.

  Args:
    num_workers: how many workers.
    cpus: the CPUs to share; by default those this process may run on.

  Returns:
    One list of CPU ids per worker, or None when there are fewer CPUs than
    workers (then pinning would put two workers on one core, which is what
    not pinning does too, only less flexibly).
  """
  if cpus is None:
    cpus = sorted(os.sched_getaffinity(0))
  cpus = list(cpus)
  if num_workers <= 0 or len(cpus) < num_workers:
    return None
  share = len(cpus) // num_workers
  return [cpus[i * share:(i + 1) * share] for i in range(num_workers)]


def thread_env(intra_op_threads: Optional[int] = None,
               inter_op_threads: Optional[int] = None) -> Dict[str, str]:
  """Environment that sets TensorFlow's thread pools, for the given counts.

  TensorFlow reads TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS when it
  creates its first session or eager context; OMP_NUM_THREADS sizes oneDNN's
  pool, which otherwise uses every core of the machine regardless of pinning.

  Args:
    intra_op_threads: threads inside one op, or None to leave unset.
    inter_op_threads: ops run concurrently, or None to leave unset.

  Returns:
    The variables to add to a worker's environment.

  Raises:
    ValueError: if a count is not positive.
  """
  env = {}
  for name, value in (("intra_op_threads", intra_op_threads),
                      ("inter_op_threads", inter_op_threads)):
    if value is not None and value < 1:
      raise ValueError(f"{name} must be >= 1, got {value}")
  if intra_op_threads is not None:
    env["TF_NUM_INTRAOP_THREADS"] = str(intra_op_threads)
    env["OMP_NUM_THREADS"] = str(intra_op_threads)
  if inter_op_threads is not None:
    env["TF_NUM_INTEROP_THREADS"] = str(inter_op_threads)
  return env


def kill_process_groups(pgids: Sequence[int], grace_s: float = 3.0,
                        reap: Optional[Callable[[], Any]] = None) -> None:
  """SIGTERM to each process group, then SIGKILL to those still alive.

  Args:
    pgids: process-group ids (the leaders' pids).
    grace_s: how long the groups get to exit after SIGTERM.
    reap: called while waiting; must reap the leaders if they are children
      of this process (a zombie leader keeps its group "alive").
  """
  alive = [g for g in pgids if _signal_group(g, signal.SIGTERM)]
  deadline = time.monotonic() + grace_s
  while alive and time.monotonic() < deadline:
    time.sleep(_POLL_INTERVAL_S)
    if reap is not None:
      reap()
    alive = [g for g in alive if _group_alive(g)]
  for pgid in alive:
    _signal_group(pgid, signal.SIGKILL)


class WorkerGroup(cleanup.SignalGuarded):
  """N worker processes that are started together and always killed.

  Use as a context manager:

    with WorkerGroup(specs, log_dir) as group:
      result = group.wait(timeout_s=60)

  Leaving the block kills whatever still runs, also on an exception or on
  SIGINT/SIGTERM (which raise `cleanup.Interrupted` inside the block).
  """

  def __init__(self, specs: Sequence[WorkerSpec],
               log_dir: Optional[str] = None, grace_s: float = 3.0,
               handle_signals: bool = True, die_with_parent: bool = True):
    """Creates the group; nothing starts before `start` or `__enter__`.

    Args:
      specs: one spec per worker.
      log_dir: directory for the workers' log files (created if needed); a
        fresh temporary directory if None (kept afterwards for inspection).
      grace_s: seconds between SIGTERM and SIGKILL when killing.
      handle_signals: turn SIGINT/SIGTERM into `cleanup.Interrupted` inside
        the `with` block (main thread only).
      die_with_parent: the kernel kills each worker when the thread that
        started it exits (see the module docstring); needs `setpriv`.

    Raises:
      ValueError: if there are no specs.
    """
    if not specs:
      raise ValueError("a worker group needs at least one worker")
    self._specs = list(specs)
    self.log_dir = log_dir or tempfile.mkdtemp(prefix="tf_preempt_workers_")
    self._grace_s = grace_s
    super().__init__(handle_signals)
    self._die_with_parent = die_with_parent
    self._procs: List[Optional[subprocess.Popen]] = []
    self._returncodes: List[Optional[int]] = []
    self._killed: List[bool] = []
    self._start_time = None
    self._closed = False

  @property
  def pids(self) -> List[int]:
    return [p.pid for p in self._procs if p is not None]

  def name(self, index: int) -> str:
    return self._specs[index].name or f"worker-{index}"

  def log_paths(self, index: int):
    """(stdout path, stderr path) of worker `index`."""
    base = os.path.join(self.log_dir, self.name(index))
    return base + ".stdout.log", base + ".stderr.log"

  def start(self) -> None:
    """Starts every worker. If one fails to start, kills those started."""
    if self._procs:
      raise RuntimeError("the worker group was already started")
    os.makedirs(self.log_dir, exist_ok=True)
    atexit.register(self.close)
    self._start_time = time.monotonic()
    try:
      for index, spec in enumerate(self._specs):
        self._procs.append(self._spawn(index, spec))
        self._returncodes.append(None)
        self._killed.append(False)
    except BaseException:
      self.close()
      raise

  def _spawn(self, index: int, spec: WorkerSpec) -> subprocess.Popen:
    env = dict(os.environ)
    # Unbuffered, so the log is live and the stats line is on disk even if
    # the worker is killed right after printing it.
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(spec.env)
    # The wrappers below exec the program, so a missing program would
    # surface as a worker exiting 127; say it before anything starts.
    if not spec.argv:
      raise ValueError(f"{self.name(index)}: empty argv")
    for program in list(spec.prefix[:1]) + [spec.argv[0]]:
      if shutil.which(program, path=env.get("PATH")) is None:
        raise FileNotFoundError(
            f"{self.name(index)}: program {program!r} not found")
    argv = list(spec.prefix) + list(spec.argv)
    setpriv = shutil.which("setpriv")
    if self._die_with_parent and setpriv:
      argv = [setpriv, "--pdeathsig", "KILL", "--"] + argv
    taskset = shutil.which("taskset")
    if spec.cpus is not None and taskset:
      argv = [taskset, "-c", ",".join(str(c) for c in spec.cpus)] + argv
    stdout_path, stderr_path = self.log_paths(index)
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
      proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=err, env=env, cwd=spec.cwd,
                              start_new_session=True)
    if spec.cpus is not None and not taskset:
      try:
        os.sched_setaffinity(proc.pid, spec.cpus)
      except OSError:
        pass  # Already gone; wait() reports its exit code.
    return proc

  def poll(self) -> List[Optional[int]]:
    """Current return codes (None while running), reaping finished workers."""
    for i, proc in enumerate(self._procs):
      if self._returncodes[i] is None and proc is not None:
        self._returncodes[i] = proc.poll()
    return list(self._returncodes)

  def wait(self, timeout_s: Optional[float] = None,
           fail_fast: bool = True) -> GroupResult:
    """Waits until all exit 0, one fails, or the timeout; kills the rest.

    Args:
      timeout_s: seconds from `start`; None waits forever.
      fail_fast: stop waiting (and kill the others) at the first worker that
        exits non-zero. Without it, wait for every worker (tests of error
        paths where one worker is meant to fail and the others to finish).

    Returns:
      The group's result; every worker has exited when it returns.
    """
    if not self._procs:
      raise RuntimeError("start the worker group before waiting for it")
    failed = None
    timed_out = False
    deadline = None if timeout_s is None else self._start_time + timeout_s
    while True:
      codes = self.poll()
      if failed is None:
        failed = next(
            (i for i, c in enumerate(codes) if c not in (None, 0)), None)
      if (failed is not None and fail_fast) or None not in codes:
        break
      if deadline is not None and time.monotonic() >= deadline:
        timed_out = True
        break
      time.sleep(_POLL_INTERVAL_S)
    self.kill()
    return self.result(failed=failed, timed_out=timed_out)

  def result(self, failed: Optional[int] = None,
             timed_out: bool = False) -> GroupResult:
    """The group's result as it stands (workers still running have None)."""
    workers = []
    for i, spec in enumerate(self._specs):
      proc = self._procs[i] if i < len(self._procs) else None
      stdout_path, stderr_path = self.log_paths(i)
      workers.append(WorkerResult(
          index=i, name=self.name(i), pid=proc.pid if proc else None,
          returncode=self._returncodes[i] if proc else None,
          killed=self._killed[i] if proc else False,
          stdout_path=stdout_path, stderr_path=stderr_path,
          cpus=list(spec.cpus) if spec.cpus is not None else None))
    elapsed = (time.monotonic() - self._start_time
               if self._start_time is not None else 0.0)
    return GroupResult(workers=workers, failed=failed, timed_out=timed_out,
                       elapsed_s=elapsed)

  def kill(self) -> None:
    """Kills every worker's process group and reaps the workers.

    Workers that already exited are signalled too: their process group may
    still hold children they left behind.
    """
    if not self._procs:
      return
    with cleanup.signals_deferred():
      running = [i for i, c in enumerate(self.poll()) if c is None]
      for i in running:
        self._killed[i] = True
      kill_process_groups([p.pid for p in self._procs if p is not None],
                          self._grace_s, reap=self.poll)
      for i, proc in enumerate(self._procs):
        if proc is not None and self._returncodes[i] is None:
          try:
            self._returncodes[i] = proc.wait(timeout=self._grace_s)
          except subprocess.TimeoutExpired:
            # Unkillable (stuck in the kernel); report it, do not hang.
            pass

  def close(self) -> None:
    """Kills everything and forgets the atexit hook. Idempotent."""
    if self._closed:
      return
    self._closed = True
    try:
      self.kill()
    finally:
      atexit.unregister(self.close)

  # cleanup.SignalGuarded: the `with` block starts and closes.
  def _acquire(self) -> None:
    self.start()

  def _release(self) -> None:
    self.close()


def run_workers(specs: Sequence[WorkerSpec], timeout_s: Optional[float] = None,
                log_dir: Optional[str] = None, grace_s: float = 3.0,
                die_with_parent: bool = True,
                fail_fast: bool = True) -> GroupResult:
  """Starts the workers, waits for them, and kills them whatever happens.

  Args:
    specs: one spec per worker.
    timeout_s: seconds before all are killed; None waits forever.
    log_dir: directory for the log files; a temporary one if None.
    grace_s: seconds between SIGTERM and SIGKILL.
    die_with_parent: see `WorkerGroup`.
    fail_fast: see `WorkerGroup.wait`.

  Returns:
    The group's result.

  Raises:
    cleanup.Interrupted: on SIGINT/SIGTERM, after the workers were killed.
  """
  with WorkerGroup(specs, log_dir=log_dir, grace_s=grace_s,
                   die_with_parent=die_with_parent) as group:
    return group.wait(timeout_s, fail_fast=fail_fast)


def _signal_group(pgid: int, signum: int) -> bool:
  """Sends a signal to a process group; False if the group is gone."""
  try:
    os.killpg(pgid, signum)
  except ProcessLookupError:
    return False
  except PermissionError:
    # A member changed its credentials; the group is still there.
    return True
  return True


def _group_alive(pgid: int) -> bool:
  """Whether a process group has a member that is not a zombie.

  Zombies are ignored: they are dead, and their parent may be an init that
  reaps orphans only about once a second (as on this project's VMs), which
  would make every kill wait that long.
  """
  try:
    entries = os.listdir("/proc")
  except OSError:
    return _signal_group(pgid, 0)  # No procfs: zombies count as alive.
  for entry in entries:
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat", "rb") as f:
        # "pid (comm) state ppid pgrp ...": comm may contain spaces and
        # parentheses, so split after the last ")".
        fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
      continue
    if int(fields[2]) == pgid and fields[0] != b"Z":
      return True
  return False


def _read(path: str) -> str:
  try:
    with open(path, "rb") as f:
      return f.read().decode("utf-8", errors="replace")
  except FileNotFoundError:
    return ""
