"""Tests of tf_preempt.bench.early_work: the weight-free part of a step."""

import pytest
import tensorflow as tf

from tf_preempt.bench import early_work


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
  free = early_work.weight_free_ops(graph, inputs)
  assert {"scaled", "mask", "noise"} <= free
  for name in ("product", "masked", inputs[0]):
    assert name not in free
  # Without weights every op is free.
  assert early_work.weight_free_ops(graph, []) == {
      op.name for op in graph.get_operations()}


def test_profiled_op_seconds_needs_a_profile(tmp_path):
  with pytest.raises(FileNotFoundError, match="no profile"):
    early_work.profiled_op_seconds(str(tmp_path))


def test_dropout_is_the_transformer_s_early_work_and_vgg_has_none():
  # threads=None: other tests may have started TensorFlow's runtime.
  record = early_work.measure("transformer_tiny", batch_size=4, steps=3,
                              threads=None)
  assert 0 < record["early_share"] < 0.5
  assert record["early_ms"] < record["ops_ms"]
  assert record["early_ops"]
  # Most of it is dropout's random numbers.
  dropout_ms = sum(ms for name, ms in record["early_ops"]
                   if "dropout" in name)
  assert dropout_ms > 0.5 * record["early_ms"]
  vgg = early_work.measure("vgg_small", batch_size=2, steps=3, threads=None)
  assert vgg["early_share"] < 0.02
