"""K steps in one flat graph, so step k+1 overlaps step k's reduction.

Stock Keras runs each step as its own `tf.function` (and `steps_per_execution`
calls one nested function per step inside a while loop). A function call
waits for all of its side effects, so the next step's forward pass cannot
start before the last gradient of this step is reduced and applied: priority
scheduling would buy nothing.

`unroll_steps(model)` replaces the model's train function with one that
traces `model.steps_per_execution` calls of `model.train_step` back to back
in ONE `tf.function`, with no nested function calls (and the test function,
which `evaluate` and `fit`'s validation use, likewise with `test_step`). Automatic control
dependencies then order each step's read of a variable after the previous
step's update of that same variable only, so step k+1's first layer waits for
its own parameter update, not for the whole reduction.

Keras semantics are kept: `fit`'s loop still hands over one block of
`steps_per_execution` batches per call and calls the callbacks once per
block, the metrics and the optimizer's iteration count advance once per
step, and a last block with fewer batches runs a function traced for that
many steps (traced once, cached).

It also makes `steps_per_execution > 1` work under distribution strategies:
stock Keras 3.15 runs such blocks in a `tf.while_loop` whose `tf.cond` fails
under `MirroredStrategy` and `MultiWorkerMirroredStrategy` on TensorFlow 2.21
("You must feed a value for placeholder tensor 'while/cond/Placeholder'").
"""

import time
from typing import Dict, Optional

import tensorflow as tf

from tf_preempt.keras import keras_internals


class UnrolledStepFunction:
  """A train or test function that runs a block of steps in one flat graph.

  The batches of a block are taken from the distributed iterator eagerly and
  passed to the traced function as arguments; that is how the function knows
  how many steps it runs without a data-dependent branch (a `tf.cond` would
  put the steps in a nested function again).

  Attributes:
    last_input_ns: nanoseconds the last call that took at least one batch
      spent taking its batches from the iterator (None before such a
      call).
  """

  def __init__(self, model, step):
    """Initializes the function.

    Args:
      model: the Keras model.
      step: the per-batch step, `model.train_step` or `model.test_step`.
    """
    self._model = model
    self._step = step
    self._functions: Dict[int, object] = {}
    self.last_input_ns: Optional[int] = None

  def _steps(self, batches):
    strategy = self._model.distribute_strategy
    outputs = None
    for batch in batches:
      outputs = strategy.run(self._step, args=(batch,))
    # Metrics are stateful: the last step's logs are the block's logs, as in
    # stock Keras.
    return keras_internals.reduce_per_replica(outputs, strategy, "auto")

  def function_for(self, num_steps: int):
    """Returns the (cached) function that runs `num_steps` steps."""
    fn = self._functions.get(num_steps)
    if fn is None:
      fn = self._steps
      if not self._model.run_eagerly:
        fn = tf.function(fn, reduce_retracing=True, autograph=False)
      self._functions[num_steps] = fn
    return fn

  def __call__(self, iterator):
    start_ns = time.monotonic_ns()
    batches = []
    for _ in range(self._model.steps_per_execution):
      try:
        batches.append(next(iterator))
      except (StopIteration, tf.errors.OutOfRangeError):
        break
    if not batches:
      raise StopIteration
    # Taking batches from a distributed iterator is eager Python work that
    # the block pays before its first op: telemetry reports it per block.
    self.last_input_ns = time.monotonic_ns() - start_ns
    return self.function_for(len(batches))(tuple(batches))


def unroll_steps(model, steps: Optional[int] = None):
  """Makes `fit` and `evaluate` run each block of steps in one flat graph.

  Call after `model.compile` or before it: the replacement survives a
  re-compile (compile only drops the traced function).

  Args:
    model: a Keras 3 model on the TensorFlow backend.
    steps: the number of steps per block; None keeps the model's
      `steps_per_execution` (from `compile`).

  Returns:
    The model, for chaining.

  Raises:
    ValueError: if `steps` is not a positive integer.
  """
  if steps is not None:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
      raise ValueError(f"steps must be a positive integer, got {steps!r}.")
    model.steps_per_execution = steps

  def make_train_function(force=False):
    if model.train_function is None or force:
      model.train_function = UnrolledStepFunction(model, model.train_step)
    return model.train_function

  def make_test_function(force=False):
    if model.test_function is None or force:
      model.test_function = UnrolledStepFunction(model, model.test_step)
    return model.test_function

  model.make_train_function = make_train_function
  model.make_test_function = make_test_function
  model.train_function = None
  model.test_function = None
  return model
