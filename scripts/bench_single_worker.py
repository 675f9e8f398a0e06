r"""Single-worker overhead: pace against stock MirroredStrategy, 1 worker.

  .venv/bin/python scripts/bench_single_worker.py --model vgg_small \
      --batch_size 48 --steps 32 --warmup_steps 16 --repeats 5 \
      --out benchmarks/results/DATE-single-worker-vgg_small

With one worker there is no collective to hide, so whatever pace adds to a
step (the wrapped strategy, the plan, the scheduler's bookkeeping) is pure
overhead. Each row is a fresh `scripts/train.py` process launched like a
benchmark worker (`tf_preempt.launch`, one pinned core, one intra-op
thread), Keras `fit` on synthetic data, K=1:

- `stock`: `--strategy=stock_mirrored`, tf.distribute.MirroredStrategy
  unchanged (the reference);
- `pace`: `--strategy=mirrored --scheduler=pace`
  (PreemptiveMirroredStrategy);
- `tf_default`: `--strategy=mirrored --scheduler=tf_default`.

The rows run interleaved (A B C, then C B A, ...) so that drift on a shared
machine hits all alike; with --max_repeats, whole repeats are added until
every row's median is within --settle_tolerance of its fastest run, as in
scripts/bench.py. Prints the medians and the ratios to stock and
writes DIR/results.json and DIR/results.md. Nothing is asserted.
"""

import json
import os
import shlex
import statistics
import sys

from absl import app
from absl import flags

from tf_preempt import launch
from tf_preempt.bench import runner

_SCRIPTS = os.path.dirname(os.path.abspath(__file__))
ROWS = {
    "stock": ["--strategy=stock_mirrored"],
    "pace": ["--strategy=mirrored", "--scheduler=pace"],
    "tf_default": ["--strategy=mirrored", "--scheduler=tf_default"],
}
# The goal: pace within 2% of stock with one worker.
GOAL = 1.02


def define_flags() -> None:
  flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 48, "Batch size of the one worker.")
  flags.DEFINE_integer("steps", 32, "Training steps per run.")
  flags.DEFINE_integer("warmup_steps", 16, "Steps per run not timed.")
  runner.define_repeat_flags(5, "every row", "every row's")
  flags.DEFINE_float("timeout_s", 300.0, "Time limit of each run.")
  flags.DEFINE_string("out", None, "Output directory (optional).")


def _run_once(row: str, args) -> float:
  command = [sys.executable, os.path.join(_SCRIPTS, "train.py"),
             f"--model={args.model}", f"--batch_size={args.batch_size}",
             f"--steps={args.steps}", f"--warmup_blocks={args.warmup_steps}",
             "--unroll=1"] + ROWS[row]
  [stats] = launch.launch_for_stats(command, 1, timeout_s=args.timeout_s,
                                    **launch.MEASUREMENT_WORKER)
  return stats["median_step_s"]


def measure(args, log=print):
  """Runs every row `args.repeats` times, interleaved, and more up to
  `args.max_repeats` until every row has settled.

  Returns:
    The results.json dict: per row its step times and median, the ratio of
    each median to stock's, the repeats run, the rows still unsettled, and
    the command and machine.

  Raises:
    ValueError: on repeats that `runner.resolved_max_repeats` refuses.
  """
  max_repeats = runner.resolved_max_repeats(args.repeats, args.max_repeats)
  loads = []

  def run_once(setting, repeat):
    loads.append(os.getloadavg()[0])
    step_s = _run_once(setting.name, args)
    log(f"{runner.repeat_tag(repeat, args.repeats, max_repeats)} "
        f"{setting.name}: {step_s * 1e3:.2f} ms/step (load before "
        f"{loads[-1]:.2f})")
    return step_s

  runs, done, left = runner.repeat_until_settled(
      run_once, [runner.Setting(row) for row in ROWS], args.repeats,
      max_repeats, args.settle_tolerance, log)
  stock = statistics.median(runs["stock"])
  rows = {}
  for row, step_s in runs.items():
    median = statistics.median(step_s)
    rows[row] = {"flags": ROWS[row], "step_s": step_s, "median_s": median,
                 "ratio_to_stock": median / stock}
  return {"rows": rows, "goal_ratio_to_stock": GOAL, "repeats": done,
          "unsettled": left,
          "command": " ".join(shlex.quote(a) for a in sys.argv),
          "machine": f"{runner.machine()}; load average before each run "
                     f"{min(loads):.2f}-{max(loads):.2f}; 1 worker pinned "
                     f"to one core, 1 intra-op thread, 1 replica",
          "model": args.model, "batch_size": args.batch_size,
          "steps": args.steps, "warmup_steps": args.warmup_steps}


def markdown(results) -> str:
  """The table of `results` (step time per row, ratio to stock)."""
  lines = [f"Command: `{results['command']}`", "",
           f"Machine: {results['machine']}", "",
           "| row | flags | runs (ms) | median (ms) | step time / stock's |",
           "|---|---|---|---|---|"]
  for row, r in results["rows"].items():
    runs = ", ".join(f"{t * 1e3:.2f}" for t in r["step_s"])
    lines.append(f"| {row} | `{' '.join(r['flags'])}` | {runs} | "
                 f"{r['median_s'] * 1e3:.2f} | {r['ratio_to_stock']:.4f} |")
  pace = results["rows"]["pace"]["ratio_to_stock"]
  met = "met" if pace <= results["goal_ratio_to_stock"] else "NOT met"
  lines += ["", f"pace / stock = {pace:.4f} (goal <= "
            f"{results['goal_ratio_to_stock']:.2f}: {met})."]
  if results.get("unsettled"):
    lines += ["", f"Not settled after {results['repeats']} repeat(s) "
              "(median above the fastest run by more than the tolerance): "
              f"{', '.join(results['unsettled'])}."]
  return "\n".join(lines) + "\n"


def main(argv):
  del argv
  try:
    results = measure(flags.FLAGS)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  text = markdown(results)
  print(text)
  if flags.FLAGS.out:
    os.makedirs(flags.FLAGS.out, exist_ok=True)
    with open(os.path.join(flags.FLAGS.out, "results.json"), "w") as f:
      json.dump(results, f, indent=1)
    with open(os.path.join(flags.FLAGS.out, "results.md"), "w") as f:
      f.write(text)


if __name__ == "__main__":
  define_flags()
  app.run(main)
