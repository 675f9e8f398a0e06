r"""Measures, in real two-worker runs, how much shorter an unrolled block's
later step is than a step of its own.

  python scripts/bench_step_phases.py [--models transformer_tiny]
      [--batch_sizes 32] [--repeats 5] [--out DIR]

Per model and repeat, scripts/train.py runs as scripts/bench.py's rows do
(`demo.train_once`: --workers processes on one core each, the emulated
--bandwidth link, --heap, the stock --scheduler's one collective), once
at K = 1 and once at K = 2 (alternating which goes first), with
TensorFlow's profiler on worker 0 over --blocks blocks after the
warm-up (`--tf_profiler_dir`). Its profile gives each block's
phases (`tf_preempt.bench.step_phases`): the K = 1 block's head (its
start to its loss: the whole forward pass, start-up included) and compute
(to the backward pass's end), and the K = 2 block's later forward (from
the first step's update of the first layer to the second step's loss:
what of the second step's forward pass waited for the update). Per repeat

  early share = (K = 1 head - K = 2 later forward) / K = 1 compute,

medians over each run's blocks: the share of a step's time that the
block's second step did not wait for (`ExecutionModel.early_compute`:
work that reads no updated weight, which the executor ran earlier), in
the runs' own threading and contention, unlike the one-process block
head (`scripts/bench_block_head.py`). `DIR/step_phases.json` keeps every
run, the machine, and per model the median share (`DIR/runs.jsonl` each
run as it ends, so a failure later loses none); `scripts/validate_sim.py`
prefers it, of the directory's machine, batch per worker, heap mode,
link and worker count, over a block head. The runs' "step_ms" include the
profiler's start and stop (in timed blocks): not a benchmark's step time.
Prints the phases; nothing here is asserted.
"""

import json
import os
import statistics
import tempfile
from typing import Any, Dict, List, Sequence

from absl import app
from absl import flags

import demo  # scripts/demo.py: one N-worker training run (train_once).

from tf_preempt import heap
from tf_preempt.bench import runner
from tf_preempt.bench import step_phases
from tf_preempt.bench import step_profile


def define_flags() -> None:
  runner.define_model_batch_flags()
  flags.DEFINE_integer("repeats", 5, "Pairs of runs (K = 1, K = 2) per "
                       "model.")
  flags.DEFINE_integer("workers", 2, "Worker processes of each run.")
  flags.DEFINE_string("bandwidth", "2gbit", "Emulated link rate; empty: "
                      "loopback.")
  flags.DEFINE_string("scheduler", "tf_default", "The runs' scheduler: one "
                      "that updates every variable after one collective, "
                      "so that no layer of the second step waits for a "
                      "later reduction.")
  flags.DEFINE_integer("warmup_steps", 16, "Steps before the profiled "
                       "blocks.")
  flags.DEFINE_integer("blocks", 8, "Blocks profiled per run.")
  flags.DEFINE_enum("heap", "tensorflow", heap.HEAP_MODES,
                    "--heap of the runs (the benchmark directory's).")
  flags.DEFINE_float("timeout_s", 600, "Per run.")
  flags.DEFINE_string("out", None, "Directory for step_phases.json.")


# Runs of one setting before the probe gives up (see `profiled_run`).
ATTEMPTS = 3
# What a run's record says it ran with (a model's runs must agree).
SETTINGS = ("model", "per_worker_batch", "scheduler", "workers",
            "bandwidth", "heap")


def run_record(phases: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
  """A run's phases, flattened over its blocks.

  Args:
    phases: `step_phases.block_phases` of the run's profile.

  Returns:
    {"heads_ms", "compute_ms" (the blocks that have one),
    "later_forward_ms" (every later step of every block), "blocks_ms"}.
  """
  return {"heads_ms": [p["head_ms"] for p in phases],
          "compute_ms": [p["compute_ms"] for p in phases
                         if p["compute_ms"] is not None],
          "later_forward_ms": [v for p in phases
                               for v in p["later_forward_ms"]],
          "blocks_ms": [p["block_ms"] for p in phases]}


def summarize(records: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """Per model, the median early share of its repeats.

  Args:
    records: `run_record`s with the run's settings (`SETTINGS`), "unroll"
      and "repeat" added; per model and repeat one at K = 1 and one at
      K = 2.

  Returns:
    {model: {the settings but "model", "early_share" (the median of
    "shares"), "shares" (per repeat: the module doc's share), "heads_ms",
    "later_forward_ms", "compute_ms" (per repeat, the runs' medians)}}.

  Raises:
    ValueError: if a model was measured in two settings (e.g. batch
      sizes), a repeat lacks K = 1 or K = 2, or a run has none of the
      phases it needs.
  """
  out = {}
  for model, (settings, repeats) in runner.paired_repeats(
      records, SETTINGS[1:]).items():
    summary: Dict[str, Any] = dict(settings, shares=[], heads_ms=[],
                                   later_forward_ms=[], compute_ms=[])
    for repeat, runs in repeats:
      needed = ((runs[1], "heads_ms"), (runs[1], "compute_ms"),
                (runs[2], "later_forward_ms"))
      if not all(run[key] for run, key in needed):
        raise ValueError(f"{model}, repeat {repeat}: a run has no "
                         "profiled head, compute or later forward")
      head = statistics.median(runs[1]["heads_ms"])
      compute = statistics.median(runs[1]["compute_ms"])
      later = statistics.median(runs[2]["later_forward_ms"])
      summary["shares"].append((head - later) / compute)
      summary["heads_ms"].append(head)
      summary["compute_ms"].append(compute)
      summary["later_forward_ms"].append(later)
    summary["early_share"] = statistics.median(summary["shares"])
    out[model] = summary
  return out


def profiled_run(model: str, per_worker_batch: int, unroll: int,
                 flag_values, attempts: int = ATTEMPTS) -> Dict[str, Any]:
  """One profiled run of the benchmark's kind, run again if a worker fails.

  TensorFlow's profiler crashed a worker as it stopped ("double free or
  corruption", SIGSEGV) in 9 of 52 runs here while every worker was
  profiled (none of 23 with worker 0 alone, as now): a failed run is run
  again, up to `attempts` runs in all.

  Args:
    model: a model of the registry.
    per_worker_batch: its batch on one worker.
    unroll: the blocks' steps (K).
    flag_values: the parsed flags (--workers, --bandwidth, --scheduler,
      --warmup_steps, --blocks, --heap, --timeout_s).
    attempts: runs at most.

  Returns:
    Its `run_record` with the run's settings (`SETTINGS`), "unroll",
    "step_ms" (the run's median step, profiled blocks included) and
    "failed_runs" (the last log lines of each failed run).

  Raises:
    RuntimeError: if all `attempts` runs fail.
  """
  f = flag_values
  warmup_blocks = -(-f.warmup_steps // unroll)  # as demo.train_once
  # One block more than profiled: the profiler stops as it begins.
  steps = (warmup_blocks + f.blocks + 1) * unroll
  failures = []
  for _ in range(attempts):
    with tempfile.TemporaryDirectory() as log_dir:
      try:
        result = demo.train_once(
            f.scheduler, unroll, model=model,
            batch_size=per_worker_batch * f.workers, steps=steps,
            warmup_steps=f.warmup_steps, num_workers=f.workers,
            link=runner.link_of(f.bandwidth or None),
            timeout_s=f.timeout_s,
            extra_args=[f"--heap={f.heap}", f"--tf_profiler_dir={log_dir}",
                        f"--tf_profiler_blocks={f.blocks}"])
      except RuntimeError as e:
        # The message ends with the workers' last log lines: the crash.
        failures.append([l for l in str(e).splitlines() if l.strip()][-3:])
        print(f"  a run failed, run again: {failures[-1]}", flush=True)
        continue
      space = step_profile.read_profile(os.path.join(log_dir, "worker-0"))
    record = run_record(step_phases.block_phases(space, unroll))
    record.update(model=model, per_worker_batch=per_worker_batch,
                  unroll=unroll, scheduler=f.scheduler, workers=f.workers,
                  bandwidth=f.bandwidth, heap=f.heap,
                  step_ms=result["median_step_s"] * 1e3,
                  failed_runs=failures)
    return record
  raise RuntimeError(f"{model} K={unroll}: all {attempts} runs failed: "
                     f"{failures}")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  pairs = runner.flagged_model_batches()
  if f.blocks < 1 or f.warmup_steps < 1:
    raise app.UsageError("--blocks and --warmup_steps must be positive "
                         "(the first block traces the function)")
  records: List[Dict[str, Any]] = []
  if f.out:
    os.makedirs(f.out, exist_ok=True)
    open(os.path.join(f.out, "runs.jsonl"), "w").close()
  for repeat, model, batch, unroll in runner.paired_run_order(f.repeats,
                                                              pairs):
    record = profiled_run(model, batch, unroll, f)
    record["repeat"] = repeat
    if f.out:
      with open(os.path.join(f.out, "runs.jsonl"), "a") as out:
        out.write(json.dumps(record) + "\n")
    print(f"{model} batch {batch} K={unroll}: head "
          f"{statistics.median(record['heads_ms']):.2f} ms, later "
          f"forward {statistics.median(record['later_forward_ms'] or [0]):.2f}"
          f" ms, compute {statistics.median(record['compute_ms'] or [0]):.2f}"
          f" ms (medians of {len(record['blocks_ms'])} blocks)",
          flush=True)
    records.append(record)
  summary = summarize(records)
  for model, s in summary.items():
    print(f"{model}: early share {s['early_share']:.3f} of a step (median "
          f"of {len(s['shares'])} repeats: "
          f"{', '.join(f'{v:.3f}' for v in s['shares'])})")
  if f.out:
    path = runner.write_probe(f.out, "step_phases.json", summary, records)
    print(f"wrote {path}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
