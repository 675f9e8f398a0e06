"""Transformer encoder classifiers: Vaswani et al.'s base size and a tiny one.

A token embedding, sinusoidal position encoding, N post-norm encoder layers
(multi-head self-attention and a ReLU feed-forward network, each wrapped in a
residual connection and layer normalisation, as in the paper), mean pooling
over the sequence and a dense classification head.

Each encoder layer of the base size (d_model 512, 8 heads, ff 2048) has
3,152,384 parameters, 18,914,304 for the six layers; the embedding adds
vocab_size * 512 and the head (512 + 1) * num_classes.

Each encoder layer is a DAG, not a chain: the attention and feed-forward
sub-layers each have a residual branch around them.

The classifier layer runs in float32 so that the outputs are float32 under a
mixed-precision policy too.
"""

from typing import Optional

import keras
from keras import layers
import numpy as np


@keras.saving.register_keras_serializable(package="tf_preempt")
class PositionalEncoding(layers.Layer):
  """Scales token embeddings by sqrt(d_model) and adds sinusoidal positions.

  The encoding is a constant (section 3.5 of the paper), so the layer has no
  weights; it is computed once in float32 and cast to the compute dtype.
  """

  def build(self, input_shape):
    length, depth = input_shape[-2], input_shape[-1]
    if length is None or depth is None:
      raise ValueError("PositionalEncoding needs a static sequence length and "
                       f"depth, got input shape {input_shape}.")
    position = np.arange(length, dtype=np.float64)[:, None]
    div = np.exp(np.arange(0, depth, 2, dtype=np.float64) *
                 (-np.log(10000.0) / depth))
    table = np.zeros((length, depth), dtype=np.float64)
    table[:, 0::2] = np.sin(position * div)
    table[:, 1::2] = np.cos(position * div)[:, :depth // 2]
    self._table = table.astype(np.float32)
    self._scale = float(np.sqrt(depth))

  def call(self, inputs):
    table = keras.ops.cast(self._table, inputs.dtype)
    return inputs * keras.ops.cast(self._scale, inputs.dtype) + table

  def compute_output_shape(self, input_shape):
    return input_shape


def _encoder_layer(x, d_model, num_heads, ff_dim, dropout, name):
  """One post-norm encoder layer: attention and feed-forward sub-layers."""
  attention = layers.MultiHeadAttention(
      num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout,
      name=name + "_attention")(x, x)
  attention = layers.Dropout(dropout, name=name + "_attention_dropout")(
      attention)
  x = layers.Add(name=name + "_attention_add")([x, attention])
  x = layers.LayerNormalization(epsilon=1e-6, name=name + "_attention_norm")(x)
  ff = layers.Dense(ff_dim, activation="relu", name=name + "_ff1")(x)
  ff = layers.Dense(d_model, name=name + "_ff2")(ff)
  ff = layers.Dropout(dropout, name=name + "_ff_dropout")(ff)
  x = layers.Add(name=name + "_ff_add")([x, ff])
  return layers.LayerNormalization(epsilon=1e-6, name=name + "_ff_norm")(x)


def transformer_classifier(vocab_size: int = 32000,
                           sequence_length: int = 128,
                           num_layers: int = 6,
                           d_model: int = 512,
                           num_heads: int = 8,
                           ff_dim: int = 2048,
                           num_classes: int = 2,
                           dropout: float = 0.1,
                           classifier_activation: Optional[str] = "softmax",
                           name: str = "transformer") -> keras.Model:
  """Builds a Transformer encoder classifier over token ids.

  Args:
    vocab_size: number of token ids; the embedding has vocab_size * d_model
      parameters.
    sequence_length: tokens per example (static, for the position encoding
      and for the planner's FLOPs estimate).
    num_layers: encoder layers.
    d_model: model width.
    num_heads: attention heads; must divide d_model.
    ff_dim: hidden units of the feed-forward network.
    num_classes: size of the classification head.
    dropout: dropout rate of the attention weights and the sub-layer outputs.
    classifier_activation: activation of the head ("softmax", or None).
    name: the model's name.

  Returns:
    An uncompiled functional `keras.Model` mapping int32 token ids of shape
    (batch, sequence_length) to class scores.

  Raises:
    ValueError: if num_heads does not divide d_model.
  """
  if d_model % num_heads:
    raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}.")
  inputs = keras.Input(shape=(sequence_length,), dtype="int32", name="tokens")
  x = layers.Embedding(vocab_size, d_model, name="embedding")(inputs)
  x = PositionalEncoding(name="position_encoding")(x)
  x = layers.Dropout(dropout, name="embedding_dropout")(x)
  for i in range(num_layers):
    x = _encoder_layer(x, d_model, num_heads, ff_dim, dropout,
                       f"encoder{i + 1}")
  x = layers.GlobalAveragePooling1D(name="pool")(x)
  # dtype="float32": the head computes and outputs float32 under any policy.
  outputs = layers.Dense(num_classes, activation=classifier_activation,
                         dtype="float32", name="predictions")(x)
  return keras.Model(inputs, outputs, name=name)


def transformer_base(**kwargs) -> keras.Model:
  """The base size: 6 layers, d_model 512, 8 heads, ff 2048."""
  return transformer_classifier(**kwargs)


def transformer_tiny(**kwargs) -> keras.Model:
  """A tiny encoder for CPU tests: 2 layers, d_model 64, 4 heads, ff 128."""
  config = dict(vocab_size=1000, sequence_length=32, num_layers=2, d_model=64,
                num_heads=4, ff_dim=128, name="transformer_tiny")
  config.update(kwargs)
  return transformer_classifier(**config)
