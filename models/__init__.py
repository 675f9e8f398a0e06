"""Keras 3 functional models for benchmarks and tests (`tf_preempt.models`).

`get(name, **kwargs)` builds a model by name; `names()` lists the names.
Importing this package imports neither Keras nor TensorFlow: the builders
below are loaded on first use (PEP 562), so a binary can validate a model
name before TensorFlow starts.
"""

from tf_preempt import _lazy
from tf_preempt.models.registry import get
from tf_preempt.models.registry import names

# Public name -> module that defines it; these modules import Keras.
_LAZY = {
    "resnet20": "tf_preempt.models.resnet",
    "resnet50": "tf_preempt.models.resnet",
    "resnet56": "tf_preempt.models.resnet",
    "resnet_cifar": "tf_preempt.models.resnet",
    "transformer_base": "tf_preempt.models.transformer",
    "transformer_classifier": "tf_preempt.models.transformer",
    "transformer_tiny": "tf_preempt.models.transformer",
    "vgg16": "tf_preempt.models.vgg",
    "vgg_small": "tf_preempt.models.vgg",
}
_SUBMODULES = ("resnet", "transformer", "vgg")


__getattr__, __dir__ = _lazy.lazy_exports(__name__, globals(), _LAZY,
                                          _SUBMODULES)
