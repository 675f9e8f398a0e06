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

# The TensorFlow backend's trainer module. Its `reduce_per_replica` is how
# `fit` turns per-replica step outputs into logs: the unrolled train function
# must produce the same logs as stock `fit`, and `fit`'s own train function
# looks it up in this module at call time (where
# tf_preempt.bench.log_reduction_worker replaces it, to time stock `fit`
# without the per-step reduction of the logs).
from keras.src.backend.tensorflow import trainer as tensorflow_trainer  # pylint: disable=g-bad-import-order

reduce_per_replica = tensorflow_trainer.reduce_per_replica
