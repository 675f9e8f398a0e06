"""A replica context whose all-reduce does not join all of its results.

`tf.distribute.ReplicaContext.all_reduce` makes its result differentiable by
wrapping the whole batch in one `custom_gradient`, which in a graph puts ONE
`IdentityN` op over every reduced value. An op runs when all of its inputs
are ready, so every reduced gradient then waits for the LAST collective of
the batch: the next step's first layer waits for the whole reduction, and a
preemptive order buys nothing.

`PreemptiveReplicaContext.all_reduce` issues the batch the same way (one
`merge_call`, or one replica-context all-reduce where the strategy avoids
merge calls), so the plan still sees every gradient at once, but gives each
result its own gradient function: the gradient of an all-sum is an all-sum
(an all-mean, likewise), exactly as stock defines it, tensor by tensor.

`run_in_context(strategy, fn)` wraps a replica function so that it runs
under this context; the strategies call it from `run`.
"""

import functools

import tensorflow as tf

from tf_preempt.runtime import tf_internals


class PreemptiveReplicaContext(tf_internals.MirroredReplicaContext):
  """`_MirroredReplicaContext` with a per-tensor differentiable all-reduce."""

  def all_reduce(self, reduce_op, value, options=None):
    """All-reduces `value` across replicas; see `ReplicaContext.all_reduce`.

    Args:
      reduce_op: a `tf.distribute.ReduceOp` or its name.
      value: a nested structure of tensors / `IndexedSlices`.
      options: optional `tf.distribute.experimental.CommunicationOptions`.

    Returns:
      The reduced values, in `value`'s structure.
    """
    flat = tf.nest.flatten(value)
    if (tf.executing_eagerly() or
        any(isinstance(v, tf.IndexedSlices) for v in flat)):
      # Stock does not wrap these in a custom gradient either way.
      return super().all_reduce(reduce_op, value, options)
    if isinstance(reduce_op, str):
      reduce_op = tf.distribute.ReduceOp(reduce_op.upper())
    if options is None:
      options = tf.distribute.experimental.CommunicationOptions()
    extended = self._strategy.extended

    if tf_internals.uses_merge_call(extended):
      def batch_all_reduce(strategy, *values):
        return strategy.extended.batch_reduce_to(
            reduce_op,
            [(v, tf_internals.batch_reduce_destination(v)) for v in values],
            options)
      reduced = self.merge_call(batch_all_reduce, args=flat)
    else:
      reduced = tf_internals.replica_ctx_all_reduce(extended, reduce_op, flat,
                                                    options)
    reduced = [self._with_all_reduce_gradient(reduce_op, x, y)
               for x, y in zip(flat, reduced)]
    return tf.nest.pack_sequence_as(value, reduced)

  def _with_all_reduce_gradient(self, reduce_op, x, y):
    """Returns `y` with the gradient w.r.t. `x` of an all-reduce."""

    @tf.custom_gradient
    def reduced(unused_x):
      return y, lambda dy: self.all_reduce(reduce_op, dy)

    return reduced(x)


def run_in_context(strategy, fn):
  """Wraps a replica function to run under `PreemptiveReplicaContext`.

  A `tf.function` is returned as is: `strategy.run` lifts it to run once per
  replica inside one graph, and wrapping it would change that.

  Args:
    strategy: the strategy whose replicas call the wrapper.
    fn: the replica function passed to `strategy.run`.

  Returns:
    The wrapped function.
  """
  if tf_internals.is_tf_function(fn):
    return fn

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    outer = tf.distribute.get_replica_context()
    if (outer is None or outer.strategy is not strategy or
        isinstance(outer, PreemptiveReplicaContext)):
      return fn(*args, **kwargs)
    with PreemptiveReplicaContext(
        strategy, tf_internals.replica_id_in_sync_group(outer)):
      return fn(*args, **kwargs)

  return wrapper
