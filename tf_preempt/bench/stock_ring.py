"""Stock all-reduce for the probes' workers: no tf_preempt code on its path.

`scripts/bench_arrival_order.py` and `scripts/bench_contention.py` time
what TensorFlow's own ring does, so their workers build stock
`tf.distribute.MultiWorkerMirroredStrategy` with RING collectives here,
and the chain of matmuls they compute beside it (which `speed_worker`
also times alone). For a side-by-side check the arrival probe can also
build tf_preempt's strategy with the "tf_default" scheduler (the same one
collective, gated by the scheduler op), as the training binary's
tf_default rows run it.
"""

from tf_preempt import heap


def strategy_and_gradient(nbytes: int, preemptive: bool = False,
                          heap_mode: str = heap.DEFAULT_MODE):
  """Stock MultiWorkerMirroredStrategy (RING) and a gradient to reduce.

  Args:
    nbytes: bytes of the gradient (float32; at least one element).
    preemptive: build `tf_preempt.PreemptiveMultiWorkerMirroredStrategy`
      with scheduler "tf_default" instead (RING too).
    heap_mode: `tf_preempt.configure_heap`'s mode, applied once the
      strategy is built ("tensorflow": as in a training worker, whose
      distributed dataset sets TensorFlow's mmap threshold).

  Returns:
    (the strategy, from TF_CONFIG; a non-trainable float32 variable of
    ones of `nbytes` // 4 elements, made in its scope).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  options = tf.distribute.experimental.CommunicationOptions(
      implementation=tf.distribute.experimental.CommunicationImplementation
      .RING)
  if preemptive:
    import tf_preempt  # pylint: disable=g-import-not-at-top
    strategy = tf_preempt.PreemptiveMultiWorkerMirroredStrategy(
        communication_options=options, scheduler="tf_default")
  else:
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=options)
  heap.configure_heap(heap_mode)
  with strategy.scope():
    gradient = tf.Variable(tf.ones([max(1, nbytes // 4)]), trainable=False)
  return strategy, gradient


def chain_variables(strategy, matrix: int):
  """The matmul chain's weight and start, made in `strategy`'s scope.

  Args:
    strategy: the probe's strategy.
    matrix: the side of the chain's square float32 matrices.

  Returns:
    (weight, start): non-trainable variables; the weight is near the
    identity, so that the chain's values neither blow up nor vanish.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with strategy.scope():
    weight = tf.Variable(tf.eye(matrix) * 0.999 + 1e-4, trainable=False)
    start = tf.Variable(tf.ones([matrix, matrix]), trainable=False)
  return weight, start


def matmul_chain(strategy, ops: int, matrix: int):
  """A function of `after` that runs `ops` matmuls one after the other.

  The probes' compute: `contention_worker`'s "compute" and
  `speed_worker`'s reading of the host's speed run this one chain.

  Args:
    strategy: the probe's strategy (its variables are made in its scope).
    ops: matmuls in the chain.
    matrix: the side of its square float32 matrices.

  Returns:
    chain(after) -> (the timestamp at its end, a scalar that depends on
    it), its matmuls after `after`.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  weight, start_x = chain_variables(strategy, matrix)

  def chain(after):
    with tf.control_dependencies([after]):
      x = tf.identity(start_x.read_value())
    for _ in range(ops):
      x = tf.matmul(x, weight)
    with tf.control_dependencies([x]):
      return tf.timestamp(), x[0, 0]
  return chain
