"""Input pipelines of the training binary: synthetic data and tfds.

Both return a `tf.data.Dataset` of GLOBAL batches, repeated, for Keras
`fit` under a `tf.distribute` strategy: the strategy splits each global batch
across its replicas, and under "multi_worker" shards the data set across the
workers. The sharding policy is DATA (every worker reads the same elements
and keeps its share of each global batch), so that step n sees the same
examples in one process and in a cluster, whatever the number of files.

Synthetic data is a pure function of (seed, example index): two runs, or two
workers, see identical examples without storing them.
"""

import dataclasses
from typing import Any, Optional, Sequence, Tuple

import tensorflow as tf

# Images from tfds are scaled from uint8 to [0, 1].
_PIXEL_SCALE = 1.0 / 255.0


@dataclasses.dataclass(frozen=True)
class InputSpec:
  """What a model reads: one input, integer class labels.

  Attributes:
    shape: one example's input shape (no batch dimension).
    dtype: the input dtype name, e.g. "float32" or "int32".
    num_classes: labels are integers in [0, num_classes).
    vocab_size: for integer inputs (token ids), ids are in [0, vocab_size).
  """
  shape: Tuple[int, ...]
  dtype: str
  num_classes: int
  vocab_size: Optional[int] = None


def input_spec_of(model) -> InputSpec:
  """Reads the input and label shapes of a one-input classifier.

  Args:
    model: a built Keras functional model with one input and one output of
      shape (batch, num_classes).

  Returns:
    The `InputSpec`.

  Raises:
    ValueError: if the model has several inputs or an unknown dimension.
  """
  import keras  # pylint: disable=g-import-not-at-top
  if len(model.inputs) != 1 or len(model.outputs) != 1:
    raise ValueError(f"synthetic data needs a model with one input and one "
                     f"output; {model.name} has {len(model.inputs)} and "
                     f"{len(model.outputs)}")
  shape = tuple(model.inputs[0].shape[1:])
  if any(d is None for d in shape):
    raise ValueError(f"synthetic data needs a static input shape; "
                     f"{model.name} has {shape}")
  dtype = keras.backend.standardize_dtype(model.inputs[0].dtype)
  vocab = None
  if "int" in dtype:
    embeddings = [layer for layer in model.layers
                  if isinstance(layer, keras.layers.Embedding)]
    if not embeddings:
      raise ValueError(f"{model.name} reads integers but has no Embedding "
                       f"layer to take the vocabulary size from")
    vocab = int(embeddings[0].input_dim)
  return InputSpec(shape=shape, dtype=dtype,
                   num_classes=int(model.outputs[0].shape[-1]),
                   vocab_size=vocab)


def _with_data_sharding(dataset: tf.data.Dataset) -> tf.data.Dataset:
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  options.deterministic = True
  return dataset.with_options(options)


def synthetic_example(spec: InputSpec, seed: int, index):
  """Example number `index` of the synthetic data: a pure function."""
  # Stateless ops: the same (seed, index) gives the same example in every
  # process, without a random state to keep in step.
  key = tf.stack([tf.constant(seed, tf.int64), tf.cast(index, tf.int64)])
  if spec.vocab_size is not None:
    x = tf.random.stateless_uniform(spec.shape, key, minval=0,
                                    maxval=spec.vocab_size, dtype=tf.int32)
    x = tf.cast(x, spec.dtype)
  else:
    x = tf.random.stateless_uniform(spec.shape, key, dtype=tf.float32)
    x = tf.cast(x, spec.dtype)
  y = tf.random.stateless_uniform((), key + 1, minval=0,
                                  maxval=spec.num_classes, dtype=tf.int32)
  return x, y


def synthetic(spec: InputSpec, global_batch_size: int, num_batches: int,
              seed: int = 0) -> tf.data.Dataset:
  """`num_batches` distinct global batches of synthetic data, repeated.

  Args:
    spec: shapes and ranges (see `input_spec_of`).
    global_batch_size: examples per step over all replicas.
    num_batches: distinct batches before the data repeats.
    seed: the data's seed.

  Returns:
    A dataset of (x, y) global batches, endless.
  """
  n = global_batch_size * num_batches
  dataset = (tf.data.Dataset.range(n)
             .map(lambda i: synthetic_example(spec, seed, i))
             .batch(global_batch_size, drop_remainder=True)
             .repeat()
             .prefetch(2))
  return _with_data_sharding(dataset)


@dataclasses.dataclass(frozen=True)
class TfdsInfo:
  """What the model needs to know about a tfds image classification set.

  Attributes:
    spec: image shape and classes.
    num_examples: examples in the split, or None if the data set's metadata
      does not say (e.g. under `tfds.testing.mock_data`).
  """
  spec: InputSpec
  num_examples: Optional[int]


def tfds_info(name: str, data_dir: Optional[str] = None,
              split: str = "train") -> TfdsInfo:
  """Reads a tfds data set's image shape, classes and size.

  Raises:
    ValueError: if it is not an (image, label) classification set.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds.builder(name, data_dir=data_dir)
  info = builder.info
  features = info.features
  supervised = info.supervised_keys
  if not supervised or len(supervised) != 2:
    raise ValueError(f"--data=tfds:{name} is not an (input, label) data set "
                     f"(no supervised keys)")
  image, label = features[supervised[0]], features[supervised[1]]
  num_classes = getattr(label, "num_classes", None)
  shape = getattr(image, "shape", None)
  if (not num_classes or shape is None or len(shape) != 3 or
      any(d is None for d in shape)):
    raise ValueError(f"--data=tfds:{name} must have fixed-size images and "
                     f"class labels; it has {image!r} and {label!r}")
  try:
    num_examples = int(info.splits[split].num_examples)
  except KeyError:
    num_examples = None
  return TfdsInfo(InputSpec(tuple(int(d) for d in shape), "float32",
                            int(num_classes)), num_examples)


def tfds_dataset(name: str, global_batch_size: int,
                 data_dir: Optional[str] = None, split: str = "train",
                 image_shape: Optional[Sequence[int]] = None,
                 shuffle_seed: Optional[int] = 0) -> tf.data.Dataset:
  """A tfds image classification split as global batches, repeated.

  Args:
    name: the tfds name, e.g. "cifar10".
    global_batch_size: examples per step over all replicas.
    data_dir: where the prepared data set is (nothing is downloaded).
    split: the split to read.
    image_shape: resize images to this (height, width, channels) if given.
    shuffle_seed: seed of a deterministic shuffle buffer; None: no shuffle.

  Returns:
    A dataset of (float32 image in [0, 1], int32 label) global batches.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  # Files in a fixed order, and no download: the data must be prepared.
  dataset = tfds.load(name, split=split, data_dir=data_dir,
                      as_supervised=True, shuffle_files=False,
                      download=False)

  def prepare(image, label):
    image = tf.cast(image, tf.float32) * _PIXEL_SCALE
    if image_shape is not None and tuple(image.shape) != tuple(image_shape):
      image = tf.image.resize(image, image_shape[:2])
    return image, tf.cast(label, tf.int32)

  dataset = dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=True)
  if shuffle_seed is not None:
    dataset = dataset.shuffle(10 * global_batch_size, seed=shuffle_seed,
                              reshuffle_each_iteration=True)
  dataset = (dataset.batch(global_batch_size, drop_remainder=True)
             .repeat().prefetch(2))
  return _with_data_sharding(dataset)


def describe(dataset: Any) -> str:
  """A one-line description of a dataset's element spec (for logs)."""
  return str(tf.nest.map_structure(lambda s: (s.shape.as_list(),
                                              s.dtype.name),
                                   dataset.element_spec))

