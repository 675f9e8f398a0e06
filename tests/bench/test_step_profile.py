"""Tests of tf_preempt.bench.step_profile: layer times and early work."""

import pytest
import tensorflow as tf

from tf_preempt.bench import step_profile


def _graph_and_weight_inputs():
  weight = tf.Variable(tf.ones([4]), name="weight")

  @tf.function
  def f(x):
    scaled = tf.multiply(x, 2.0, name="scaled")  # reads no weight
    mask = tf.greater_equal(
        tf.random.stateless_uniform([4], seed=[1, 2], name="noise"), 0.5,
        name="mask")
    product = tf.multiply(scaled, weight, name="product")
    return tf.where(mask, product, 0.0, name="masked")

  graph = f.get_concrete_function(tf.TensorSpec([4])).graph
  inputs = [internal.op.name for external, internal in graph.captures
            if external is weight.handle]
  return graph, inputs


def test_weight_free_ops_are_those_no_weight_reaches():
  graph, inputs = _graph_and_weight_inputs()
  assert len(inputs) == 1
  free = step_profile.weight_free_ops(graph, inputs)
  assert {"scaled", "mask", "noise"} <= free
  for name in ("product", "masked", inputs[0]):
    assert name not in free
  # Without weights every op is free.
  assert step_profile.weight_free_ops(graph, []) == {
      op.name for op in graph.get_operations()}


def test_layer_seconds_by_name_scope_and_phase():
  seconds = {
      "net_1/dense_1/MatMul": 2.0, "net_1/dense_1/BiasAdd": 1.0,
      "gradient_tape/net_1/dense_1/MatMul/MatMul_1": 4.0,
      "net_1/dense_1_1/MatMul": 0.5,  # a layer named dense_1, called again
      "net_1/block_2/conv_1/Conv2D": 3.0,  # nested: the outer layer's
      "net_1/dropout/Mul": 0.25,  # the scope without a suffix
      "sgd/update/Sub": 9.0, "sparse_categorical_crossentropy/Neg": 9.0,
      "other_1/dense_1/MatMul": 9.0,  # another model's scope
  }
  assert step_profile.layer_seconds(
      seconds, "net", ["dense_1", "block", "dropout"]) == {
          "dense_1/forward": 3.5, "dense_1/backward": 4.0,
          "block/forward": 3.0, "dropout/forward": 0.25}


def test_profiled_op_seconds_needs_a_profile(tmp_path):
  with pytest.raises(FileNotFoundError, match="no profile"):
    step_profile.profiled_op_seconds(str(tmp_path))


def test_transformer_s_early_work_is_dropout_and_layers_hold_the_time():
  # threads=None: other tests may have started TensorFlow's runtime.
  record = step_profile.measure("transformer_tiny", batch_size=4, steps=3,
                              threads=None)
  assert 0 < record["early_share"] < 0.5
  assert record["early_ms"] < record["ops_ms"]
  assert record["early_ops"]
  # Most of it is dropout's random numbers.
  dropout_ms = sum(ms for name, ms in record["early_ops"]
                   if "dropout" in name)
  assert dropout_ms > 0.5 * record["early_ms"]
  # The layers hold nearly all of the step's op time, each of the DAG's
  # names (the loss and the optimizer are the rest).
  assert 0.8 < record["layer_share"] <= 1.0
  assert record["layer_ms"]["encoder1_attention/backward"] > 0
  vgg = step_profile.measure("vgg_small", batch_size=2, steps=3, threads=None)
  assert vgg["early_share"] < 0.02
  assert vgg["layer_ms"]["block1_conv1/forward"] > 0
