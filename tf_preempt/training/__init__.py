"""Training binary library: `TrainConfig`, input data and `run(config)`.

`config` is pure Python (validation runs before TensorFlow is imported);
`data` and `runner` import TensorFlow. `scripts/train.py` is the command
line. `run` is imported on first use so that importing this package for the
config alone never loads TensorFlow.
"""

from tf_preempt import _lazy
from tf_preempt.training.config import TrainConfig

_LAZY = {"run": "tf_preempt.training.runner"}


__getattr__, __dir__ = _lazy.lazy_exports(__name__, globals(), _LAZY)
