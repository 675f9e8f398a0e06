"""`ProfileBlocks`: TensorFlow's profiler over a few training blocks.

A Keras callback that starts `tf.profiler.experimental` at the beginning
of one block (one call of the train function: `--unroll` steps) and stops
it after a number of blocks, so that a profile holds steady-state steps
only, not the first block's tracing. The profile goes where TensorBoard's
profile plugin looks for it (LOG_DIR/plugins/profile/RUN/HOST.xplane.pb);
`tf_preempt.bench.step_phases` and `tf_preempt.bench.block_head` read it.
"""

from typing import Any, Optional

import keras
import tensorflow as tf


class ProfileBlocks(keras.callbacks.Callback):
  """Profiles blocks [first, first + count) of `fit` into `log_dir`.

  Blocks count from 0 (Keras's "batch" callbacks run once per call of the
  train function). The profiler stops as the block after them begins, or
  as the run ends or fails: one process can run one profiler at a time.

  Caveat: in multi-worker runs TensorFlow's profiler can crash a worker as
  it stops (SIGSEGV, "double free or corruption" in
  `tf.profiler.experimental.stop`, TensorFlow 2.21). With both workers of
  two-worker runs profiled, 9 of 52 runs here lost worker 1 that way,
  never worker 0; with worker 0 alone profiled (what the training binary
  does), none of 23. Keras's TensorBoard callback (`profile_batch`) stops
  it the same way. Profile a separate run, not one whose result must not
  be lost.
  """

  def __init__(self, first: int, count: int, log_dir: str):
    """Initializes the callback.

    Args:
      first: the first block profiled, >= 0.
      count: blocks profiled, >= 1.
      log_dir: the directory the profile is written under.

    Raises:
      ValueError: if `first` < 0 or `count` < 1.
    """
    super().__init__()
    if first < 0 or count < 1:
      raise ValueError(f"first={first} must be >= 0 and count={count} >= 1")
    self.first, self.count, self.log_dir = first, count, log_dir
    self.blocks = 0
    self.profiling = False
    self.profiled = 0  # blocks that ended under the profiler

  def on_train_batch_begin(self, batch: int,
                           logs: Optional[Any] = None) -> None:
    if self.blocks == self.first:
      tf.profiler.experimental.start(self.log_dir)
      self.profiling = True
    elif self.blocks == self.first + self.count:
      # As the next block begins, its call not yet made. (Where it stops
      # made no clear difference to the crashes below: 5 of 34 runs here,
      # 3 of 12 at the run's end, 1 of 6 as the last block ended.)
      self.stop()

  def on_train_batch_end(self, batch: int, logs: Optional[Any] = None) -> None:
    self.blocks += 1
    if self.profiling:
      self.profiled += 1

  def on_train_end(self, logs: Optional[Any] = None) -> None:
    self.stop()

  def stop(self) -> None:
    """Stops the profiler if this callback started it (writes the profile)."""
    if self.profiling:
      self.profiling = False
      tf.profiler.experimental.stop()
