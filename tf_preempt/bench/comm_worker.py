r"""Times the gradient all-reduce alone, with no compute: one worker's side.

  python -m tf_preempt.bench.comm_worker --model vgg_small [--repeats 20]

Run as every worker of a TF_CONFIG cluster (`tf_preempt.launch`). Builds
`PreemptiveMultiWorkerMirroredStrategy` with stock TensorFlow's reduction
(`tf_default`), then times, through that strategy's collective launchers
(`tf_preempt.profile.online.time_collectives`), one all-reduce of as many
float32 bytes as the model has gradients: the one pack stock TensorFlow
sends, the least communication a step can do (each further collective adds
its fixed cost). It also times all-reduces of 1/64, 1/16 and 1/4 of those
bytes, for an alpha-beta fit of a collective that runs alone. Prints one
JSON line: {"comm_s", "nbytes", "model", "samples": {nbytes: seconds}}.
"""

import json
import sys
from typing import Sequence

from absl import app
from absl import flags

from tf_preempt import heap

# The all-reduce sizes timed: the gradients' bytes divided by these.
SIZE_DIVISORS = (64, 16, 4, 1)

flags.DEFINE_string("model", "vgg_small", "Model of the registry.")
flags.DEFINE_integer("repeats", 20, "Timed all-reduces (median).")
heap.define_flag()


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  # pylint: disable=g-import-not-at-top
  import numpy as np
  import tensorflow as tf
  import tf_preempt
  from tf_preempt.models import registry
  from tf_preempt.profile import online
  # pylint: enable=g-import-not-at-top
  strategy = tf_preempt.PreemptiveMultiWorkerMirroredStrategy(
      scheduler="tf_default")
  # As in a training worker, where the distributed dataset has set
  # TensorFlow's mmap threshold (or --heap=keep raised it) before the
  # first collective.
  heap.configure_heap(flags.FLAGS.heap)
  with strategy.scope():
    model = registry.get(flags.FLAGS.model)
  nbytes = int(sum(4 * np.prod(v.shape) for v in model.trainable_variables))
  nbytes -= nbytes % 4
  # One untimed call per size first (tracing, connection set-up), then the
  # median of the timed ones; time_collectives does both. The smaller sizes
  # (1/64 to 1/4 of the gradients) are for the alpha-beta fit of one
  # collective timed alone.
  sizes = sorted({max(4, (nbytes // d) // 4 * 4) for d in SIZE_DIVISORS})
  timings = online.time_collectives(strategy.cross_device_ops, sizes=sizes,
                                    repeats=flags.FLAGS.repeats)
  del tf  # Imported so that a broken install fails here, not in the strategy.
  print(json.dumps({"comm_s": timings[nbytes], "nbytes": nbytes,
                    "model": flags.FLAGS.model,
                    "samples": {str(b): t for b, t in timings.items()}}),
        flush=True)


if __name__ == "__main__":
  app.run(main)
