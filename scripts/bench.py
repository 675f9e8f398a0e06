r"""Benchmarks the schedulers side by side on N local workers.

  .venv/bin/python scripts/bench.py --model vgg_small --workers 2 \
      --bandwidth 200mbit --batch_size 48 --steps 24 --repeats 2 --unroll 2 \
      --out benchmarks/results/DATE-vgg_small-200mbit   # all 7 schedulers

Runs `scripts/train.py` through `scripts/demo.py`'s `train_once` for every
baseline at K=1 and at --unroll, and pace at --unroll (rows `NAME@K`),
interleaved (A B C ... then reversed); tf_packed at the best pack size and
bytescheduler at the best credit of a short pre-pass; plus compute alone and
communication alone in the same rotation. Writes DIR/results.json,
DIR/results.md, DIR/details.json (every run, the load before it),
DIR/timeline.png and DIR/traces/ (Chrome traces, one per row and worker).
The work is in `tf_preempt.bench`; see benchmarks/README.md.
"""

import os
import shlex
import sys
from typing import Sequence

from absl import app
from absl import flags

import demo  # scripts/demo.py: one N-worker training run (train_once).

from tf_preempt import heap
from tf_preempt.bench import runner

_SCRIPTS = os.path.dirname(os.path.abspath(__file__))


def define_flags() -> None:
  flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
  flags.DEFINE_integer("workers", 2, "Worker processes.")
  flags.DEFINE_string("bandwidth", "200mbit",
                      "Emulated link rate (tc tbf); empty for loopback.")
  flags.DEFINE_string("latency", None, "Not supported here (no netem).")
  flags.DEFINE_integer("steps", 24, "Training steps per run.")
  flags.DEFINE_integer("warmup_steps", 8, "Steps per run not timed.")
  flags.DEFINE_list("schedulers", list(runner.SCHEDULERS),
                    "Schedulers to compare (must include tf_default).")
  runner.define_repeat_flags(
      2, "every row", "every row's, reference's and speed reading's")
  flags.DEFINE_string("out", None, "Output directory.")
  flags.DEFINE_integer("unroll", 2, "K of pace (and of the baselines' "
                       "second row).")
  flags.DEFINE_integer("batch_size", 48, "Global batch size.")
  flags.DEFINE_float("timeout_s", 300.0, "Time limit of each run.")
  flags.DEFINE_integer("pace_profile_steps", 0,
                       "> 0: the pace row profiles this many steps and "
                       "re-plans from the measurements (--profile_steps of "
                       "scripts/train.py); 0: plan from the gradient sizes.")
  flags.DEFINE_bool("pace_sparse_as_dense", False,
                    "The pace row reduces IndexedSlices (embedding) "
                    "gradients densely in its plan (--sparse_as_dense of "
                    "scripts/train.py); the baselines keep stock's "
                    "all-gather, as their projects' defaults do.")
  heap.define_flag("Every process of the benchmark (rows and references): ")


def _check(f) -> None:
  if f.latency:
    raise app.UsageError(
        "--latency cannot be emulated on this machine: its kernel has no "
        "netem (tc qdisc netem), only tbf bandwidth shaping; use "
        "--bandwidth only")
  if not f.out:
    raise app.UsageError("--out is required")
  bad = sorted(set(f.schedulers) - set(runner.SCHEDULERS))
  if bad or "tf_default" not in f.schedulers:
    raise app.UsageError(f"--schedulers must include tf_default and name "
                         f"only {', '.join(runner.SCHEDULERS)}; got {bad}")
  if f.unroll < 1 or f.steps % f.unroll or f.warmup_steps >= f.steps:
    raise app.UsageError("--unroll must divide --steps, and --warmup_steps "
                         "be fewer than --steps")
  if f.pace_profile_steps and (f.pace_profile_steps % f.unroll or
                               f.warmup_steps < f.pace_profile_steps +
                               f.unroll):
    raise app.UsageError("--pace_profile_steps must be a multiple of "
                         "--unroll, and --warmup_steps cover it and one "
                         "more block (the re-traced one)")
  if f.workers < 1 or f.batch_size % f.workers or f.repeats < 1:
    raise app.UsageError("--batch_size must be a multiple of --workers; "
                         "--repeats positive")
  if f.max_repeats and f.max_repeats < f.repeats:
    raise app.UsageError(f"--max_repeats ({f.max_repeats}) must be 0 or at "
                         f"least --repeats ({f.repeats})")
  if f.max_repeats > f.repeats == 1:
    raise app.UsageError("--max_repeats needs --repeats of 2 or more: one "
                         "run is always settled")
  if f.settle_tolerance <= 0:
    raise app.UsageError("--settle_tolerance must be positive")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  _check(f)
  command = " ".join(shlex.quote(a)
                     for a in ["scripts/bench.py"] + sys.argv[1:])
  try:
    runner.run(demo.train_once, model=f.model, num_workers=f.workers,
               bandwidth=f.bandwidth or None, steps=f.steps,
               warmup_steps=f.warmup_steps, schedulers=f.schedulers,
               repeats=f.repeats, out_dir=f.out, unroll=f.unroll,
               batch_size=f.batch_size, command=command,
               train_script=os.path.join(_SCRIPTS, "train.py"),
               timeout_s=f.timeout_s,
               pace_profile_steps=f.pace_profile_steps,
               pace_sparse_as_dense=f.pace_sparse_as_dense,
               heap_mode=f.heap, max_repeats=f.max_repeats or None,
               settle_tolerance=f.settle_tolerance,
               log=lambda m: print(m, flush=True))
  except RuntimeError as e:
    print(f"bench: {e}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  define_flags()
  app.run(main)
