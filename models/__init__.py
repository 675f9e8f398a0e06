"""Keras 3 functional models for benchmarks and tests (`tf_preempt.models`).

`get(name, **kwargs)` builds a model by name; `names()` lists the names.
"""

from tf_preempt.models.registry import get
from tf_preempt.models.registry import names
from tf_preempt.models.resnet import resnet20
from tf_preempt.models.resnet import resnet50
from tf_preempt.models.resnet import resnet56
from tf_preempt.models.resnet import resnet_cifar
from tf_preempt.models.transformer import transformer_base
from tf_preempt.models.transformer import transformer_classifier
from tf_preempt.models.transformer import transformer_tiny
from tf_preempt.models.vgg import vgg16
from tf_preempt.models.vgg import vgg_small
