r"""A `fit` with or without Keras's per-step reduction of the logs: one worker.

  python -m tf_preempt.bench.log_reduction_worker --logs=reduced|local \
      --timeline=DIR/run.json [--model vgg_small --batch_size 10 ...]

Run as every worker of a TF_CONFIG cluster (`scripts/bench_log_reduction.py`
launches it). Trains as `scripts/train.py --strategy=multi_worker` does
(`tf_preempt.training.runner`, K=1). Under a multi-worker strategy, stock
Keras 3 turns each step's outputs (the loss and every metric) into logs with
`reduce_per_replica(..., "auto")`, i.e. `strategy.reduce("MEAN", value,
axis=0)` per output: collectives after every step. `--logs=local` makes that
reduction "first" (each worker logs its own replica's values; no
collective), to time what the reduction costs; the gradients and the
training are unchanged. Prints one JSON line (the median step time and the
last batch's logged loss) and writes the Chrome trace (`--timeline`, one
file per worker).
"""

import json
from typing import Sequence

from absl import app
from absl import flags


def define_flags(worker: bool = True) -> None:
  """The training flags (also scripts/bench_log_reduction.py's).

  Args:
    worker: also the worker's own --logs and --timeline.
  """
  flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 10, "Global batch size.")
  flags.DEFINE_integer("steps", 60, "Training steps.")
  flags.DEFINE_integer("warmup_blocks", 10, "Steps not timed.")
  flags.DEFINE_string("scheduler", "tf_default", "The gradients' scheduler.")
  if worker:
    flags.DEFINE_enum("logs", "reduced", ["reduced", "local"],
                      "reduced: stock Keras; local: no cross-worker "
                      "reduction of the step's logs.")
    flags.DEFINE_string("timeline", None, "Chrome trace path (per worker).")


def local_logs() -> None:
  """Makes Keras's "auto" reduction of the step outputs "first"."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt.keras import keras_internals
  # pylint: enable=g-import-not-at-top
  trainer = keras_internals.tensorflow_trainer
  stock = trainer.reduce_per_replica

  def first(values, strategy, reduction):
    return stock(values, strategy,
                 "first" if reduction == "auto" else reduction)

  trainer.reduce_per_replica = first


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  # pylint: disable=g-import-not-at-top
  from tf_preempt.training import config as config_lib
  from tf_preempt.training import runner
  import keras
  # pylint: enable=g-import-not-at-top
  f = flags.FLAGS
  if f.logs == "local":
    local_logs()
  batch_logs = {}
  # The epoch's logs read the metrics' synced variables (global either
  # way); a batch's logs are what the step's reduction made of them. Only
  # a reference is kept per step: reading the value would add a copy to
  # every timed step.
  last_batch = keras.callbacks.LambdaCallback(
      on_train_batch_end=lambda batch, logs: batch_logs.update(logs))
  stats = runner.run(config_lib.TrainConfig(
      model=f.model, batch_size=f.batch_size, steps=f.steps,
      strategy="multi_worker", scheduler=f.scheduler,
      warmup_blocks=f.warmup_blocks, timeline=f.timeline),
                     callbacks=[last_batch])
  print(json.dumps({"logs": f.logs, "median_step_s": stats["median_step_s"],
                    "last_batch_loss": float(batch_logs["loss"]),
                    "worker_index": stats["worker_index"]}), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
