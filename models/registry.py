"""Model registry: builds a model of the package by name.

Scripts and benchmarks take a model name from a flag; this table is the one
place that maps names to builders. It names each builder by module and
function instead of holding the function, so that `names()` (and a training
binary's flag validation) works without importing Keras or TensorFlow; the
builder's module is imported by `get`.
"""

import importlib
from typing import TYPE_CHECKING, Callable, Dict, List, Tuple

if TYPE_CHECKING:
  import keras  # pylint: disable=g-bad-import-order

# name -> (module, function). The modules import Keras.
_BUILDERS: Dict[str, Tuple[str, str]] = {
    "resnet20": ("tf_preempt.models.resnet", "resnet20"),
    "resnet50": ("tf_preempt.models.resnet", "resnet50"),
    "resnet56": ("tf_preempt.models.resnet", "resnet56"),
    "transformer": ("tf_preempt.models.transformer", "transformer_base"),
    "transformer_tiny": ("tf_preempt.models.transformer", "transformer_tiny"),
    "vgg16": ("tf_preempt.models.vgg", "vgg16"),
    "vgg_small": ("tf_preempt.models.vgg", "vgg_small"),
}


def names() -> List[str]:
  """Returns the registered model names, sorted. Imports nothing."""
  return sorted(_BUILDERS)


def builder(name: str) -> Callable[..., "keras.Model"]:
  """Returns the builder function of a registered model (imports Keras).

  Raises:
    ValueError: if the name is not registered; the message lists the valid
      names.
  """
  entry = _BUILDERS.get(name)
  if entry is None:
    raise ValueError(f"Unknown model {name!r}; valid names: "
                     f"{', '.join(names())}.")
  module, function = entry
  return getattr(importlib.import_module(module), function)


def get(name: str, **kwargs) -> "keras.Model":
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
  return builder(name)(**kwargs)
