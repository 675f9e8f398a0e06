r"""Profiles each model's training step: per-layer times and early work.

  python scripts/bench_step_profile.py [--models transformer_tiny,vgg_small,
      resnet20] [--batch_sizes 32,5,12] [--repeats 3] [--out DIR]

Runs `tf_preempt.bench.step_profile` once per model, batch and repeat, one
process at a time, pinned to one core as the benchmark's workers are: each
run profiles the model's training step and prints the share of its ops'
time spent in ops that descend from no trainable variable (dropout's random
masks) and each layer's forward and backward time. `DIR/step_profile.json`
keeps every run and, per model, the median early share and the median
share of each layer's forward and backward pass in the layers' time.
`scripts/validate_sim.py` takes both from the newest `*step-profile*`
directory beside the results: the layer shares as the per-op times of the
model's DAG (scaled to the directory's measured compute), the early share
as `ExecutionModel.early_compute` (in an unrolled block TensorFlow runs
that work for every step at the block's start). Prints the shares;
nothing here is asserted.
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
  flags.DEFINE_integer("repeats", 3, "Runs per model.")
  flags.DEFINE_integer("steps", 20, "Steps timed, and as many profiled, "
                       "per run.")
  flags.DEFINE_float("timeout_s", 600, "Per run.")
  flags.DEFINE_string("out", None, "Directory for step_profile.json.")


def summarize(records: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """{model: {"per_worker_batch", "early_share" (median), "shares",
  "layer_shares": {DAG op: median share of the layers' time}}}.

  Raises:
    ValueError: if a model was measured at two batch sizes.
  """
  by_model: Dict[str, List[Dict[str, Any]]] = {}
  for r in records:
    by_model.setdefault(r["model"], []).append(r)
  out = {}
  for model, runs in by_model.items():
    batches = {r["per_worker_batch"] for r in runs}
    if len(batches) != 1:
      raise ValueError(f"{model}: measured at batch sizes {sorted(batches)};"
                       " one per model")
    shares = [r["early_share"] for r in runs]
    ops = sorted({op for r in runs for op in r.get("layer_ms", {})})
    layer_shares = {op: statistics.median(
        r["layer_ms"].get(op, 0.0) / sum(r["layer_ms"].values())
        for r in runs) for op in ops}
    out[model] = {"per_worker_batch": batches.pop(),
                  "early_share": statistics.median(shares),
                  "shares": shares, "layer_shares": layer_shares}
  return out


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  pairs = runner.flagged_model_batches()
  records = []
  for _ in range(f.repeats):
    for model, batch in pairs:
      command = [sys.executable, "-m", "tf_preempt.bench.step_profile",
                 f"--model={model}", f"--batch_size={batch}",
                 f"--steps={f.steps}"]
      (record,) = launch.launch_for_stats(
          command, 1, timeout_s=f.timeout_s,
          **dict(launch.MEASUREMENT_WORKER, inter_op_threads=1))
      print(f"{model} batch {batch}: early share "
            f"{record['early_share']:.3f} ({record['early_ms']:.2f} of "
            f"{record['ops_ms']:.2f} profiled ms; step "
            f"{record['step_ms']:.1f} ms unprofiled)", flush=True)
      records.append(record)
  summary = summarize(records)
  for model, s in summary.items():
    print(f"{model}: median early share {s['early_share']:.3f} of "
          f"{len(s['shares'])} runs")
  if f.out:
    path = runner.write_probe(f.out, "step_profile.json", summary, records)
    print(f"wrote {path}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
