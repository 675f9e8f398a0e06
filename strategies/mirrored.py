"""`PreemptiveMirroredStrategy`: `MirroredStrategy` with planned all-reduce."""

from typing import Any, Dict, Optional

from absl import logging
import tensorflow as tf

from tf_preempt.plan.plan import Plan
from tf_preempt.strategies import _install


class PreemptiveMirroredStrategy(_install.PreemptiveStrategyMixin,
                                 tf.distribute.MirroredStrategy):
  """Synchronous training on the devices of one machine, planned all-reduce.

  A drop-in replacement for `tf.distribute.MirroredStrategy`: `scope()`,
  `run`, `reduce`, distributed datasets, checkpoints and
  `num_replicas_in_sync` are TensorFlow's own. Only the collective that
  all-reduces the gradients differs: it follows `plan`, or a plan made by
  `scheduler` from the gradients' sizes (see `PreemptiveAllReduce`).

  ```python
  strategy = PreemptiveMirroredStrategy(["/gpu:0", "/gpu:1"])
  with strategy.scope():
    model = make_model()
  ```
  """

  def __init__(self,
               devices=None,
               plan: Optional[Plan] = None,
               scheduler: str = "pace",
               communication_options=None,
               scheduler_options: Optional[Dict[str, Any]] = None,
               scheduler_op: Optional[bool] = None):
    """Creates the strategy.

    Args:
      devices: device strings, as for `MirroredStrategy`; all local devices
        if None.
      plan: an optional `tf_preempt.plan.Plan` for the gradient all-reduce.
      scheduler: the scheduler that plans all-reduces `plan` does not cover:
        "pace" (default), "priority", "fifo", "tf_default" (exactly stock's
        packing), "tf_packed", "horovod", "ddp", "bytescheduler".
      communication_options: optional
        `tf.distribute.experimental.CommunicationOptions`, merged into the
        strategy's defaults (implementation, timeout).
      scheduler_options: the scheduler's options, e.g.
        `{"bytes_per_pack": 1 << 20}` for "tf_packed", and the scheduler
        op's credit, `credit_collectives` and `credit_bytes` (see
        `PreemptiveAllReduce`).
      scheduler_op: whether the planned collectives go through the C++
        scheduler op (credit, plan-order release, telemetry): True requires
        it, False never uses it, None (default) uses it if it loads.

    Raises:
      ValueError: on an unknown scheduler.
      TypeError: if `plan` is not a `Plan`.
    """
    _install.check_arguments(plan, scheduler)
    # Read by the Extended's constructor (see _install for why).
    self._collective_key_base = _install.next_collective_key_base()
    super().__init__(devices=devices)
    installed = _install.install(self, plan, scheduler, scheduler_options,
                                 communication_options, scheduler_op)
    if installed is None:
      logging.warning(
          "PreemptiveMirroredStrategy: TensorFlow chose non-collective "
          "cross-device ops for devices %s (e.g. a mix of CPUs and GPUs); "
          "gradients are reduced as by MirroredStrategy, without a plan.",
          self.extended.worker_devices)
    self._preemptive_ops = installed
