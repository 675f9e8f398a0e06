"""Stock collective cross-device ops for comparisons in tests.

TensorFlow caches a collective's parameters by (group key, instance key) for
the whole process, and every `CollectiveKeys` starts at group key 1, instance
key 100 by default. Two cross-device ops built with default keys in one test
process therefore collide ("Shape mismatch in the collective instance 100")
as soon as their packing differs. Everything built here takes its keys from
the same process-wide counter as the preemptive strategies.
"""

import tensorflow as tf

from tf_preempt.runtime import tf_internals
from tf_preempt.strategies import _install


def fresh_collective_keys():
  """A `CollectiveKeys` whose group keys no other object in this process uses."""
  return tf_internals.CollectiveKeys(
      group_key_start=_install.next_collective_key_base())


def stock_collective_all_reduce(devices, bytes_per_pack=0, options=None):
  """Stock `CollectiveAllReduce` over `devices`, with fresh keys.

  Args:
    devices: the local devices, one replica each (one worker).
    bytes_per_pack: stock's packing option.
    options: other `CommunicationOptions`, merged in.

  Returns:
    The cross-device ops.
  """
  merged = tf.distribute.experimental.CommunicationOptions(
      bytes_per_pack=bytes_per_pack)
  if options is not None:
    merged = merged.merge(options)
  return tf_internals.CollectiveAllReduce(
      list(devices), len(devices), options=merged,
      collective_keys=fresh_collective_keys())


def stock_mirrored_strategy(devices):
  """Stock `MirroredStrategy` over `devices`, with fresh collective keys.

  The strategy reads its key base from a class attribute (TensorFlow's own
  tests set it the same way); everything else is stock.
  """
  strategy_class = type("MirroredStrategy", (tf.distribute.MirroredStrategy,),
                        {"_collective_key_base":
                         _install.next_collective_key_base()})
  return strategy_class(list(devices))
