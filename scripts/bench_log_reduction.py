r"""What Keras's per-step reduction of the logs costs a multi-worker `fit`.

  python scripts/bench_log_reduction.py [--bandwidth 2gbit] [--repeats 2]
      [--model vgg_small --batch_size 10 --steps 60 --scheduler tf_default]

Runs `tf_preempt.bench.log_reduction_worker` on `--workers` workers over the
emulated link (pinned one core each, as in the benchmarks), `--repeats`
times with stock Keras's logs ("reduced": every step's loss and metrics
reduced across the workers) and with each worker's own ("local": no
collective for the logs), interleaved (A B, then B A) because the machine
is shared. Prints per setting the median step time of each run, the
median over runs, their ratio, and in how many timed blocks each task
started more than 1 ms after the other (from the runs' Chrome traces,
`timeline.block_skews`). Prints numbers only; nothing here is asserted.
"""

import json
import os
import statistics
import sys
import tempfile
from typing import Any, Dict, List, Sequence

from absl import app
from absl import flags

from tf_preempt.bench import log_reduction_worker
from tf_preempt.bench import timeline
from tf_preempt.launch import launcher
from tf_preempt.launch import netem
from tf_preempt.training import runner

SETTINGS = ("reduced", "local")


def define_flags() -> None:
  log_reduction_worker.define_flags(worker=False)
  flags.DEFINE_integer("workers", 2, "Worker processes.")
  flags.DEFINE_string("bandwidth", "2gbit", "Emulated link rate (tc tbf, "
                      "root); empty for loopback.")
  flags.DEFINE_integer("repeats", 2, "Runs of each setting.")
  flags.DEFINE_string("out", None, "Directory for the traces; a temporary "
                      "one if unset.")
  flags.DEFINE_float("timeout_s", 600.0, "Time limit of each run.")
  flags.DEFINE_bool("json", False, "Print one JSON object instead of text.")


def late_starts(traces: Sequence[Dict[str, Any]],
                warmup_blocks: int) -> List[int]:
  """Per task, the timed blocks (K=1) it started late."""
  return timeline.late_start_counts(
      timeline.block_skews(traces, first_step=warmup_blocks))


def summarize(runs: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
  """Medians per setting and the ratio local / reduced.

  Args:
    runs: setting -> one {"median_step_s", "late_starts",
      "last_batch_losses"} per run.

  Returns:
    {setting: {"median_step_s", "runs_s", "late_starts",
    "last_batch_losses": per run, each worker's last logged batch loss},
    "ratio": local over reduced}.
  """
  out: Dict[str, Any] = {}
  for setting, rs in runs.items():
    out[setting] = {
        "runs_s": [r["median_step_s"] for r in rs],
        "median_step_s": statistics.median(r["median_step_s"] for r in rs),
        "late_starts": [sum(r["late_starts"][t] for r in rs)
                        for t in range(len(rs[0]["late_starts"]))],
        "last_batch_losses": [r["last_batch_losses"] for r in rs]}
  out["ratio"] = out["local"]["median_step_s"] / out["reduced"]["median_step_s"]
  return out


def _run(setting: str, out_dir: str, repeat: int, link) -> Dict[str, Any]:
  f = flags.FLAGS
  path = os.path.join(out_dir, f"{setting}_r{repeat}.json")
  command = [sys.executable, "-m", "tf_preempt.bench.log_reduction_worker",
             f"--logs={setting}", f"--model={f.model}",
             f"--batch_size={f.batch_size}", f"--steps={f.steps}",
             f"--warmup_blocks={f.warmup_blocks}",
             f"--scheduler={f.scheduler}", f"--timeline={path}"]
  stats = launcher.launch_for_stats(command, f.workers, link=link,
                                    timeout_s=f.timeout_s,
                                    **launcher.MEASUREMENT_WORKER)
  traces = [timeline.load_trace(runner.timeline_path(path, f.workers, i))
            for i in range(f.workers)]
  return {"median_step_s": max(s["median_step_s"] for s in stats),
          "late_starts": late_starts(traces, f.warmup_blocks),
          "last_batch_losses": [s["last_batch_loss"] for s in stats]}


def main(argv: Sequence[str]) -> int:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  if (f.workers < 2 or f.repeats < 1 or f.warmup_blocks >= f.steps or
      f.batch_size % f.workers):
    raise app.UsageError("--workers must be at least 2, --repeats positive, "
                         "--warmup_blocks fewer than --steps and "
                         "--batch_size a multiple of --workers")
  link = netem.LinkConfig(rate=f.bandwidth) if f.bandwidth else None
  out_dir = f.out or tempfile.mkdtemp(prefix="bench_log_reduction_")
  os.makedirs(out_dir, exist_ok=True)
  runs: Dict[str, List[Dict[str, Any]]] = {s: [] for s in SETTINGS}
  try:
    for repeat in range(f.repeats):
      order = SETTINGS if repeat % 2 == 0 else SETTINGS[::-1]
      for setting in order:
        runs[setting].append(_run(setting, out_dir, repeat, link))
  except (RuntimeError, netem.EmulationUnavailable) as e:
    print(f"bench_log_reduction: {e}", file=sys.stderr)
    return 1
  result = summarize(runs)
  if f.json:
    print(json.dumps(result))
    return 0
  print(f"{f.model}, global batch {f.batch_size}, {f.workers} workers, "
        f"{f.bandwidth or 'loopback'}, {f.scheduler}, K=1; traces in "
        f"{out_dir}")
  for setting in SETTINGS:
    r = result[setting]
    runs_ms = ", ".join(f"{t * 1e3:.1f}" for t in r["runs_s"])
    late = ", ".join(f"task {t} {n}" for t, n in enumerate(r["late_starts"]))
    print(f"  {setting:8s} median {r['median_step_s'] * 1e3:.1f} ms/step "
          f"(runs {runs_ms}); blocks started > 1 ms late: {late}")
  print(f"  local / reduced = {result['ratio']:.3f}")
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(main)
