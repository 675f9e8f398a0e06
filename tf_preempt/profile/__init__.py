"""Turning a Keras model into the planner's training DAG, and op timings.

Imports Keras: `tf_preempt.plan` stays free of TensorFlow, this does not.
"""

from tf_preempt.profile.model_dag import DEFAULT_BACKWARD_RATIO
from tf_preempt.profile.model_dag import DEFAULT_EFFICIENCY
from tf_preempt.profile.model_dag import GPU_SPECS
from tf_preempt.profile.model_dag import GpuSpec
from tf_preempt.profile.model_dag import call_cost
from tf_preempt.profile.model_dag import gpu_spec
from tf_preempt.profile.model_dag import load_profile
from tf_preempt.profile.model_dag import model_to_dag
from tf_preempt.profile.model_dag import trainable_bytes
from tf_preempt.profile.plan_cache import PlanCacheMismatchError
from tf_preempt.profile.online import ReplanResult
from tf_preempt.profile.online import profile_and_replan
