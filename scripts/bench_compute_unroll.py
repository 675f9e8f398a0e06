r"""Compute alone at K = 1, 2, 4: does a step cost less in a longer block?

  .venv/bin/python scripts/bench_compute_unroll.py --model vgg_small \
      --batch_size 10 --steps 24 --warmup_steps 8 --repeats 5 \
      --out benchmarks/results/DATE-compute-unroll-vgg_small

scripts/bench.py measures the compute of a step once, at K=1 (its
reference "compute alone": `scripts/train.py --strategy=one_device` on
every worker at once, each pinned to its core, no collective), and the
simulation (scripts/validate_sim.py) runs every step of a K-step block at
that compute. If part of it were work done once per `tf.function` call
(the call, the loop around it), a step of a K=2 block would cost less
than a K=1 step. This runs the same reference at each K of `--unrolls`,
interleaved (A B C, then C B A, ...; with --max_repeats, whole repeats are
added until every K's median is within --settle_tolerance of its fastest
run, as scripts/bench.py's), and prints each K's median step time and its
ratio to the first K of --unrolls (K=1 by default); with --out, DIR/results.json and DIR/results.md. Nothing is
asserted.
"""

import json
import os
import shlex
import statistics
import sys
from typing import Dict, List, Sequence

from absl import app
from absl import flags

from tf_preempt import heap
from tf_preempt.bench import runner

_SCRIPTS = os.path.dirname(os.path.abspath(__file__))
FLAGS = flags.FLAGS


def define_flags() -> None:
  flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 10, "Global batch size of the rows "
                       "(each worker trains batch_size / workers).")
  flags.DEFINE_integer("workers", 2, "Worker processes, one core each.")
  flags.DEFINE_integer("steps", 24, "Steps per run (a multiple of every K).")
  flags.DEFINE_integer("warmup_steps", 8,
                       "Steps not timed (a multiple of every K).")
  flags.DEFINE_list("unrolls", ["1", "2", "4"], "Values of K.")
  runner.define_repeat_flags(5, "every K", "every K's")
  flags.DEFINE_float("timeout_s", 300.0, "Time limit of each run.")
  flags.DEFINE_string("out", None, "Output directory (optional).")
  heap.define_flag("Every run: ")


def label(unroll: int) -> str:
  """The name of a K's setting.

  Args:
    unroll: the K.

  Returns:
    "compute alone, K=<unroll>".
  """
  return f"compute alone, K={unroll}"


def run(model: str, batch_size: int, workers: int, steps: int,
        warmup_steps: int, unrolls: Sequence[int], repeats: int,
        max_repeats: int = 0, settle_tolerance: float = runner.SETTLE_TOLERANCE,
        heap_mode: str = heap.DEFAULT_MODE, timeout_s: float = 300.0,
        measure=runner.compute_alone, log=print) -> Dict[str, object]:
  """Runs every K; returns the summary that results.json holds.

  Args:
    model, batch_size, workers, steps, warmup_steps: as the flags.
    unrolls: the values of K; the first is the reference of the ratios.
    repeats, max_repeats, settle_tolerance: as the flags.
    heap_mode: the heap mode of every run.
    timeout_s: time limit of each run.
    measure: `runner.compute_alone` (a stand-in in tests).
    log: prints a line.

  Returns:
    {"runs": {label: [seconds per step]}, "medians": {label: seconds},
    "ratios": {label: median over the first K's}, "repeats": int,
    "unsettled": [label], "load_before": {label: [the 1-minute load
    average before each run]}}.

  Raises:
    ValueError: on repeats that `runner.resolved_max_repeats` refuses, or
      steps that are not multiples of every K.
  """
  max_repeats = runner.resolved_max_repeats(repeats, max_repeats)
  if len(set(unrolls)) != len(unrolls):
    raise ValueError(f"--unrolls {list(unrolls)} names a K twice")
  bad = [k for k in unrolls if k < 1 or steps % k or warmup_steps % k]
  if bad:
    raise ValueError(f"--steps ({steps}) and --warmup_steps "
                     f"({warmup_steps}) must be multiples of every K; "
                     f"not of {bad}")
  settings = [runner.Setting(label(k), "", k) for k in unrolls]
  train_script = os.path.join(_SCRIPTS, "train.py")

  loads: Dict[str, List[float]] = {}

  def run_once(setting: runner.Setting, repeat: int) -> float:
    # The machine is shared: what else ran is read off the load before.
    load = os.getloadavg()[0]
    loads.setdefault(setting.name, []).append(load)
    log(f"{runner.repeat_tag(repeat, repeats, max_repeats)} "
        f"{setting.name} (load average {load:.2f}) ...")
    seconds, _ = measure(train_script, model, batch_size, steps,
                         warmup_steps, workers, unroll=setting.unroll,
                         heap_args=(f"--heap={heap_mode}",),
                         timeout_s=timeout_s)
    return seconds

  runs, done, left = runner.repeat_until_settled(
      run_once, settings, repeats, max_repeats, settle_tolerance, log=log)
  medians = {name: statistics.median(v) for name, v in runs.items()}
  first = medians[settings[0].name]
  return {"runs": runs, "medians": medians,
          "ratios": {name: m / first for name, m in medians.items()},
          "repeats": done, "unsettled": left, "load_before": loads}


def table(summary: Dict[str, object]) -> List[str]:
  """The summary as a Markdown table.

  Args:
    summary: what `run` returns.

  Returns:
    The table's lines: each K's median, ratio to the first K and runs.
  """
  lines = ["| setting | median ms/step | over the first K | runs ms |",
           "|---|---:|---:|---|"]
  for name, median in summary["medians"].items():
    runs = ", ".join(f"{x * 1e3:.2f}" for x in summary["runs"][name])
    lines.append(f"| {name} | {median * 1e3:.2f} | "
                 f"{summary['ratios'][name]:.3f} | {runs} |")
  return lines


def main(argv):
  del argv
  try:
    unrolls = [int(k) for k in FLAGS.unrolls]
    summary = run(FLAGS.model, FLAGS.batch_size, FLAGS.workers, FLAGS.steps,
                  FLAGS.warmup_steps, unrolls, FLAGS.repeats,
                  FLAGS.max_repeats, FLAGS.settle_tolerance, FLAGS.heap,
                  FLAGS.timeout_s)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  left = summary["unsettled"]
  head = (f"{FLAGS.model}, per-worker batch "
          f"{FLAGS.batch_size // FLAGS.workers}, {FLAGS.workers} workers at "
          f"once, median over {summary['repeats']} repeat(s)"
          + (f"; not settled: {', '.join(left)}" if left else ""))
  lines = [head, ""] + table(summary)
  print("\n".join(lines))
  if FLAGS.out:
    os.makedirs(FLAGS.out, exist_ok=True)
    command = shlex.join(["scripts/bench_compute_unroll.py", *sys.argv[1:]])
    with open(os.path.join(FLAGS.out, "results.json"), "w") as f:
      json.dump({"command": command, "machine": runner.machine(),
                 **summary}, f, indent=1)
    with open(os.path.join(FLAGS.out, "results.md"), "w") as f:
      f.write("\n".join([f"`{command}`", "", runner.machine(), ""] + lines)
              + "\n")


if __name__ == "__main__":
  define_flags()
  app.run(main)
