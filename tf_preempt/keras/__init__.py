"""Keras integration: cross-step overlap in `fit`."""

from tf_preempt.keras.unrolled import UnrolledStepFunction
from tf_preempt.keras.unrolled import unroll_steps
