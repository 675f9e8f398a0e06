"""The interim `make demo`: the PACE planner on three real models, simulated.

For ResNet-50, VGG-16 and the base Transformer encoder at 8 workers and
10 Gbit/s, plans the gradient all-reduce with every scheduler and prints the
simulated iteration time and the speed-up over stock TensorFlow. Tensor sizes
are the real Keras models' variables; compute times are a FLOPs estimate for
a V100 (see tf_preempt/profile/model_dag.py).
"""

import os
import sys
import time

# Only warnings and errors from TensorFlow's C++ side: the tables are the
# output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simulate  # pylint: disable=g-import-not-at-top,wrong-import-position

WORKERS = 8
BANDWIDTH_GBPS = 10.0


def main() -> None:
  print("tf_preempt demo: a SIMULATION of the PACE all-reduce planner, not "
        "training. Real multi-worker training with the planner's schedule "
        "lands later.")
  print(f"Each table: one training iteration of a real Keras model on "
        f"{WORKERS} workers over a {BANDWIDTH_GBPS:g} Gbit/s ring all-reduce, "
        "compute times estimated for a V100.\n")
  start = time.perf_counter()
  for model in simulate.MODELS:
    stats = simulate.run(model=model, workers=WORKERS,
                         bandwidth_gbps=BANDWIDTH_GBPS)
    print(simulate.format_table(stats))
    print()
  print(f"Done in {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
  main()
