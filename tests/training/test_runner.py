"""Tests of `tf_preempt.training.run`: a few real steps in this process."""

import json
import math
import os

import keras
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tf_preempt.bench import block_head
from tf_preempt.bench import step_profile
from tf_preempt.bench import xspace
from tf_preempt.keras import unroll_steps
from tf_preempt.testing import collectives
from tf_preempt.training import TrainConfig
from tf_preempt.training import run
from tf_preempt.training import runner

_KEYS = ("median_step_s", "examples_per_s", "final_loss", "plan", "scheduler",
         "unroll", "workers", "worker_index")


def _sane(stats, steps):
  assert set(_KEYS) <= set(stats)
  json.dumps(stats)  # The binary prints it as one JSON line.
  assert stats["steps_run"] == steps
  assert 0 < stats["median_step_s"] < 60
  assert stats["examples_per_s"] == pytest.approx(
      stats["global_batch_size"] / stats["median_step_s"])
  assert math.isfinite(stats["final_loss"]) and stats["final_loss"] > 0
  assert stats["workers"] == 1 and stats["worker_index"] == 0


def test_one_device():
  stats = run(TrainConfig(model="vgg_small", batch_size=8, steps=4))
  _sane(stats, 4)
  assert stats["strategy"] == "one_device" and stats["scheduler"] is None
  assert stats["plan"] is None and stats["replicas"] == 1
  assert stats["timed_steps"] == 2  # Two warm-up blocks left out.


def test_stock_mirrored_is_tensorflow_s_own(logical_cpus):
  stats = run(TrainConfig(model="vgg_small", batch_size=8, steps=4,
                          strategy="stock_mirrored",
                          devices=tuple(logical_cpus[:2])))
  _sane(stats, 4)
  assert stats["strategy"] == "stock_mirrored" and stats["replicas"] == 2
  # Nothing of tf_preempt reduces: no scheduler, no plan.
  assert stats["scheduler"] is None and stats["plan"] is None
  strategy = runner.make_strategy(TrainConfig(strategy="stock_mirrored"))
  assert type(strategy) is tf.distribute.MirroredStrategy  # pylint: disable=unidiomatic-typecheck


def test_mirrored_unrolled_with_timeline(logical_cpus, tmp_path):
  timeline = str(tmp_path / "trace.json")
  stats = run(TrainConfig(
      model="vgg_small", batch_size=8, steps=6, strategy="mirrored",
      devices=tuple(logical_cpus[:2]), scheduler="pace", unroll=2,
      chunk_bytes=1 << 20, timeline=timeline, warmup_blocks=1))
  _sane(stats, 6)
  assert stats["replicas"] == 2 and stats["scheduler"] == "pace"
  assert stats["unroll"] == 2 and stats["timed_steps"] == 4
  plan = stats["plan"]
  assert plan["scheduler"] == "pace" and plan["tensors"] > 10
  assert plan["split_tensors"] >= 1  # The 2 MB dense kernel, at least.
  with open(timeline) as f:
    trace = json.load(f)
  names = {e["name"] for e in trace["traceEvents"]}
  assert any(n.startswith("block ") for n in names)
  if stats["scheduler_op"]:
    assert any(n.startswith("collective ") for n in names)
  # The synthetic data never runs out: each block takes its batches inside
  # its graph, so none records an eager batch-taking time.
  blocks = [e for e in trace["traceEvents"]
            if e["name"].startswith("block ") and e.get("ph") == "X"]
  assert len(blocks) == 3
  for block in blocks:
    assert "input_us" not in block["args"]


def test_tf_profiler_profiles_the_blocks_after_the_warm_up(tmp_path):
  stats = run(TrainConfig(
      model="transformer_tiny", batch_size=4, steps=10, unroll=2,
      warmup_blocks=2, tf_profiler_dir=str(tmp_path), tf_profiler_blocks=2))
  _sane(stats, 10)
  log_dir = str(tmp_path / "worker-0")
  assert stats["tf_profiler"] == {"log_dir": log_dir, "first_block": 2,
                                  "blocks": 2}
  calls = xspace.train_calls(step_profile.read_profile(log_dir))
  steps = [len(block_head.loss_ends(c)) for c in calls]
  assert [n for n in steps if n] == [2, 2]  # two blocks of two steps


def test_tf_profiler_stops_with_a_run_shorter_than_its_blocks(tmp_path):
  stats = run(TrainConfig(model="vgg_small", batch_size=4, steps=3,
                          warmup_blocks=1, tf_profiler_dir=str(tmp_path),
                          tf_profiler_blocks=5))
  assert stats["tf_profiler"]["blocks"] == 2
  step_profile.read_profile(stats["tf_profiler"]["log_dir"])
  # The process's profiler is free again: another run can profile.
  tf.profiler.experimental.start(str(tmp_path / "again"))
  tf.profiler.experimental.stop()


def test_step_timer_records_batches_taken_eagerly(logical_cpus):
  # Finite data: an unrolled block takes its batches eagerly, and the timer
  # puts that time into the block's span.
  strategy = collectives.stock_mirrored_strategy(logical_cpus[:2])
  with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
  unroll_steps(model, 2)
  timer = runner.StepTimer(2)
  x = tf.random.stateless_normal((48, 4), seed=(1, 2))
  model.fit(x, tf.reduce_sum(x, axis=1), batch_size=8, epochs=1, verbose=0,
            callbacks=[timer])
  assert len(timer.spans) == 3
  for span in timer.spans:
    assert 0 < span["args"]["input_us"] < (span["end"] - span["start"]) / 1e3


def test_timeline_keeps_the_telemetry_iterations_asked_for(logical_cpus,
                                                          tmp_path):
  iterations = {}
  for kept in (None, 40):
    timeline = str(tmp_path / f"trace-{kept}.json")
    stats = run(TrainConfig(
        model="vgg_small", batch_size=8, steps=24, strategy="mirrored",
        devices=tuple(logical_cpus[:2]), scheduler="tf_default",
        telemetry_iterations=kept, timeline=timeline, warmup_blocks=1))
    if not stats["scheduler_op"]:
      pytest.skip("no scheduler op here: no collective records")
    with open(timeline) as f:
      events = json.load(f)["traceEvents"]
    iterations[kept] = {e["args"]["iteration"] for e in events
                        if e.get("cat") == "collective"}
    # Stock Keras's K=1 function takes its batch in the graph: untimed.
    assert not any("input_us" in e["args"] for e in events
                   if e.get("cat") == "compute")
  # The op's default ring keeps the last 16 steps; 40 keeps all 24.
  assert len(iterations[None]) == 16
  assert len(iterations[40]) == 24


def test_profile_steps_replan(logical_cpus):
  stats = run(TrainConfig(
      model="vgg_small", batch_size=8, steps=4, strategy="mirrored",
      devices=tuple(logical_cpus[:2]), profile_steps=2, warmup_blocks=3))
  profile = stats["profile"]
  if isinstance(profile, str):  # No ProfileAndReplan in this installation.
    assert "not wired" in profile
    return
  assert profile["plan"] == stats["plan"]
  assert "re-plan" in profile["summary"]


def test_mirrored_tf_default_is_one_pack(logical_cpus):
  stats = run(TrainConfig(
      model="transformer_tiny", batch_size=4, steps=2, strategy="mirrored",
      devices=tuple(logical_cpus[:2]), scheduler="tf_default",
      mixed_precision="mixed_bfloat16", warmup_blocks=0))
  assert stats["steps_run"] == 2
  assert stats["plan"]["collectives"] == 1
  # The policy is set only for the run.
  assert keras.mixed_precision.global_policy().name == "float32"


def test_tfds_data(tmp_path):
  with tfds.testing.mock_data(num_examples=16, data_dir=str(tmp_path)):
    stats = run(TrainConfig(model="vgg_small", batch_size=4, steps=3,
                            data="tfds:mnist", data_dir=str(tmp_path),
                            warmup_blocks=1))
  assert stats["steps_run"] == 3 and stats["data"] == "tfds:mnist"
  assert math.isfinite(stats["final_loss"])


def test_model_dir_resumes_after_an_interruption(tmp_path):

  class Crash(keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
      if epoch == 1:
        raise RuntimeError("simulated crash")

  config = TrainConfig(model="vgg_small", batch_size=4, steps=4,
                       steps_per_epoch=2, model_dir=str(tmp_path),
                       warmup_blocks=0)
  with pytest.raises(RuntimeError, match="simulated crash"):
    run(config, callbacks=[Crash()])
  own = tmp_path / "worker-0"
  assert (own / "ckpt-0001.weights.h5").exists()
  stats = run(config)
  assert stats["initial_epoch"] == 1 and stats["epochs_run"] == 1
  assert stats["steps_run"] == 2
  assert sorted(os.listdir(own)) == ["ckpt-0001.weights.h5",
                                     "ckpt-0002.weights.h5"]


def test_plan_file_must_be_a_plan(tmp_path, logical_cpus):
  plan = tmp_path / "plan.json"
  plan.write_text("[1, 2]")
  with pytest.raises(ValueError, match="--plan"):
    runner.make_strategy(TrainConfig(strategy="mirrored", plan=str(plan),
                                     devices=tuple(logical_cpus[:2])))


def test_timed_blocks_and_timeline_path():
  assert runner.timed_blocks([5, 1, 2, 3], 2) == [2, 3]
  assert runner.timed_blocks([5], 2) == [5]
  assert runner.timeline_path("/t/trace.json", 1, 0) == "/t/trace.json"
  assert runner.timeline_path("/t/trace.json", 2, 1) == (
      "/t/trace.worker-1.json")


def test_collective_timeout_only_when_asked(logical_cpus):
  devices = tuple(logical_cpus[:2])
  default = runner.make_strategy(TrainConfig(strategy="mirrored",
                                             devices=devices))
  timed = runner.make_strategy(TrainConfig(
      strategy="mirrored", devices=devices, collective_timeout_s=30.0))
  # None: TensorFlow starts no sleeping thread per collective launch.
  assert default.cross_device_ops._options.timeout_seconds is None  # pylint: disable=protected-access
  assert timed.cross_device_ops._options.timeout_seconds == 30.0  # pylint: disable=protected-access
