r"""Reads the host's speed: a chain of matmuls alone, one worker's side.

  python -m tf_preempt.bench.speed_worker [--ops 60 --matrix 330]

Run as every worker of a TF_CONFIG cluster (`tf_preempt.launch`, pinned to
its core like the benchmark's workers; the cluster is not used). Times
`--rounds` runs of the chain of `--ops` float32 matmuls of `--matrix` x
`--matrix` that `scripts/bench_contention.py` runs beside its all-reduce
(`contention_worker`'s "compute"), after one untimed run. On this testbed
one machine identity (CPU, cores, kernel build) ran that chain at 0.65 and
1.18 ms a matmul hours apart: the reading says how fast the host was when
the benchmark or the probe ran, so that the one can be matched to the
other. Prints one JSON line: {"ms_per_matmul": the median round's time
per matmul, "ops", "matrix", "rounds"}.
"""

import json
import statistics
import time
from typing import Sequence

from absl import app
from absl import flags

from tf_preempt import heap
from tf_preempt.bench import stock_ring

flags.DEFINE_integer("ops", 60, "Matmuls in the chain.")
flags.DEFINE_integer("matrix", 330, "Side of the chain's matrices.")
flags.DEFINE_integer("rounds", 15, "Timed runs of the chain (median).")
heap.define_flag()


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  heap.configure_heap(f.heap)
  matmuls = stock_ring.matmul_chain(tf.distribute.get_strategy(), f.ops,
                                    f.matrix)

  @tf.function
  def chain():
    return matmuls(tf.constant(0.0))[1]

  chain().numpy()  # Tracing and the first run, untimed.
  seconds = []
  for _ in range(f.rounds):
    begin = time.perf_counter()
    chain().numpy()
    seconds.append(time.perf_counter() - begin)
  print(json.dumps({"ms_per_matmul": statistics.median(seconds) / f.ops * 1e3,
                    "ops": f.ops, "matrix": f.matrix, "rounds": f.rounds}),
        flush=True)


if __name__ == "__main__":
  app.run(main)
