"""Keras integration: cross-step overlap and online re-planning in `fit`."""

from tf_preempt.keras.replan import ProfileAndReplan
from tf_preempt.keras.unrolled import UnrolledStepFunction
from tf_preempt.keras.unrolled import unroll_steps
from tf_preempt.profile.online import profile_and_replan
