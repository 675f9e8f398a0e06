r"""Runtime overhead: tf_default against stock, and the cost of chunking.

  .venv/bin/python scripts/bench_runtime.py [--steps 30] [--repeats 5]

1. Step time of a custom training loop (an MLP with ~25 MB of float32
   gradients, two replicas on two logical CPUs of this one process) under
   stock `MirroredStrategy` and under `PreemptiveMirroredStrategy` with
   `scheduler="tf_default"` (the same single pack as stock). The two run
   interleaved, `--repeats` times, so drift on a shared machine hits both;
   the medians and their ratio are printed.
2. Per-collective overhead of chunking for a 100 MB gradient set (25
   tensors of 4 MB), one replica (a group of one: the collective itself
   moves nothing, so what is left is slicing, concatenation, splitting,
   stitching and launching): the all-reduce time for plans of 1 to ~400
   collectives, and the least-squares slope, seconds per extra collective.

Prints numbers only; nothing here is asserted.
"""

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

LAYER_WIDTHS = [1024, 2048, 2048, 1024, 10]
CHUNKING_TENSORS = 25
CHUNKING_TENSOR_BYTES = 4 << 20


def _split_cpu(num):
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * num)


def _training_step(strategy, batch):
  """Returns a tf.function that runs one SGD step of an MLP under strategy."""
  import keras  # pylint: disable=g-import-not-at-top
  with strategy.scope():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((LAYER_WIDTHS[0],))] +
        [keras.layers.Dense(w, activation="relu") for w in LAYER_WIDTHS[1:]])
    optimizer = keras.optimizers.SGD(0.01)
    optimizer.build(model.trainable_variables)
  x = tf.random.stateless_normal((batch, LAYER_WIDTHS[0]), seed=(1, 2))
  y = tf.random.stateless_normal((batch, LAYER_WIDTHS[-1]), seed=(3, 4))
  dataset = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors((x, y)).repeat())
  iterator = iter(dataset)

  @tf.function
  def step():
    def replica_fn(xb, yb):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb) - yb) ** 2)
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return strategy.run(replica_fn, next(iterator))

  grad_bytes = sum(v.numpy().nbytes for v in model.trainable_variables)
  return step, grad_bytes


def _median_step_s(step, steps):
  for _ in range(3):
    step()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                          step())
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def compare_with_stock(steps, repeats, batch=64):
  """Prints stock vs tf_default step times (medians of interleaved runs)."""
  from tf_preempt import PreemptiveMirroredStrategy  # pylint: disable=g-import-not-at-top
  from tf_preempt.testing import collectives  # pylint: disable=g-import-not-at-top
  devices = ["/cpu:0", "/cpu:1"]
  makers = {
      "stock MirroredStrategy": lambda: collectives.stock_mirrored_strategy(
          devices),
      "tf_preempt tf_default": lambda: PreemptiveMirroredStrategy(
          devices, scheduler="tf_default"),
  }
  steps_of = {}
  for name, make in makers.items():
    steps_of[name], grad_bytes = _training_step(make(), batch)
  samples = {name: [] for name in makers}
  for _ in range(repeats):
    for name, step in steps_of.items():
      samples[name].append(_median_step_s(step, steps))
  print(f"1. One worker, 2 replicas, MLP with {grad_bytes / 1e6:.1f} MB of "
        f"gradients, batch {batch}, {repeats} interleaved repeats of "
        f"{steps} steps:")
  medians = {name: statistics.median(s) for name, s in samples.items()}
  for name, median in medians.items():
    print(f"   {name:<24} {median * 1e3:8.2f} ms/step  "
          f"(repeats: {', '.join(f'{s * 1e3:.1f}' for s in samples[name])})")
  ratio = medians["tf_preempt tf_default"] / medians["stock MirroredStrategy"]
  print(f"   ratio tf_default / stock: {ratio:.3f} "
        f"({(ratio - 1) * 100:+.1f}%)")


def chunking_overhead(repeats):
  """Prints all-reduce time against the number of collectives (1 replica)."""
  from tf_preempt.plan.plan import PlanTensor  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan.plan import plan_from_groups  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan.plan import split_evenly  # pylint: disable=g-import-not-at-top
  from tf_preempt.runtime import PreemptiveAllReduce  # pylint: disable=g-import-not-at-top
  from tf_preempt.testing import collectives  # pylint: disable=g-import-not-at-top
  device = "/cpu:0"
  elements = CHUNKING_TENSOR_BYTES // 4
  tensors = [PlanTensor(f"t{i}", CHUNKING_TENSOR_BYTES)
             for i in range(CHUNKING_TENSORS)]
  values = [tf.fill([elements], float(i)) for i in range(CHUNKING_TENSORS)]
  counts, seconds = [], []
  print(f"2. Chunking overhead, {CHUNKING_TENSORS} x "
        f"{CHUNKING_TENSOR_BYTES >> 20} MB = "
        f"{CHUNKING_TENSORS * CHUNKING_TENSOR_BYTES / 1e6:.0f} MB, one "
        f"replica, median of {repeats} calls:")
  for chunk in (None, 4 << 20, 1 << 20, 256 << 10):
    if chunk is None:
      groups = [[(i, 0, t.nbytes) for i, t in enumerate(tensors)]]
      label = "one fused pack"
    else:
      groups = [[(i, off, length)] for i, t in enumerate(tensors)
                for off, length in split_evenly(t.nbytes, 4, chunk)]
      label = f"chunks of {chunk >> 10} KiB"
    plan = plan_from_groups(tensors, groups)
    ops_ = PreemptiveAllReduce(
        [device], 1, collective_keys=collectives.fresh_collective_keys(),
        plan=plan, scheduler_op=False)

    @tf.function
    def reduce(ops_=ops_):
      with tf.device(device):
        return ops_._all_reduce(  # pylint: disable=protected-access
            tf.distribute.ReduceOp.SUM, values, 0, None)

    reduce()
    times = []
    for _ in range(repeats):
      start = time.perf_counter()
      out = reduce()
      out[-1].numpy()
      times.append(time.perf_counter() - start)
    median = statistics.median(times)
    counts.append(len(groups))
    seconds.append(median)
    print(f"   {label:<20} {len(groups):4d} collectives  "
          f"{median * 1e3:8.2f} ms")
  slope, intercept = np.polyfit(counts, seconds, 1)
  print(f"   per extra collective: {slope * 1e6:.1f} us "
        f"(fixed part {intercept * 1e3:.2f} ms)")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=15)
  parser.add_argument("--repeats", type=int, default=9)
  args = parser.parse_args()
  _split_cpu(2)
  compare_with_stock(args.steps, args.repeats)
  chunking_overhead(max(args.repeats, 5))


if __name__ == "__main__":
  main()
