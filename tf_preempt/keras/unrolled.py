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

Where the data never runs out (a distributed dataset of infinite
cardinality, as `.repeat()` makes it and as the training binaries' data
is), the block takes its K batches inside the graph, as stock Keras's
train function does; otherwise it takes them eagerly and passes
them in, so that a last, partial block runs only the steps it has data for.

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

  A finite iterator's batches are taken eagerly and passed to the traced
  function as arguments; that is how the function knows how many steps it
  runs without a data-dependent branch (a `tf.cond` would put the steps in a
  nested function again). An endless iterator is passed in whole and the
  function takes its K batches itself, as stock Keras's function does.
  (Taken eagerly, a K = 2 block spent 2.3-2.9 ms in `next()` before its
  first op on the benchmark machines; taking them inside the graph saved
  about 1% of a step in a scratch A/B of the compute alone, the rest
  being, likely, the input pipeline's own work on the same core: (h23)
  to (h28) in benchmarks/simulation/README.md.)

  Attributes:
    last_input_ns: nanoseconds the last call that took its batches eagerly
      spent taking them from the iterator (None before such a call, and
      after a call that took them inside the graph).
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
    self._endless_functions: Dict[int, object] = {}
    self.last_input_ns: Optional[int] = None

  def _steps(self, batches):
    strategy = self._model.distribute_strategy
    outputs = None
    for batch in batches:
      outputs = strategy.run(self._step, args=(batch,))
    # Metrics are stateful: the last step's logs are the block's logs, as in
    # stock Keras.
    return keras_internals.reduce_per_replica(outputs, strategy, "auto")

  def _traced(self, fn):
    if self._model.run_eagerly:
      return fn
    return tf.function(fn, reduce_retracing=True, autograph=False)

  def function_for(self, num_steps: int):
    """Returns the (cached) function that runs `num_steps` given batches."""
    fn = self._functions.get(num_steps)
    if fn is None:
      fn = self._functions[num_steps] = self._traced(self._steps)
    return fn

  def endless_function_for(self, num_steps: int):
    """Returns the (cached) function that takes and runs `num_steps` batches.

    Args:
      num_steps: the batches each call takes from the iterator it is given.

    Returns:
      A function of a distributed iterator that never runs out; a call
      returns the block's logs, as a call of `function_for`'s does.
    """
    fn = self._endless_functions.get(num_steps)
    if fn is None:
      def take_and_run(iterator):
        return self._steps(tuple(next(iterator) for _ in range(num_steps)))
      fn = self._endless_functions[num_steps] = self._traced(take_and_run)
    return fn

  def __call__(self, iterator):
    if never_runs_out(iterator):
      self.last_input_ns = None
      return self.endless_function_for(self._model.steps_per_execution)(
          iterator)
    start_ns = time.monotonic_ns()
    batches = []
    for _ in range(self._model.steps_per_execution):
      try:
        batches.append(next(iterator))
      except (StopIteration, tf.errors.OutOfRangeError):
        break
    if not batches:
      raise StopIteration
    # Taking batches eagerly is Python work that the block pays before its
    # first op: telemetry reports it per block.
    self.last_input_ns = time.monotonic_ns() - start_ns
    return self.function_for(len(batches))(tuple(batches))


def never_runs_out(iterator) -> bool:
  """Whether a block may take its batches inside the graph.

  Args:
    iterator: what `fit` or `evaluate` hands the train or test function.

  Returns:
    True for a `tf.distribute` iterator over a dataset of infinite
    cardinality that takes its batches without an end-of-data check.
    Such a dataset can still end if what it repeats turns out empty
    (`filter` or a generator before `repeat`): the block then stops with
    `OutOfRangeError`, which `fit` ends the epoch on, as stock Keras's
    in-graph take does; steps of that block may already have run.
  """
  # Private attributes of tf.distribute's DistributedIterator (TensorFlow
  # 2.21, constraints.txt): no public API says whether it ends. Anything
  # else (a plain tf.data iterator, a Python generator, a finite dataset)
  # keeps the eager path, which works for all of them. TensorFlow turns the
  # end-of-data check off for infinite data (input_lib's
  # _enable_get_next_as_optional); testing it too only guards the in-graph
  # take against a release that would not.
  cardinality = getattr(iterator, "_cardinality", None)
  return (isinstance(iterator, tf.distribute.DistributedIterator) and
          cardinality is not None and
          int(cardinality) == tf.data.INFINITE_CARDINALITY and
          not getattr(iterator, "_enable_get_next_as_optional", True))


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
