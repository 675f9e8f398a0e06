"""Keras integration: cross-step overlap in `fit`."""

from tf_preempt.keras.unrolled import UnrolledTrainFunction
from tf_preempt.keras.unrolled import unroll_train_steps
