"""Test-session set-up shared by every test module.

TensorFlow fixes its logical devices once per process, so the split of the
CPU into logical devices (how the single-host, multi-replica tests get more
than one replica without a GPU) happens here, once, before any test module
touches TensorFlow. Tests that need N replicas use the first N of
`LOGICAL_CPUS`.
"""

import pytest

NUM_LOGICAL_CPUS = 4
LOGICAL_CPUS = tuple(f"/cpu:{i}" for i in range(NUM_LOGICAL_CPUS))


def _split_cpu(num):
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * num)


_split_cpu(NUM_LOGICAL_CPUS)


@pytest.fixture
def logical_cpus():
  """The logical CPU devices of this test process."""
  return LOGICAL_CPUS
