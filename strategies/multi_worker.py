"""`PreemptiveMultiWorkerMirroredStrategy`: MWMS with planned all-reduce."""

from typing import Any, Dict, Optional

from absl import logging
import tensorflow as tf

from tf_preempt.plan.plan import Plan
from tf_preempt.runtime import failure_detection
from tf_preempt.runtime import tf_internals
from tf_preempt.strategies import _install


class PreemptiveMultiWorkerMirroredStrategy(
    _install.PreemptiveStrategyMixin,
    tf.distribute.MultiWorkerMirroredStrategy):
  """Synchronous training on many workers (TF_CONFIG), planned all-reduce.

  A drop-in replacement for `tf.distribute.MultiWorkerMirroredStrategy`:
  the cluster set-up, `scope()`, `run`, `reduce`, distributed datasets,
  checkpoints and `num_replicas_in_sync` are TensorFlow's own. Only the
  collective that all-reduces the gradients differs: it follows `plan`, or a
  plan made by `scheduler` from the gradients' sizes. Before the first
  collective of a plan every worker checks that all hold the same plan.

  ```python
  strategy = PreemptiveMultiWorkerMirroredStrategy(scheduler="pace")
  ```
  """

  def __init__(self,
               cluster_resolver=None,
               communication_options=None,
               plan: Optional[Plan] = None,
               scheduler: str = "pace",
               scheduler_options: Optional[Dict[str, Any]] = None,
               scheduler_op: Optional[bool] = None):
    """Creates the strategy.

    Args:
      cluster_resolver: as for `MultiWorkerMirroredStrategy`
        (`TFConfigClusterResolver` if None).
      communication_options: optional
        `tf.distribute.experimental.CommunicationOptions`, the default options
        of every collective (implementation, timeout). No timeout by default
        (TensorFlow keeps a thread asleep for the timeout per collective
        launch; see `tf_preempt.runtime.cross_device_ops`): a dead worker is
        named by the coordination service's heartbeat (10 s). With a
        timeout the heartbeat is set from it (a third of it, 1-10 s), so
        that a dead worker is still reported by name before a collective
        times out anonymously.
      plan: an optional `tf_preempt.plan.Plan` for the gradient all-reduce;
        every worker must pass the same one.
      scheduler: the scheduler that plans all-reduces `plan` does not cover
        (see `PreemptiveMirroredStrategy`).
      scheduler_options: the scheduler's options, including the scheduler
        op's credit (see `PreemptiveMirroredStrategy`).
      scheduler_op: whether to use the scheduler op (see
        `PreemptiveMirroredStrategy`).

    Raises:
      ValueError: on an unknown scheduler.
      TypeError: if `plan` is not a `Plan`.
    """
    _install.check_arguments(plan, scheduler)
    if cluster_resolver is None:
      cluster_resolver = (
          tf.distribute.cluster_resolver.TFConfigClusterResolver())
    _configure_heartbeat(cluster_resolver, communication_options)
    # Read by the Extended's constructor (see _install for why).
    self._collective_key_base = _install.next_collective_key_base()
    super().__init__(cluster_resolver=cluster_resolver,
                     communication_options=communication_options)
    self._preemptive_ops = _install.install(self, plan, scheduler,
                                            scheduler_options,
                                            scheduler_op=scheduler_op)

  def reduce(self, reduce_op, value, axis):
    """As `tf.distribute.Strategy.reduce`, also for what Keras `fit` asks.

    Stock `MultiWorkerMirroredStrategy` cannot serve two calls that Keras 3's
    `fit` makes (keras-team/keras#20585, tensorflow/tensorflow#72388): a
    nested structure of per-replica values (the first batch, which
    `_maybe_symbolic_build` reduces to learn the shapes) and a per-replica
    scalar with `axis=0` (the loss and metrics, from `reduce_per_replica`).
    This one reduces each value of a nested structure on its own, and a
    scalar, which has no axis, across replicas; everything else is stock.

    Args:
      reduce_op: a `tf.distribute.ReduceOp` or its name.
      value: a (nested structure of) per-replica value(s).
      axis: as for `tf.distribute.Strategy.reduce`.

    Returns:
      The reduced value(s), in `value`'s structure.
    """
    if tf.nest.is_nested(value):
      return tf.nest.map_structure(
          lambda v: self.reduce(reduce_op, v, axis), value)
    if axis is not None and _is_scalar(value):
      axis = None
    return super().reduce(reduce_op, value, axis)


def _configure_heartbeat(cluster_resolver, communication_options) -> None:
  """Sets the heartbeat so that a dead peer is named before a collective
  times out (see `tf_preempt.runtime.failure_detection`)."""
  timeout_s = getattr(communication_options, "timeout_seconds", None)
  heartbeat_s = failure_detection.heartbeat_timeout_s(timeout_s)
  if tf_internals.configure_coordination_service(
      cluster_resolver, heartbeat_timeout_ms=round(heartbeat_s * 1e3)):
    return
  configured_ms = tf_internals.configured_heartbeat_timeout_ms()
  configured_s = (failure_detection.DEFAULT_HEARTBEAT_TIMEOUT_S
                  if not configured_ms else configured_ms / 1e3)
  # Without a collective timeout nothing can fire before the heartbeat.
  if timeout_s and configured_ms is not None and configured_s > heartbeat_s:
    logging.warning(
        "The coordination service of this process was configured before "
        "the strategy, with a %.1f s heartbeat timeout; a collective "
        "timeout of %.1f s may then fire first, and its error does not name "
        "the dead peer.", configured_s, timeout_s)


def _is_scalar(value):
  """Whether every local component of `value` has rank 0."""
  components = (value.values if isinstance(value, tf.distribute.DistributedValues)
                else (value,))
  return all(getattr(c, "shape", None) is not None and c.shape.rank == 0
             for c in components)
