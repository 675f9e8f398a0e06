r"""Runs a command as N TensorFlow workers on this machine.

  python scripts/launch.py --num_workers 2 -- python scripts/train.py ...
  python scripts/launch.py --num_workers 2 --emulate_bandwidth 2gbit \
      --emulate_latency 200us --timeout_s 600 --log_dir /tmp/run -- \
      python scripts/train.py ...

Each worker gets its own TF_CONFIG (free loopback ports, or with emulation a
private address inside its own network namespace), its own CPU core when
there are enough, and its own logs (<log_dir>/worker-<i>.stdout.log and
.stderr.log). Prints each worker's last stdout line that is a JSON object
(its stats line) as "[worker i] {...}", then a one-line summary. Exits with
the first failing worker's exit code after killing the others (124 on
timeout, 130 on Ctrl-C); worker processes and namespaces never outlive it.
Emulation needs root; see tf_preempt/launch/netem.py.
"""

import json
import sys
from typing import Any, Dict, Optional, Sequence, TextIO

from absl import app
from absl import flags

from tf_preempt import launch as launch_lib
from tf_preempt.launch import netem

_TAIL_LINES = 20
_USAGE_EXIT_CODE = 2
_UNAVAILABLE_EXIT_CODE = 1


def define_flags() -> None:
  """Defines the command-line flags (all optional, so tests need none)."""
  flags.DEFINE_integer("num_workers", 2, "Number of worker processes.")
  flags.DEFINE_string("emulate_bandwidth", None,
                      "Emulated link rate as a tc rate, e.g. 2gbit (root).")
  flags.DEFINE_string("emulate_latency", None,
                      "Emulated one-way latency, e.g. 200us (root, netem).")
  flags.DEFINE_float("timeout_s", None,
                     "Kill every worker after this many seconds.")
  # --log_dir (worker logs; default a new temporary directory) is absl's own
  # flag, defined by absl.logging, which writes nothing there unless asked
  # to; defining it again would raise DuplicateFlagError.
  flags.DEFINE_boolean("pin_cpus", True,
                       "Pin each worker to its own CPU core(s) when there "
                       "are at least as many cores as workers.")
  flags.DEFINE_integer("intra_op_threads", None,
                       "TF_NUM_INTRAOP_THREADS for each worker.")
  flags.DEFINE_integer("inter_op_threads", None,
                       "TF_NUM_INTEROP_THREADS for each worker.")


def run(command: Sequence[str], num_workers: int = 2,
        emulate_bandwidth: Optional[str] = None,
        emulate_latency: Optional[str] = None,
        timeout_s: Optional[float] = None, log_dir: Optional[str] = None,
        pin_cpus: bool = True, intra_op_threads: Optional[int] = None,
        inter_op_threads: Optional[int] = None,
        out: Optional[TextIO] = None) -> Dict[str, Any]:
  """Launches the workers, prints their stats lines and a summary.

  Args:
    command: argv every worker runs.
    num_workers: how many workers.
    emulate_bandwidth: tc rate of the emulated links, or None.
    emulate_latency: one-way latency of the emulated links, or None.
    timeout_s: seconds before all workers are killed, or None.
    log_dir: directory for the logs, or None for a temporary one.
    pin_cpus: pin workers to CPU cores when there are enough.
    intra_op_threads: TF intra-op threads per worker, or None.
    inter_op_threads: TF inter-op threads per worker, or None.
    out: where to print; stdout by default.

  Returns:
    {"exit_code", "elapsed_s", "failed" (index or None), "timed_out",
    "log_dir", "workers": [{"index", "exit_code", "killed", "stats"}]}; an
    "error" key instead of workers when nothing could start.
  """
  out = out or sys.stdout
  link = None
  try:
    if emulate_bandwidth is not None or emulate_latency is not None:
      link = netem.LinkConfig(rate=emulate_bandwidth, latency=emulate_latency)
    result = launch_lib.launch(
        command, num_workers, timeout_s=timeout_s, log_dir=log_dir, link=link,
        pin_cpus=pin_cpus, intra_op_threads=intra_op_threads,
        inter_op_threads=inter_op_threads)
  except ValueError as e:
    return _error(out, f"error: {e}", _USAGE_EXIT_CODE)
  except netem.EmulationUnavailable as e:
    return _error(out, f"error: {e}", _UNAVAILABLE_EXIT_CODE)
  except KeyboardInterrupt as e:
    # launch_lib.Interrupted (SIGINT/SIGTERM while workers ran) or a plain
    # Ctrl-C before anything started; either way nothing is left running.
    exit_code = getattr(e, "exit_code", 130)
    return _error(out, f"{e or 'interrupted'}; all workers were killed and "
                  f"emulated networks removed", exit_code)
  return _report(result, out)


def _error(out: TextIO, message: str, exit_code: int) -> Dict[str, Any]:
  print(f"launch: {message}", file=out, flush=True)
  return {"exit_code": exit_code, "error": message}


def _report(result: launch_lib.LaunchResult, out: TextIO) -> Dict[str, Any]:
  group = result.group
  workers = []
  for w in group.workers:
    stats = w.stats
    if stats is not None:
      line = json.dumps(stats)
    elif w.killed:
      line = "(killed; no JSON stats line)"
    else:
      line = f"(exit code {w.exit_code}; no JSON stats line)"
    print(f"[worker {w.index}] {line}", file=out)
    workers.append({"index": w.index, "exit_code": w.exit_code,
                    "killed": w.killed, "stats": stats})
  network = (f"emulated {result.link.describe()}" if result.link
             else "loopback")
  n = len(group.workers)
  killed = [str(w.index) for w in group.workers if w.killed]
  killed_text = f"; killed worker(s) {', '.join(killed)}" if killed else ""
  if group.ok:
    print(f"launch: {n} workers exited 0 in {group.elapsed_s:.1f} s "
          f"({network}; logs in {result.log_dir})", file=out)
  elif group.failed is not None:
    bad = group.workers[group.failed]
    print(f"launch: worker {bad.index} failed with exit code {bad.exit_code} "
          f"after {group.elapsed_s:.1f} s{killed_text} ({network}; logs in "
          f"{result.log_dir}); last lines of its log:", file=out)
    for line in bad.tail(_TAIL_LINES).splitlines():
      print(f"  {line}", file=out)
  else:
    print(f"launch: timed out after {group.elapsed_s:.1f} s{killed_text} "
          f"({network}; logs in {result.log_dir})", file=out)
  out.flush()
  return {"exit_code": group.exit_code, "elapsed_s": group.elapsed_s,
          "failed": group.failed, "timed_out": group.timed_out,
          "log_dir": result.log_dir, "workers": workers}


def main(argv: Sequence[str]) -> None:
  flags_ = flags.FLAGS
  stats = run(command=list(argv[1:]), num_workers=flags_.num_workers,
              emulate_bandwidth=flags_.emulate_bandwidth,
              emulate_latency=flags_.emulate_latency,
              timeout_s=flags_.timeout_s, log_dir=flags_.log_dir or None,
              pin_cpus=flags_.pin_cpus,
              intra_op_threads=flags_.intra_op_threads,
              inter_op_threads=flags_.inter_op_threads)
  sys.exit(stats["exit_code"])


if __name__ == "__main__":
  define_flags()
  app.run(main)
