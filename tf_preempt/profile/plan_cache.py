"""The plan cache: one JSON file per (model, world size, implementation).

A restart finds its plan here and skips the profiling. Files are written
atomically (temp file, fsync, `os.replace`); a file that cannot be parsed is
reported as missing (the caller re-profiles and overwrites it), and a
well-formed file made for another model, world size or implementation
raises `PlanCacheMismatchError`: it is never used.
"""

import hashlib
import json
import os
import tempfile
from typing import Dict, Optional

from absl import logging
import keras

from tf_preempt.plan.plan import Plan
from tf_preempt.runtime import tf_internals

CACHE_FORMAT = 1


class PlanCacheMismatchError(ValueError):
  """A cached plan was made for another model, world size or implementation."""


def model_signature(model: keras.Model) -> str:
  """A hash of the trainable variables' shapes and dtypes, in order.

  Names are left out: Keras uniquifies layer names per process ("dense_3"),
  so the same model gets other names after a restart.
  """
  spec = [[list(v.shape), keras.backend.standardize_dtype(v.dtype)]
          for v in model.trainable_variables]
  return hashlib.sha256(json.dumps(spec).encode()).hexdigest()


def implementation_name(cross_device_ops) -> str:
  """"ring", "nccl" or "auto": the collectives' implementation."""
  options = tf_internals.cross_device_ops_state(cross_device_ops).options
  return str(options.implementation.value).lower()


def cache_path(cache_dir: str, signature: str, world_size: int,
               implementation: str) -> str:
  """The cache file of one (model, world size, implementation)."""
  return os.path.join(
      cache_dir,
      f"plan-{signature[:16]}-w{world_size}-{implementation}.json")


def save_cached_plan(path: str, plan: Plan, signature: str, world_size: int,
                     implementation: str,
                     measurements: Optional[Dict] = None) -> None:
  """Writes a plan cache file atomically.

  A temporary file in the same directory is written, flushed and renamed
  over `path`: a crash leaves the old file or the new one, never half of it.
  """
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  text = json.dumps({
      "format": CACHE_FORMAT,
      "signature": signature,
      "world_size": int(world_size),
      "implementation": implementation,
      "fingerprint": plan.fingerprint(),
      "measurements": measurements or {},
      "plan": plan.to_dict(),
  }, indent=1, sort_keys=True)
  fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".tmp",
                             dir=os.path.dirname(path) or ".")
  try:
    with os.fdopen(fd, "w") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def load_cached_plan(path: str, signature: str, world_size: int,
                     implementation: str) -> Optional[Plan]:
  """Reads a plan cache file.

  Args:
    path: the file.
    signature: `model_signature` of the model to train.
    world_size: replicas over all workers.
    implementation: `implementation_name` of the cross-device ops.

  Returns:
    The plan; None if there is no file, or if it cannot be parsed (logged:
    the caller re-profiles and overwrites it).

  Raises:
    PlanCacheMismatchError: if the file is a valid cache of a plan made for
      another model, world size or implementation.
  """
  try:
    with open(path) as f:
      text = f.read()
  except FileNotFoundError:
    return None
  except OSError as e:
    logging.warning("tf_preempt: cannot read plan cache %s (%s); "
                    "re-profiling.", path, e)
    return None
  try:
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
      raise ValueError(f"not a plan cache of format {CACHE_FORMAT}")
    plan = Plan.from_dict(data["plan"])
    if plan.fingerprint() != data["fingerprint"]:
      raise ValueError("the plan does not match its recorded fingerprint")
    cached = (data["signature"], int(data["world_size"]),
              data["implementation"])
  except (ValueError, KeyError, TypeError) as e:
    logging.warning("tf_preempt: plan cache %s is corrupted or truncated "
                    "(%s); re-profiling and overwriting it.", path, e)
    return None
  wanted = (signature, int(world_size), implementation)
  if cached != wanted:
    what = [name for name, a, b in zip(
        ("model signature", "world size", "implementation"), cached, wanted)
            if a != b]
    raise PlanCacheMismatchError(
        f"Plan cache {path} was made for another {' and '.join(what)}: it "
        f"holds (signature {cached[0][:16]}, world size {cached[1]}, "
        f"{cached[2]}), this run is (signature {wanted[0][:16]}, world size "
        f"{wanted[1]}, {wanted[2]}). Delete the file or use another "
        "cache_dir.")
  return plan


# --- measurements ------------------------------------------------------------


def check_plan_fits(plan: Plan, model: keras.Model, path: str) -> None:
  """Raises PlanCacheMismatchError unless the plan fits the variables."""
  variables = model.trainable_variables
  fits = len(plan.tensors) == len(variables) and all(
      t.shape in (None, tuple(int(d) for d in v.shape))
      for t, v in zip(plan.tensors, variables))
  if not fits:
    raise PlanCacheMismatchError(
        f"Plan cache {path} holds a plan of {len(plan.tensors)} tensors "
        f"that does not fit the model's {len(variables)} trainable "
        "variables.")
