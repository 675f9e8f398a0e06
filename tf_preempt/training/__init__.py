"""Training binary library: `TrainConfig`, input data and `run(config)`.

`config` is pure Python (validation runs before TensorFlow is imported);
`data` and `runner` import TensorFlow. `scripts/train.py` is the command
line. `run` is imported on first use so that importing this package for the
config alone never loads TensorFlow.
"""

import importlib

from tf_preempt.training.config import TrainConfig

_LAZY = {"run": "tf_preempt.training.runner"}


def __getattr__(name):
  module = _LAZY.get(name)
  if module is None:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(importlib.import_module(module), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(list(globals()) + list(_LAZY))
