r"""Simulates one training iteration of a real model under every scheduler.

The tensors are the trainable variables of the real Keras model (ResNet-50,
VGG-16 or the base Transformer encoder), the compute ops and their durations
come from `tf_preempt.profile.model_to_dag` (a FLOPs estimate for a named
GPU, or measured per-op seconds from --profile), the network is a ring
all-reduce over --workers workers. Every scheduler plans the all-reduce and
the planner's simulator times the iteration (end of the backward pass to the
end of the next forward pass, computation and communication overlapping).

Usage:
  python scripts/simulate.py --model=resnet50 --workers=8 --bandwidth_gbps=10
  python scripts/simulate.py --model=vgg16 --json   # one JSON object

Nothing is trained and no GPU is needed: this is the planner's view.
"""

import contextlib
import functools
import json
import os
import sys
import time
from typing import Any, Dict, Optional, Sequence

# Only warnings and errors from TensorFlow's C++ side: the table is the output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

MODELS = ("resnet50", "vgg16", "transformer")
# Every scheduler of the planner except "optimal" (exhaustive search, for
# tiny DAGs only), in the order of the table: stock TensorFlow first, PACE
# last.
SCHEDULERS = ("tf_default", "tf_packed", "fifo", "priority", "horovod",
              "ddp", "bytescheduler", "pace")
BASELINE = "tf_default"
MiB = 1 << 20
# Per-worker batch sizes the models are usually trained with on a 16 GB GPU.
DEFAULT_BATCH_SIZES = {"resnet50": 64, "vgg16": 32, "transformer": 32}

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines the script's flags; all optional."""
  flags.DEFINE_enum("model", "resnet50", MODELS, "Model whose tensors and "
                    "compute ops are simulated.")
  flags.DEFINE_integer("workers", 8, "Number of data-parallel workers.",
                       lower_bound=2)
  flags.DEFINE_float("bandwidth_gbps", 10.0, "Link bandwidth, Gbit/s.")
  flags.DEFINE_float("latency_us", 50.0, "Per-step latency of the ring "
                     "all-reduce, microseconds.", lower_bound=0.0)
  flags.DEFINE_string("gpu", "v100", "GPU the compute estimate is for; one of "
                      "tf_preempt.profile.GPU_SPECS.")
  flags.DEFINE_integer("batch_size", None, "Per-worker batch size; default "
                       f"by model: {DEFAULT_BATCH_SIZES}.", lower_bound=1)
  flags.DEFINE_string("profile", None, "JSON file {op_name: seconds} of "
                      "measured op times that replace the estimates.")
  flags.DEFINE_integer("bytes_per_pack", 16 * MiB, "Pack size of the "
                       "tf_packed baseline, bytes.", lower_bound=1)
  flags.DEFINE_bool("json", False, "Print one JSON object instead of a "
                    "table.")
  flags.register_validator(
      "bandwidth_gbps", lambda v: v is not None and v > 0,
      message="--bandwidth_gbps must be > 0.")
  flags.register_validator(
      "profile", lambda path: path is None or os.path.isfile(path),
      message="--profile must name an existing JSON file.")


def _check_gpu_flag() -> None:
  """Fails like a flag validator when --gpu names no known GPU.

  Not a registered validator: absl runs those on every parse, and the GPU
  table lives next to the Keras code, so `--help` and every flag error would
  wait for TensorFlow to import.
  """
  # pylint: disable-next=g-import-not-at-top
  from tf_preempt.profile import model_dag
  if FLAGS.gpu.lower() not in model_dag.GPU_SPECS:
    raise app.UsageError(
        f"flag --gpu={FLAGS.gpu}: must be one of "
        f"{', '.join(sorted(model_dag.GPU_SPECS))}.")


@functools.lru_cache(maxsize=None)
def model_dag(model: str, batch_size: int, gpu: str, profile: Optional[str]):
  """The TrainingDAG of `model`, built once per process per argument set.

  Building the Keras model (ResNet-50, VGG-16) is the slow part of a run;
  a sweep over workers and bandwidths reuses the DAG, which is immutable.
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import models as models_lib
  from tf_preempt import profile as profile_lib
  # pylint: enable=g-import-not-at-top
  measured = profile_lib.load_profile(profile) if profile else None
  return profile_lib.model_to_dag(models_lib.get(model),
                                  batch_size=batch_size, gpu=gpu,
                                  profile=measured)


def run(model: str = "resnet50",
        workers: int = 8,
        bandwidth_gbps: float = 10.0,
        latency_us: float = 50.0,
        gpu: str = "v100",
        batch_size: Optional[int] = None,
        profile: Optional[str] = None,
        bytes_per_pack: int = 16 * MiB,
        schedulers: Sequence[str] = SCHEDULERS) -> Dict[str, Any]:
  """Plans and simulates one iteration of `model` with every scheduler.

  Args:
    model: one of MODELS.
    workers: data-parallel workers, >= 2.
    bandwidth_gbps: link bandwidth in Gbit/s, > 0.
    latency_us: ring step latency in microseconds, >= 0.
    gpu: a key of `tf_preempt.profile.GPU_SPECS`.
    batch_size: per-worker batch size; None for the model's default.
    profile: path of a JSON file {op_name: seconds}, or None.
    bytes_per_pack: pack size of the tf_packed baseline.
    schedulers: schedulers to run; must include BASELINE. May name split
      schedulers (`tf_preempt.plan.SPLIT_SCHEDULERS`, e.g. "pace_rsag").

  Returns:
    A dict: "schedulers" maps each name to {"iteration_s",
    "speedup_vs_tf_default"}; "plan_seconds" is the wall time of PACE's
    make_plan; also "model", "workers", "bandwidth_gbps", "latency_us",
    "gpu", "gpu_description", "efficiency" (fraction of the GPU's peak the
    FLOPs model assumes for ops the profile does not time), "profile",
    "batch_size", "tensors",
    "total_bytes", "compute_s" (backward end plus the forward critical
    path, the no-communication lower bound).

  Raises:
    ValueError: naming the argument at fault.
  """
  # Imported here so that `--help` and flag errors do not wait for Keras.
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.profile import model_dag as model_dag_lib
  # pylint: enable=g-import-not-at-top

  if model not in MODELS:
    raise ValueError(f"model={model!r}; valid: {', '.join(MODELS)}.")
  if workers < 2:
    raise ValueError(f"workers={workers} must be >= 2.")
  if not bandwidth_gbps > 0:
    raise ValueError(f"bandwidth_gbps={bandwidth_gbps} must be > 0.")
  if latency_us < 0:
    raise ValueError(f"latency_us={latency_us} must be >= 0.")
  if BASELINE not in schedulers:
    raise ValueError(f"schedulers must include {BASELINE!r}.")
  batch_size = batch_size or DEFAULT_BATCH_SIZES[model]
  dag = model_dag(model, batch_size, gpu, profile)
  cost = plan_lib.CostModel.ring(workers, bandwidth_gbps * 1e9 / 8,
                                 latency_us * 1e-6)
  options = {"tf_packed": {"bytes_per_pack": bytes_per_pack}}

  times, plan_seconds = {}, None
  for name in schedulers:
    start = time.perf_counter()
    plan = plan_lib.make_plan(dag, cost, scheduler=name,
                              **options.get(name, {}))
    if name == "pace":
      plan_seconds = time.perf_counter() - start
    times[name] = float(plan_lib.simulate(dag, cost, plan).iteration_time)

  base = times[BASELINE]
  return {
      "schedulers": {name: {"iteration_s": t,
                            "speedup_vs_tf_default": base / t if t else 1.0}
                     for name, t in times.items()},
      "plan_seconds": plan_seconds,
      "model": model,
      "workers": workers,
      "bandwidth_gbps": bandwidth_gbps,
      "latency_us": latency_us,
      "gpu": gpu,
      "gpu_description": model_dag_lib.gpu_spec(gpu).description,
      "efficiency": model_dag_lib.DEFAULT_EFFICIENCY,
      "profile": profile,
      "batch_size": batch_size,
      "tensors": len(dag.tensors),
      "total_bytes": int(sum(t.nbytes for t in dag.tensors)),
      "compute_s": dag.backward_end() + dag.forward_length(),
  }


def format_table(stats: Dict[str, Any]) -> str:
  """Renders `run`'s result as an aligned, human-readable table."""
  lines = [
      f"{stats['model']}: {stats['tensors']} tensors, "
      f"{stats['total_bytes'] / MiB:.1f} MiB of gradients; "
      f"{stats['workers']} workers, {stats['bandwidth_gbps']:g} Gbit/s, "
      f"{stats['gpu']}, batch {stats['batch_size']}/worker; "
      f"compute alone {stats['compute_s'] * 1e3:.1f} ms",
      f"  {'scheduler':<15}{'iteration (ms)':>16}"
      f"{'speed-up vs ' + BASELINE:>24}",
  ]
  for name, row in stats["schedulers"].items():
    lines.append(f"  {name:<15}{row['iteration_s'] * 1e3:>16.1f}"
                 f"{row['speedup_vs_tf_default']:>23.2f}x")
  if stats.get("plan_seconds") is not None:
    lines.append(f"  (pace planned in {stats['plan_seconds'] * 1e3:.0f} ms)")
  return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  _check_gpu_flag()
  kwargs = dict(model=FLAGS.model, workers=FLAGS.workers,
                bandwidth_gbps=FLAGS.bandwidth_gbps,
                latency_us=FLAGS.latency_us, gpu=FLAGS.gpu,
                batch_size=FLAGS.batch_size, profile=FLAGS.profile,
                bytes_per_pack=FLAGS.bytes_per_pack)
  if FLAGS.json:
    # stdout carries the one JSON object: anything a library prints while
    # the model is built goes to stderr instead.
    with contextlib.redirect_stdout(sys.stderr):
      stats = run(**kwargs)
    print(json.dumps(stats, sort_keys=True))
  else:
    print(format_table(run(**kwargs)))


if __name__ == "__main__":
  define_flags()
  app.run(main)
