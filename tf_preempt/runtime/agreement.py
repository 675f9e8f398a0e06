"""Checking that every worker is about to execute the same plan.

Collectives are matched across workers by their order alone, so two workers
with different plans would not fail: they would hang, or silently add up the
wrong bytes. Before the first collective of a plan the workers all-gather a
short, fixed-length summary of it (`signature`) and compare; since the summary
has the same length whatever the plan, the check itself cannot hang on a
mismatch, and every worker sees every other worker's summary and raises the
same `PlanMismatchError`.

This module is pure: it builds and compares the summaries; the cross-device
ops do the all-gather.
"""

import hashlib
import json
import sys
from typing import List, Sequence

import numpy as np

from tf_preempt.plan.plan import Plan

SIGNATURE_VERSION = 2

# The summary's fields, in order. Counts are given as numbers so that a
# mismatch can show them; the rest are 31-bit hashes of canonical JSON.
FIELDS = (
    "signature_version",
    "worker",
    "num_tensors",
    "tensor_sizes",
    "tensor_dtypes",
    "tensor_shapes",
    "num_collectives",
    "collectives",
    "fingerprint[0:8]",
    "fingerprint[8:16]",
    # Workers on different TensorFlow releases may build different
    # collectives from one plan; the hash of the version string.
    "tensorflow_version",
)
_NUMERIC = {"signature_version", "worker", "num_tensors", "num_collectives"}
# Fields that describe who sent the summary, not the plan.
_IDENTITY = {"worker"}
SIGNATURE_LENGTH = len(FIELDS)


class PlanMismatchError(RuntimeError):
  """Workers hold different plans for the same all-reduce."""


def _hash31(obj) -> int:
  text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
  return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def tensorflow_version() -> str:
  """The running TensorFlow's version, without importing it here."""
  tf = sys.modules.get("tensorflow")
  version = getattr(getattr(tf, "version", None), "VERSION", None)
  if version is None:
    from importlib import metadata  # pylint: disable=g-import-not-at-top
    for dist in ("tensorflow-cpu", "tensorflow"):
      try:
        return metadata.version(dist)
      except metadata.PackageNotFoundError:
        pass
    return "unknown"
  return str(version)


def signature(plan: Plan, worker: int) -> np.ndarray:
  """Returns the fixed-length int32 summary of `plan` sent by `worker`."""
  data = plan.to_dict()
  fp = plan.fingerprint()
  values = {
      "signature_version": SIGNATURE_VERSION,
      "worker": worker,
      "num_tensors": len(plan.tensors),
      "tensor_sizes": _hash31([[t.nbytes, t.itemsize] for t in plan.tensors]),
      "tensor_dtypes": _hash31([t.dtype for t in plan.tensors]),
      "tensor_shapes": _hash31([None if t.shape is None else list(t.shape)
                                for t in plan.tensors]),
      "num_collectives": len(plan.collectives),
      "collectives": _hash31(data["collectives"]),
      "fingerprint[0:8]": int(fp[0:8], 16) & 0x7FFFFFFF,
      "fingerprint[8:16]": int(fp[8:16], 16) & 0x7FFFFFFF,
      "tensorflow_version": _hash31(tensorflow_version()),
  }
  return np.array([values[f] for f in FIELDS], dtype=np.int32)


def check_signatures(gathered: Sequence[Sequence[int]],
                     plan_summary: str = "") -> None:
  """Compares the summaries of all replicas.

  Args:
    gathered: one `signature` per replica (several replicas of one worker
      send the same one).
    plan_summary: a description of the local plan for the message.

  Raises:
    PlanMismatchError: naming two workers that differ and the first field in
      which they do.
  """
  rows: List[np.ndarray] = [np.asarray(r, dtype=np.int64) for r in gathered]
  if not rows:
    return
  ref = rows[0]
  compared = [i for i, f in enumerate(FIELDS) if f not in _IDENTITY]
  worker = FIELDS.index("worker")
  for row in rows[1:]:
    differing = [i for i in compared if row[i] != ref[i]]
    if not differing:
      continue
    field = FIELDS[differing[0]]
    if field in _NUMERIC:
      detail = f"{int(ref[differing[0]])} vs {int(row[differing[0]])}"
    elif field == "tensorflow_version":
      detail = f"hashes differ; this worker runs {tensorflow_version()}"
    else:
      detail = "hashes differ"
    others = ", ".join(FIELDS[i] for i in differing[1:])
    raise PlanMismatchError(
        f"tf_preempt: workers {int(ref[worker])} and {int(row[worker])} hold "
        f"different all-reduce plans; first differing field: {field!r} "
        f"({detail})" + (f"; also differing: {others}" if others else "") +
        ". Collectives are matched by order, so running on would hang or "
        "reduce the wrong bytes. Give every worker the same plan (compare "
        "Plan.fingerprint()) and the same model." +
        (f" This worker's plan: {plan_summary}." if plan_summary else ""))
