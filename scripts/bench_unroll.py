r"""Step time of unrolled K = 1, 2, 4, 8 against stock fit, 2-worker loopback.

  .venv/bin/python scripts/bench_unroll.py [--model vgg_small] [--rounds 2]

Runs `scripts/train.py` on two local workers (plain loopback, one core each,
through `scripts/demo.py`'s `train_once`) for:

- stock fit: `--scheduler=tf_default --unroll=1` (stock TensorFlow's
  collectives, one step per `tf.function`, which is all stock Keras can do
  under a multi-worker strategy);
- `--scheduler=pace --unroll=K` for K in `--unrolls`;
- once more `pace` at the largest K with `--profile_steps`, to report what
  the profile-and-re-plan phase costs.

Settings run in `--rounds` rounds in alternating order (the machine is
shared), and with `--max_rounds` more whole rounds until every setting's
median is within `--settle_tolerance` of its fastest run (as
scripts/bench.py's --max_repeats); each setting's figure is the median over
its runs of each run's median step time (the slower worker's). Prints
numbers only.
"""

import statistics
import sys
from typing import Sequence

from absl import app
from absl import flags

import demo  # scripts/demo.py: one 2-worker training run.

from tf_preempt.bench import runner

FLAGS = flags.FLAGS


def define_flags() -> None:
  flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 10, "Global batch size.")
  flags.DEFINE_integer("steps", 64, "Steps per run (divisible by every K).")
  flags.DEFINE_integer("warmup_steps", 16, "Steps not timed.")
  flags.DEFINE_list("unrolls", ["1", "2", "4", "8"], "Values of K for pace.")
  flags.DEFINE_integer("rounds", 2, "Runs of each setting (at least).")
  flags.DEFINE_integer("max_rounds", 0,
                       "> --rounds (>= 2): after --rounds, whole rounds are "
                       "added until every setting's median is within "
                       "--settle_tolerance of its fastest run, up to this "
                       "many; 0: exactly --rounds.")
  flags.DEFINE_float("settle_tolerance", runner.SETTLE_TOLERANCE,
                     "See --max_rounds (a fraction of the fastest run).")
  flags.DEFINE_integer("profile_steps", 8, "Steps before re-planning in the "
                       "profiling run (0: skip it).")


def run(model, batch_size, steps, warmup_steps, unrolls: Sequence[int],
        rounds, profile_steps, out=sys.stdout, max_rounds=0,
        settle_tolerance=runner.SETTLE_TOLERANCE):
  """Runs every setting; prints and returns {label: median step seconds}.

  Raises:
    ValueError: on rounds that `runner.resolved_max_repeats` refuses.
  """
  max_rounds = runner.resolved_max_repeats(rounds, max_rounds)
  common = dict(model=model, batch_size=batch_size, steps=steps,
                warmup_steps=warmup_steps, num_workers=2, link=None,
                timeout_s=300.0)
  settings = [runner.Setting("stock fit (tf_default, K=1)", "tf_default")]
  settings += [runner.Setting(f"pace, K={k}", "pace", k) for k in unrolls]
  if profile_steps:
    settings.append(runner.Setting(
        f"pace, K={max(unrolls)}, re-planned after {profile_steps} steps",
        "pace", max(unrolls), profile_steps=profile_steps))
  profiles = {}

  def run_once(setting, round_):
    print(f"{runner.repeat_tag(round_, rounds, max_rounds)} {setting.name} "
          "...", file=out, flush=True)
    r = demo.train_once(setting.scheduler, setting.unroll,
                        profile_steps=setting.profile_steps, **common)
    if r.get("profile"):
      profiles[setting.name] = r["profile"]
    return r["median_step_s"]

  runs, done, left = runner.repeat_until_settled(
      run_once, settings, rounds, max_rounds, settle_tolerance,
      log=lambda line: print(line, file=out, flush=True))
  medians = {label: statistics.median(v) for label, v in runs.items()}
  stock = medians[settings[0].name]
  unsettled = f"; not settled: {', '.join(left)}" if left else ""
  print(f"\n{model}, global batch {batch_size}, 2 workers on loopback, "
        f"median over {done} run(s){unsettled}:", file=out)
  for label, median in medians.items():
    each = ", ".join(f"{x * 1e3:.1f}" for x in runs[label])
    print(f"  {label:<40} {median * 1e3:8.1f} ms/step  "
          f"{stock / median:5.2f}x vs stock fit   runs: {each} ms", file=out)
  for label, profile in profiles.items():
    summary = profile.get("summary") if isinstance(profile, dict) else profile
    print(f"  profiling ({label}): {summary}", file=out)
  return medians


def main(argv):
  del argv
  try:
    run(FLAGS.model, FLAGS.batch_size, FLAGS.steps, FLAGS.warmup_steps,
        [int(k) for k in FLAGS.unrolls], FLAGS.rounds, FLAGS.profile_steps,
        max_rounds=FLAGS.max_rounds, settle_tolerance=FLAGS.settle_tolerance)
  except ValueError as e:
    raise app.UsageError(str(e)) from e


if __name__ == "__main__":
  define_flags()
  app.run(main)
