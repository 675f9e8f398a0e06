"""Tests of the training input pipelines: synthetic data and tfds."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tf_preempt import models
from tf_preempt.training import data


def _batches(dataset, n):
  return [tuple(t.numpy() for t in b) for b in dataset.take(n)]


class TestSynthetic:

  def test_shapes_come_from_the_model(self):
    spec = data.input_spec_of(models.get("vgg_small", num_classes=7))
    assert spec == data.InputSpec((32, 32, 3), "float32", 7)
    x, y = _batches(data.synthetic(spec, 6, num_batches=2), 1)[0]
    assert x.shape == (6, 32, 32, 3) and x.dtype == np.float32
    assert y.shape == (6,) and y.dtype == np.int32
    assert ((0 <= y) & (y < 7)).all()
    assert ((0 <= x) & (x < 1)).all()

  def test_token_ids_stay_in_the_vocabulary(self):
    spec = data.input_spec_of(models.get("transformer_tiny"))
    assert spec.shape == (32,) and "int" in spec.dtype
    assert spec.vocab_size == 1000 and spec.num_classes == 2
    x, y = _batches(data.synthetic(spec, 4, num_batches=1), 1)[0]
    assert x.shape == (4, 32) and x.min() >= 0 and x.max() < 1000
    assert set(np.unique(y)) <= {0, 1}

  def test_deterministic_and_repeating(self):
    spec = data.InputSpec((3,), "float32", 5)
    first = _batches(data.synthetic(spec, 4, num_batches=3, seed=1), 6)
    again = _batches(data.synthetic(spec, 4, num_batches=3, seed=1), 6)
    other = _batches(data.synthetic(spec, 4, num_batches=3, seed=2), 1)
    for (xa, ya), (xb, yb) in zip(first, again):
      np.testing.assert_array_equal(xa, xb)
      np.testing.assert_array_equal(ya, yb)
    # Three distinct batches, then the same three again.
    assert not np.array_equal(first[0][0], first[1][0])
    np.testing.assert_array_equal(first[0][0], first[3][0])
    assert not np.array_equal(first[0][0], other[0][0])

  def test_sharded_by_data_for_distribution(self):
    spec = data.InputSpec((3,), "float32", 5)
    options = data.synthetic(spec, 4, 1).options()
    assert (options.experimental_distribute.auto_shard_policy ==
            tf.data.experimental.AutoShardPolicy.DATA)

  def test_multi_input_model_is_refused(self):
    import keras  # pylint: disable=g-import-not-at-top
    a, b = keras.Input((2,)), keras.Input((2,))
    model = keras.Model([a, b], keras.layers.Dense(3)(
        keras.layers.Concatenate()([a, b])))
    with pytest.raises(ValueError, match="one input"):
      data.input_spec_of(model)


class TestTfds:

  def test_mock_mnist_from_a_local_data_dir(self, tmp_path):
    with tfds.testing.mock_data(num_examples=20, data_dir=str(tmp_path)):
      info = data.tfds_info("mnist", data_dir=str(tmp_path))
      assert info.spec.shape == (28, 28, 1) and info.spec.num_classes == 10
      # Mocked data sets have no split sizes.
      assert info.num_examples is None
      dataset = data.tfds_dataset("mnist", 8, data_dir=str(tmp_path),
                                  image_shape=info.spec.shape)
      batches = _batches(dataset, 3)  # Repeats past the 20 examples.
    for x, y in batches:
      assert x.shape == (8, 28, 28, 1) and x.dtype == np.float32
      assert 0 <= x.min() and x.max() <= 1
      assert y.shape == (8,) and y.dtype == np.int32

  def test_images_are_resized_to_the_model(self, tmp_path):
    with tfds.testing.mock_data(num_examples=8, data_dir=str(tmp_path)):
      dataset = data.tfds_dataset("mnist", 4, data_dir=str(tmp_path),
                                  image_shape=(32, 32, 1), shuffle_seed=None)
      x, _ = _batches(dataset, 1)[0]
    assert x.shape == (4, 32, 32, 1)

  def test_non_classification_set_is_refused(self, tmp_path):
    with tfds.testing.mock_data(num_examples=2, data_dir=str(tmp_path)):
      with pytest.raises(ValueError, match="--data=tfds:"):
        data.tfds_info("wikipedia_toxicity_subtypes",
                       data_dir=str(tmp_path))
