"""Tests of tf_preempt.profile.model_dag: Keras model -> planner TrainingDAG."""

import collections
import json

import keras
import numpy as np
import pytest

from tf_preempt import models
from tf_preempt import plan
from tf_preempt import profile
from tf_preempt.profile import model_dag


@pytest.fixture(scope="module")
def resnet20():
  return models.get("resnet20")


@pytest.fixture(scope="module")
def resnet20_dag(resnet20):
  return profile.model_to_dag(resnet20, batch_size=32)


def _predecessors(dag):
  pred = collections.defaultdict(list)
  for a, b in dag.edges:
    pred[b].append(a)
  return pred


def _ops(dag):
  return {op.name: op for op in dag.ops}


class TestStructure:

  def test_resnet20_is_a_dag_not_a_chain(self, resnet20_dag):
    pred = _predecessors(resnet20_dag)
    ops = _ops(resnet20_dag)
    # The residual adds join two branches, in both passes.
    joins = [b for b, p in pred.items() if len(p) >= 2]
    assert "conv2_block1_add/forward" in joins
    assert sorted(pred["conv2_block1_add/forward"]) == [
        "conv1_relu/forward", "conv2_block1_2_bn/forward"]
    assert any(ops[b].phase == "backward" for b in joins)
    # ... and the shortcut's input forks into two ops.
    succ = collections.Counter(a for a, _ in resnet20_dag.edges)
    assert succ["conv1_relu/forward"] == 2

  def test_backward_edges_reverse_forward_edges(self, resnet20_dag):
    ops = _ops(resnet20_dag)
    forward = {(a[:-len("/forward")], b[:-len("/forward")])
               for a, b in resnet20_dag.edges if ops[a].phase == "forward"}
    backward = {(b[:-len("/backward")], a[:-len("/backward")])
                for a, b in resnet20_dag.edges if ops[a].phase == "backward"}
    assert forward == backward
    assert all(ops[a].phase == ops[b].phase for a, b in resnet20_dag.edges)

  def test_one_op_pair_per_working_layer(self, resnet20, resnet20_dag):
    working = [l.name for l in resnet20.layers
               if not isinstance(l, keras.layers.InputLayer)]
    names = [op.name for op in resnet20_dag.ops]
    assert len(names) == len(set(names)) == 2 * len(working)
    for layer in working:
      assert f"{layer}/forward" in names and f"{layer}/backward" in names

  def test_every_trainable_variable_is_a_tensor_exactly_once(
      self, resnet20, resnet20_dag):
    assert [t.name for t in resnet20_dag.tensors] == [
        v.path for v in resnet20.trainable_variables]
    assert len({t.name for t in resnet20_dag.tensors}) == len(
        resnet20.trainable_variables)

  def test_total_bytes_are_the_trainable_bytes(self, resnet20, resnet20_dag):
    expected = sum(int(np.prod(v.shape)) * 4
                   for v in resnet20.trainable_variables)
    assert sum(t.nbytes for t in resnet20_dag.tensors) == expected
    assert profile.trainable_bytes(resnet20) == expected
    assert all(t.itemsize == 4 for t in resnet20_dag.tensors)

  def test_producer_and_consumer_are_the_owning_layer(self, resnet20_dag):
    by_name = {t.name: t for t in resnet20_dag.tensors}
    kernel = by_name["conv1_conv/kernel"]
    assert kernel.producer == "conv1_conv/backward"
    assert kernel.consumers == ("conv1_conv/forward",)
    gamma = by_name["conv3_block2_1_bn/gamma"]
    assert gamma.producer == "conv3_block2_1_bn/backward"

  def test_metadata_only_layers_are_contracted(self):
    model = models.get("vgg_small")
    dag = profile.model_to_dag(model)
    names = {op.name for op in dag.ops}
    assert "flatten/forward" not in names
    assert ("block3_pool/forward", "fc1/forward") in dag.edges
    assert ("fc1/backward", "block3_pool/backward") in dag.edges

  def test_transformer_attention_is_a_dag(self):
    dag = profile.model_to_dag(models.get("transformer_tiny"))
    pred = _predecessors(dag)
    assert sorted(pred["encoder1_attention_add/forward"]) == [
        "embedding_dropout/forward", "encoder1_attention_dropout/forward"]
    attention = [t for t in dag.tensors
                 if t.producer == "encoder1_attention/backward"]
    assert len(attention) == 8  # q, k, v, output: kernel and bias each

  def test_resnet50_size(self):
    model = models.get("resnet50")
    dag = profile.model_to_dag(model)
    assert len(dag.tensors) == 161
    assert sum(t.nbytes for t in dag.tensors) == 25_557_032 * 4

  def test_shared_layer_gets_one_op_pair_per_call(self):
    inputs = keras.Input((8,))
    shared = keras.layers.Dense(8, name="shared")
    x = shared(inputs)
    x = keras.layers.Dense(8, name="middle")(x)
    x = shared(x)
    model = keras.Model(inputs, x)
    dag = profile.model_to_dag(model)
    kernel = next(t for t in dag.tensors if t.name == "shared/kernel")
    assert kernel.consumers == ("shared@0/forward", "shared@1/forward")
    # The first call's backward runs last and completes the gradient.
    assert kernel.producer == "shared@0/backward"
    assert ("shared@1/backward", "middle/backward") in dag.edges
    assert len(dag.tensors) == 4

  def test_subclassed_model_is_refused(self):
    class Net(keras.Model):

      def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

      def call(self, x):
        return self.dense(x)

    net = Net()
    net(np.zeros((1, 3), "float32"))
    with pytest.raises(ValueError, match="functional"):
      profile.model_to_dag(net)


class TestDurations:

  def test_conv_flops(self, resnet20):
    layer = resnet20.get_layer("conv1_conv")
    node = layer._inbound_nodes[0]
    cost = profile.call_cost(layer, node.input_tensors, node.outputs)
    assert cost.flops == 2 * 32 * 32 * 16 * (3 * 3 * 3)
    assert cost.weight_bytes == 3 * 3 * 3 * 16 * 4

  def test_dense_and_attention_flops(self):
    model = models.get("transformer_tiny")
    dense = model.get_layer("encoder1_ff1")
    node = dense._inbound_nodes[0]
    cost = profile.call_cost(dense, node.input_tensors, node.outputs)
    assert cost.flops == 2 * 32 * 64 * 128
    mha = model.get_layer("encoder1_attention")
    node = mha._inbound_nodes[0]
    cost = profile.call_cost(mha, node.input_tensors, node.outputs)
    seq, d = 32, 64
    expected = 2 * (4 * seq * d * d + 2 * seq * seq * d) + 5 * 4 * seq * seq
    assert cost.flops == expected

  def test_roofline_and_backward_ratio(self):
    model = models.get("vgg16")
    dag = profile.model_to_dag(model, batch_size=32, gpu="v100")
    ops = _ops(dag)
    spec = profile.GPU_SPECS["v100"]
    # A big convolution is compute-bound: FLOPs / (peak * efficiency).
    conv_flops = 2 * 224 * 224 * 64 * (3 * 3 * 64) * 32
    assert ops["block1_conv2/forward"].duration == pytest.approx(
        conv_flops / (spec.peak_flops * profile.DEFAULT_EFFICIENCY))
    # A convolution computes both gradients, a pooling only its input's,
    # the first convolution (reading the images) only its weights'.
    for name, passes in (("block1_conv2", 2), ("block1_pool", 1),
                         ("fc1", 2), ("block1_conv1", 1)):
      assert ops[f"{name}/backward"].duration == pytest.approx(
          passes * ops[f"{name}/forward"].duration), name
    assert all(op.duration > 0 for op in ops.values())

  def test_backward_skips_the_passes_autodiff_does_not_run(self, resnet20):
    ops = _ops(profile.model_to_dag(resnet20, batch_size=32,
                                    backward_ratio=3.0))
    def ratio(name):
      return (ops[f"{name}/backward"].duration /
              ops[f"{name}/forward"].duration)
    assert ratio("conv2_block1_1_conv") == pytest.approx(3.0)
    assert ratio("conv2_block1_1_bn") == pytest.approx(3.0)
    assert ratio("conv2_block1_1_relu") == pytest.approx(1.5)
    assert ratio("conv1_conv") == pytest.approx(1.5)
    assert ops["conv2_block1_add/backward"].duration == 0
    assert ops["conv2_block1_add/forward"].duration > 0

  def test_no_input_gradient_behind_fixed_preprocessing(self):
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Rescaling(1 / 255, name="scale")(inputs)
    x = keras.layers.Conv2D(4, 3, name="conv_a")(x)
    x = keras.layers.Conv2D(4, 3, name="conv_b")(x)
    ops = _ops(profile.model_to_dag(keras.Model(inputs, x), batch_size=4))
    assert ops["scale/backward"].duration == 0
    assert ops["conv_a/backward"].duration == pytest.approx(
        ops["conv_a/forward"].duration)
    assert ops["conv_b/backward"].duration == pytest.approx(
        2 * ops["conv_b/forward"].duration)

  def test_nested_model_keeps_both_passes(self):
    inner_in = keras.Input((8, 8, 3))
    y = keras.layers.Conv2D(4, 3, name="inner_a")(inner_in)
    y = keras.layers.Conv2D(4, 3, name="inner_b")(y)
    backbone = keras.Model(inner_in, y, name="backbone")
    inputs = keras.Input((8, 8, 3))
    ops = _ops(profile.model_to_dag(keras.Model(inputs, backbone(inputs)),
                                    batch_size=4))
    assert ops["backbone/backward"].duration == pytest.approx(
        2 * ops["backbone/forward"].duration)

  def test_frozen_and_integer_outputs_stop_the_input_gradient(self):
    inputs = keras.Input((6,))
    frozen = keras.layers.Dense(6, name="frozen")
    frozen.trainable = False
    x = frozen(inputs)
    x = keras.layers.Dense(6, name="after_frozen")(x)
    ids = keras.ops.argmax(x, axis=-1)  # an operation, int32
    e = keras.layers.Embedding(6, 4, name="lookup")(ids)
    y = keras.layers.Dense(4, name="head")(keras.ops.add(e, e))
    model = keras.Model(inputs, [x, y])
    ops = _ops(profile.model_to_dag(model, batch_size=4))
    assert ops["frozen/backward"].duration == 0
    assert ops["after_frozen/backward"].duration == pytest.approx(
        ops["after_frozen/forward"].duration)
    # argmax has no gradient: nothing flows back through it.
    assert ops["argmax/forward"].duration > 0
    assert ops["argmax/backward"].duration == 0
    assert ops["lookup/backward"].duration == 0
    # keras.ops.add, like the Add layer, passes its gradient on.
    assert ops["add/backward"].duration == 0
    assert ops["head/backward"].duration == pytest.approx(
        2 * ops["head/forward"].duration)

  def test_shared_layer_call_on_a_weight_output_computes_both(self):
    inputs = keras.Input((6,))
    shared = keras.layers.Dense(6, name="shared")
    x = shared(inputs)
    x = shared(x)
    ops = _ops(profile.model_to_dag(keras.Model(inputs, x), batch_size=4))
    assert ops["shared@0/backward"].duration == pytest.approx(
        ops["shared@0/forward"].duration)
    assert ops["shared@1/backward"].duration == pytest.approx(
        2 * ops["shared@1/forward"].duration)

  def test_sparse_embedding_backward_does_no_work(self):
    ops = _ops(profile.model_to_dag(models.get("transformer_tiny")))
    assert ops["embedding/forward"].duration > 0
    assert ops["embedding/backward"].duration == 0
    assert ops["position_encoding/backward"].duration == pytest.approx(
        ops["position_encoding/forward"].duration)

  def test_durations_scale_with_batch_and_gpu(self, resnet20):
    small = profile.model_to_dag(resnet20, batch_size=32)
    large = profile.model_to_dag(resnet20, batch_size=256)
    a100 = profile.model_to_dag(resnet20, batch_size=32, gpu="a100")
    assert large.backward_end() > 4 * small.backward_end()
    assert a100.backward_end() < small.backward_end()

  def test_unknown_gpu_lists_valid_ones(self, resnet20):
    with pytest.raises(ValueError, match="h900.*a100.*v100"):
      profile.model_to_dag(resnet20, gpu="h900")

  def test_bad_numbers(self, resnet20):
    with pytest.raises(ValueError, match="batch_size"):
      profile.model_to_dag(resnet20, batch_size=0)
    with pytest.raises(ValueError, match="efficiency"):
      profile.model_to_dag(resnet20, efficiency=1.5)


class TestProfile:

  def test_profile_replaces_estimates(self, resnet20, tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"conv1_conv/forward": 0.5,
                                "predictions/backward": 0.25}))
    measured = profile.load_profile(str(path))
    dag = profile.model_to_dag(resnet20, profile=measured)
    ops = _ops(dag)
    assert ops["conv1_conv/forward"].duration == 0.5
    assert ops["predictions/backward"].duration == 0.25
    estimate = _ops(profile.model_to_dag(resnet20))
    assert ops["conv1_bn/forward"].duration == estimate[
        "conv1_bn/forward"].duration

  def test_profile_with_unknown_op_fails(self, resnet20):
    with pytest.raises(ValueError, match="conv9_conv/forward"):
      profile.model_to_dag(resnet20, profile={"conv9_conv/forward": 1.0})

  @pytest.mark.parametrize("text, match", [
      ("[1, 2]", "JSON object"),
      ('{"a/forward": -1}', "a/forward"),
      ('{"a/forward": "fast"}', "a/forward"),
      ("{not json", "malformed"),
  ])
  def test_bad_profile_file(self, tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
      profile.load_profile(str(path))


def test_the_planner_plans_a_real_model(resnet20_dag):
  cost = plan.CostModel.ring(8, 10e9 / 8, 50e-6)
  pace = plan.make_plan(resnet20_dag, cost, scheduler="pace")
  default = plan.make_plan(resnet20_dag, cost, scheduler="tf_default")
  assert (plan.simulate(resnet20_dag, cost, pace).iteration_time <=
          plan.simulate(resnet20_dag, cost, default).iteration_time + 1e-12)
  assert [t.name for t in pace.tensors] == [
      t.name for t in resnet20_dag.tensors]


def test_gpu_table_is_documented():
  for name, spec in model_dag.GPU_SPECS.items():
    assert name == name.lower()
    assert spec.peak_flops > 0 and spec.memory_bandwidth > 0
    assert spec.peak_flops_half >= spec.peak_flops
  assert model_dag.GPU_SPECS["v100"].peak_flops == 15.7e12
  assert profile.DEFAULT_EFFICIENCY == 0.4


def test_mixed_precision_uses_half_peak_and_float32_gradients():
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy("mixed_float16")
  try:
    model = models.get("transformer_tiny", sequence_length=512)
  finally:
    keras.config.set_dtype_policy(previous)
  half = _ops(profile.model_to_dag(model, batch_size=64))
  full = _ops(profile.model_to_dag(models.get(
      "transformer_tiny", sequence_length=512), batch_size=64))
  # The float16 attention runs on tensor cores; the float32 head does not.
  assert (half["encoder1_attention/forward"].duration <
          full["encoder1_attention/forward"].duration)
  assert (half["predictions/forward"].duration ==
          pytest.approx(full["predictions/forward"].duration))
  # Variables (and so gradients) stay float32 under mixed precision.
  dag = profile.model_to_dag(model)
  assert all(t.itemsize == 4 for t in dag.tensors)
  assert sum(t.nbytes for t in dag.tensors) == profile.trainable_bytes(model)


def test_sequential_model_is_a_chain():
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                            keras.layers.ReLU(), keras.layers.Dense(2)])
  dag = profile.model_to_dag(model)
  forward = [op.name for op in dag.ops if op.phase == "forward"]
  assert len(forward) == 3
  assert [e for e in dag.edges if e[0].endswith("/forward")] == [
      (forward[0], forward[1]), (forward[1], forward[2])]
  assert [t.name for t in dag.tensors] == [
      v.path for v in model.trainable_variables]


def test_transposed_convolution_flops():
  inputs = keras.Input((8, 8, 4))
  outputs = keras.layers.Conv2DTranspose(6, 3, strides=2, padding="same",
                                         name="up")(inputs)
  model = keras.Model(inputs, outputs)
  layer = model.get_layer("up")
  node = layer._inbound_nodes[0]
  cost = profile.call_cost(layer, node.input_tensors, node.outputs)
  assert cost.flops == 2 * (8 * 8 * 4) * 9 * 6


def test_embedding_gradients_are_sparse():
  # transformer_tiny at 8 examples per worker: 8 x 32 int32 ids gather rows
  # of 64 float32 from the 1000 x 64 table; every other gradient is dense.
  dag = profile.model_to_dag(models.get("transformer_tiny"), batch_size=8)
  (embedding,) = [t for t in dag.tensors if t.sparse is not None]
  assert embedding.name == "embedding/embeddings"
  assert embedding.nbytes == 1000 * 64 * 4
  assert embedding.sparse == plan.SparseGradient(
      values_nbytes=8 * 32 * 64 * 4, indices_nbytes=8 * 32 * 4)
  # int64 ids stay int64; a layer called twice gathers both calls' rows.
  ids = keras.Input((5,), dtype="int64")
  table = keras.layers.Embedding(10, 3, name="table")
  both = keras.layers.Concatenate(axis=1)([table(ids), table(ids)])
  dag = profile.model_to_dag(keras.Model(ids, both), batch_size=2)
  assert dag.tensors[0].sparse == plan.SparseGradient(
      values_nbytes=2 * 10 * 3 * 4, indices_nbytes=2 * 10 * 8)
  # A Dense layer's kernel is dense.
  x = keras.Input((4,))
  dense = profile.model_to_dag(keras.Model(x, keras.layers.Dense(2)(x)))
  assert all(t.sparse is None for t in dense.tensors)
