"""tf_preempt: preemptive all-reduce scheduling (PACE) for tf.distribute.

The planner (`tf_preempt.plan`) is pure numpy and is imported eagerly; the
TensorFlow-facing API is imported on first use, so `import tf_preempt.plan`
never loads TensorFlow.
"""

from tf_preempt import _lazy
from tf_preempt.plan import CostModel
from tf_preempt.plan import Plan
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan import make_plan
from tf_preempt.plan import simulate

__version__ = "0.1.0"

# Public name -> module that defines it; these modules import TensorFlow.
_LAZY = {
    "PreemptiveAllReduce": "tf_preempt.runtime.cross_device_ops",
    "PlanMismatchError": "tf_preempt.runtime.agreement",
    "PreemptiveMirroredStrategy": "tf_preempt.strategies",
    "PreemptiveMultiWorkerMirroredStrategy": "tf_preempt.strategies",
    "unroll_steps": "tf_preempt.keras",
    "ProfileAndReplan": "tf_preempt.keras",
    "profile_and_replan": "tf_preempt.keras",
    "model_to_dag": "tf_preempt.profile.model_dag",
    "configure_heap": "tf_preempt.heap",
}


__getattr__, __dir__ = _lazy.lazy_exports(__name__, globals(), _LAZY)
