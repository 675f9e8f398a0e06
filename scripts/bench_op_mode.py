"""Prints the step time of the gated (scheduler op) vs token-only all-reduce.

In-process: two replicas on two logical CPUs, a pace plan of small chunks,
one `tf.function` step per call; the median of `--steps` calls after a
warm-up. No assertions: the numbers are for reading.

  .venv/bin/python scripts/bench_op_mode.py --steps 50
"""

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

SHAPES = [(256, 256), (256,), (128, 512), (512,), (1024, 64), (64,)]


def run(steps, chunk_bytes):
  """Returns {mode: median seconds per step}."""
  from tf_preempt.runtime import PreemptiveAllReduce  # pylint: disable=g-import-not-at-top
  from tf_preempt.runtime import tf_internals  # pylint: disable=g-import-not-at-top
  devices = ["/cpu:0", "/cpu:1"]
  ring = tf_internals.CommunicationOptions(implementation="RING")
  values = [[tf.constant(np.random.default_rng(d).standard_normal(s),
                         tf.float32) for s in SHAPES] for d in range(2)]
  out = {}
  for k, (name, scheduler_op) in enumerate((("token_only", False),
                                            ("scheduler_op", True),
                                            ("token_only again", False))):
    ops_ = PreemptiveAllReduce(
        devices, 2, ring,
        tf_internals.CollectiveKeys(group_key_start=1000 * (k + 1)),
        scheduler="pace", scheduler_options={"chunk_bytes": chunk_bytes},
        scheduler_op=scheduler_op)

    @tf.function
    def step(per_device, ops_=ops_):
      results = []
      for i, device in enumerate(devices):
        with tf.device(device):
          results.append(ops_._all_reduce(  # pylint: disable=protected-access
              tf.distribute.ReduceOp.SUM, per_device[i], i, ring))
      return results

    for _ in range(3):
      step(values)
    times = []
    for _ in range(steps):
      start = time.perf_counter()
      tf.nest.map_structure(lambda t: t.numpy(), step(values))
      times.append(time.perf_counter() - start)
    n = len(ops_.bind(values[0]).steps)
    out[name] = (statistics.median(times), n)
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--chunk_bytes", type=int, default=64 << 10)
  args = parser.parse_args()
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  total = sum(int(np.prod(s)) * 4 for s in SHAPES)
  print(f"in-process, 2 replicas, {total / 1e6:.2f} MB of gradients, "
        f"chunks of {args.chunk_bytes} bytes, median of {args.steps} steps")
  for name, (seconds, n) in run(args.steps, args.chunk_bytes).items():
    print(f"  {name:18s} {seconds * 1e3:8.2f} ms/step  ({n} collectives)")


if __name__ == "__main__":
  main()
