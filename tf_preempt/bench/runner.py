"""Runs the side-by-side benchmark: every scheduler, interleaved, on N workers.

The training runs go through `scripts/demo.py`'s `train_once` (passed in as
`train_once`, so this package does not import scripts); the two reference
measurements launch their own small commands through `tf_preempt.launch`:

- compute alone: `scripts/train.py --strategy=one_device` with the
  per-worker batch, on every worker at once (each pinned to its core, as in
  the training runs), so no collective runs at all;
- communication alone: `tf_preempt.bench.comm_worker`, one all-reduce of the
  model's gradient bytes through the multi-worker strategy, no compute.

Every setting runs once per repeat, repeats in alternating order (A B C ...
then ... C B A), because the machine is shared and its load drifts. With
`max_repeats` above `repeats`, whole repeats are added until every setting
has settled (`unsettled`), or the cap is reached.
"""

import dataclasses
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import time
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

from tf_preempt import heap
from tf_preempt.bench import results as results_lib
from tf_preempt.bench import timeline

MIB = 1 << 20
# tf_packed: the pack sizes tried; the fastest one is benchmarked.
PACK_BYTES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
# bytescheduler: credits (bytes in flight, enforced by the scheduler op)
# tried; 16 MiB is ByteScheduler's default credit (4M float32 elements).
CREDIT_BYTES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
SCHEDULERS = ("tf_default", "tf_packed", "horovod", "ddp", "bytescheduler",
              "priority", "pace")
COMPUTE, COMM = "compute alone", "communication alone"
# A reading of the host's speed (`speed_worker`), beside the references: one
# machine identity is not one speed on this testbed.
SPEED = "speed reading"
# Under the traces directory: one directory per run (its index in
# `Bench.runs`) until `Bench.keep_median_runs` keeps one run's per row.
RUN_TRACES = "runs"
# A run's plan (Plan.to_json), in its directory under RUN_TRACES.
RUN_PLAN = "plan.json"
# A setting has settled when the median of its runs is at most this far
# above its fastest run: at least half of its runs then lie near the
# undisturbed time (a disturbance on this shared machine only slows a run).
SETTLE_TOLERANCE = 0.05


@dataclasses.dataclass
class Setting:
  """One thing to run: a scheduler row, or a reference measurement."""
  name: str  # "NAME@K", COMPUTE or COMM.
  scheduler: Optional[str] = None
  unroll: int = 1
  args: Tuple[str, ...] = ()
  description: str = ""
  profile_steps: int = 0  # > 0: profile and re-plan first (pace only).


def interleaved(items: Sequence[Any], repeats: int):
  """Yields (repeat, item): `items` in order, then reversed, and so on.

  The machine is shared and its load drifts; alternating the order makes
  a drift hit no item more than another.
  """
  for repeat in range(repeats):
    for item in in_repeat_order(items, repeat):
      yield repeat, item


def in_repeat_order(items: Sequence[Any], repeat: int) -> Sequence[Any]:
  """`items` in the order of repeat number `repeat` (0-based)."""
  return items if repeat % 2 == 0 else items[::-1]


def unsettled(runs_by_name: Mapping[str, Sequence[float]],
              tolerance: float = SETTLE_TOLERANCE) -> List[str]:
  """The names whose median run is more than `tolerance` above their fastest.

  Args:
    runs_by_name: {setting name: the values of its runs so far} (seconds).
    tolerance: a fraction of the fastest run.

  Returns:
    The unsettled names, sorted.

  Raises:
    ValueError: if a setting has no run.
  """
  empty = sorted(n for n, v in runs_by_name.items() if not v)
  if empty:
    raise ValueError(f"settings without a run: {', '.join(empty)}")
  return sorted(n for n, v in runs_by_name.items()
                if statistics.median(v) > min(v) * (1 + tolerance))


def settings_of(schedulers: Sequence[str], unroll: int,
                pack_bytes: Optional[int] = None,
                credit_bytes: Optional[int] = None,
                pace_profile_steps: int = 0,
                pace_sparse_as_dense: bool = False) -> List[Setting]:
  """The rows: each baseline at K=1 and K=`unroll`, pace at K=`unroll`."""
  out = []
  for s in schedulers:
    args, desc = _scheduler_args(s, pack_bytes, credit_bytes)
    profile_steps = pace_profile_steps if s == "pace" else 0
    if profile_steps:
      desc = (f"PACE plan re-planned after {profile_steps} profiled steps "
              "(measured compute, alpha-beta fitted from timed all-reduces "
              "and the scheduler op's records); the first plan from the "
              "gradient sizes")
    if s == "pace" and pace_sparse_as_dense:
      args += ("--sparse_as_dense",)
      desc += ("; IndexedSlices (embedding) gradients reduced densely in "
               "the plan (--sparse_as_dense)")
    ks = (unroll,) if s == "pace" else sorted({1, unroll})
    for k in ks:
      out.append(Setting(results_lib.row_name(s, k), s, k, args, desc,
                         profile_steps))
  return out


def _scheduler_args(scheduler: str, pack_bytes: Optional[int],
                    credit_bytes: Optional[int]) -> Tuple[Tuple[str, ...],
                                                          str]:
  """The flags of scripts/train.py for `scheduler`, and their description."""
  from tf_preempt.plan import registry  # pylint: disable=g-import-not-at-top
  defaults = registry.options_of(scheduler)
  if scheduler == "tf_packed" and pack_bytes is not None:
    return ((f"--bytes_per_pack={pack_bytes}",),
            f"bytes_per_pack {pack_bytes // MIB} MiB (best of "
            f"{', '.join(str(b // MIB) for b in PACK_BYTES)} MiB)")
  if scheduler == "bytescheduler" and credit_bytes is not None:
    return ((f"--credit_bytes={credit_bytes}",),
            f"partition {defaults['partition_elements']} elements, plan "
            f"credit {defaults['credit_elements']} elements (defaults); "
            f"runtime credit {credit_bytes // MIB} MiB in flight (best of "
            f"{', '.join(str(b // MIB) for b in CREDIT_BYTES)} MiB)")
  if scheduler == "tf_default":
    return (), "stock CollectiveAllReduce: one pack after the backward pass"
  if scheduler == "pace":
    return (), "PACE plan from gradient sizes (no re-plan), defaults " + (
        ", ".join(f"{k}={v}" for k, v in defaults.items()))
  return (), ", ".join(f"{k}={v}" for k, v in defaults.items()) or (
      "no options")


def link_of(bandwidth: Optional[str]):
  """The emulated link, or None for loopback; raises if it cannot be made."""
  from tf_preempt import launch  # pylint: disable=g-import-not-at-top
  if not bandwidth:
    return None
  support = launch.check_available()
  if not support.rate:
    raise RuntimeError(f"a {bandwidth} link cannot be emulated here: "
                       f"{'; '.join(support.reasons) or 'unknown reason'} "
                       "(run as root, or pass --bandwidth= for loopback)")
  return launch.LinkConfig(rate=bandwidth)


def machine() -> str:
  """CPU, cores, OS and TensorFlow version, for results.json."""
  cpu = platform.processor() or "?"
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  try:
    tf_version = importlib.metadata.version("tensorflow-cpu")
  except importlib.metadata.PackageNotFoundError:
    tf_version = "?"
  return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores (shared), "
          f"{platform.system()} {platform.release()}, Python "
          f"{platform.python_version()}, tensorflow-cpu {tf_version}")


class Bench:
  """Runs settings and keeps every run's step time and the load before it."""

  def __init__(self, train_once: Callable[..., Dict[str, Any]], *,
               model: str, batch_size: int, steps: int, warmup_steps: int,
               num_workers: int, link, timeout_s: float, out_dir: str,
               train_script: str, heap_mode: str = heap.DEFAULT_MODE,
               log=print):
    self.train_once = train_once
    self.model, self.batch_size = model, batch_size
    self.steps, self.warmup_steps = steps, warmup_steps
    self.num_workers, self.link = num_workers, link
    self.timeout_s = timeout_s
    self.out_dir = out_dir
    self.trace_dir = os.path.join(out_dir, "traces")
    os.makedirs(self.trace_dir, exist_ok=True)
    # An earlier bench into this directory that failed left its runs' files:
    # none of them may pass for one of this bench's.
    shutil.rmtree(os.path.join(self.trace_dir, RUN_TRACES), ignore_errors=True)
    self.train_script = train_script
    # Every process of the benchmark runs in this heap mode (the training
    # rows, compute alone, communication alone), so that the references see
    # the buffers the rows see.
    self.heap_args = (f"--heap={heap_mode}",)
    self.log = log
    self.runs: List[Dict[str, Any]] = []
    # {nbytes: [seconds]} of all-reduces timed alone (comm-alone runs).
    self.comm_samples: Dict[int, List[float]] = {}

  def run(self, setting: Setting, tag: str = "") -> float:
    """Runs `setting` once; returns its step (or all-reduce) seconds."""
    load = os.getloadavg()[0]
    self.log(f"{tag}{setting.name} (load average {load:.2f} on "
             f"{os.cpu_count()} cores) ...")
    start = time.perf_counter()
    if setting.name == COMPUTE:
      value, extra = self._compute_alone()
    elif setting.name == COMM:
      value, extra = self._comm_alone()
    elif setting.name == SPEED:
      value, extra = speed_reading(self.num_workers, self.heap_args,
                                   self.timeout_s) * 1e-3, {}
    else:
      # Every run's own traces: the row's kept ones are chosen at the end.
      run_dir = os.path.join(self.trace_dir, RUN_TRACES, str(len(self.runs)))
      os.makedirs(run_dir)
      trace = os.path.join(run_dir, timeline.trace_file(setting.name))
      r = self.train_once(
          setting.scheduler, setting.unroll, model=self.model,
          batch_size=self.batch_size, steps=self.steps,
          warmup_steps=self.warmup_steps, num_workers=self.num_workers,
          link=self.link, timeout_s=self.timeout_s,
          profile_steps=setting.profile_steps,
          extra_args=(list(setting.args) + list(self.heap_args) +
                      [f"--timeline={trace}"]))
      value = r["median_step_s"]
      extra = {"collectives": (r["plan"] or {}).get("collectives"),
               "final_loss": r["final_loss"], "heap": r.get("heap")}
      if r.get("profile"):
        extra["profile"] = r["profile"]
      if r.get("plan_json"):
        with open(os.path.join(run_dir, RUN_PLAN), "w") as f:
          f.write(r["plan_json"])
    self.log(f"  {value * 1e3:.1f} ms ({time.perf_counter() - start:.0f} s)")
    self.runs.append(dict(name=setting.name, args=list(setting.args),
                          value_s=value, load_before=load, tag=tag.strip(),
                          **extra))
    return value

  def keep_median_runs(self, names: Sequence[str]) -> Dict[str, int]:
    """Keeps each row's traces and plan of its median repeat run.

    The traces then show a run like the one the row's median stands for,
    not whichever ran last (which the machine's noise may have slowed).
    Of an even number of runs, the earlier of the two middle ones.
    They go to the traces directory under their usual names, and the
    run's plan to plans/NAME@K.json (a plan from the sizes is the same in
    every run; a re-planned one can differ, and the row's details keep
    each run's plan summary). Every other run's files are removed.

    Args:
      names: the rows ("NAME@K").

    Returns:
      {row: the index in `runs` of the run whose files were kept}.
    """
    kept = {}
    for name in names:
      runs = [(i, r["value_s"]) for i, r in enumerate(self.runs)
              if r["name"] == name and r["tag"].startswith("repeat")]
      if not runs:
        continue
      # By rank, not by distance to the median: of two middle runs, both
      # are equally far from their mean, and rounding would pick one.
      values = sorted(v for _, v in runs)
      middle = {values[(len(values) - 1) // 2], values[len(values) // 2]}
      index = min(i for i, v in runs if v in middle)
      source = os.path.join(self.trace_dir, RUN_TRACES, str(index))
      for f in sorted(os.listdir(source)):
        if f == RUN_PLAN:
          os.makedirs(os.path.join(self.out_dir, "plans"), exist_ok=True)
          target = os.path.join(self.out_dir, "plans", f"{name}.json")
        else:
          target = os.path.join(self.trace_dir, f)
        shutil.move(os.path.join(source, f), target)
      kept[name] = index
    shutil.rmtree(os.path.join(self.trace_dir, RUN_TRACES), ignore_errors=True)
    return kept

  def cost_model(self) -> Optional[Dict[str, Any]]:
    """alpha-beta fitted over the medians of the all-reduces timed alone."""
    from tf_preempt.plan import cost  # pylint: disable=g-import-not-at-top
    medians = {b: statistics.median(t) for b, t in self.comm_samples.items()}
    if len(medians) < 2:
      return None
    fitted = cost.CostModel.fit(list(medians), list(medians.values()))
    return {"alpha": fitted.alpha, "beta": fitted.beta,
            "samples": {str(b): t for b, t in sorted(medians.items())},
            "source": "one float32 all-reduce at a time, no compute, "
                      "through the multi-worker strategy on the benchmark's "
                      "link (tf_preempt.bench.comm_worker); median of each "
                      "size over the repeats, least squares"}

  def _launch(self, command: Sequence[str], link) -> List[Dict[str, Any]]:
    return launch_measurement(command, self.num_workers, self.timeout_s,
                              link)

  def _compute_alone(self) -> Tuple[float, Dict[str, Any]]:
    return compute_alone(self.train_script, self.model, self.batch_size,
                         self.steps, self.warmup_steps, self.num_workers,
                         heap_args=self.heap_args, timeout_s=self.timeout_s)

  def _comm_alone(self) -> Tuple[float, Dict[str, Any]]:
    stats = self._launch([sys.executable, "-m",
                          "tf_preempt.bench.comm_worker",
                          f"--model={self.model}", *self.heap_args],
                         link=self.link)
    # The collectives are synchronous: the slowest worker's time is theirs.
    samples = {int(b): max(s["samples"][b] for s in stats)
               for b in stats[0]["samples"]}
    for b, t in samples.items():
      self.comm_samples.setdefault(b, []).append(t)
    return max(s["comm_s"] for s in stats), {"nbytes": stats[0]["nbytes"],
                                             "samples": samples}


def launch_measurement(command: Sequence[str], num_workers: int,
                       timeout_s: float, link=None) -> List[Dict[str, Any]]:
  """Runs `command` on `num_workers` workers at once, with the worker
  settings of the training rows (each pinned to its core, one intra-op
  thread), so that a reference sees the same CPU as they do.

  Args:
    command: the worker's command line.
    num_workers: processes, one per core.
    timeout_s: time limit of the launch.
    link: the emulated link (`tf_preempt.launch`), or None.

  Returns:
    Each worker's stats (`tf_preempt.launch.launch_for_stats`).

  Raises:
    RuntimeError: if a worker failed or timed out.
  """
  from tf_preempt import launch  # pylint: disable=g-import-not-at-top
  return launch.launch_for_stats(command, num_workers, timeout_s=timeout_s,
                                 link=link, **launch.MEASUREMENT_WORKER)


def compute_alone(train_script: str, model: str, batch_size: int, steps: int,
                  warmup_steps: int, num_workers: int, unroll: int = 1,
                  heap_args: Sequence[str] = (), timeout_s: float = 300.0
                  ) -> Tuple[float, Dict[str, Any]]:
  """The compute of a training step with no all-reduce: every worker trains
  its own shard (`batch_size` / `num_workers`) with no strategy at all, all
  at once, each pinned to its core as in the training runs.

  Args:
    train_script: the path of scripts/train.py.
    model: a model of the registry.
    batch_size: the global batch size of the training rows.
    steps: steps per run (a multiple of `unroll`).
    warmup_steps: steps left out of the median (a multiple of `unroll`).
    num_workers: processes, one per core.
    unroll: steps per `tf.function` call (K); the rows' reference is K=1.
    heap_args: the benchmark's heap flag.
    timeout_s: time limit of the launch.

  Returns:
    (the slowest worker's median seconds per step, {"per_worker_batch"}).

  Raises:
    ValueError: if `steps` or `warmup_steps` is not a multiple of `unroll`.
    RuntimeError: if a worker failed or timed out.
  """
  if steps % unroll or warmup_steps % unroll:
    raise ValueError(f"steps ({steps}) and warmup steps ({warmup_steps}) "
                     f"must be multiples of the unroll ({unroll})")
  per_worker = batch_size // num_workers
  stats = launch_measurement(
      [sys.executable, train_script, "--strategy=one_device",
       f"--model={model}", f"--batch_size={per_worker}", f"--steps={steps}",
       f"--unroll={unroll}", f"--warmup_blocks={warmup_steps // unroll}",
       *heap_args],
      num_workers, timeout_s)
  return max(s["median_step_s"] for s in stats), {
      "per_worker_batch": per_worker}


def speed_reading(num_workers: int, heap_args: Sequence[str] = (),
                  timeout_s: float = 120.0) -> float:
  """Milliseconds per matmul of `speed_worker`'s chain, the slowest of
  `num_workers` workers pinned as the benchmark's are (run all at once,
  so that each core is as busy as in a run).

  Raises:
    RuntimeError: if a worker failed or timed out.
  """
  stats = launch_measurement(
      [sys.executable, "-m", "tf_preempt.bench.speed_worker", *heap_args],
      num_workers, timeout_s)
  return max(s["ms_per_matmul"] for s in stats)


def define_repeat_flags(default_repeats: int, each: str, settled: str
                        ) -> None:
  """Defines a benchmark script's --repeats, --max_repeats and
  --settle_tolerance (the arguments of `repeat_until_settled`).

  Args:
    default_repeats: --repeats' default.
    each: what runs once per repeat, as in "Runs of every row".
    settled: whose medians must settle, as in "every row's".
  """
  # pylint: disable=g-import-not-at-top
  from absl import flags
  # pylint: enable=g-import-not-at-top
  flags.DEFINE_integer("repeats", default_repeats,
                       f"Runs of {each} (at least).")
  flags.DEFINE_integer("max_repeats", 0,
                       "> --repeats (>= 2): after --repeats, whole repeats "
                       f"are added until {settled} median is within "
                       "--settle_tolerance of its fastest run, up to this "
                       "many; 0: exactly --repeats.")
  flags.DEFINE_float("settle_tolerance", SETTLE_TOLERANCE,
                     "See --max_repeats (a fraction of the fastest run).")


def define_model_batch_flags() -> None:
  """Defines a per-model probe's --models and --batch_sizes (the
  benchmarks' three models at their batch per worker)."""
  # pylint: disable=g-import-not-at-top
  from absl import flags
  # pylint: enable=g-import-not-at-top
  flags.DEFINE_list("models", ["transformer_tiny", "vgg_small", "resnet20"],
                    "Models of the registry.")
  flags.DEFINE_list("batch_sizes", ["32", "5", "12"],
                    "Each model's batch of one worker (the benchmarks' "
                    "global batch over 2 workers), in --models' order.")


def model_batches(models: Sequence[str], batch_sizes: Sequence[str]
                  ) -> List[Tuple[str, int]]:
  """(model, batch) pairs of --models and --batch_sizes.

  Args:
    models: model names.
    batch_sizes: each model's batch of one worker, as the flag's strings.

  Returns:
    [(model, batch)], in `models`' order.

  Raises:
    ValueError: if the two lists differ in length or a batch is no
      positive integer.
  """
  if len(batch_sizes) != len(models):
    raise ValueError(f"--batch_sizes has {len(batch_sizes)} values for "
                     f"{len(models)} --models")
  pairs = []
  for model, batch in zip(models, batch_sizes):
    if not str(batch).isdigit() or int(batch) < 1:
      raise ValueError(f"--batch_sizes: {batch!r} is no positive integer")
    pairs.append((model, int(batch)))
  return pairs


def flagged_model_batches() -> List[Tuple[str, int]]:
  """`model_batches` of the parsed --models and --batch_sizes.

  Returns:
    [(model, batch)], in --models' order.

  Raises:
    absl.app.UsageError: if they do not fit together.
  """
  # pylint: disable=g-import-not-at-top
  from absl import app
  from absl import flags
  # pylint: enable=g-import-not-at-top
  try:
    return model_batches(flags.FLAGS.models, flags.FLAGS.batch_sizes)
  except ValueError as e:
    raise app.UsageError(str(e)) from e


def paired_run_order(repeats: int, pairs: Sequence[Tuple[str, int]]
                     ) -> Iterator[Tuple[int, str, int, int]]:
  """The runs of a K = 1 / K = 2 probe, in the order to run them.

  Args:
    repeats: repeats of each pair of runs.
    pairs: (model, batch) to run, in order.

  Yields:
    (repeat, model, batch, K): per repeat, each model at K = 1 and 2, the
    two K in alternating order from repeat to repeat, so that a drift of
    the machine's speed falls on both.
  """
  for repeat in range(repeats):
    unrolls = (1, 2) if repeat % 2 == 0 else (2, 1)
    for model, batch in pairs:
      for unroll in unrolls:
        yield repeat, model, batch, unroll


def paired_repeats(records: Sequence[Dict[str, Any]],
                   settings: Sequence[str] = ("per_worker_batch",)
                   ) -> Dict[str, Tuple[Dict[str, Any],
                                        List[Tuple[int, Dict[int, Any]]]]]:
  """A K = 1 / K = 2 probe's runs, by model and repeat.

  Args:
    records: the runs, each with "model", "repeat", "unroll" and the
      `settings` keys.
    settings: what a model's runs must agree on.

  Returns:
    {model: ({setting: value}, [(repeat, {1: its K = 1 run, 2: its K = 2
    run})] by repeat)}.

  Raises:
    ValueError: if a model's runs differ in a setting, or a repeat lacks
      K = 1 or K = 2.
  """
  by_model: Dict[str, Dict[int, Dict[int, Dict[str, Any]]]] = {}
  seen: Dict[str, set] = {}
  for r in records:
    by_model.setdefault(r["model"], {}).setdefault(
        r["repeat"], {})[r["unroll"]] = r
    seen.setdefault(r["model"], set()).add(tuple(r[k] for k in settings))
  out = {}
  for model, repeats in by_model.items():
    if len(seen[model]) != 1:
      raise ValueError(f"{model}: measured in settings "
                       f"{sorted(seen[model])} of {tuple(settings)}; one "
                       "per model")
    for repeat, runs in sorted(repeats.items()):
      if set(runs) != {1, 2}:
        raise ValueError(f"{model}, repeat {repeat}: runs at K = "
                         f"{sorted(runs)}, not 1 and 2")
    out[model] = (dict(zip(settings, seen[model].pop())),
                  sorted(repeats.items()))
  return out


def write_probe(out_dir: str, filename: str, models: Dict[str, Any],
                runs: Sequence[Dict[str, Any]]) -> str:
  """Writes a probe's `out_dir/filename`: {"machine", "models", "runs"}.

  Args:
    out_dir: the directory (made if missing).
    filename: the JSON file's name.
    models: the per-model summary.
    runs: every run's record.

  Returns:
    The path written.
  """
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, filename)
  with open(path, "w") as out:
    json.dump({"machine": machine(), "models": models, "runs": list(runs)},
              out, indent=1)
  return path


def resolved_max_repeats(repeats: int, max_repeats: Optional[int]) -> int:
  """The most repeats to run, checked before any run.

  Args:
    repeats: the repeats always run (>= 1).
    max_repeats: None or 0 (exactly `repeats`), or more: the cap of
      `repeat_until_settled`.

  Returns:
    The cap (`repeats` without one).

  Raises:
    ValueError: if `repeats` is below 1, `max_repeats` below `repeats`, or
      above a `repeats` of 1 (one run is always settled).
  """
  cap = max_repeats or repeats
  if repeats < 1 or cap < repeats or (cap > repeats and repeats < 2):
    raise ValueError(f"max_repeats {max_repeats} with repeats {repeats}: "
                     "repeats must be positive, max_repeats 0 or at least "
                     "repeats, and above it only with 2 or more repeats "
                     "(one run is always settled)")
  return cap


def repeat_tag(repeat: int, repeats: int, max_repeats: int) -> str:
  """How a run of 0-based `repeat` is logged: "repeat 2/3:", or, with
  repeats added until settled, "repeat 4 (3 to 9, until settled):"."""
  if max_repeats > repeats:
    return f"repeat {repeat + 1} ({repeats} to {max_repeats}, until settled):"
  return f"repeat {repeat + 1}/{repeats}:"


def repeat_until_settled(
    run_one: Callable[[Setting, int], float], order: Sequence[Setting],
    repeats: int, max_repeats: int, tolerance: float = SETTLE_TOLERANCE,
    log=print) -> Tuple[Dict[str, List[float]], int, List[str]]:
  """Runs `order` in alternating repeats until every setting has settled.

  Args:
    run_one: runs a setting once, given it and the 0-based repeat; returns
      its value (seconds).
    order: the settings of one repeat.
    repeats: the repeats always run.
    max_repeats: the most repeats run (>= `repeats`).
    tolerance: see `unsettled`.
    log: prints a line.

  Returns:
    ({name: the values of its runs, in run order}, the repeats run, the
    names still unsettled when they stopped).
  """
  by_name: Dict[str, List[float]] = {s.name: [] for s in order}
  done = 0
  while True:
    for s in in_repeat_order(order, done):
      by_name[s.name].append(run_one(s, done))
    done += 1
    if done < repeats:
      continue
    left = unsettled(by_name, tolerance)
    if not left or done >= max_repeats:
      return by_name, done, left
    log(f"not settled after {done} repeat(s) (median more than "
        f"{tolerance:.0%} above the fastest run): {', '.join(left)}")


def pick_best(bench: Bench, scheduler: str, flag: str,
              values: Sequence[int]) -> Tuple[int, Dict[int, float]]:
  """Runs `scheduler` at K=1 once per value of `flag`; the fastest value."""
  times = {}
  for v in values:
    times[v] = bench.run(Setting(f"{scheduler}@1", scheduler, 1,
                                 (f"--{flag}={v}",)), tag=f"pre-pass {flag}="
                         f"{v // MIB} MiB: ")
  return min(values, key=lambda v: (times[v], v)), times


def run(train_once: Callable[..., Dict[str, Any]], *, model: str,
        num_workers: int, bandwidth: Optional[str], steps: int,
        warmup_steps: int, schedulers: Sequence[str], repeats: int,
        out_dir: str, unroll: int, batch_size: int, command: str,
        train_script: str, timeout_s: float = 300.0,
        pace_profile_steps: int = 0, pace_sparse_as_dense: bool = False,
        heap_mode: str = heap.DEFAULT_MODE,
        max_repeats: Optional[int] = None,
        settle_tolerance: float = SETTLE_TOLERANCE,
        log=print) -> Dict[str, Any]:
  """The whole benchmark; writes results.json, results.md, timeline.png.

  The other arguments are scripts/bench.py's flags (`num_workers` is
  --workers, `out_dir` --out, `heap_mode` --heap), the training run
  (`train_once`, `train_script`), the command line for results.json and
  where to print.

  Args:
    repeats: the repeats always run.
    max_repeats: None (= `repeats`) or more: after `repeats`, whole
      repeats are added while a row or a reference has not settled
      (`unsettled` at `settle_tolerance`), up to this many.
    settle_tolerance: see `unsettled`.

  Returns:
    The results.json dict.

  Raises:
    ValueError: if `max_repeats` is below `repeats`, or above a `repeats`
      of 1 (one run is always settled).
  """
  max_repeats = resolved_max_repeats(repeats, max_repeats)
  until_settled = max_repeats > repeats
  start = time.perf_counter()
  link = link_of(bandwidth)
  bench = Bench(train_once, model=model, batch_size=batch_size, steps=steps,
                warmup_steps=warmup_steps, num_workers=num_workers,
                link=link, timeout_s=timeout_s, out_dir=out_dir,
                train_script=train_script, heap_mode=heap_mode, log=log)
  settling = (f", then up to {max_repeats} until settled" if until_settled
              else "")
  log(f"bench: {model}, global batch {batch_size}, {num_workers} workers, "
      f"{bandwidth or 'loopback'}, {steps} steps per run "
      f"({warmup_steps} not timed), {repeats} repeat(s){settling}, "
      f"K={unroll}")
  prepass = {}
  pack = credit = None
  if "tf_packed" in schedulers:
    pack, prepass["tf_packed bytes_per_pack"] = pick_best(
        bench, "tf_packed", "bytes_per_pack", PACK_BYTES)
  if "bytescheduler" in schedulers:
    credit, prepass["bytescheduler credit_bytes"] = pick_best(
        bench, "bytescheduler", "credit_bytes", CREDIT_BYTES)
  rows = settings_of(schedulers, unroll, pack, credit, pace_profile_steps,
                     pace_sparse_as_dense)
  order = rows + [Setting(COMPUTE), Setting(COMM), Setting(SPEED)]
  by_name, done, left = repeat_until_settled(
      lambda s, repeat: bench.run(
          s, tag=repeat_tag(repeat, repeats, max_repeats) + " "),
      order, repeats, max_repeats, settle_tolerance, log)
  trace_runs = bench.keep_median_runs([s.name for s in rows])
  compute_s = statistics.median(by_name.pop(COMPUTE))
  comm_s = statistics.median(by_name.pop(COMM))
  speed_ms = statistics.median(by_name.pop(SPEED)) * 1e3
  loads = [r["load_before"] for r in bench.runs]
  description = (f"{machine()}; load average before each run "
                 f"{min(loads):.2f}-{max(loads):.2f}; link "
                 f"{link.describe() if link else 'loopback'}; workers pinned "
                 f"to one core each, 1 intra-op thread; heap {heap_mode}")
  results = results_lib.aggregate(by_name, compute_s, comm_s, command,
                                  description)
  results_lib.check_schema(results)
  with open(os.path.join(out_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
  details = {"settings": {s.name: {"args": list(s.args),
                                   "description": s.description}
                          for s in rows},
             "prepass": {k: {str(b): t for b, t in v.items()}
                         for k, v in prepass.items()},
             "runs": bench.runs, "elapsed_s": time.perf_counter() - start,
             "batch_size": batch_size, "steps": steps,
             "warmup_steps": warmup_steps, "repeats": done,
             "min_repeats": repeats, "max_repeats": max_repeats,
             "settle_tolerance": settle_tolerance,
             # Settings still unsettled when the repeats stopped.
             "unsettled": left,
             # Each row's traces are of this run (an index into "runs"):
             # the repeat run nearest the row's median.
             "trace_runs": trace_runs,
             "heap": heap_mode,
             # The median over the repeats; each reading is a "speed
             # reading" run (its value_s: seconds per matmul).
             "speed_ms_per_matmul": speed_ms}
  with open(os.path.join(out_dir, "details.json"), "w") as f:
    json.dump(details, f, indent=1)
  cost_model = bench.cost_model()
  if cost_model is not None:
    with open(os.path.join(out_dir, "cost_model.json"), "w") as f:
      json.dump(cost_model, f, indent=1)
  timeline.plot_directory(
      out_dir, [s.name for s in rows],
      title=f"{model}, global batch {batch_size}, {num_workers} workers, "
      f"{bandwidth or 'loopback'}: one steady-state block per row (worker 0)")
  pace = next((s.name for s in rows if s.scheduler == "pace"), None)
  with open(os.path.join(out_dir, "results.md"), "w") as f:
    f.write(results_lib.markdown(results, details, pace))
  log(results_lib.markdown(results, details, pace))
  log(f"Done in {time.perf_counter() - start:.0f} s; {out_dir}")
  return results
