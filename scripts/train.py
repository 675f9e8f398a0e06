r"""Trains a model of the registry with Keras `fit` and prints its stats.

  python scripts/train.py --model resnet20 --batch_size 64 --steps 50
  python scripts/launch.py --num_workers 2 --emulate_bandwidth 2gbit -- \
      python scripts/train.py --strategy multi_worker --scheduler pace \
      --unroll 2 --model vgg_small --batch_size 16 --steps 40

Every flag is checked before TensorFlow is imported: a bad value, a
contradiction or a malformed TF_CONFIG fails at once with a message naming
the flag (exit code 2). At the end the binary prints exactly one line on
stdout, the JSON stats of `tf_preempt.training.run`.
"""

import json
import sys
from typing import Any, Dict, Sequence

from absl import app
from absl import flags

from tf_preempt import heap
from tf_preempt.models import registry as model_registry
from tf_preempt.training import config as config_lib

_USAGE_EXIT_CODE = 2


def define_flags() -> None:
  """Defines the command-line flags (all optional, so tests need none)."""
  d = config_lib.TrainConfig()
  flags.DEFINE_string("model", d.model, "Model: " +
                      ", ".join(model_registry.names()) + ".")
  flags.DEFINE_integer("batch_size", d.batch_size,
                       "GLOBAL batch size (all replicas of all workers).")
  flags.DEFINE_integer("steps", None, "Total training steps (exclusive "
                       f"with --epochs; default {config_lib.DEFAULT_STEPS}).")
  flags.DEFINE_integer("epochs", None, "Training epochs (exclusive with "
                       "--steps).")
  flags.DEFINE_integer("steps_per_epoch", None,
                       "Steps per epoch (default: all --steps in one epoch, "
                       "or the whole data set).")
  flags.DEFINE_string("strategy", d.strategy,
                      "|".join(config_lib.STRATEGIES) +
                      "; multi_worker reads TF_CONFIG.")
  flags.DEFINE_list("devices", None, "Devices of --strategy=mirrored or "
                    "stock_mirrored (default: all local devices).")
  flags.DEFINE_string("scheduler", None,
                      "|".join(config_lib.SCHEDULERS) +
                      f" (default {config_lib.DEFAULT_SCHEDULER}); "
                      "tf_default reduces exactly as stock TensorFlow.")
  flags.DEFINE_integer("bytes_per_pack", None,
                       "tf_default: CommunicationOptions.bytes_per_pack; "
                       "tf_packed: the pack size.")
  flags.DEFINE_integer("chunk_bytes", None,
                       "Chunk size of schedulers that take one (pace).")
  flags.DEFINE_integer("credit_bytes", None,
                       "Bytes in flight per device (scheduler op).")
  flags.DEFINE_integer("telemetry_iterations", None,
                       "Steps of collective records --timeline gets (the "
                       "scheduler op keeps the last 16 by default).")
  flags.DEFINE_bool("sparse_as_dense", d.sparse_as_dense,
                    "Reduce IndexedSlices gradients (embeddings) densely, "
                    "scheduled by the plan, instead of all-gathering them "
                    "after it as stock TensorFlow does.")
  flags.DEFINE_string("scheduler_op", d.scheduler_op,
                      "|".join(config_lib.SCHEDULER_OP_MODES) +
                      ": gate collectives with the C++ scheduler op.")
  flags.DEFINE_integer("unroll", d.unroll,
                       "Steps traced as one flat graph (cross-step overlap).")
  flags.DEFINE_string("implementation", d.implementation,
                      "|".join(config_lib.IMPLEMENTATIONS) +
                      ": collective implementation.")
  flags.DEFINE_float("collective_timeout_s", None,
                     "Fail a collective after this many seconds (also "
                     "bounds a live but stuck peer; costs two sleeping "
                     "threads per collective launch). Default: none, as "
                     "stock; dead peers are named by the heartbeat.")
  flags.DEFINE_string("plan", None, "Plan JSON file for the gradients.")
  flags.DEFINE_integer("profile_steps", d.profile_steps,
                       "Steps to profile before re-planning (0: off).")
  flags.DEFINE_string("timeline", None, "Chrome trace JSON file to write.")
  flags.DEFINE_string("model_dir", None,
                      "Checkpoints and backups (per-worker subdirectory).")
  flags.DEFINE_string("mixed_precision", None,
                      "|".join(config_lib.MIXED_PRECISION) + ".")
  flags.DEFINE_string("data", d.data, "synthetic or tfds:NAME.")
  flags.DEFINE_string("data_dir", None, "tensorflow-datasets data_dir.")
  flags.DEFINE_integer("intra_op_threads", None,
                       "TensorFlow intra-op threads.")
  flags.DEFINE_integer("inter_op_threads", None,
                       "TensorFlow inter-op threads.")
  heap.define_flag()
  flags.DEFINE_float("learning_rate", d.learning_rate, "SGD learning rate.")
  flags.DEFINE_integer("seed", d.seed, "Seed of weights and synthetic data.")
  flags.DEFINE_integer("warmup_blocks", d.warmup_blocks,
                       "Blocks of --unroll steps left out of the median.")
  flags.DEFINE_string("tf_profiler_dir", None,
                      "Profile --tf_profiler_blocks blocks after the "
                      "--warmup_blocks with TensorFlow's profiler on worker "
                      "0 into DIR/worker-0 (for TensorBoard). Only the "
                      "chief: its stop crashed other workers (TensorFlow "
                      "2.21); profile a separate run all the same.")
  flags.DEFINE_integer("tf_profiler_blocks", None,
                       "Blocks --tf_profiler_dir profiles (default "
                       f"{config_lib.DEFAULT_PROFILER_BLOCKS}).")


def config_from_flags(flag_values=None) -> config_lib.TrainConfig:
  """The `TrainConfig` of the parsed flags (not validated yet)."""
  flag_values = flag_values or flags.FLAGS
  values: Dict[str, Any] = {}
  for field in config_lib.TrainConfig.__dataclass_fields__:
    values[field] = flag_values[field].value
  if values["devices"] is not None:
    values["devices"] = tuple(values["devices"])
  return config_lib.TrainConfig.from_dict(values)


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    print(f"train: unexpected arguments {argv[1:]}", file=sys.stderr)
    sys.exit(_USAGE_EXIT_CODE)
  config = config_from_flags()
  try:
    config.validate()
  except ValueError as e:
    # Before TensorFlow is imported: a bad flag costs a fraction of a second.
    print(f"train: error: {e}", file=sys.stderr)
    sys.exit(_USAGE_EXIT_CODE)
  from tf_preempt.training import runner  # pylint: disable=g-import-not-at-top
  stats = runner.run(config)
  print(json.dumps(stats), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
