"""`TrainConfig`: every setting of a training run, checked without TensorFlow.

`scripts/train.py` turns its flags into a `TrainConfig` and calls
`validate()` before anything imports TensorFlow, so that a typo fails in a
fraction of a second with a message naming the flag instead of after a
minute of TensorFlow start-up (or, for a bad TF_CONFIG, as a gRPC connection
that never comes up). Each check raises `ValueError` whose message starts
with the flag's name, e.g. "--batch_size must be ...".

Pure Python: nothing here imports TensorFlow or Keras.
"""

import dataclasses
import math
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from tf_preempt import heap as heap_lib
from tf_preempt.launch import tf_config as tf_config_lib
from tf_preempt.models import registry as model_registry
from tf_preempt.plan import registry as plan_registry

STRATEGIES = ("one_device", "mirrored", "multi_worker", "stock_mirrored")
# The strategies whose gradient all-reduce tf_preempt schedules; the others
# take no scheduler flag. "stock_mirrored" is tf.distribute.MirroredStrategy
# unchanged: the reference of the single-worker overhead benchmark.
PREEMPTIVE_STRATEGIES = ("mirrored", "multi_worker")
# The schedulers a strategy can run; "optimal" is exhaustive search, for
# tests of the planner only.
SCHEDULERS = ("pace", "priority", "fifo", "tf_default", "tf_packed",
              "horovod", "ddp", "bytescheduler")
IMPLEMENTATIONS = ("auto", "ring", "nccl")
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16")
SCHEDULER_OP_MODES = ("auto", "on", "off")
DEFAULT_SCHEDULER = "pace"
# Training length when neither --steps nor --epochs is given.
DEFAULT_STEPS = 20
# Distinct global batches of synthetic data (repeated); one synthetic epoch
# unless --steps_per_epoch says otherwise.
SYNTHETIC_BATCHES = 16
TFDS_PREFIX = "tfds:"
# The binaries' optimizer's name (Keras SGD), also its update ops' name
# scope: "sgd", "sgd_1", ... per step of an unrolled block. Named, or Keras
# would call a process's second SGD "sgd_1"; tf_preempt.bench.step_phases
# finds each step's updates by it.
OPTIMIZER_NAME = "sgd"
# Blocks --tf_profiler_dir profiles unless --tf_profiler_blocks says.
DEFAULT_PROFILER_BLOCKS = 4


@dataclasses.dataclass
class TrainConfig:
  """The settings of one training run; field names are the flag names.

  Attributes:
    model: a name of `tf_preempt.models.names()`.
    batch_size: the GLOBAL batch size (all replicas of all workers).
    steps: total training steps; exclusive with `epochs`. Neither: 20.
    epochs: passes over the data set; exclusive with `steps`.
    steps_per_epoch: steps of one epoch; by default one epoch of `steps`
      steps, or the whole data set with `epochs`.
    strategy: "one_device", "mirrored", "multi_worker" (reads TF_CONFIG) or
      "stock_mirrored" (tf.distribute.MirroredStrategy, no tf_preempt).
    devices: devices of the "mirrored" and "stock_mirrored" strategies; all
      local ones if None.
    scheduler: the all-reduce scheduler of the distributed strategies (None:
      "pace"); "tf_default" reduces exactly as stock TensorFlow does.
    bytes_per_pack: "tf_default": CommunicationOptions.bytes_per_pack (as
      stock; 0 = one pack); "tf_packed": the scheduler's pack size.
    chunk_bytes: chunk size of schedulers that take one ("pace").
    credit_bytes: bytes in flight per device, enforced by the scheduler op.
    telemetry_iterations: steps of collective records the scheduler op
      keeps for `timeline` (None: its default, the last 16).
    sparse_as_dense: reduce `IndexedSlices` gradients (embeddings) densely,
      inside the plan, instead of all-gathering them after it as stock does.
    scheduler_op: "auto" (use the C++ scheduler op if it loads), "on"
      (require it) or "off".
    unroll: steps traced into one flat graph (`tf_preempt.keras.unroll_steps`)
      so that step k+1's forward pass overlaps step k's all-reduce.
    implementation: collective implementation: "auto", "ring" or "nccl".
    collective_timeout_s: seconds after which a collective fails with
      `DeadlineExceededError`, also bounding a peer that is alive but
      stuck; None (the default): no timeout, as stock (dead peers are still
      named by the heartbeat). TensorFlow keeps two sleeping threads per
      collective launch for this long, so a long timeout with many
      collectives a second piles up threads.
    plan: path of a plan JSON file (`Plan.to_json`) for the gradients.
    profile_steps: steps to profile before re-planning (0: off).
    timeline: path of a Chrome trace JSON file to write at the end.
    model_dir: checkpoints (ModelCheckpoint) and a backup to resume from
      (BackupAndRestore), under a subdirectory per worker.
    mixed_precision: a Keras mixed precision policy name, or None.
    data: "synthetic" or "tfds:NAME".
    data_dir: tensorflow-datasets data directory (with "tfds:").
    intra_op_threads: TensorFlow intra-op threads (None: TF's default).
    inter_op_threads: TensorFlow inter-op threads (None: TF's default).
    heap: where glibc keeps large host buffers: "tensorflow" (TensorFlow's
      128 KiB mmap threshold, as in any `fit` under a strategy) or "keep"
      (up to 32 MiB from the heap, reused: fewer page faults per
      collective, more memory kept); `tf_preempt.configure_heap`.
    learning_rate: SGD learning rate (momentum 0.9).
    seed: seed of the weights and of the synthetic data.
    warmup_blocks: timed blocks (of `unroll` steps) left out of the median;
      the first one also traces the function.
    tf_profiler_dir: TensorFlow's profiler runs on worker 0 (the chief)
      over the first `tf_profiler_blocks` blocks after the `warmup_blocks`
      and writes its profile (TensorBoard's profile plugin reads it) under
      this directory, in "worker-0"; None: off. Only the chief: stopping
      it crashed the other worker of two-worker runs
      (`tf_preempt.training.profiling.ProfileBlocks`); profile a separate
      run all the same. The profiled blocks' times, in the median unless
      the warm-up covers them, include the profiler's cost.
    tf_profiler_blocks: blocks profiled (None: DEFAULT_PROFILER_BLOCKS);
      needs `tf_profiler_dir`.
  """
  model: str = "resnet20"
  batch_size: int = 32
  steps: Optional[int] = None
  epochs: Optional[int] = None
  steps_per_epoch: Optional[int] = None
  strategy: str = "one_device"
  devices: Optional[Tuple[str, ...]] = None
  scheduler: Optional[str] = None
  bytes_per_pack: Optional[int] = None
  chunk_bytes: Optional[int] = None
  credit_bytes: Optional[int] = None
  telemetry_iterations: Optional[int] = None
  sparse_as_dense: bool = False
  scheduler_op: str = "auto"
  unroll: int = 1
  implementation: str = "auto"
  collective_timeout_s: Optional[float] = None
  plan: Optional[str] = None
  profile_steps: int = 0
  timeline: Optional[str] = None
  model_dir: Optional[str] = None
  mixed_precision: Optional[str] = None
  data: str = "synthetic"
  data_dir: Optional[str] = None
  intra_op_threads: Optional[int] = None
  inter_op_threads: Optional[int] = None
  heap: str = heap_lib.DEFAULT_MODE
  learning_rate: float = 0.01
  seed: int = 0
  warmup_blocks: int = 2
  tf_profiler_dir: Optional[str] = None
  tf_profiler_blocks: Optional[int] = None

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> "TrainConfig":
    """Builds a config from a mapping of field names (e.g. parsed flags).

    Raises:
      ValueError: on a name that is not a field.
    """
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
      raise ValueError(f"unknown setting(s) {unknown}; valid: "
                       f"{sorted(fields)}")
    return cls(**values)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  # --- derived values -------------------------------------------------------

  @property
  def effective_scheduler(self) -> str:
    return self.scheduler or DEFAULT_SCHEDULER

  @property
  def preemptive(self) -> bool:
    """Whether tf_preempt schedules this run's gradient all-reduce."""
    return self.strategy in PREEMPTIVE_STRATEGIES

  @property
  def tfds_name(self) -> Optional[str]:
    """The data set name of "tfds:NAME", or None for synthetic data."""
    if self.data.startswith(TFDS_PREFIX):
      return self.data[len(TFDS_PREFIX):]
    return None

  # --- validation -----------------------------------------------------------

  def validate(self, environ: Optional[Mapping[str, str]] = None
              ) -> "TrainConfig":
    """Checks every value and combination; imports no TensorFlow.

    Args:
      environ: the environment to read TF_CONFIG from ("multi_worker");
        `os.environ` if None.

    Returns:
      self, for chaining.

    Raises:
      ValueError: naming the flag (e.g. "--unroll ...") of the first problem
        found, or "TF_CONFIG ..." for a malformed cluster description.
    """
    self._check_values()
    self._check_combinations()
    if self.strategy == "multi_worker":
      self.tf_config(environ)
    return self

  def tf_config(self, environ: Optional[Mapping[str, str]] = None
               ) -> Dict[str, Any]:
    """The parsed, validated TF_CONFIG of a "multi_worker" run.

    Raises:
      ValueError: if TF_CONFIG is unset or malformed (the launcher's message).
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    if text is None:
      raise ValueError("--strategy=multi_worker needs the TF_CONFIG "
                       "environment variable (scripts/launch.py sets it)")
    return tf_config_lib.parse_tf_config(text)

  def _check_values(self) -> None:
    _one_of("model", self.model, model_registry.names())
    _positive_int("batch_size", self.batch_size)
    _optional_positive_int("steps", self.steps)
    _optional_positive_int("epochs", self.epochs)
    _optional_positive_int("steps_per_epoch", self.steps_per_epoch)
    _one_of("strategy", self.strategy, STRATEGIES)
    if self.devices is not None:
      if (isinstance(self.devices, str) or not self.devices or
          not all(isinstance(d, str) and d for d in self.devices)):
        raise ValueError(f"--devices must be a non-empty list of device "
                         f"names, got {self.devices!r}")
      if len(set(self.devices)) != len(self.devices):
        raise ValueError(f"--devices lists a device twice: {self.devices!r}")
    if self.scheduler is not None:
      _one_of("scheduler", self.scheduler, SCHEDULERS)
    _optional_int("bytes_per_pack", self.bytes_per_pack, minimum=0)
    _optional_positive_int("chunk_bytes", self.chunk_bytes)
    _optional_int("credit_bytes", self.credit_bytes, minimum=0)
    _optional_positive_int("telemetry_iterations", self.telemetry_iterations)
    if not isinstance(self.sparse_as_dense, bool):
      raise ValueError(f"--sparse_as_dense must be true or false, got "
                       f"{self.sparse_as_dense!r}")
    _one_of("scheduler_op", self.scheduler_op, SCHEDULER_OP_MODES)
    _positive_int("unroll", self.unroll)
    _one_of("implementation", self.implementation, IMPLEMENTATIONS)
    if self.collective_timeout_s is not None:
      _positive_number("collective_timeout_s", self.collective_timeout_s,
                       finite=True)
    if self.plan is not None:
      if not isinstance(self.plan, str) or not self.plan:
        raise ValueError(f"--plan must be a file path, got {self.plan!r}")
      if not os.path.isfile(self.plan):
        raise ValueError(f"--plan file {self.plan!r} does not exist")
    _optional_int("profile_steps", self.profile_steps, minimum=0)
    for name in ("timeline", "model_dir", "tf_profiler_dir"):
      value = getattr(self, name)
      if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"--{name} must be a path, got {value!r}")
    if self.timeline is not None and os.path.isdir(self.timeline):
      raise ValueError(f"--timeline must be a file path, not the directory "
                       f"{self.timeline!r}")
    if self.mixed_precision is not None:
      _one_of("mixed_precision", self.mixed_precision, MIXED_PRECISION)
    if not isinstance(self.data, str) or not (
        self.data == "synthetic" or
        (self.data.startswith(TFDS_PREFIX) and len(self.data) > 5)):
      raise ValueError(f"--data must be 'synthetic' or 'tfds:NAME', got "
                       f"{self.data!r}")
    if self.data_dir is not None and (not isinstance(self.data_dir, str) or
                                      not self.data_dir):
      raise ValueError(f"--data_dir must be a path, got {self.data_dir!r}")
    _optional_positive_int("intra_op_threads", self.intra_op_threads)
    _optional_positive_int("inter_op_threads", self.inter_op_threads)
    _one_of("heap", self.heap, heap_lib.HEAP_MODES)
    _positive_number("learning_rate", self.learning_rate)
    _optional_int("seed", self.seed, minimum=0)
    _optional_int("warmup_blocks", self.warmup_blocks, minimum=0)
    if self.tf_profiler_dir is not None and os.path.isfile(
        self.tf_profiler_dir):
      raise ValueError(f"--tf_profiler_dir must be a directory, not the "
                       f"file {self.tf_profiler_dir!r}")
    _optional_positive_int("tf_profiler_blocks", self.tf_profiler_blocks)

  def _check_combinations(self) -> None:
    if self.steps is not None and self.epochs is not None:
      raise ValueError("--steps and --epochs are exclusive: give the total "
                       "number of steps or the number of epochs, not both")
    if self.steps is not None and self.steps_per_epoch is not None:
      if self.steps % self.steps_per_epoch:
        raise ValueError(f"--steps={self.steps} must be a multiple of "
                         f"--steps_per_epoch={self.steps_per_epoch}")
    epoch_steps = self.steps_per_epoch or self.steps
    if (epoch_steps is None and self.epochs is not None and
        self.tfds_name is None):
      epoch_steps = SYNTHETIC_BATCHES
    if self.epochs is None and self.steps is None:
      epoch_steps = self.steps_per_epoch or DEFAULT_STEPS
    if epoch_steps is not None and epoch_steps % self.unroll:
      raise ValueError(f"--unroll={self.unroll} must divide the steps of an "
                       f"epoch ({epoch_steps}): each block of --unroll steps "
                       f"runs as one graph")
    if self.devices is not None and self.strategy not in ("mirrored",
                                                           "stock_mirrored"):
      raise ValueError(f"--devices applies to --strategy=mirrored or "
                       f"stock_mirrored only, not {self.strategy!r}")
    if not self.preemptive:
      why = (f"--strategy={self.strategy} (" +
             ("no all-reduce" if self.strategy == "one_device" else
              "stock TensorFlow reduces, nothing is scheduled") + ")")
      if self.profile_steps:
        raise ValueError(f"--profile_steps has no effect with {why}")
      for name in ("scheduler", "bytes_per_pack", "chunk_bytes",
                   "credit_bytes", "telemetry_iterations", "plan"):
        if getattr(self, name) is not None:
          raise ValueError(f"--{name} has no effect with {why}; use "
                           f"mirrored or multi_worker")
      if self.sparse_as_dense:
        raise ValueError(f"--sparse_as_dense has no effect with {why}")
      if self.implementation != "auto":
        raise ValueError(f"--implementation has no effect with {why}")
      if self.collective_timeout_s is not None:
        raise ValueError(f"--collective_timeout_s has no effect with {why}")
      if self.scheduler_op != "auto":
        raise ValueError(f"--scheduler_op has no effect with {why}")
    scheduler = self.effective_scheduler
    if self.bytes_per_pack is not None and scheduler not in ("tf_default",
                                                             "tf_packed"):
      raise ValueError(f"--bytes_per_pack applies to --scheduler=tf_default "
                       f"or tf_packed, not {scheduler!r}")
    if self.bytes_per_pack == 0 and scheduler == "tf_packed":
      raise ValueError("--bytes_per_pack must be positive with "
                       "--scheduler=tf_packed (0 means one pack: use "
                       "--scheduler=tf_default)")
    if (self.chunk_bytes is not None and
        "chunk_bytes" not in plan_registry.options_of(scheduler)):
      takes = [s for s in SCHEDULERS
               if "chunk_bytes" in plan_registry.options_of(s)]
      raise ValueError(f"--chunk_bytes applies to --scheduler="
                       f"{'|'.join(takes)}, not {scheduler!r}")
    for name, what in (("credit_bytes", "enforced"),
                       ("telemetry_iterations", "recorded")):
      if getattr(self, name) is not None and self.scheduler_op == "off":
        raise ValueError(f"--{name} is {what} by the scheduler op; it "
                         "contradicts --scheduler_op=off")
    if self.plan is not None and self.scheduler is not None:
      # The plan decides the gradients' order; a scheduler flag would only
      # plan the small other all-reduces, which is not what anyone means.
      raise ValueError("--plan and --scheduler are exclusive: the plan "
                       "fixes the gradient all-reduce")
    if self.plan is not None and (self.chunk_bytes is not None or
                                  self.bytes_per_pack is not None):
      raise ValueError("--plan fixes fusion and chunks; --chunk_bytes and "
                       "--bytes_per_pack contradict it")
    if self.implementation == "nccl" and self.strategy == "multi_worker" and (
        self.mixed_precision == "mixed_bfloat16"):
      raise ValueError("--implementation=nccl does not reduce bfloat16; use "
                       "--mixed_precision=mixed_float16 or "
                       "--implementation=ring")
    if self.data_dir is not None and self.tfds_name is None:
      raise ValueError("--data_dir applies to --data=tfds:NAME only")
    if self.profile_steps and self.steps is not None and (
        self.profile_steps >= self.steps):
      raise ValueError(f"--profile_steps={self.profile_steps} must be fewer "
                       f"than --steps={self.steps}")
    if self.tf_profiler_blocks is not None and self.tf_profiler_dir is None:
      raise ValueError("--tf_profiler_blocks has no effect without "
                       "--tf_profiler_dir")
    if (self.tf_profiler_dir is not None and self.steps is not None and
        self.steps // self.unroll <= self.warmup_blocks):
      raise ValueError(f"--tf_profiler_dir profiles the blocks after the "
                       f"{self.warmup_blocks} --warmup_blocks, but "
                       f"--steps={self.steps} runs only "
                       f"{self.steps // self.unroll} block(s) of "
                       f"--unroll={self.unroll}")
    if self.profile_steps and self.profile_steps % self.unroll:
      raise ValueError(f"--profile_steps={self.profile_steps} must be a "
                       f"multiple of --unroll={self.unroll}")

  # --- training length ------------------------------------------------------

  def schedule(self, dataset_steps: Optional[int] = None
              ) -> Tuple[int, int]:
    """(epochs, steps per epoch) of the run.

    Args:
      dataset_steps: global batches in one pass over the data set, or None
        if unknown; needed with --epochs and no --steps_per_epoch.

    Raises:
      ValueError: if the length cannot be worked out.
    """
    if self.steps is None and self.epochs is None:
      per_epoch = self.steps_per_epoch or DEFAULT_STEPS
      return max(1, DEFAULT_STEPS // per_epoch), per_epoch
    if self.steps is not None:
      per_epoch = self.steps_per_epoch or self.steps
      return self.steps // per_epoch, per_epoch
    per_epoch = self.steps_per_epoch or dataset_steps
    if dataset_steps is None and per_epoch is None:
      raise ValueError(f"--data={self.data!r} does not say how many "
                       f"examples it has; give --steps_per_epoch or --steps")
    if not per_epoch:
      raise ValueError(f"--data={self.data!r} has fewer examples than one "
                       f"global batch of --batch_size={self.batch_size}")
    return self.epochs, per_epoch - per_epoch % self.unroll or self.unroll


def _one_of(name: str, value: Any, valid) -> None:
  if value not in valid:
    raise ValueError(f"--{name} must be one of {', '.join(valid)}; got "
                     f"{value!r}")


def _is_int(value: Any) -> bool:
  # bool is an int in Python; --unroll=True is a mistake, not 1.
  return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(name: str, value: Any) -> None:
  if not _is_int(value) or value < 1:
    raise ValueError(f"--{name} must be a positive integer, got {value!r}")


def _optional_positive_int(name: str, value: Any) -> None:
  if value is not None:
    _positive_int(name, value)


def _positive_number(name: str, value: Any, finite: bool = False) -> None:
  # bool is a number in Python too; NaN is not > 0.
  if (isinstance(value, bool) or not isinstance(value, (int, float)) or
      not value > 0 or (finite and not math.isfinite(value))):
    raise ValueError(f"--{name} must be a positive{' finite' * finite} "
                     f"number, got {value!r}")


def _optional_int(name: str, value: Any, minimum: int) -> None:
  if value is not None and (not _is_int(value) or value < minimum):
    raise ValueError(f"--{name} must be an integer >= {minimum}, got "
                     f"{value!r}")
