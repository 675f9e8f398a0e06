"""Every private Keras API tf_preempt uses, in one place.

Keras 3.15 is the version tested (constraints.txt). The names below are not
public; if a Keras release moves them, this module is the one to change.
"""

import keras

TESTED_KERAS_MAJOR = 3

if int(keras.__version__.split(".")[0]) != TESTED_KERAS_MAJOR:
  raise ImportError(
      f"tf_preempt.keras needs Keras 3 (tested with 3.15, see "
      f"constraints.txt); found Keras {keras.__version__}.")

# reduce_per_replica: how `fit` turns per-replica step outputs into logs. The
# unrolled train function must produce the same logs as stock `fit`.
from keras.src.backend.tensorflow.trainer import reduce_per_replica  # pylint: disable=unused-import


# The module `fit`'s train function looks reduce_per_replica up in, at call
# time: tf_preempt.bench.log_reduction_worker replaces it there to time
# stock fit without the per-step reduction of the logs.
from keras.src.backend.tensorflow import trainer as tensorflow_trainer  # pylint: disable=unused-import,g-bad-import-order
