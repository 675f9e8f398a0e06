r"""Measures how much later a K = 2 block's first step reaches its loss.

  python scripts/bench_block_head.py [--models transformer_tiny,vgg_small,
      resnet20] [--batch_sizes 32,5,12] [--repeats 5] [--out DIR]

Runs `tf_preempt.bench.block_head` (the compute alone of scripts/bench.py,
profiled) at K = 1 and K = 2 per model and repeat, one process at a time,
pinned to one core with the benchmark workers' threading
(`tf_preempt.launch.MEASUREMENT_WORKER`), the two K's in alternating order.
A block's head runs from its start to its first step's loss. Per repeat
the share is the K = 2 run's median head over half its block less the
K = 1 run's median head over its block: how much of a step's time the
later step's work takes at the block's start, before the first step's
forward pass is done (`ExecutionModel.early_compute`). Each run's heads
are taken over its own blocks because the two runs are two processes a
minute apart on a shared machine whose speed drifts between them: taken
in milliseconds over the K = 1 block (the "delays_ms" kept beside), the
15 repeats of `benchmarks/results/2026-12-07-block-head-transformer_tiny`
spread 2.4 times as widely (4.5 times between their quartiles). `DIR/block_head.json` keeps
every run, the machine, and per model the median delay share.
`scripts/validate_sim.py` takes it from the `*block-head*` directory
beside the results measured on the directory's machine at its batch per
worker (the most repeats of the model, then the newest) where no step
phases of real runs are (`scripts/bench_step_phases.py`, taken first),
and the step profile's early share (`scripts/bench_step_profile.py`)
where neither is (`probe_inputs.early_share`). The K = 1 run is stock
Keras's train function and the K = 2 run the unrolled one, as in the
benchmark's rows, so the delay holds whatever makes the unrolled
function's first step later, not only the later step's early work.
Prints the delays; nothing here is asserted.
"""

import statistics
import sys
from typing import Any, Dict, List, Sequence

from absl import app
from absl import flags

from tf_preempt import launch
from tf_preempt.bench import runner


def define_flags() -> None:
  runner.define_model_batch_flags()
  flags.DEFINE_integer("repeats", 5, "Pairs of runs (K = 1, K = 2) per "
                       "model.")
  flags.DEFINE_integer("blocks", 8, "Blocks profiled per run.")
  flags.DEFINE_float("timeout_s", 600, "Per run.")
  flags.DEFINE_string("out", None, "Directory for block_head.json.")


def head_fraction(record: Dict[str, Any]) -> float:
  """The median over a `block_head` record's blocks of head over block."""
  return statistics.median(h / b for h, b in zip(record["heads_ms"],
                                                 record["blocks_ms"]))


def summarize(records: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """Per model, the median delay share of its repeats.

  Args:
    records: `block_head` records, each with a "repeat" (an index) added;
      per model and repeat one at K = 1 and one at K = 2.

  Returns:
    {model: {"per_worker_batch", "delay_share" (the median of "shares"),
    "shares" (per repeat, in order: 2 `head_fraction` of the K = 2 run
    less that of the K = 1 run), "delays_ms" (per repeat: the K = 2 run's
    median head less the K = 1 run's, in ms)}}.

  Raises:
    ValueError: if a model was measured at two batch sizes, or a repeat
      lacks K = 1 or K = 2 (`runner.paired_repeats`).
  """
  out = {}
  for model, (settings, repeats) in runner.paired_repeats(records).items():
    shares, delays = [], []
    for _, runs in repeats:
      delays.append(runs[2]["head_ms"] - runs[1]["head_ms"])
      shares.append(2 * head_fraction(runs[2]) - head_fraction(runs[1]))
    out[model] = {"per_worker_batch": settings["per_worker_batch"],
                  "delay_share": statistics.median(shares),
                  "shares": shares, "delays_ms": delays}
  return out


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  pairs = runner.flagged_model_batches()
  records: List[Dict[str, Any]] = []
  for repeat, model, batch, unroll in runner.paired_run_order(f.repeats,
                                                              pairs):
    command = [sys.executable, "-m", "tf_preempt.bench.block_head",
               f"--model={model}", f"--batch_size={batch}",
               f"--unroll={unroll}", f"--blocks={f.blocks}"]
    (record,) = launch.launch_for_stats(
        command, 1, timeout_s=f.timeout_s, **launch.MEASUREMENT_WORKER)
    record["repeat"] = repeat
    print(f"{model} batch {batch} K={unroll}: head "
          f"{record['head_ms']:.2f} ms of a {record['block_ms']:.2f} ms "
          "block (profiled medians)", flush=True)
    records.append(record)
  summary = summarize(records)
  for model, s in summary.items():
    print(f"{model}: K = 2's head longer by "
          f"{statistics.median(s['delays_ms']):.2f} ms, median share "
          f"{s['delay_share']:.3f} of a step, over "
          f"{len(s['shares'])} repeats")
  if f.out:
    path = runner.write_probe(f.out, "block_head.json", summary, records)
    print(f"wrote {path}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
