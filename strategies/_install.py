"""Installing `PreemptiveAllReduce` into a TensorFlow mirrored strategy."""

import itertools
import threading

from tf_preempt.runtime import binding
from tf_preempt.runtime import default_plan
from tf_preempt.runtime import replica_context
from tf_preempt.runtime import tf_internals
from tf_preempt.runtime.cross_device_ops import PreemptiveAllReduce


# Collective group and instance keys are process-wide: TensorFlow caches a
# collective's parameters by (group key, instance key). Two strategies over the
# same devices would both start at group key 1 and instance key 100, and the
# second's collectives, whose shapes differ when their plans differ, would be
# matched with the first's cached ones ("Shape mismatch in the collective
# instance 100"). Each preemptive strategy therefore takes its own range of
# group keys. Workers that build their strategies in the same order (as they
# must anyway, for their collectives to match) get the same ranges.
_KEY_BASE_STRIDE = 10000
_key_bases = itertools.count(1)
_key_lock = threading.Lock()


def check_arguments(plan, scheduler):
  """The checks both strategies make before TensorFlow builds anything.

  Raises:
    ValueError: on an unknown scheduler or a plan the runtime cannot run.
    TypeError: if `plan` is not a `Plan`.
  """
  default_plan.check_scheduler(scheduler)
  binding.check_user_plan(plan)


def next_collective_key_base():
  """Returns a collective key base no other preemptive strategy has."""
  with _key_lock:
    return next(_key_bases) * _KEY_BASE_STRIDE


def install(strategy, plan, scheduler, scheduler_options=None,
            communication_options=None, scheduler_op=None):
  """Makes `strategy` all-reduce with a `PreemptiveAllReduce`.

  The strategy keeps everything else it built (devices, input pipeline,
  variable handling, key allocator); only its collective cross-device ops
  are replaced, by ones made from the same devices, group and keys.

  Args:
    strategy: a freshly built `MirroredStrategy` or
      `MultiWorkerMirroredStrategy`.
    plan: a `Plan` or None.
    scheduler: the scheduler for values the plan does not cover.
    scheduler_options: options of the scheduler.
    communication_options: options merged into the strategy's defaults.
    scheduler_op: whether to use the scheduler op (see
      `PreemptiveAllReduce`).

  Returns:
    The installed `PreemptiveAllReduce`, or None if the strategy does not use
    collectives on these devices (then it is left as TensorFlow built it).
  """
  num_workers, worker_index = tf_internals.extended_worker_info(
      strategy.extended)
  del num_workers  # The group size already counts every worker's devices.

  def make_ops(devices, group_size, options, collective_keys):
    return PreemptiveAllReduce(
        devices, group_size, options, collective_keys, plan=plan,
        scheduler=scheduler, scheduler_options=scheduler_options,
        worker_index=worker_index, scheduler_op=scheduler_op)

  return tf_internals.replace_collective_ops(
      strategy.extended, make_ops, communication_options)


class PreemptiveStrategyMixin:
  """What both preemptive strategies change in TensorFlow's behaviour.

  Mixed in before the TensorFlow strategy class. `run` executes the replica
  function under `PreemptiveReplicaContext`, whose all-reduce gives every
  reduced value its own gradient function: stock `ReplicaContext.all_reduce`
  joins all results in one `IdentityN`, which makes every reduced gradient
  wait for the last collective and defeats a preemptive order.
  """

  def run(self, fn, args=(), kwargs=None, options=None):
    """As `tf.distribute.Strategy.run`."""
    return super().run(replica_context.run_in_context(self, fn), args,
                       kwargs, options)

  @property
  def cross_device_ops(self):
    """The `PreemptiveAllReduce` in use, or None if collectives are not."""
    return self._preemptive_ops
