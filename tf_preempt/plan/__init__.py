"""The PACE planner: training DAG, cost model, schedulers and simulator.

Pure numpy: nothing here imports TensorFlow.
"""

from tf_preempt.plan.plan import Collective
from tf_preempt.plan.plan import Piece
from tf_preempt.plan.plan import Plan
from tf_preempt.plan.plan import PlanTensor
