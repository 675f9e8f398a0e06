"""The TensorFlow side: cross-device ops that execute a plan.

Importing this package imports TensorFlow and checks its version.
"""

from tf_preempt.runtime.agreement import PlanMismatchError
from tf_preempt.runtime.binding import BoundPlan
from tf_preempt.runtime.binding import bind_plan
from tf_preempt.runtime.cross_device_ops import PreemptiveAllReduce
from tf_preempt.runtime.default_plan import SCHEDULERS
from tf_preempt.runtime.tf_internals import UnsupportedTensorFlowError
from tf_preempt.runtime.tf_internals import check_tf_version
