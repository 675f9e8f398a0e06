"""The PACE planner: training DAG, cost model, schedulers and simulator.

Pure numpy: nothing here imports TensorFlow.
"""

from tf_preempt.plan.cost import CostModel
from tf_preempt.plan.dag import Op
from tf_preempt.plan.dag import SparseGradient
from tf_preempt.plan.dag import TensorInfo
from tf_preempt.plan.dag import TrainingDAG
from tf_preempt.plan.plan import Collective
from tf_preempt.plan.plan import Piece
from tf_preempt.plan.plan import Plan
from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.plan import plan_from_groups
from tf_preempt.plan.plan import split_evenly
from tf_preempt.plan.registry import SCHEDULERS
from tf_preempt.plan.registry import SPLIT_SCHEDULERS
from tf_preempt.plan.registry import make_plan
from tf_preempt.plan.registry import options_of
from tf_preempt.plan.simulator import Timeline
from tf_preempt.plan.simulator import simulate
