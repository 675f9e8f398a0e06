r"""`make demo`: real 2-worker training, stock TF's all-reduce vs PACE.

  python scripts/demo.py                    # the main job (3-4 minutes)
  python scripts/demo.py --steps 20 --noattribution   # a quick look
  python scripts/demo.py --simulate         # the planner's simulated tables

Runs `scripts/train.py` as two TensorFlow workers on this machine through
`tf_preempt.launch` (one CPU core, one intra-op thread each), over an
emulated 200 Mbit/s link between two network namespaces when the machine
allows it (root and tc tbf; latency emulation needs netem, which this
kernel lacks), over plain loopback otherwise (the output says which). Both
main runs train the same model from the same seed on the same synthetic
data, global batch and link, with `PreemptiveMultiWorkerMirroredStrategy`
and Keras `fit`:

1. `--scheduler=tf_default --unroll=1`: stock TensorFlow's reduction
   exactly (CollectiveAllReduce's one pack of all gradients, issued when the
   whole backward pass is done), one step per `tf.function`, as stock Keras.
2. `--scheduler=pace --unroll=2`: the PACE plan (priority order, fusion,
   chunks) with two steps traced into one flat graph, so the next step's
   forward pass starts while the tail of the all-reduce is still running.

With `--attribution` (default) it also runs the two mixed settings (stock
packing unrolled, PACE not unrolled) so that the speed-up can be split
between the schedule and the cross-step overlap.

Why vgg_small at global batch 48 over a 200 Mbit/s link: the schedule can
only help when communication and computation per step are of similar size
AND the communication mostly waits on the link. Measured on this machine (2
shared cores, TF 2.21 CPU, each worker pinned to one core with one intra-op
thread): vgg_small has 0.81 M parameters, 3.26 MB of float32 gradients; a
ring all-reduce of those between two workers moves 3.26 MB per worker,
about 130 ms at 200 Mbit/s, while a training step at 24 examples per
worker computes for about 90 ms.

The link rate matters more than anything else here, because the ring
all-reduce over gRPC is CPU work on the same core that computes (copies,
serialisation, the sum, TCP through the veth pair):

- at 2 Gbit/s (3.26 MB in 14.9 ms, 9.8 ms over plain loopback) the
  collectives are CPU-bound; "overlapped" communication only time-slices
  the one core, every collective beside compute gets slow (an 11 KB one
  took 7-28 ms next to a forward pass), and the milliseconds of fixed cost
  per collective make PACE's 6 collectives dearer than stock's one pack:
  PACE + unroll 2 measured 0.58x-0.95x of stock at 2 Gbit/s and 500 Mbit/s
  (batch 10 and 16), and 0.71x-0.90x on loopback (scripts/bench_unroll.py);
- at 200 Mbit/s the link dominates, as it does on a real cluster where the
  NIC or NCCL moves the bytes without the compute core, and the overlap
  pays: stock 221.4 ms/step, PACE + unroll 2 183.1 ms/step, 1.21x (runs of
  each within 2 ms; schedule alone at unroll 1 1.10x, unroll alone 1.02x,
  schedule at unroll 2 1.18x; 2 Dec 2026, `make demo` defaults).

Stock `tf.distribute.MultiWorkerMirroredStrategy` itself cannot run Keras 3
`fit` (keras-team/keras#20585, tensorflow/tensorflow#72388), so the
baseline is the package's strategy with `--scheduler=tf_default`, whose
collectives are exactly stock's.
"""

import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import app
from absl import flags

from tf_preempt.bench import runner

# Only warnings and errors from TensorFlow's C++ side (the --simulate path
# imports TensorFlow in this process; the workers log to files).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_SCRIPTS = os.path.dirname(os.path.abspath(__file__))
_TRAIN = os.path.join(_SCRIPTS, "train.py")

STOCK_CANNOT_FIT = (
    "Stock tf.distribute.MultiWorkerMirroredStrategy cannot run Keras 3 fit "
    "at all (ValueError from strategy.reduce before the first step; "
    "keras-team/keras#20585, tensorflow/tensorflow#72388), so the baseline "
    "is PreemptiveMultiWorkerMirroredStrategy with --scheduler=tf_default, "
    "which issues exactly stock CollectiveAllReduce's collectives.")

# The planner tables of the interim demo (--simulate).
SIMULATE_WORKERS = 8
SIMULATE_BANDWIDTH_GBPS = 10.0


def define_flags() -> None:
  """Defines the command-line flags (all optional, so tests need none)."""
  flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 48, "Global batch size.")
  flags.DEFINE_integer("steps", 60, "Training steps of each run.")
  flags.DEFINE_integer("warmup_steps", 20,
                       "Steps left out of each run's median step time.")
  flags.DEFINE_integer("unroll", 2, "Steps per flat graph of the PACE run.")
  flags.DEFINE_integer("num_workers", 2, "Worker processes.")
  flags.DEFINE_string("bandwidth", "200mbit",
                      "Emulated link rate (tc rate); empty for loopback.")
  flags.DEFINE_boolean("attribution", True,
                       "Also run tf_default unrolled and pace not unrolled.")
  flags.DEFINE_integer("rounds", 2,
                       "Runs of each setting, in alternating order.")
  flags.DEFINE_integer("profile_steps", 0,
                       "PACE runs: profile this many steps, fit the cost "
                       "model to this machine and re-plan (0: the default "
                       "plan, made from gradient sizes alone).")
  flags.DEFINE_boolean("pin_cpus", True,
                       "Pin each worker to its own core (then gRPC's "
                       "communication threads share the core with the "
                       "compute).")
  flags.DEFINE_float("timeout_s", 240.0, "Time limit of each run.")
  flags.DEFINE_boolean("simulate", False,
                       "Print the planner's simulated tables instead "
                       "(ResNet-50, VGG-16, Transformer; 8 workers, "
                       "10 Gbit/s).")


def _link(bandwidth: Optional[str], out):
  """The emulated link, or None (loopback), saying which and why."""
  from tf_preempt import launch  # pylint: disable=g-import-not-at-top
  if not bandwidth:
    print("Network: plain loopback (no --bandwidth).", file=out)
    return None
  support = launch.check_available()
  if support.rate:
    print(f"Network: emulated {bandwidth} link between the workers' network "
          f"namespaces (tc tbf; no latency emulation: "
          f"{'available' if support.delay else 'this kernel has no netem'}).",
          file=out)
    return launch.LinkConfig(rate=bandwidth)
  reasons = "; ".join(support.reasons) or "unknown reason"
  print(f"Network: plain loopback; a {bandwidth} link cannot be emulated "
        f"here ({reasons}).", file=out)
  return None


def train_once(scheduler: str, unroll: int, *, model: str, batch_size: int,
               steps: int, warmup_steps: int, num_workers: int, link,
               timeout_s: float, profile_steps: int = 0,
               pin_cpus: bool = True,
               extra_args: Sequence[str] = ()) -> Dict[str, Any]:
  """Runs scripts/train.py on `num_workers` workers; returns their stats.

  `extra_args` are more flags of scripts/train.py, e.g. "--scheduler_op=off".

  Raises:
    RuntimeError: if a worker fails (with its last log lines).
  """
  from tf_preempt import launch  # pylint: disable=g-import-not-at-top
  warmup_blocks = -(-warmup_steps // unroll)
  command = [sys.executable, _TRAIN, "--strategy=multi_worker",
             f"--model={model}", f"--batch_size={batch_size}",
             f"--steps={steps}", f"--scheduler={scheduler}",
             f"--unroll={unroll}", f"--warmup_blocks={warmup_blocks}"]
  if profile_steps:
    command.append(f"--profile_steps={profile_steps}")
  command.extend(extra_args)
  worker = dict(launch.MEASUREMENT_WORKER, pin_cpus=pin_cpus)
  start = time.perf_counter()
  stats = launch.launch_for_stats(command, num_workers, timeout_s=timeout_s,
                                  link=link, **worker)
  elapsed_s = time.perf_counter() - start
  medians = [s["median_step_s"] for s in stats]
  return {"scheduler": scheduler, "unroll": unroll,
          # The steps are synchronous; the slowest worker's median is the
          # cluster's.
          "median_step_s": max(medians), "worker_medians": medians,
          "examples_per_s": batch_size / max(medians),
          "final_loss": stats[0]["final_loss"], "plan": stats[0]["plan"],
          "plan_json": stats[0].get("plan_json"),
          "timed_steps": stats[0]["timed_steps"],
          "profile": stats[0].get("profile"),
          "heap": stats[0].get("heap"),
          "elapsed_s": elapsed_s}


def _row(label: str, r: Dict[str, Any], width: int) -> str:
  plan = r["plan"] or {}
  return (f"  {label:<{width}} {r['median_step_s'] * 1e3:8.1f} ms/step "
          f"{r['examples_per_s']:8.1f} ex/s  {plan.get('collectives', '?'):>3}"
          f" collective(s)  loss {r['final_loss']:.4f}")


def run(model: str = "vgg_small", batch_size: int = 48, steps: int = 60,
        warmup_steps: int = 20, unroll: int = 2, num_workers: int = 2,
        bandwidth: Optional[str] = "200mbit", attribution: bool = True,
        rounds: int = 2, timeout_s: float = 240.0, profile_steps: int = 0,
        pin_cpus: bool = True, out=None) -> Dict[str, Any]:
  """The demo: baseline and PACE runs, printed; returns the numbers.

  The settings run in `rounds` rounds, each in the reverse order of the
  previous one, so that a change in the machine's load (it is shared)
  skews no setting more than another; a setting's step time is the median
  over its runs of each run's median step time.

  Returns:
    {"baseline", "pace": {"label", "median_step_s", "runs": [...]},
    "speedup", "network", "attribution" (settings), "same_loss"}.
  """
  out = out or sys.stdout
  start = time.perf_counter()
  print(f"tf_preempt demo: {model}, global batch {batch_size}, {steps} "
        f"steps per run ({warmup_steps} warm-up steps not timed), "
        f"{num_workers} workers "
        f"{'on one core each' if pin_cpus else 'sharing all cores'}, "
        "one intra-op thread each, Keras fit under "
        "PreemptiveMultiWorkerMirroredStrategy.", file=out)
  link = _link(bandwidth, out)
  common = dict(model=model, batch_size=batch_size, steps=steps,
                warmup_steps=warmup_steps, num_workers=num_workers,
                link=link, timeout_s=timeout_s, pin_cpus=pin_cpus)
  replanned = f", re-planned after {profile_steps} steps" if (
      profile_steps) else ""
  settings = [("stock reduction (tf_default), unroll 1", "tf_default", 1),
              (f"PACE plan (pace), unroll {unroll}{replanned}", "pace",
               unroll)]
  if attribution and unroll > 1:
    settings += [(f"stock reduction, unroll {unroll}", "tf_default", unroll),
                 (f"PACE plan, unroll 1{replanned}", "pace", 1)]
  results = {label: {"label": label, "runs": []} for label, _, _ in settings}
  for round_, (label, scheduler, k) in runner.interleaved(settings, rounds):
    # The machine is shared: say how busy it was.
    load = os.getloadavg()[0]
    print(f"round {round_ + 1}/{rounds}: {label} (load average "
          f"{load:.1f} on {os.cpu_count()} cores) ...", file=out,
          flush=True)
    r = train_once(scheduler, k, profile_steps=(
        profile_steps if scheduler == "pace" else 0), **common)
    r["load_before"] = load
    results[label]["runs"].append(r)
  for res in results.values():
    res["median_step_s"] = statistics.median(
        r["median_step_s"] for r in res["runs"])
    res["examples_per_s"] = batch_size / res["median_step_s"]
    last = res["runs"][-1]
    res.update(plan=last["plan"], final_loss=last["final_loss"],
               profile=last.get("profile"))
  rows = [results[label] for label, _, _ in settings]
  baseline, pace = rows[0], rows[1]
  print(f"\nStep time (median over {rounds} run(s) of each run's median; "
        "the slower worker's):", file=out)
  width = max(len(r["label"]) for r in rows)
  for r in rows:
    each = ", ".join(f"{x['median_step_s'] * 1e3:.1f}" for x in r["runs"])
    print(f"{_row(r['label'], r, width)}  runs: {each} ms", file=out)
  for r in rows:
    if isinstance(r.get("profile"), dict) and r["profile"].get("summary"):
      print(f"  ({r['label']}: {r['profile']['summary']})", file=out)
  speedup = baseline["median_step_s"] / pace["median_step_s"]
  print(f"\nSpeed-up of PACE + unroll {unroll} over stock reduction: "
        f"{speedup:.2f}x ({baseline['median_step_s'] * 1e3:.1f} ms -> "
        f"{pace['median_step_s'] * 1e3:.1f} ms per step).", file=out)
  extra = rows[2:]
  if extra:
    stock_k, pace_1 = extra
    print(f"  attribution: schedule alone (unroll 1) "
          f"{baseline['median_step_s'] / pace_1['median_step_s']:.2f}x; "
          f"unroll {unroll} alone (stock reduction) "
          f"{baseline['median_step_s'] / stock_k['median_step_s']:.2f}x; "
          f"schedule at unroll {unroll} "
          f"{stock_k['median_step_s'] / pace['median_step_s']:.2f}x.",
          file=out)
  every = [x for r in rows for x in r["runs"]]
  same_loss = all(abs(x["final_loss"] - every[0]["final_loss"]) <=
                  1e-3 * max(1.0, abs(every[0]["final_loss"]))
                  for x in every)
  losses = sorted({f"{x['final_loss']:.4f}" for x in every})
  print(f"Same data, model, batch and link in every run; final losses "
        f"{'agree' if same_loss else 'DIFFER'} ({', '.join(losses)}).",
        file=out)
  print(STOCK_CANNOT_FIT, file=out)
  print(f"Done in {time.perf_counter() - start:.0f} s.", file=out, flush=True)
  return {"baseline": baseline, "pace": pace, "speedup": speedup,
          "network": link.describe() if link else "loopback",
          "attribution": extra, "same_loss": same_loss}


def simulate_tables(out=None) -> None:
  """The interim demo's tables: the planner on three models, simulated."""
  out = out or sys.stdout
  sys.path.insert(0, _SCRIPTS)
  import simulate  # pylint: disable=g-import-not-at-top
  print("tf_preempt planner SIMULATION (no training): one iteration of a "
        f"real Keras model on {SIMULATE_WORKERS} workers over a "
        f"{SIMULATE_BANDWIDTH_GBPS:g} Gbit/s ring all-reduce, compute times "
        "estimated for a V100.\n", file=out)
  start = time.perf_counter()
  for model in simulate.MODELS:
    stats = simulate.run(model=model, workers=SIMULATE_WORKERS,
                         bandwidth_gbps=SIMULATE_BANDWIDTH_GBPS)
    print(simulate.format_table(stats), file=out)
    print(file=out)
  print(f"Done in {time.perf_counter() - start:.0f} s.", file=out)


def _check(f) -> None:
  if f.steps < 1 or f.warmup_steps < 0 or f.warmup_steps >= f.steps:
    raise app.UsageError("--steps must be positive and more than "
                         "--warmup_steps")
  if f.profile_steps < 0 or (f.profile_steps and
                             f.profile_steps >= f.warmup_steps):
    raise app.UsageError("--profile_steps must be >= 0 and fewer than "
                         "--warmup_steps (the re-planned steps are timed)")
  if f.unroll < 1 or f.steps % f.unroll:
    raise app.UsageError("--unroll must be positive and divide --steps")
  if f.rounds < 1:
    raise app.UsageError("--rounds must be positive")
  if f.num_workers < 1 or f.batch_size % f.num_workers:
    raise app.UsageError("--batch_size must be a multiple of --num_workers")
  from tf_preempt.models import registry  # pylint: disable=g-import-not-at-top
  if f.model not in registry.names():
    raise app.UsageError(f"--model must be one of "
                         f"{', '.join(registry.names())}")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  if f.simulate:
    simulate_tables()
    return
  _check(f)
  try:
    run(model=f.model, batch_size=f.batch_size, steps=f.steps,
        warmup_steps=f.warmup_steps, unroll=f.unroll,
        num_workers=f.num_workers, bandwidth=f.bandwidth or None,
        attribution=f.attribution, rounds=f.rounds, timeout_s=f.timeout_s,
        profile_steps=f.profile_steps, pin_cpus=f.pin_cpus)
  except RuntimeError as e:
    print(f"demo: {e}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  define_flags()
  app.run(main)
