"""tf_preempt.keras.unrolled: K steps in one flat graph, Keras semantics kept."""

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_preempt import PreemptiveMirroredStrategy
from tf_preempt.keras import unroll_steps
from tf_preempt.plan import CostModel
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan import make_plan
from tf_preempt.keras.unrolled import UnrolledStepFunction
from tf_preempt.keras.unrolled import never_runs_out
from tf_preempt.testing import collectives
from tf_preempt.testing import graphs

_BATCHES_PER_EPOCH = 7  # not a multiple of K: the last block is partial
_K = 3


def _data(out_units=1):
  rng = np.random.RandomState(0)
  x = rng.randn(8 * _BATCHES_PER_EPOCH, 8).astype("float32")
  return x, np.tile(x.sum(axis=1, keepdims=True), (1, out_units))


def _model(strategy, steps_per_execution, metrics=("mae",), width=16,
           optimizer=lambda: keras.optimizers.Adam(0.01), out_units=1):
  with strategy.scope():
    keras.utils.set_random_seed(1)
    model = keras.Sequential([
        keras.Input((8,)),
        keras.layers.Dense(width, activation="relu"),
        keras.layers.Dense(width, activation="relu"),
        keras.layers.Dense(out_units),
    ])
    model.compile(optimizer(), "mse", metrics=list(metrics),
                  steps_per_execution=steps_per_execution)
  return model


class _BatchCounter(keras.callbacks.Callback):

  def __init__(self):
    super().__init__()
    self.ends = []

  def on_train_batch_end(self, batch, logs=None):
    self.ends.append(batch)


def _fit(model, unroll):
  if unroll:
    unroll_steps(model)
  counter = _BatchCounter()
  x, y = _data()
  history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                      callbacks=[counter])
  return model, history.history, counter.ends


def _strategies(logical_cpus):
  return {
      "stock": lambda: collectives.stock_mirrored_strategy(logical_cpus[:2]),
      "preemptive_pace": lambda: PreemptiveMirroredStrategy(
          list(logical_cpus[:2]), scheduler="pace"),
      "preemptive_priority": lambda: PreemptiveMirroredStrategy(
          list(logical_cpus[:2]), scheduler="priority"),
  }


@pytest.mark.parametrize("strategy_name",
                         ["stock", "preemptive_pace", "preemptive_priority"])
def test_unrolled_blocks_train_like_single_steps(strategy_name, logical_cpus):
  make_strategy = _strategies(logical_cpus)[strategy_name]
  ref, ref_history, ref_ends = _fit(_model(make_strategy(), 1), unroll=False)
  got, got_history, got_ends = _fit(_model(make_strategy(), _K), unroll=True)

  for a, b in zip(ref.weights, got.weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6,
                               err_msg=a.path)
  for name in ref_history:
    np.testing.assert_allclose(ref_history[name], got_history[name],
                               rtol=1e-6)
  assert int(got.optimizer.iterations.numpy()) == 2 * _BATCHES_PER_EPOCH
  # Callbacks see one call per block of K steps, numbered as stock Keras
  # numbers them (the partial last block still reports begin + K - 1).
  assert ref_ends == list(range(_BATCHES_PER_EPOCH)) * 2
  assert got_ends == [2, 5, 8] * 2


def _fit_endless(model, unroll, steps_per_epoch):
  if unroll:
    unroll_steps(model)
  x, y = _data()
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat()
  history = model.fit(dataset, epochs=2, steps_per_epoch=steps_per_epoch,
                      validation_data=dataset.skip(2), validation_steps=_K,
                      verbose=0)
  return model, history.history


@pytest.mark.parametrize("strategy_name",
                         ["stock", "preemptive_pace", "preemptive_priority"])
def test_endless_data_is_taken_in_the_graph_and_trains_like_single_steps(
    strategy_name, logical_cpus):
  make_strategy = _strategies(logical_cpus)[strategy_name]
  # 7 steps an epoch in blocks of 3: Keras hands over 3 full blocks, and
  # on data that never runs out stock Keras runs all 9 steps too.
  ref, ref_history = _fit_endless(_model(make_strategy(), 1), False, 9)
  got, got_history = _fit_endless(_model(make_strategy(), _K), True,
                                  _BATCHES_PER_EPOCH)
  for a, b in zip(ref.weights, got.weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6,
                               err_msg=a.path)
  assert set(ref_history) == set(got_history) and "val_loss" in ref_history
  for name in ref_history:
    np.testing.assert_allclose(ref_history[name], got_history[name],
                               rtol=1e-6, err_msg=name)
  assert int(got.optimizer.iterations.numpy()) == 2 * 9
  # Every block, of training and of validation, took its batches inside
  # the graph: nothing was timed, no function of given batches was traced,
  # and one trace served every block.
  for function in (got.train_function, got.test_function):
    assert function.last_input_ns is None
    assert list(function._endless_functions) == [_K]  # pylint: disable=protected-access
    assert not function._functions  # pylint: disable=protected-access
    assert function.endless_function_for(
        _K).experimental_get_tracing_count() == 1


def test_never_runs_out_only_for_endless_distributed_iterators(logical_cpus):
  dataset = tf.data.Dataset.range(8).batch(2)
  mirrored = collectives.stock_mirrored_strategy(logical_cpus[:2])
  one_device = tf.distribute.OneDeviceStrategy(logical_cpus[0])
  for strategy in (mirrored, one_device):
    assert never_runs_out(iter(strategy.experimental_distribute_dataset(
        dataset.repeat())))
    assert not never_runs_out(iter(strategy.experimental_distribute_dataset(
        dataset)))
  # Plain tf.data and Python iterators say nothing of their end.
  assert not never_runs_out(iter(dataset.repeat()))
  assert not never_runs_out(iter([1, 2, 3]))


def test_steps_argument_sets_steps_per_execution(logical_cpus):
  model = _model(tf.distribute.OneDeviceStrategy(logical_cpus[0]), 1)
  unroll_steps(model, steps=4)
  assert model.steps_per_execution == 4
  model.make_train_function()
  assert isinstance(model.train_function, UnrolledStepFunction)


@pytest.mark.parametrize("steps", [0, -1, 2.0, True, "2"])
def test_bad_steps_are_rejected(steps, logical_cpus):
  model = _model(tf.distribute.OneDeviceStrategy(logical_cpus[0]), 1)
  with pytest.raises(ValueError, match="steps must be a positive integer"):
    unroll_steps(model, steps=steps)


def test_a_call_times_taking_its_batches(logical_cpus, monkeypatch):
  model = _model(tf.distribute.OneDeviceStrategy(logical_cpus[0]), _K)
  unroll_steps(model)
  model.make_train_function()
  function = model.train_function
  assert function.last_input_ns is None
  x, y = _data()
  delay_s, run_s = 0.05, 0.5

  def slow_batches():
    for i in range(_K):
      time.sleep(delay_s)
      yield tf.constant(x[8 * i:8 * i + 8]), tf.constant(y[8 * i:8 * i + 8])

  # The steps themselves are not what is timed: a stand-in that takes
  # longer than all the batches together.
  ran = []
  monkeypatch.setattr(function, "function_for",
                      lambda n: lambda batches: ran.append(len(batches)) or
                      time.sleep(run_s))
  start = time.monotonic_ns()
  function(slow_batches())
  elapsed = time.monotonic_ns() - start
  assert ran == [_K]
  assert _K * delay_s * 1e9 <= function.last_input_ns
  assert function.last_input_ns <= elapsed - run_s * 1e9
  # A call that finds no batch leaves the last block's time as it was.
  taken = function.last_input_ns
  with pytest.raises(StopIteration):
    function(iter(()))
  assert function.last_input_ns == taken


def _two_step_graph(strategy, width=16, out_units=1, endless=False):
  """Traces two unrolled steps; returns (graph, model).

  With `endless`, the steps take their batches from an endless iterator in
  the graph; otherwise they are given two batches taken eagerly.
  """
  # No compiled metrics: `fit` would build them before tracing; here nothing
  # does, and they are not what this graph is about. Plain SGD: the reduced
  # gradient flows straight into the variable's update, with no slot
  # variable in between, so data edges tell which collective carries it.
  model = _model(strategy, 2, metrics=(), width=width,
                 optimizer=lambda: keras.optimizers.SGD(0.01),
                 out_units=out_units)
  unroll_steps(model)
  with strategy.scope():
    model.optimizer.build(model.trainable_variables)
  x, y = _data(out_units)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
  if endless:
    dataset = dataset.repeat()
  iterator = iter(strategy.experimental_distribute_dataset(dataset))
  unrolled = UnrolledStepFunction(model, model.train_step)
  if endless:
    assert never_runs_out(iterator)
    function = unrolled.endless_function_for(2)
    return function.get_concrete_function(iterator).graph, model
  batches = (next(iterator), next(iterator))
  function = unrolled.function_for(2)
  return function.get_concrete_function(batches).graph, model


def _step_structure(graph, model):
  """Finds the ops the overlap tests reason about.

  Returns:
    (step2_first_matmuls, first_reductions, last_reductions): step 2's
    forward MatMuls of the first layer, and the step-1 collectives that carry
    the first and the last layer's kernel gradient.
  """
  placeholders = graphs.variable_placeholders(graph, model.trainable_variables)
  first_kernel = model.layers[0].kernel.path
  last_kernel = model.layers[-1].kernel.path
  first_updates = graphs.updates_of(graph, placeholders[first_kernel])
  last_updates = graphs.updates_of(graph, placeholders[last_kernel])
  first_matmuls = graphs.consumers_of_type(
      graphs.reads_of(graph, placeholders[first_kernel]), "MatMul")
  # Step 2's forward MatMuls are the ones that wait for a step-1 update of
  # their own kernel.
  step2 = [op for op in first_matmuls
           if set(first_updates) & graphs.ancestors(op)]
  assert step2, "found no second-step forward MatMul of the first layer"
  # The collectives that carry a kernel's gradient are the data ancestors of
  # its step-1 update (control edges would add every collective chained
  # before it by the ordering token).
  collectives = set(graphs.collective_reductions(graph))
  first = collectives & graphs.ancestors(first_updates[0], control=False)
  last = collectives & graphs.ancestors(last_updates[0], control=False)
  assert first and last, "found no reduction of a kernel's gradient"
  return step2, first, last


def first_layer_waits_for_last_layer_reduction(graph, model):
  """Does step 2's first MatMul wait for step 1's last-layer reduction?"""
  step2, _, last = _step_structure(graph, model)
  return any(last & graphs.ancestors(op) for op in step2)


_BATCHES = pytest.mark.parametrize("endless", [False, True],
                                   ids=["given_batches", "endless_iterator"])


@_BATCHES
def test_unrolled_graph_has_no_nested_function_calls(logical_cpus, endless):
  graph, _ = _two_step_graph(collectives.stock_mirrored_strategy(
      logical_cpus[:2]), endless=endless)
  calls = [op.name for op in graph.get_operations()
           if op.type in ("PartitionedCall", "StatefulPartitionedCall",
                          "While", "StatelessWhile", "If", "StatelessIf")]
  assert not calls
  # Two steps on two replicas: four batch shards, taken in the graph only
  # from an endless iterator.
  takes = [op for op in graph.get_operations() if "GetNext" in op.type]
  assert len(takes) == (4 if endless else 0), [op.type for op in takes]


@_BATCHES
def test_stock_single_pack_makes_next_step_wait(logical_cpus, endless):
  # The negative control of the overlap test: with stock TensorFlow's one
  # pack, step 2's first layer waits for the whole reduction of step 1.
  graph, model = _two_step_graph(collectives.stock_mirrored_strategy(
      logical_cpus[:2]), endless=endless)
  assert first_layer_waits_for_last_layer_reduction(graph, model)


def _comm_bound_pace_plan(model):
  """A pace plan for `model` on a slow link, where preemption pays."""
  sizes = [v.numpy().nbytes for v in model.trainable_variables]
  dag = TrainingDAG.chain([1e-4] * len(sizes), [2e-4] * len(sizes), sizes)
  return make_plan(dag, CostModel.ring(2, 1e8, 50e-6), "pace")


@_BATCHES
def test_priority_order_skips_the_last_layer_reduction(logical_cpus, endless):
  # A tiny model: every gradient is ready before the link is free, so the
  # priority plan sends the first layer first and the last layer last; step
  # 2's first layer must not wait for the last layer's reduction, whether
  # its batch was given or taken in the graph.
  strategy = PreemptiveMirroredStrategy(list(logical_cpus[:2]),
                                        scheduler="priority")
  graph, model = _two_step_graph(strategy, endless=endless)
  assert not first_layer_waits_for_last_layer_reduction(graph, model)


def test_pace_plan_lets_next_step_start_before_the_reduction_ends(
    logical_cpus):
  # On a slow link pace splits the big last layer and sends the first layer
  # between its chunks: step 2's first layer must wait for the collectives up
  # to its own, and for none of the ones after it (among them a chunk of the
  # last layer's gradient).
  shape = dict(width=256, out_units=1024)
  plan_model = _model(tf.distribute.OneDeviceStrategy(logical_cpus[0]), 1,
                      **shape)
  plan = _comm_bound_pace_plan(plan_model)
  strategy = PreemptiveMirroredStrategy(list(logical_cpus[:2]), plan=plan)
  graph, model = _two_step_graph(strategy, **shape)
  step2, first, last = _step_structure(graph, model)
  before_or_with_first = set(first)
  for op in first:
    before_or_with_first |= graphs.ancestors(op)
  after_first = (set(graphs.collective_reductions(graph)) -
                 before_or_with_first)
  assert after_first & last, (
      "the plan sends no piece of the last layer after the first layer; "
      "the test needs a plan that preempts")
  for op in step2:
    assert not after_first & graphs.ancestors(op), op.name
