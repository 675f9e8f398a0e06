"""Drop-in `tf.distribute` strategies whose all-reduce follows a plan.

Installed as `tf_preempt.strategies`.
"""

from tf_preempt.strategies.mirrored import PreemptiveMirroredStrategy
from tf_preempt.strategies.multi_worker import PreemptiveMultiWorkerMirroredStrategy
