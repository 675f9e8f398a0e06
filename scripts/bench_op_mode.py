"""Prints the step time of the gated (scheduler op) vs token-only all-reduce.

In-process: two replicas on two logical CPUs, a pace plan of small chunks,
one `tf.function` step per call; the median of `--steps` calls after a
warm-up. With `--cluster`: two worker processes on loopback training
vgg_small with Keras `fit` (scripts/train.py through scripts/demo.py's
`train_once`), `--scheduler_op=on` against `off`, alternating, the median
over `--rounds` runs of each run's median step time. No assertions: the
numbers are for reading.

  .venv/bin/python scripts/bench_op_mode.py --steps 50
  .venv/bin/python scripts/bench_op_mode.py --cluster --rounds 3
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


def run_cluster(rounds, steps=40):
  """Prints op vs token-only step times of a 2-worker loopback `fit`."""
  import demo  # pylint: disable=g-import-not-at-top
  runs = {"on": [], "off": []}
  for round_ in range(rounds):
    for mode in (("on", "off") if round_ % 2 == 0 else ("off", "on")):
      r = demo.train_once("pace", 2, model="vgg_small", batch_size=10,
                          steps=steps, warmup_steps=10, num_workers=2,
                          link=None, timeout_s=300.0,
                          extra_args=[f"--scheduler_op={mode}"])
      runs[mode].append(r["median_step_s"])
  print(f"2 workers on loopback, vgg_small, pace, unroll 2, median over "
        f"{rounds} run(s):")
  medians = {mode: statistics.median(v) for mode, v in runs.items()}
  for mode, label in (("on", "scheduler op"), ("off", "token only")):
    each = ", ".join(f"{x * 1e3:.1f}" for x in runs[mode])
    print(f"  {label:18s} {medians[mode] * 1e3:8.2f} ms/step  runs: {each}")
  print(f"  op / token-only: {medians['on'] / medians['off']:.3f}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--chunk_bytes", type=int, default=64 << 10)
  parser.add_argument("--cluster", action="store_true")
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args()
  if args.cluster:
    run_cluster(args.rounds)
    return
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
