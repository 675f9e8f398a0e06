"""Tests of TrainConfig validation: every flag's bad values, contradictions."""

import json
import subprocess
import sys

import pytest

from tf_preempt.training import config as config_lib
from tf_preempt.training.config import TrainConfig

_WORKERS = {"cluster": {"worker": ["localhost:1234", "localhost:1235"]},
            "task": {"type": "worker", "index": 0}}
_ENV = {"TF_CONFIG": json.dumps(_WORKERS)}


def _check(environ=None, **kwargs):
  return TrainConfig(**kwargs).validate(environ=_ENV if environ is None
                                        else environ)


def test_defaults_are_valid():
  config = TrainConfig().validate()
  assert config.effective_scheduler == "pace"
  assert config.schedule() == (1, config_lib.DEFAULT_STEPS)


@pytest.mark.parametrize("flag,value", [
    ("model", "alexnet"),
    ("model", ""),
    ("batch_size", 0),
    ("batch_size", -8),
    ("batch_size", 2.5),
    ("batch_size", True),
    ("steps", 0),
    ("steps", "10"),
    ("epochs", 0),
    ("steps_per_epoch", -1),
    ("strategy", "parameter_server"),
    ("scheduler", "round_robin"),
    ("scheduler", "optimal"),
    ("bytes_per_pack", -1),
    ("chunk_bytes", 0),
    ("credit_bytes", -5),
    ("telemetry_iterations", 0),
    ("sparse_as_dense", "yes"),
    ("scheduler_op", "maybe"),
    ("unroll", 0),
    ("unroll", True),
    ("implementation", "mpi"),
    ("collective_timeout_s", 0),
    ("collective_timeout_s", -1.0),
    ("collective_timeout_s", float("inf")),
    ("collective_timeout_s", "60"),
    ("collective_timeout_s", True),
    ("plan", "/no/such/plan.json"),
    ("plan", ""),
    ("profile_steps", -1),
    ("timeline", ""),
    ("model_dir", ""),
    ("mixed_precision", "float16"),
    ("data", "imagenet"),
    ("data", "tfds:"),
    ("data_dir", ""),
    ("intra_op_threads", 0),
    ("inter_op_threads", -2),
    ("heap", "glibc"),
    ("learning_rate", 0.0),
    ("learning_rate", "fast"),
    ("seed", -1),
    ("warmup_blocks", -1),
    ("tf_profiler_dir", ""),
    ("tf_profiler_blocks", 0),
    ("devices", ()),
    ("devices", "/cpu:0"),
    ("devices", ("/cpu:0", "/cpu:0")),
])
def test_bad_value_names_the_flag(flag, value):
  base = {"strategy": "mirrored"}
  base[flag] = value
  if flag == "data_dir":
    base["data"] = "tfds:mnist"
  with pytest.raises(ValueError, match=f"--{flag}"):
    _check(**base)


def test_timeline_must_not_be_a_directory(tmp_path):
  with pytest.raises(ValueError, match="--timeline"):
    _check(timeline=str(tmp_path))


def test_tf_profiler_dir_must_not_be_a_file(tmp_path):
  path = tmp_path / "profile"
  path.write_text("")
  with pytest.raises(ValueError, match="--tf_profiler_dir must be a "
                     "directory"):
    _check(tf_profiler_dir=str(path))
  _check(tf_profiler_dir=str(tmp_path / "new"), tf_profiler_blocks=2)


def test_tf_profiler_blocks_needs_the_dir():
  with pytest.raises(ValueError, match="--tf_profiler_blocks has no effect "
                     "without --tf_profiler_dir"):
    _check(tf_profiler_blocks=2)


def test_tf_profiler_needs_a_block_after_the_warm_up(tmp_path):
  with pytest.raises(ValueError, match="profiles the blocks after the 2 "
                     "--warmup_blocks, but --steps=4 runs only 2 block"):
    _check(tf_profiler_dir=str(tmp_path), steps=4, unroll=2, warmup_blocks=2)
  _check(tf_profiler_dir=str(tmp_path), steps=6, unroll=2, warmup_blocks=2)


@pytest.mark.parametrize("kwargs,flag", [
    (dict(steps=10, epochs=2), "--steps and --epochs"),
    (dict(steps=10, steps_per_epoch=3), "--steps=10"),
    (dict(steps=10, unroll=4), "--unroll=4"),
    (dict(unroll=3), "--unroll=3"),  # Of the default 20 steps.
    (dict(epochs=2, unroll=5), "--unroll=5"),  # Of 16 synthetic batches.
    (dict(devices=("/cpu:0",)), "--devices"),
    (dict(scheduler="pace"), "--scheduler"),
    (dict(bytes_per_pack=1024), "--bytes_per_pack"),
    (dict(chunk_bytes=1024), "--chunk_bytes"),
    (dict(credit_bytes=1024), "--credit_bytes"),
    (dict(telemetry_iterations=64), "--telemetry_iterations"),
    (dict(implementation="ring"), "--implementation"),
    (dict(collective_timeout_s=60.0), "--collective_timeout_s"),
    (dict(scheduler_op="on"), "--scheduler_op"),
    (dict(data_dir="/tmp"), "--data_dir"),
    (dict(steps=4, profile_steps=2), "--profile_steps"),
    (dict(sparse_as_dense=True), "--sparse_as_dense"),
])
def test_contradictions_one_device(kwargs, flag):
  with pytest.raises(ValueError, match=flag):
    _check(**kwargs)


@pytest.mark.parametrize("kwargs,flag", [
    (dict(scheduler="pace"), "--scheduler"),
    (dict(bytes_per_pack=0), "--bytes_per_pack"),
    (dict(credit_bytes=1024), "--credit_bytes"),
    (dict(implementation="ring"), "--implementation"),
    (dict(steps=4, profile_steps=2), "--profile_steps"),
])
def test_stock_mirrored_takes_no_scheduler_flag(kwargs, flag):
  with pytest.raises(ValueError, match=flag + ".*stock_mirrored.*stock "
                     "TensorFlow reduces"):
    _check(strategy="stock_mirrored", **kwargs)


def test_stock_mirrored_takes_devices():
  config = _check(strategy="stock_mirrored", devices=("/cpu:0",))
  assert not config.preemptive


@pytest.mark.parametrize("kwargs,flag", [
    (dict(scheduler="pace", bytes_per_pack=1024), "--bytes_per_pack"),
    (dict(scheduler="tf_packed", bytes_per_pack=0), "--bytes_per_pack"),
    (dict(scheduler="fifo", chunk_bytes=1024), "--chunk_bytes"),
    (dict(scheduler="tf_default", chunk_bytes=1024), "--chunk_bytes"),
    (dict(credit_bytes=1024, scheduler_op="off"), "--credit_bytes"),
    (dict(telemetry_iterations=64, scheduler_op="off"),
     "--telemetry_iterations"),
    (dict(steps=8, unroll=2, profile_steps=3), "--profile_steps"),
    (dict(steps=4, profile_steps=4), "--profile_steps"),
])
def test_contradictions_distributed(kwargs, flag):
  with pytest.raises(ValueError, match=flag):
    _check(strategy="mirrored", **kwargs)


def test_plan_contradictions(tmp_path):
  plan = tmp_path / "plan.json"
  plan.write_text("{}")
  with pytest.raises(ValueError, match="--plan and --scheduler"):
    _check(strategy="mirrored", plan=str(plan), scheduler="pace")
  with pytest.raises(ValueError, match="--plan fixes"):
    _check(strategy="mirrored", plan=str(plan), chunk_bytes=1 << 20)
  _check(strategy="mirrored", plan=str(plan))


def test_valid_distributed_combinations():
  _check(strategy="mirrored", scheduler="tf_default", bytes_per_pack=0)
  _check(strategy="mirrored", scheduler="tf_packed", bytes_per_pack=1 << 20)
  _check(strategy="mirrored", scheduler="pace", chunk_bytes=1 << 20,
         credit_bytes=1 << 22, unroll=4, steps=8)
  _check(strategy="multi_worker", scheduler="bytescheduler",
         implementation="ring", mixed_precision="mixed_bfloat16")
  _check(strategy="multi_worker", collective_timeout_s=60)


@pytest.mark.parametrize("tf_config,message", [
    (None, "needs the TF_CONFIG"),
    ("{not json", "not valid JSON"),
    (json.dumps({"cluster": {"worker": ["a:1"]}}), "missing 'task'"),
    (json.dumps({"task": {"type": "worker", "index": 0}}),
     "missing 'cluster'"),
    (json.dumps({"cluster": {"worker": ["a:1", "a:2"]},
                 "task": {"type": "worker", "index": 2}}), "out of range"),
    (json.dumps({"cluster": {"worker": ["a:1", "a:1"]},
                 "task": {"type": "worker", "index": 0}}),
     "duplicate address"),
    (json.dumps({"cluster": {"worker": ["a"]},
                 "task": {"type": "worker", "index": 0}}), "host:port"),
])
def test_malformed_tf_config(tf_config, message):
  environ = {} if tf_config is None else {"TF_CONFIG": tf_config}
  with pytest.raises(ValueError, match=message):
    _check(environ=environ, strategy="multi_worker")


def test_tf_config_is_read_only_for_multi_worker():
  _check(environ={"TF_CONFIG": "{not json"}, strategy="mirrored")


def test_schedule():
  assert TrainConfig(steps=12).schedule() == (1, 12)
  assert TrainConfig(steps=12, steps_per_epoch=4).schedule() == (3, 4)
  assert TrainConfig(epochs=2).schedule(16) == (2, 16)
  assert TrainConfig(epochs=2, steps_per_epoch=5).schedule(16) == (2, 5)
  # A data set's epoch is cut to whole blocks of --unroll steps.
  assert TrainConfig(epochs=1, unroll=4, data="tfds:x").schedule(10) == (1, 8)
  with pytest.raises(ValueError, match="--batch_size"):
    TrainConfig(epochs=1, data="tfds:x").schedule(0)
  with pytest.raises(ValueError, match="--steps_per_epoch"):
    TrainConfig(epochs=1, data="tfds:x").schedule(None)


def test_from_dict_rejects_unknown_settings():
  with pytest.raises(ValueError, match="unknown setting"):
    TrainConfig.from_dict({"modle": "resnet20"})
  assert TrainConfig.from_dict({"unroll": 2}).unroll == 2


def test_validation_imports_no_tensorflow():
  # In a fresh interpreter: this test process has TensorFlow already.
  code = (
      "import sys\n"
      "from tf_preempt.training import TrainConfig\n"
      "from tf_preempt import models\n"
      "TrainConfig(model='vgg_small', strategy='mirrored', unroll=2,\n"
      "            steps=8).validate()\n"
      "assert models.names()\n"
      "try:\n"
      "  TrainConfig(unroll=0).validate()\n"
      "except ValueError:\n"
      "  pass\n"
      "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]\n"
      "assert not bad, bad\n")
  subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
