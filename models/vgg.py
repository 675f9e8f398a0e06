"""VGG builders: VGG-16 (ImageNet shape) and a small VGG that trains on a CPU.

VGG-16 is configuration D of Simonyan and Zisserman (2015): 13 3x3
convolutions with biases, 5 max-pools and three dense layers. With 224x224
inputs and the 1000-class head it has 138,357,544 parameters, the published
count; most of them (102,764,544) are in the first dense layer, which is what
makes VGG-16 the hard case for gradient communication.

The classifier layer runs in float32 so that the outputs are float32 under a
mixed-precision policy too.
"""

from typing import Optional, Sequence, Tuple

import keras
from keras import layers

# Filters of each convolution, per block, of configuration D.
_VGG16_BLOCKS = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512),
                 (512, 512, 512))


def _vgg(inputs, blocks, batch_norm):
  """The convolutional trunk: blocks of 3x3 convolutions and max-pools."""
  x = inputs
  for b, filters_list in enumerate(blocks, start=1):
    for c, filters in enumerate(filters_list, start=1):
      name = f"block{b}_conv{c}"
      if batch_norm:
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False,
                          name=name)(x)
        x = layers.BatchNormalization(name=name + "_bn")(x)
        x = layers.ReLU(name=name + "_relu")(x)
      else:
        x = layers.Conv2D(filters, 3, padding="same", activation="relu",
                          name=name)(x)
    x = layers.MaxPooling2D(2, strides=2, name=f"block{b}_pool")(x)
  return x


def vgg16(input_shape: Tuple[int, int, int] = (224, 224, 3),
          num_classes: int = 1000,
          classifier_activation: Optional[str] = "softmax",
          name: str = "vgg16") -> keras.Model:
  """Builds VGG-16 (configuration D, no batch norm).

  Args:
    input_shape: (height, width, channels); at least 32x32. The first dense
      layer's size follows the input size: 138,357,544 parameters in all are
      for 224x224 inputs.
    num_classes: size of the classification head.
    classifier_activation: activation of the head ("softmax", or None).
    name: the model's name.

  Returns:
    An uncompiled functional `keras.Model`.
  """
  inputs = keras.Input(shape=input_shape, name="images")
  x = _vgg(inputs, _VGG16_BLOCKS, batch_norm=False)
  x = layers.Flatten(name="flatten")(x)
  x = layers.Dense(4096, activation="relu", name="fc1")(x)
  x = layers.Dense(4096, activation="relu", name="fc2")(x)
  # dtype="float32": the head computes and outputs float32 under any policy.
  outputs = layers.Dense(num_classes, activation=classifier_activation,
                         dtype="float32", name="predictions")(x)
  return keras.Model(inputs, outputs, name=name)


def vgg_small(input_shape: Tuple[int, int, int] = (32, 32, 3),
              num_classes: int = 10,
              blocks: Sequence[Sequence[int]] = ((32, 32), (64, 64),
                                                 (128, 128)),
              dense_units: int = 256,
              classifier_activation: Optional[str] = "softmax",
              name: str = "vgg_small") -> keras.Model:
  """Builds a small VGG with batch norm for CIFAR-sized inputs on a CPU.

  The same shape as VGG-16 (3x3 convolution blocks, then dense layers with a
  large first one), small enough for tests and CPU benchmarks (about 0.8M
  parameters with the defaults).

  Args:
    input_shape: (height, width, channels); divisible by 2**len(blocks).
    num_classes: size of the classification head.
    blocks: filters of each convolution, per block; each block ends with a
      2x2 max-pool.
    dense_units: units of the hidden dense layer.
    classifier_activation: activation of the head ("softmax", or None).
    name: the model's name.

  Returns:
    An uncompiled functional `keras.Model`.
  """
  inputs = keras.Input(shape=input_shape, name="images")
  x = _vgg(inputs, blocks, batch_norm=True)
  x = layers.Flatten(name="flatten")(x)
  x = layers.Dense(dense_units, activation="relu", name="fc1")(x)
  outputs = layers.Dense(num_classes, activation=classifier_activation,
                         dtype="float32", name="predictions")(x)
  return keras.Model(inputs, outputs, name=name)
