"""`ProfileAndReplan`: a Keras callback that replaces the default plan.

The first `warmup_steps` steps of `fit` run with the strategy's default plan
(made from the gradients' sizes alone). Then, between two batches, the
callback measures the model and the cluster, makes a PACE plan from the
measurements (`tf_preempt.profile.online.profile_and_replan`), installs it
and rebuilds the train function, so the next batch retraces with the new
plan. With a cache directory, a restart reads the plan at the start of
training and skips the profiling.

```python
strategy = PreemptiveMirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
  model = make_model()
  model.compile(...)
unroll_steps(model, 4)  # optional; respected
model.fit(data, callbacks=[ProfileAndReplan(global_batch_size=64,
                                            cache_dir="/tmp/plans")])
```

Plans change the order and grouping of the collectives, never the sums, so
training computes the same numbers with or without the callback.
"""

import statistics
import time
from typing import List, Optional, Sequence

from absl import logging
import keras

from tf_preempt.profile import online
from tf_preempt.profile import plan_cache


class ProfileAndReplan(keras.callbacks.Callback):
  """Profiles after a warm-up, re-plans, and retraces the train function.

  Attributes:
    result: the `online.ReplanResult`, once a plan is installed.
    warmup_step_s: measured seconds per step with the default plan.
    replanned_step_s: measured seconds per step with the new plan.
    summary: the logged summary line.
  """

  def __init__(self,
               global_batch_size: int,
               warmup_steps: int = 3,
               cache_dir: Optional[str] = None,
               sizes: Sequence[int] = online.DEFAULT_SIZES,
               repeats: int = online.DEFAULT_REPEATS,
               scheduler: str = "pace"):
    """Initializes the callback.

    Args:
      global_batch_size: examples per step over all replicas (the size the
        compute is measured at).
      warmup_steps: steps with the default plan before profiling, >= 1;
        counted in steps, rounded up to whole blocks of
        `steps_per_execution`. The first block traces, so at least two
        blocks give a measured step time.
      cache_dir: directory of cached plans; None for no cache.
      sizes: bytes of the timed all-reduces.
      repeats: timed calls per measurement.
      scheduler: the planner's scheduler.

    Raises:
      ValueError: if warmup_steps < 1.
    """
    super().__init__()
    if isinstance(warmup_steps, bool) or int(warmup_steps) < 1:
      raise ValueError(f"warmup_steps={warmup_steps!r} must be >= 1.")
    self._global_batch_size = int(global_batch_size)
    self._warmup_steps = int(warmup_steps)
    self._cache_dir = cache_dir
    self._sizes = tuple(sizes)
    self._repeats = int(repeats)
    self._scheduler = scheduler
    self.result: Optional[online.ReplanResult] = None
    self.warmup_step_s: Optional[float] = None
    self.replanned_step_s: Optional[float] = None
    self.summary: Optional[str] = None
    self._steps_done = 0
    self._batch_start = 0.0
    self._warmup_times: List[float] = []
    self._after_times: List[float] = []
    self._just_replanned = False

  def _steps_per_block(self) -> int:
    return max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))

  def on_train_begin(self, logs=None):
    self._steps_done = 0
    self._warmup_times, self._after_times = [], []
    if self.result is not None or self._cache_dir is None:
      return
    # Only the cache is read here; profiling waits for the warm-up. Every
    # worker takes part in the decision (see online.profile_and_replan).
    strategy = self.model.distribute_strategy
    ops = strategy.cross_device_ops
    world = int(strategy.num_replicas_in_sync)
    signature = plan_cache.model_signature(self.model)
    implementation = plan_cache.implementation_name(ops)
    path = plan_cache.cache_path(self._cache_dir, signature, world,
                             implementation)
    cached = plan_cache.load_cached_plan(path, signature, world,
                                         implementation)
    if cached is not None:
      plan_cache.check_plan_fits(cached, self.model, path)
    if online.all_workers_mean(ops, [float(cached is not None)])[0] == 1.0:
      self._replan()

  def on_train_batch_begin(self, batch, logs=None):
    self._batch_start = time.perf_counter()

  def on_train_batch_end(self, batch, logs=None):
    elapsed = time.perf_counter() - self._batch_start
    block = self._steps_per_block()
    first = self._steps_done == 0
    self._steps_done += block
    if self.result is None:
      # The first block traces: its time is not a step time.
      if not first:
        self._warmup_times.append(elapsed / block)
      if self._steps_done >= self._warmup_steps:
        self._replan()
    elif not self._just_replanned:
      self._after_times.append(elapsed / block)
      self.replanned_step_s = statistics.median(self._after_times)
    self._just_replanned = False

  def _replan(self):
    model = self.model
    self.result = online.profile_and_replan(
        model, model.distribute_strategy, self._global_batch_size,
        cache_dir=self._cache_dir, sizes=self._sizes, repeats=self._repeats,
        scheduler=self._scheduler)
    # `fit` reads model.train_function before every block; a rebuilt one
    # traces again, and the trace binds the new plan. unroll_steps replaces
    # make_train_function, so its flat K-step function is rebuilt alike.
    model.make_train_function(force=True)
    self._just_replanned = True  # the next block traces: not a step time
    self.warmup_step_s = (statistics.median(self._warmup_times)
                          if self._warmup_times else None)
    self.summary = self.result.summary_line(self.warmup_step_s)
    logging.info("%s", self.summary)

  def on_train_end(self, logs=None):
    if self._after_times and self.result is not None:
      logging.info("tf_preempt: step time %s ms with the default plan, "
                   "%.2f ms with the %s plan.",
                   "n/a" if self.warmup_step_s is None else
                   f"{self.warmup_step_s * 1e3:.2f}",
                   self.replanned_step_s * 1e3, self.result.plan.scheduler)
