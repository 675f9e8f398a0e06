r"""Does a stock all-reduce take longer when one particular task arrives last?

  python scripts/bench_arrival_order.py [--bandwidth 2gbit] [--nbytes 3260000]
      [--late_ms 4] [--late_by sleep|compute] [--busy_ms 10] [--steps 80]
      [--strategy stock|tf_preempt] [--heap tensorflow|keep] [--json]

Launches `--workers` workers of `tf_preempt.bench.arrival_worker` (stock
MultiWorkerMirroredStrategy, RING, one all-reduce per step; no tf_preempt
code on the collective's path) over the emulated link, each pinned to its
core as in the benchmarks. In each step one task, chosen at random, arrives
`--late_ms` late, or none does: it sleeps before the step
(`--late_by=sleep`, its core idle) or computes longer inside it
(`--late_by=compute`: every task runs `--busy_ms` of matmuls before the
all-reduce, the late one `--late_ms` more, so its core is busy, as at the
end of a backward pass). Prints, per late task, the median time from
the last arrival to the collective's end (what a step waits for once every
worker is in) and the median arrival skew. `--strategy=tf_preempt`
reduces through tf_preempt's strategy (scheduler "tf_default": the same
collective, gated by the scheduler op) instead of stock's. `--heap` is
the workers' `tf_preempt.configure_heap` mode (as the training rows').
`--burst_bytes` sets the links' token bucket, `--reverse_namespaces` runs
task i in worker N-1-i's namespace, `--worker_logs DIR` keeps the
workers' logs.

benchmarks/simulation/README.md ("Where it misses") quotes its numbers: on
this machine the all-reduce takes longer when task 0 is the late one.
Prints numbers only; nothing here is asserted.
"""

import json
import statistics
import sys
from typing import Any, Dict, List, Mapping, Sequence

from absl import app
from absl import flags

from tf_preempt.bench import arrival_worker
from tf_preempt.bench import runner
from tf_preempt.bench import timeline
from tf_preempt.launch import launcher
from tf_preempt.launch import netem


def define_flags() -> None:
  arrival_worker.define_flags()
  flags.DEFINE_integer("workers", 2, "Worker processes.")
  flags.DEFINE_string("bandwidth", "2gbit", "Emulated link rate (tc tbf, "
                      "root); empty for loopback.")
  flags.DEFINE_integer("burst_bytes", None, "The links' token bucket in "
                       "bytes (default: tf_preempt.launch.netem's, 4 ms of "
                       "traffic).")
  flags.DEFINE_bool("reverse_namespaces", False, "Task i runs in the network "
                    "namespace (and with the address) of worker N-1-i: does "
                    "the effect follow the task or its place?")
  flags.DEFINE_integer("warmup_steps", 10, "Steps left out of the medians.")
  flags.DEFINE_float("timeout_s", 600.0, "Time limit of the run.")
  flags.DEFINE_string("worker_logs", None, "Keep the workers' logs here (e.g. "
                      "TensorFlow's with TF_CPP_VMODULE=ring_alg=3 set).")
  flags.DEFINE_bool("json", False, "Print one JSON object instead of text.")


def by_late_task(worker_outputs: Sequence[Mapping[str, Any]],
                 warmup_steps: int) -> Dict[str, Dict[str, float]]:
  """Groups the steps by their late task.

  Args:
    worker_outputs: each worker's JSON line, in task order.
    warmup_steps: leading steps left out.

  Returns:
    {"task N" or "nobody": {"steps", "from_last_ms": median of last arrival
    to last end, "skew_ms": median of last arrival less first arrival}};
    a task's group also has "gap_ms": median of that task's arrival less
    its own previous end (what its sleep adds to; the skew can be less,
    since the tasks' previous ends differ).

  Raises:
    ValueError: if the workers disagree on the steps or their late tasks.
  """
  rows = [w["steps"] for w in worker_outputs]
  if len({len(r) for r in rows}) != 1:
    raise ValueError("the workers ran different numbers of steps")
  groups: Dict[str, List[Dict[str, Any]]] = {}
  for i, step in enumerate(zip(*rows)):
    if len({s[0] for s in step}) != 1:
      raise ValueError(f"step {i}: the workers disagree on the late task")
    if i < warmup_steps:
      continue
    late = step[0][0]
    key = "nobody" if late == arrival_worker.NOBODY else f"task {late}"
    figures = timeline.arrival([s[1] for s in step], [s[2] for s in step])
    if late != arrival_worker.NOBODY and i > 0:
      figures["gap_s"] = step[late][1] - rows[late][i - 1][2]
    groups.setdefault(key, []).append(figures)
  out = {}
  for key, v in sorted(groups.items()):
    out[key] = {"steps": len(v),
                "from_last_ms": statistics.median(
                    a["from_last_s"] for a in v) * 1e3,
                "skew_ms": statistics.median(a["skew_s"] for a in v) * 1e3}
    gaps = [a["gap_s"] for a in v if "gap_s" in a]
    if gaps:
      out[key]["gap_ms"] = statistics.median(gaps) * 1e3
  return out


def compute_figures(worker_outputs: Sequence[Mapping[str, Any]],
                    busy_ms: float, late_by: str) -> Dict[str, float]:
  """The compute probe's settings for the output ({} when sleeping).

  Args:
    worker_outputs: each worker's JSON line.
    busy_ms: every task's compute before the all-reduce.
    late_by: "sleep" or "compute".

  Returns:
    {"busy_ms", "ms_per_op": the median of the workers' calibrated matmul
    times} with --late_by=compute, else {}.

  Raises:
    ValueError: if a computing worker did not report its matmul time.
  """
  if late_by != "compute":
    return {}
  times = [w.get("ms_per_op") for w in worker_outputs]
  if any(t is None for t in times):
    raise ValueError("a worker did not report ms_per_op (an old worker?)")
  return {"busy_ms": busy_ms, "ms_per_op": statistics.median(times)}


def main(argv: Sequence[str]) -> int:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  if (f.workers < 2 or f.warmup_steps >= f.steps or f.nbytes < 4 or
      f.late_ms < 0 or f.busy_ms < 0):
    raise app.UsageError("--workers must be at least 2, --warmup_steps "
                         "fewer than --steps, --nbytes at least 4 and "
                         "--late_ms and --busy_ms not negative")
  if not f.bandwidth and (f.burst_bytes is not None or f.reverse_namespaces):
    raise app.UsageError("--burst_bytes and --reverse_namespaces need "
                         "--bandwidth (an emulated link)")
  command = [sys.executable, "-m", "tf_preempt.bench.arrival_worker",
             f"--nbytes={f.nbytes}", f"--late_ms={f.late_ms}",
             f"--steps={f.steps}", f"--seed={f.seed}",
             f"--late_by={f.late_by}", f"--busy_ms={f.busy_ms}",
             f"--strategy={f.strategy}", f"--heap={f.heap}"]
  try:
    link = (netem.LinkConfig(rate=f.bandwidth, burst_bytes=f.burst_bytes)
            if f.bandwidth else None)
    order = (list(range(f.workers))[::-1] if f.reverse_namespaces
             else None)
    outputs = launcher.launch_for_stats(command, f.workers, link=link,
                                        timeout_s=f.timeout_s,
                                        log_dir=f.worker_logs,
                                        namespace_order=order,
                                        **launcher.MEASUREMENT_WORKER)
    groups = by_late_task(outputs, f.warmup_steps)
    computing = compute_figures(outputs, f.busy_ms, f.late_by)
    # How fast the host was: validate_sim matches a directory to the
    # probe of the nearest speed.
    speed = runner.speed_reading(f.workers, [f"--heap={f.heap}"],
                                 f.timeout_s)
  except (RuntimeError, ValueError, netem.EmulationUnavailable) as e:
    print(f"bench_arrival_order: {e}", file=sys.stderr)
    return 1
  if f.json:
    print(json.dumps({"bandwidth": f.bandwidth or None, "nbytes": f.nbytes,
                      "late_ms": f.late_ms, "late_by": f.late_by,
                      "strategy": f.strategy, "heap": f.heap,
                      "machine": runner.machine(),
                      "speed_ms_per_matmul": speed,
                      "strategy_classes": sorted(
                          {w.get("strategy_class", "?") for w in outputs}),
                      "heap_modes": sorted(
                          {str(w.get("heap")) for w in outputs}),
                      **computing, "burst_bytes": f.burst_bytes,
                      "reverse_namespaces": f.reverse_namespaces,
                      "by_late_task": groups}))
    return 0
  where = link.describe() if link else "loopback"
  if f.reverse_namespaces:
    where += ", namespaces reversed"
  how = ("sleeping" if f.late_by == "sleep" else
         f"computing (every task computes {f.busy_ms:g} ms first; a matmul "
         f"took {computing['ms_per_op']:.3f} ms)")
  print(f"{f.workers} workers, {where}, one {f.strategy} all-reduce of "
        f"{f.nbytes} B (heap {f.heap}), "
        f"the late task {f.late_ms:g} ms late, {how}; host speed "
        f"{speed:.3f} ms per matmul")
  for key, g in groups.items():
    print(f"  {key + ' late:':14s} {g['steps']:3d} steps, last arrival to "
          f"end median {g['from_last_ms']:.1f} ms (skew {g['skew_ms']:.1f} "
          f"ms)")
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(main)
