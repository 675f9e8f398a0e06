r"""Sweeps scripts/simulate.py over models, worker counts and bandwidths.

Every point (model, workers, bandwidth) is planned once per scheduler by
`simulate.run` (ring all-reduce cost, per-op times from the roofline FLOPs
model of a named GPU, see `tf_preempt.profile.model_dag`); each model's DAG
is built once per process. The script prints and writes the speed-up of
`pace` over each baseline and over the best of them, and of `pace_rsag`
(DeAR-style reduce-scatter + all-gather split, `tf_preempt.plan.rsag`) over
`pace`:

  OUT_DIR/sweep.md          one markdown table per model
  OUT_DIR/sweep.json        every point, every scheduler's iteration time
  OUT_DIR/speedup_vs_bandwidth.png   one panel per model, one line per
                                     baseline, at --plot_workers workers
  OUT_DIR/speedup_vs_workers.png     the same against workers, at
                                     --plot_bandwidth_gbps

Usage:
  python scripts/simulate_sweep.py                 # the full grid (minutes)
  python scripts/simulate_sweep.py --models=transformer --workers=2,8 \
      --bandwidths_gbps=1,10 --out_dir=/tmp/sweep --json
"""

import contextlib
import importlib.util
import json
import os
import sys
from typing import Any, Dict, List, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

# scripts/simulate.py: a script's own folder is on sys.path when it runs.
import simulate  # pylint: disable=g-import-not-at-top,g-bad-import-order

_HERE = os.path.dirname(os.path.abspath(__file__))



BASELINES = ("tf_default", "tf_packed", "fifo", "priority", "horovod",
             "ddp", "bytescheduler")
SCHEDULERS = BASELINES + ("pace", "pace_rsag")
DEFAULT_WORKERS = (2, 4, 8, 16, 32, 64)
DEFAULT_BANDWIDTHS_GBPS = (1.0, 10.0, 25.0, 100.0)
# The published PACE result (Bao et al., INFOCOM 2020): up to 36% faster
# than the best earlier scheduler on a GPU testbed.
PAPER_SPEEDUP = 1.36
DEFAULT_OUT_DIR = os.path.join(os.path.dirname(_HERE), "benchmarks",
                               "simulation")

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines the script's flags; all optional."""
  flags.DEFINE_list("models", list(simulate.MODELS), "Models to sweep.")
  flags.DEFINE_list("workers", [str(w) for w in DEFAULT_WORKERS],
                    "Worker counts (ring all-reduce), each >= 2.")
  flags.DEFINE_list("bandwidths_gbps",
                    [f"{b:g}" for b in DEFAULT_BANDWIDTHS_GBPS],
                    "Link bandwidths, Gbit/s.")
  flags.DEFINE_float("latency_us", 50.0, "Per-step latency of the ring, "
                     "microseconds.", lower_bound=0.0)
  flags.DEFINE_string("gpu", "v100", "GPU of the FLOPs model; one of "
                      "tf_preempt.profile.GPU_SPECS.")
  flags.DEFINE_string("out_dir", DEFAULT_OUT_DIR, "Where the tables and "
                      "plots go; empty to write nothing.")
  flags.DEFINE_integer("plot_workers", 8, "Workers of the speed-up against "
                       "bandwidth plot.")
  flags.DEFINE_float("plot_bandwidth_gbps", 10.0, "Bandwidth of the "
                     "speed-up against workers plot.")
  flags.DEFINE_bool("json", False, "Print one JSON object instead of the "
                    "tables.")


def _point(stats: Dict[str, Any]) -> Dict[str, Any]:
  """One row of the sweep from `simulate.run`'s result."""
  times = {n: r["iteration_s"] for n, r in stats["schedulers"].items()}
  baselines = [b for b in BASELINES if b in times]
  best = min(baselines, key=lambda b: times[b])
  pace = times["pace"]
  row = {
      "model": stats["model"],
      "workers": stats["workers"],
      "bandwidth_gbps": stats["bandwidth_gbps"],
      "compute_s": stats["compute_s"],
      "iteration_s": times,
      "pace_speedup": {b: times[b] / pace for b in baselines},
      "best_baseline": best,
      "pace_speedup_vs_best": times[best] / pace,
      "pace_plan_seconds": stats["plan_seconds"],
  }
  if "pace_rsag" in times:
    row["rsag_speedup_vs_pace"] = pace / times["pace_rsag"]
  return row


def run_sweep(models: Sequence[str] = simulate.MODELS,
              workers: Sequence[int] = DEFAULT_WORKERS,
              bandwidths_gbps: Sequence[float] = DEFAULT_BANDWIDTHS_GBPS,
              latency_us: float = 50.0,
              gpu: str = "v100",
              schedulers: Sequence[str] = SCHEDULERS,
              log=None) -> Dict[str, Any]:
  """Runs `simulate.run` on the grid models x workers x bandwidths.

  Args:
    models: keys of `simulate.MODELS`.
    workers: worker counts, each >= 2.
    bandwidths_gbps: bandwidths, each > 0.
    latency_us: ring step latency.
    gpu: GPU of the FLOPs model.
    schedulers: must include "pace" and "tf_default".
    log: optional callable taking one progress line.

  Returns:
    {"points": [row per point], "setup": what the numbers assume}.

  Raises:
    ValueError: from `simulate.run`, or without "pace".
  """
  if "pace" not in schedulers:
    raise ValueError("schedulers must include 'pace'.")
  points, setup = [], None
  for model in models:
    for n in workers:
      for bw in bandwidths_gbps:
        stats = simulate.run(model=model, workers=int(n),
                             bandwidth_gbps=float(bw), latency_us=latency_us,
                             gpu=gpu, schedulers=tuple(schedulers))
        points.append(_point(stats))
        if setup is None:
          setup = {k: stats[k] for k in ("gpu", "gpu_description",
                                         "efficiency", "latency_us")}
        if log:
          p = points[-1]
          log(f"{model} n={n} {bw:g} Gbit/s: pace "
              f"{p['iteration_s']['pace'] * 1e3:.1f} ms, "
              f"{p['pace_speedup_vs_best']:.3f}x vs {p['best_baseline']}")
  setup = dict(setup or {}, cost_model="ring all-reduce: alpha = 2(n-1) * "
               "latency, beta = 2(n-1)/n / bandwidth",
               batch_sizes=dict(simulate.DEFAULT_BATCH_SIZES),
               paper_speedup=PAPER_SPEEDUP)
  return {"points": points, "setup": setup}


def format_markdown(result: Dict[str, Any]) -> str:
  """One markdown table per model: speed-ups of pace, per point."""
  setup = result["setup"]
  points = result["points"]
  out = [
      "Per-op times: roofline FLOPs model of the "
      f"{setup.get('gpu_description')} at {setup.get('efficiency')} of peak "
      "(tf_preempt.profile.model_dag; vendor data-sheet peaks). Network: "
      f"{setup['cost_model']}, "
      f"latency {setup.get('latency_us')} us per step. Cells: iteration time "
      "of the baseline / that of pace (> 1: pace is faster). `best` is the "
      "fastest baseline at that point; `rsag` is pace / pace_rsag.",
      ""]
  for model in dict.fromkeys(p["model"] for p in points):
    rows = [p for p in points if p["model"] == model]
    baselines = list(rows[0]["pace_speedup"])
    has_rsag = "rsag_speedup_vs_pace" in rows[0]
    head = (["workers", "Gbit/s", "compute ms", "pace ms"] + baselines +
            ["vs best", "best"] + (["rsag"] if has_rsag else []))
    out += [f"### {model} (batch {setup['batch_sizes'].get(model)}/worker)",
            "", "| " + " | ".join(head) + " |",
            "|" + "---:|" * len(head)]
    for p in rows:
      cells = [str(p["workers"]), f"{p['bandwidth_gbps']:g}",
               f"{p['compute_s'] * 1e3:.1f}",
               f"{p['iteration_s']['pace'] * 1e3:.1f}"]
      cells += [f"{p['pace_speedup'][b]:.2f}" for b in baselines]
      mark = "**" if p["pace_speedup_vs_best"] >= PAPER_SPEEDUP else ""
      cells += [f"{mark}{p['pace_speedup_vs_best']:.3f}{mark}",
                p["best_baseline"]]
      if has_rsag:
        cells.append(f"{p['rsag_speedup_vs_pace']:.3f}")
      out.append("| " + " | ".join(cells) + " |")
    out.append("")
  return "\n".join(out)


def _plot(result: Dict[str, Any], x_key: str, fixed_key: str,
          fixed_value: float, path: str) -> bool:
  """Speed-up of pace over each baseline against `x_key`; False if empty.

  At the grid's value of `fixed_key` nearest to `fixed_value`, so a small
  grid still gets its plots.
  """
  # pylint: disable=g-import-not-at-top
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  # pylint: enable=g-import-not-at-top
  values = {p[fixed_key] for p in result["points"]}
  if not values:
    return False
  fixed_value = min(values, key=lambda v: (abs(v - fixed_value), v))
  points = [p for p in result["points"] if p[fixed_key] == fixed_value]
  models = list(dict.fromkeys(p["model"] for p in points))
  if not models:
    return False
  fig, axes = plt.subplots(1, len(models), figsize=(4.5 * len(models), 3.8),
                           squeeze=False, sharey=True)
  for ax, model in zip(axes[0], models):
    rows = sorted((p for p in points if p["model"] == model),
                  key=lambda p: p[x_key])
    xs = [p[x_key] for p in rows]
    for b in rows[0]["pace_speedup"]:
      ax.plot(xs, [p["pace_speedup"][b] for p in rows], marker="o", label=b)
    ax.plot(xs, [p["pace_speedup_vs_best"] for p in rows], "k--",
            linewidth=2, label="best baseline")
    ax.axhline(PAPER_SPEEDUP, color="grey", linestyle=":",
               label="paper: 1.36")
    ax.set_xscale("log", base=2 if x_key == "workers" else 10)
    ax.set_title(model)
    ax.set_xlabel("workers" if x_key == "workers" else "bandwidth (Gbit/s)")
    ax.grid(True, alpha=0.3)
  axes[0][0].set_ylabel("speed-up of pace (baseline time / pace time)")
  axes[0][-1].legend(fontsize=7, loc="upper right")
  what = (f"{fixed_value:g} workers" if fixed_key == "workers"
          else f"{fixed_value:g} Gbit/s")
  fig.suptitle(f"Simulated speed-up of PACE, ring all-reduce, {what}, "
               f"{result['setup'].get('gpu_description')}", fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return True


def write_outputs(result: Dict[str, Any], out_dir: str,
                  plot_workers: int = 8,
                  plot_bandwidth_gbps: float = 10.0) -> List[str]:
  """Writes sweep.md, sweep.json and the plots; returns the paths."""
  os.makedirs(out_dir, exist_ok=True)
  paths = [os.path.join(out_dir, "sweep.md"),
           os.path.join(out_dir, "sweep.json")]
  with open(paths[0], "w") as f:
    f.write(format_markdown(result))
  with open(paths[1], "w") as f:
    json.dump(result, f, indent=1, sort_keys=True)
    f.write("\n")
  for x_key, fixed_key, value, name in (
      ("bandwidth_gbps", "workers", plot_workers, "speedup_vs_bandwidth.png"),
      ("workers", "bandwidth_gbps", plot_bandwidth_gbps,
       "speedup_vs_workers.png")):
    path = os.path.join(out_dir, name)
    if _plot(result, x_key, fixed_key, value, path):
      paths.append(path)
  return paths


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  try:
    workers = [int(w) for w in FLAGS.workers]
    bandwidths = [float(b) for b in FLAGS.bandwidths_gbps]
  except ValueError as e:
    raise app.UsageError(f"--workers / --bandwidths_gbps: {e}") from e
  unknown = sorted(set(FLAGS.models) - set(simulate.MODELS))
  if unknown:
    raise app.UsageError(f"--models: unknown {unknown}; valid: "
                         f"{', '.join(simulate.MODELS)}.")

  def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

  # Anything a library prints while the models are built goes to stderr:
  # stdout carries the tables or the one JSON object.
  with contextlib.redirect_stdout(sys.stderr):
    result = run_sweep(FLAGS.models, workers, bandwidths,
                       latency_us=FLAGS.latency_us, gpu=FLAGS.gpu, log=log)
    paths = (write_outputs(result, FLAGS.out_dir, FLAGS.plot_workers,
                           FLAGS.plot_bandwidth_gbps)
             if FLAGS.out_dir else [])
  result["written"] = paths
  if FLAGS.json:
    print(json.dumps(result, sort_keys=True))
  else:
    print(format_markdown(result))
    for p in paths:
      print(f"wrote {p}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
