"""Tests of tf_preempt.models: published sizes, one real training step each."""

import keras
import numpy as np
import pytest

from tf_preempt import models


def _trainable_count(model):
  return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def _encoder_layer_params(d_model, ff_dim):
  attention = 4 * (d_model * d_model + d_model)  # q, k, v, output + biases
  feed_forward = d_model * ff_dim + ff_dim + ff_dim * d_model + d_model
  norms = 2 * 2 * d_model
  return attention + feed_forward + norms


class TestRegistry:

  def test_names(self):
    assert models.names() == ["resnet20", "resnet50", "resnet56",
                              "transformer", "transformer_tiny", "vgg16",
                              "vgg_small"]

  def test_unknown_name_lists_valid_ones(self):
    with pytest.raises(ValueError, match="alexnet.*resnet50.*vgg16"):
      models.get("alexnet")

  def test_kwargs_reach_the_builder(self):
    model = models.get("resnet20", num_classes=7)
    assert model.output.shape == (None, 7)


class TestPublishedSizes:
  """Parameter counts of the papers (trainable, as they count them)."""

  def test_resnet50(self):
    # He et al. 2016 / torchvision: 25,557,032 (batch-norm statistics are
    # not parameters).
    assert _trainable_count(models.get("resnet50")) == 25_557_032

  def test_resnet20_and_56(self):
    # He et al. 2016, table 6: 0.27M and 0.85M with option-A shortcuts.
    assert _trainable_count(models.get("resnet20")) == 269_722
    assert _trainable_count(models.get("resnet56")) == 853_018

  def test_vgg16(self):
    model = models.get("vgg16")
    assert model.count_params() == 138_357_544
    assert _trainable_count(model) == 138_357_544

  def test_transformer_base(self):
    model = models.get("transformer")
    encoder = 6 * _encoder_layer_params(512, 2048)
    assert encoder == 18_914_304
    assert _trainable_count(model) == encoder + 32000 * 512 + (512 + 1) * 2

  def test_transformer_is_configurable(self):
    model = models.get("transformer_tiny", num_layers=3, num_classes=5)
    assert _trainable_count(model) == (
        3 * _encoder_layer_params(64, 128) + 1000 * 64 + (64 + 1) * 5)

  def test_bad_shapes_fail_clearly(self):
    with pytest.raises(ValueError, match="6n\\+2"):
      models.resnet_cifar(depth=21)
    with pytest.raises(ValueError, match="num_heads"):
      models.transformer_classifier(d_model=10, num_heads=3)


# Small inputs and heads: one step of every model stays fast on a CPU.
_TINY = {
    "resnet20": dict(),
    "resnet56": dict(),
    "resnet50": dict(input_shape=(32, 32, 3), num_classes=10),
    "vgg16": dict(input_shape=(32, 32, 3), num_classes=10),
    "vgg_small": dict(),
    "transformer": dict(vocab_size=100, sequence_length=8),
    "transformer_tiny": dict(sequence_length=8),
}


def _batch(model, size=2, seed=0):
  rng = np.random.default_rng(seed)
  spec = model.inputs[0]
  shape = (size,) + tuple(spec.shape[1:])
  if "int" in str(spec.dtype):
    vocab = model.get_layer("embedding").input_dim
    x = rng.integers(0, vocab, size=shape).astype("int32")
  else:
    x = rng.standard_normal(shape).astype("float32")
  y = rng.integers(0, model.output.shape[-1], size=(size,))
  return x, y


@pytest.mark.parametrize("name", sorted(_TINY))
def test_one_training_step(name):
  model = models.get(name, **_TINY[name])
  assert set(_TINY) == set(models.names())
  x, y = _batch(model)
  before = [np.array(v) for v in model.trainable_variables]
  model.compile(optimizer=keras.optimizers.SGD(0.1),
                loss="sparse_categorical_crossentropy", run_eagerly=True)
  loss = model.train_on_batch(x, y)
  assert np.isfinite(loss)
  after = [np.array(v) for v in model.trainable_variables]
  changed = sum(not np.array_equal(b, a) for b, a in zip(before, after))
  # Every weight gets a gradient; allow a few with exactly zero gradient
  # (e.g. a ReLU dead for both examples).
  assert changed >= 0.9 * len(before), (changed, len(before))


@pytest.mark.parametrize("name", ["resnet20", "vgg_small", "transformer_tiny"])
def test_outputs_float32_under_mixed_precision(name):
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy("mixed_float16")
  try:
    model = models.get(name, **_TINY[name])
    x, _ = _batch(model)
    out = model(x, training=False)
  finally:
    keras.config.set_dtype_policy(previous)
  assert model.output.dtype == "float32"
  assert keras.backend.standardize_dtype(out.dtype) == "float32"
  np.testing.assert_allclose(np.sum(np.array(out), axis=-1), 1.0, rtol=1e-3)
  # The body really is float16: the policy reached the hidden layers.
  hidden = [l for l in model.layers if l.name != "predictions"
            and l.weights]
  assert any(l.compute_dtype == "float16" for l in hidden)


def test_models_serialise(tmp_path):
  # The custom layers (option-A shortcut, position encoding) round-trip.
  for name in ("resnet20", "transformer_tiny"):
    model = models.get(name, **_TINY[name])
    path = str(tmp_path / f"{name}.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    x, _ = _batch(model)
    np.testing.assert_allclose(loaded(x, training=False),
                               model(x, training=False), rtol=1e-5, atol=1e-6)
