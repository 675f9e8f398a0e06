"""Model registry: builds a model of the package by name.

Scripts and benchmarks take a model name from a flag; this table is the one
place that maps names to builders.
"""

from typing import Callable, Dict, List

import keras

from tf_preempt.models import resnet
from tf_preempt.models import transformer
from tf_preempt.models import vgg

_BUILDERS: Dict[str, Callable[..., keras.Model]] = {
    "resnet20": resnet.resnet20,
    "resnet50": resnet.resnet50,
    "resnet56": resnet.resnet56,
    "transformer": transformer.transformer_base,
    "transformer_tiny": transformer.transformer_tiny,
    "vgg16": vgg.vgg16,
    "vgg_small": vgg.vgg_small,
}


def names() -> List[str]:
  """Returns the registered model names, sorted."""
  return sorted(_BUILDERS)


def get(name: str, **kwargs) -> keras.Model:
  """Builds a registered model.

  Args:
    name: one of `names()`.
    **kwargs: passed to the builder (input_shape, num_classes, ...).

  Returns:
    A new, uncompiled `keras.Model` with freshly initialised weights.

  Raises:
    ValueError: if the name is not registered; the message lists the valid
      names.
  """
  builder = _BUILDERS.get(name)
  if builder is None:
    raise ValueError(f"Unknown model {name!r}; valid names: "
                     f"{', '.join(names())}.")
  return builder(**kwargs)
