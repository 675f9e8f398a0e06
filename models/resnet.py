"""ResNet builders: ResNet-50 (ImageNet shape) and ResNet-20/56 (CIFAR shape).

Both are Keras 3 functional models, so the planner's DAG builder
(`tf_preempt.profile.model_dag`) can follow their residual branches.

- `resnet50`: the bottleneck ResNet of He et al. (2016) with the stride on
  the 3x3 convolution ("v1.5", as in torchvision and MLPerf) and bias-free
  convolutions followed by batch normalisation. With the 1000-class head it
  has 25,557,032 trainable parameters, the published count. (The stride
  position does not change the count; `keras.applications.ResNet50` gives its
  convolutions biases and so has 25,583,592.)
- `resnet_cifar(depth)`: the 6n+2 ResNet of He et al. section 4.2 with
  parameter-free "option A" shortcuts (subsample, then zero-pad channels):
  ResNet-20 has 269,722 parameters and ResNet-56 853,018 (0.27M and 0.85M
  in the paper's table 6).

The classifier layer runs in float32 so that the outputs are float32 under a
mixed-precision policy too (a float16 softmax loses the small
probabilities the loss needs).
"""

from typing import Optional, Sequence, Tuple

import keras
from keras import layers

# Keras' ImageNet ResNets use this epsilon; kept so that checkpoints and
# numerics match theirs.
_BN_EPSILON = 1.001e-5


def _conv_bn(x, filters, kernel_size, strides, name, activation=True):
  """A bias-free convolution, batch norm and optionally ReLU."""
  # No bias: the batch norm's beta makes it redundant.
  x = layers.Conv2D(filters, kernel_size, strides=strides, padding="same",
                    use_bias=False, kernel_initializer="he_normal",
                    name=name + "_conv")(x)
  x = layers.BatchNormalization(epsilon=_BN_EPSILON, name=name + "_bn")(x)
  if activation:
    x = layers.ReLU(name=name + "_relu")(x)
  return x


def _bottleneck(x, filters, strides, name):
  """A bottleneck block: 1x1 reduce, 3x3 (strided), 1x1 expand, shortcut."""
  in_channels = x.shape[-1]
  if strides != 1 or in_channels != 4 * filters:
    shortcut = _conv_bn(x, 4 * filters, 1, strides, name + "_0",
                        activation=False)
  else:
    shortcut = x
  y = _conv_bn(x, filters, 1, 1, name + "_1")
  y = _conv_bn(y, filters, 3, strides, name + "_2")
  y = _conv_bn(y, 4 * filters, 1, 1, name + "_3", activation=False)
  y = layers.Add(name=name + "_add")([shortcut, y])
  return layers.ReLU(name=name + "_out")(y)


def _classifier(x, num_classes, classifier_activation):
  """Global average pooling and a float32 dense head."""
  x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
  # dtype="float32": the head computes and outputs float32 under any policy.
  return layers.Dense(num_classes, activation=classifier_activation,
                      dtype="float32", name="predictions")(x)


def resnet50(input_shape: Tuple[int, int, int] = (224, 224, 3),
             num_classes: int = 1000,
             classifier_activation: Optional[str] = "softmax",
             name: str = "resnet50") -> keras.Model:
  """Builds ResNet-50 (v1.5) for ImageNet-shaped inputs.

  Args:
    input_shape: (height, width, channels) of one image; any size from
      32x32 up works (the network downsamples 32 times).
    num_classes: size of the classification head.
    classifier_activation: activation of the head ("softmax", or None for
      logits).
    name: the model's name.

  Returns:
    An uncompiled functional `keras.Model` with freshly initialised weights.
  """
  inputs = keras.Input(shape=input_shape, name="images")
  x = _conv_bn(inputs, 64, 7, 2, "conv1")
  x = layers.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
  stages = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
  for stage, (filters, blocks, strides) in enumerate(stages, start=2):
    for block in range(1, blocks + 1):
      x = _bottleneck(x, filters, strides if block == 1 else 1,
                      f"conv{stage}_block{block}")
  outputs = _classifier(x, num_classes, classifier_activation)
  return keras.Model(inputs, outputs, name=name)


@keras.saving.register_keras_serializable(package="tf_preempt")
class ShortcutA(layers.Layer):
  """The parameter-free "option A" shortcut of CIFAR ResNets.

  Subsamples the input spatially by `strides` and zero-pads the channels to
  `filters` (evenly on both sides), so that the shortcut adds no parameters.
  """

  def __init__(self, filters: int, strides: int = 2, **kwargs):
    super().__init__(**kwargs)
    self.filters = filters
    self.strides = strides

  def call(self, inputs):
    x = inputs[:, ::self.strides, ::self.strides, :]
    extra = self.filters - inputs.shape[-1]
    return keras.ops.pad(
        x, [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]])

  def compute_output_shape(self, input_shape):
    def _down(d):
      return None if d is None else -(-d // self.strides)
    return (input_shape[0], _down(input_shape[1]), _down(input_shape[2]),
            self.filters)

  def get_config(self):
    config = super().get_config()
    config.update(filters=self.filters, strides=self.strides)
    return config


def _basic_block(x, filters, strides, name):
  """A CIFAR basic block: two 3x3 convolutions and an option-A shortcut."""
  if strides != 1 or x.shape[-1] != filters:
    shortcut = ShortcutA(filters, strides, name=name + "_shortcut")(x)
  else:
    shortcut = x
  y = _conv_bn(x, filters, 3, strides, name + "_1")
  y = _conv_bn(y, filters, 3, 1, name + "_2", activation=False)
  y = layers.Add(name=name + "_add")([shortcut, y])
  return layers.ReLU(name=name + "_out")(y)


def resnet_cifar(depth: int = 20,
                 input_shape: Tuple[int, int, int] = (32, 32, 3),
                 num_classes: int = 10,
                 widths: Sequence[int] = (16, 32, 64),
                 classifier_activation: Optional[str] = "softmax",
                 name: Optional[str] = None) -> keras.Model:
  """Builds a CIFAR ResNet of depth 6n+2 (ResNet-20, -32, -44, -56, -110).

  Args:
    depth: number of weighted layers, 6n+2.
    input_shape: (height, width, channels) of one image.
    num_classes: size of the classification head.
    widths: channels of the three stages.
    classifier_activation: activation of the head ("softmax", or None).
    name: the model's name; defaults to "resnet{depth}".

  Returns:
    An uncompiled functional `keras.Model`.

  Raises:
    ValueError: if depth is not of the form 6n+2 with n >= 1.
  """
  if depth < 8 or (depth - 2) % 6:
    raise ValueError(f"CIFAR ResNet depth must be 6n+2 with n >= 1 "
                     f"(20, 32, 44, 56, 110, ...), got {depth}.")
  blocks = (depth - 2) // 6
  inputs = keras.Input(shape=input_shape, name="images")
  x = _conv_bn(inputs, widths[0], 3, 1, "conv1")
  for stage, filters in enumerate(widths, start=2):
    for block in range(1, blocks + 1):
      strides = 2 if stage > 2 and block == 1 else 1
      x = _basic_block(x, filters, strides, f"conv{stage}_block{block}")
  outputs = _classifier(x, num_classes, classifier_activation)
  return keras.Model(inputs, outputs, name=name or f"resnet{depth}")


def resnet20(**kwargs) -> keras.Model:
  """ResNet-20 for CIFAR-10 (269,722 parameters). See `resnet_cifar`."""
  return resnet_cifar(depth=20, **kwargs)


def resnet56(**kwargs) -> keras.Model:
  """ResNet-56 for CIFAR-10 (853,018 parameters). See `resnet_cifar`."""
  return resnet_cifar(depth=56, **kwargs)
