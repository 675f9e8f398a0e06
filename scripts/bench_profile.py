"""Prints what profiling costs and the step time before and after re-planning.

In-process: two replicas on two logical CPUs (PreemptiveMirroredStrategy),
an MLP of a few MB of gradients, Keras `fit` with `ProfileAndReplan`
(optionally with `unroll_steps`). Reports the profiling wall time, the
fitted cost model, the plan summary line, and the median step time with the
default plan (warm-up) and with the measured plan; then a second fit with
the same cache directory (the restart path: no profiling). No assertions:
the numbers are for reading.

  .venv/bin/python scripts/bench_profile.py --steps 40 --unroll 2
"""

import argparse
import os
import tempfile
import time

import numpy as np
import tensorflow as tf


def _split_cpu():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def _fit(callback, steps, width, depth, unroll, global_batch):
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt import PreemptiveMirroredStrategy  # pylint: disable=g-import-not-at-top
  from tf_preempt.keras.unrolled import unroll_steps  # pylint: disable=g-import-not-at-top
  strategy = PreemptiveMirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((width,))
    for _ in range(depth):
      x = keras.layers.Dense(width, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    model.compile(keras.optimizers.SGD(1e-3), "mse")
  if unroll > 1:
    unroll_steps(model, unroll)
  rng = np.random.RandomState(0)
  x = rng.randn(global_batch * steps, width).astype("float32")
  y = x[:, :1]
  start = time.perf_counter()
  model.fit(x, y, batch_size=global_batch, epochs=1, shuffle=False,
            verbose=0, callbacks=[callback])
  return time.perf_counter() - start, model


def run(steps, width, depth, unroll, global_batch, warmup):
  """Returns a dict of the measured numbers."""
  from tf_preempt.keras.replan import ProfileAndReplan  # pylint: disable=g-import-not-at-top
  from tf_preempt.profile import model_dag  # pylint: disable=g-import-not-at-top
  cache = tempfile.mkdtemp(prefix="tf_preempt_bench_profile_")
  first = ProfileAndReplan(global_batch, warmup_steps=warmup,
                           cache_dir=cache)
  fit_s, model = _fit(first, steps, width, depth, unroll, global_batch)
  second = ProfileAndReplan(global_batch, warmup_steps=warmup,
                            cache_dir=cache)
  fit_again_s, _ = _fit(second, steps, width, depth, unroll, global_batch)
  r = first.result
  return {
      "gradient_mb": model_dag.trainable_bytes(model) / 2**20,
      "tensors": len(model.trainable_variables),
      "profile_s": r.profile_seconds,
      "forward_ms": r.forward_s * 1e3,
      "backward_ms": r.backward_s * 1e3,
      "alpha_us": r.cost.alpha * 1e6,
      "bandwidth_gb_s": (1e-9 / r.cost.beta) if r.cost.beta else float("inf"),
      "collective_ms": {k: v * 1e3 for k, v in r.collective_seconds.items()},
      "summary": first.summary,
      "step_ms_default_plan": first.warmup_step_s * 1e3,
      "step_ms_measured_plan": first.replanned_step_s * 1e3,
      "predicted_ms": r.plan.predicted_iteration_s * 1e3,
      "fit_s": fit_s,
      "restart_from_cache": second.result.from_cache,
      "restart_step_ms": (second.replanned_step_s or float("nan")) * 1e3,
      "restart_fit_s": fit_again_s,
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=40)
  parser.add_argument("--width", type=int, default=512)
  parser.add_argument("--depth", type=int, default=4)
  parser.add_argument("--unroll", type=int, default=1)
  parser.add_argument("--global-batch", type=int, default=64)
  parser.add_argument("--warmup", type=int, default=8)
  args = parser.parse_args()
  _split_cpu()
  out = run(args.steps, args.width, args.depth, args.unroll,
            args.global_batch, args.warmup)
  print(out.pop("summary"))
  for key, value in out.items():
    if isinstance(value, dict):
      value = ", ".join(f"{k}: {v:.3f}" for k, v in sorted(value.items()))
    elif isinstance(value, float):
      value = f"{value:.3f}"
    print(f"{key:>22}: {value}")


if __name__ == "__main__":
  main()
