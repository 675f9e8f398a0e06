"""Bad input: each a clear error, and nothing written half-way.

- Malformed TF_CONFIG variants and bad flag values given to
  `scripts/train.py`: exit code 2 with a message naming the problem, before
  TensorFlow is imported, and no --model_dir created.
- A corrupted or truncated --plan JSON, a JSON value that is not a plan, a
  plan made for another model: ValueError naming the flag / the tensor.
- A plan cache from another model: PlanCacheMismatchError, the file left
  as it was; a corrupted or truncated cache is reported and not used; the
  cache is written atomically (a write that fails leaves the old file and
  no temporary file).
"""

import json
import os
import subprocess
import sys
import time

import pytest

from tf_preempt.plan import Plan
from tf_preempt.plan import PlanTensor
from tf_preempt.plan import plan_from_groups

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(REPO, "scripts", "train.py")

_GOOD_CLUSTER = {"worker": ["localhost:12345", "localhost:23456"]}

TF_CONFIGS = [
    ("{not json", "TF_CONFIG"),
    ("[1, 2]", "TF_CONFIG"),
    ("", "TF_CONFIG"),
    (json.dumps({"cluster": _GOOD_CLUSTER}), "task"),
    (json.dumps({"task": {"type": "worker", "index": 0}}), "cluster"),
    (json.dumps({"cluster": _GOOD_CLUSTER,
                 "task": {"type": "worker", "index": 2}}), "index"),
    (json.dumps({"cluster": _GOOD_CLUSTER,
                 "task": {"type": "worker", "index": "0"}}), "index"),
    (json.dumps({"cluster": _GOOD_CLUSTER,
                 "task": {"type": "ps", "index": 0}}), "ps"),
    (json.dumps({"cluster": {"worker": ["localhost:1", "localhost:1"]},
                 "task": {"type": "worker", "index": 0}}), "localhost:1"),
    (json.dumps({"cluster": {"worker": ["nohostport"]},
                 "task": {"type": "worker", "index": 0}}), "nohostport"),
]

FLAGS = [
    (["--batch_size", "0"], "batch_size"),
    (["--batch_size", "-4"], "batch_size"),
    (["--batch_size", "two"], "batch_size"),
    (["--steps", "0"], "steps"),
    (["--steps", "3", "--epochs", "2"], "epochs"),
    (["--model", "resnet5000"], "model"),
    (["--scheduler", "nosuch"], "scheduler"),
    (["--strategy", "parameter_server"], "strategy"),
    (["--unroll", "0"], "unroll"),
    (["--implementation", "mpi"], "implementation"),
]


def _train(args, tf_config=None, timeout=60):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
  env.pop("TF_CONFIG", None)
  if tf_config is not None:
    env["TF_CONFIG"] = tf_config
  start = time.monotonic()
  proc = subprocess.run([sys.executable, TRAIN] + args, env=env,
                        capture_output=True, text=True, timeout=timeout,
                        check=False)
  return proc, time.monotonic() - start


def _last_line(text):
  lines = [l for l in text.strip().splitlines() if l.strip()]
  return lines[-1] if lines else ""


@pytest.mark.parametrize("tf_config,names", TF_CONFIGS)
def test_malformed_tf_config_is_a_clear_error(tmp_path, tf_config, names):
  model_dir = tmp_path / "model"
  proc, elapsed = _train(["--strategy", "multi_worker", "--steps", "1",
                          "--model_dir", str(model_dir)], tf_config)
  message = _last_line(proc.stderr)
  print(f"[bad input] TF_CONFIG {tf_config[:60]!r}: exit {proc.returncode} "
        f"in {elapsed:.1f}s: {message[:200]}")
  assert proc.returncode == 2, proc.stderr
  assert message.startswith("train: error:"), proc.stderr
  assert names in message, message
  assert "Traceback" not in proc.stderr
  assert not model_dir.exists()


@pytest.mark.parametrize("flags,names", FLAGS)
def test_bad_flag_value_is_a_clear_error(tmp_path, flags, names):
  model_dir = tmp_path / "model"
  proc, elapsed = _train(flags + ["--model_dir", str(model_dir)])
  # absl reports a value that does not parse on the first line, then help.
  message = next((l for l in proc.stderr.splitlines() if "rror" in l),
                 _last_line(proc.stderr))
  print(f"[bad input] flags {' '.join(flags)}: exit {proc.returncode} in "
        f"{elapsed:.1f}s: {message[:200]}")
  assert proc.returncode != 0, proc.stderr
  assert names in message, proc.stderr
  assert "Traceback" not in proc.stderr
  assert not model_dir.exists()


def _vgg_small_plan():
  """A valid plan for vgg_small's gradients (one collective per tensor)."""
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt import models  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  variables = models.get("vgg_small").trainable_variables
  tensors = [PlanTensor(v.path, int(v.numpy().size) * 4) for v in variables]
  return plan_from_groups(tensors, [[(i, 0, t.nbytes)]
                                    for i, t in enumerate(tensors)])


def _plan_variants(tmp_path):
  text = _vgg_small_plan().to_json()
  other = plan_from_groups([PlanTensor(f"t{i}", 8) for i in range(3)],
                           [[(0, 0, 8), (1, 0, 8), (2, 0, 8)]])
  corrupted = text.replace('"collectives"', '"collectivez"', 1)
  variants = {
      "truncated": (text[:len(text) // 2], "--plan"),
      "corrupted": (corrupted, "--plan"),
      "not a plan": ("[1, 2]", "--plan"),
      "binary garbage": ("\x00\xff" * 10, "--plan"),
      "other model, same count": (
          plan_from_groups(
              [PlanTensor(t.name, 4 * (i + 1)) for i, t in
               enumerate(Plan.from_json(text).tensors)],
              [[(i, 0, 4 * (i + 1))]
               for i in range(len(Plan.from_json(text).tensors))]).to_json(),
          "bytes"),
      "other model, other count": (other.to_json(), "plan"),
  }
  paths = {}
  for name, (body, names) in variants.items():
    path = tmp_path / (name.replace(" ", "_").replace(",", "") + ".json")
    path.write_text(body, encoding="utf-8", errors="surrogateescape")
    paths[name] = (str(path), names)
  return paths


@pytest.mark.parametrize("variant", [
    "truncated", "corrupted", "not a plan", "binary garbage",
    "other model, same count",
    "other model, other count",
])
def test_bad_plan_file_is_a_clear_error(tmp_path, logical_cpus, variant):
  from tf_preempt.training import runner  # pylint: disable=g-import-not-at-top
  from tf_preempt.training.config import TrainConfig  # pylint: disable=g-import-not-at-top
  path, names = _plan_variants(tmp_path)[variant]
  model_dir = tmp_path / "model"
  config = TrainConfig(strategy="mirrored", model="vgg_small", batch_size=4,
                       steps=1, plan=path, devices=tuple(logical_cpus[:2]),
                       warmup_blocks=0, model_dir=str(model_dir))
  with pytest.raises(ValueError) as info:
    runner.run(config)
  print(f"[bad input] --plan {variant}: {type(info.value).__name__}: "
        f"{str(info.value).splitlines()[0][:200]}")
  assert names in str(info.value)
  # A plan that fails before training starts leaves no checkpoint.
  assert not list(model_dir.glob("**/*.weights.h5"))


def test_plan_cache_from_another_model_is_refused_and_kept(tmp_path):
  from tf_preempt.profile import plan_cache  # pylint: disable=g-import-not-at-top
  plan = plan_from_groups([PlanTensor("a", 16)], [[(0, 0, 16)]])
  path = plan_cache.cache_path(str(tmp_path), "a" * 64, 2, "RING")
  plan_cache.save_cached_plan(path, plan, "a" * 64, 2, "RING")
  before = open(path).read()
  with pytest.raises(plan_cache.PlanCacheMismatchError) as info:
    plan_cache.load_cached_plan(path, "b" * 64, 2, "RING")
  print(f"[bad input] plan cache of another model: "
        f"{str(info.value)[:200]}")
  assert "model signature" in str(info.value)
  assert open(path).read() == before


@pytest.mark.parametrize("damage", ["truncated", "garbage", "fingerprint"])
def test_damaged_plan_cache_is_not_used(tmp_path, damage, caplog):
  from tf_preempt.profile import plan_cache  # pylint: disable=g-import-not-at-top
  plan = plan_from_groups([PlanTensor("a", 16)], [[(0, 0, 16)]])
  path = plan_cache.cache_path(str(tmp_path), "a" * 64, 2, "RING")
  plan_cache.save_cached_plan(path, plan, "a" * 64, 2, "RING")
  text = open(path).read()
  if damage == "truncated":
    text = text[:len(text) // 2]
  elif damage == "garbage":
    text = "\x00garbage"
  else:
    data = json.loads(text)
    data["fingerprint"] = "0" * 64
    text = json.dumps(data)
  with open(path, "w") as f:
    f.write(text)
  assert plan_cache.load_cached_plan(path, "a" * 64, 2, "RING") is None


def test_plan_cache_write_is_atomic(tmp_path, monkeypatch):
  from tf_preempt.profile import plan_cache  # pylint: disable=g-import-not-at-top
  old = plan_from_groups([PlanTensor("a", 16)], [[(0, 0, 16)]])
  new = plan_from_groups([PlanTensor("a", 16)], [[(0, 0, 8)], [(0, 8, 8)]])
  path = plan_cache.cache_path(str(tmp_path), "a" * 64, 2, "RING")
  plan_cache.save_cached_plan(path, old, "a" * 64, 2, "RING")
  before = open(path).read()

  def crash(src, dst):
    raise OSError("disk full (injected)")

  monkeypatch.setattr(plan_cache.os, "replace", crash)
  with pytest.raises(OSError, match="injected"):
    plan_cache.save_cached_plan(path, new, "a" * 64, 2, "RING")
  monkeypatch.undo()
  assert open(path).read() == before
  assert sorted(os.listdir(tmp_path)) == [os.path.basename(path)]
  loaded = plan_cache.load_cached_plan(path, "a" * 64, 2, "RING")
  assert loaded.fingerprint() == old.fingerprint()
