"""Where glibc puts large host buffers: the gRPC collectives' and the tensors'.

TensorFlow's tf.data calls `mallopt(M_MMAP_THRESHOLD, 128 KiB)` once per
process, when it builds its first GeneratorDataset kernel (its work-around
for memory growth with `Dataset.from_generator` under Python 3.11). Every
iterator over a distributed dataset builds one (`MultiDeviceIterator`), so
every `model.fit` under a tf.distribute strategy makes the call. It also
turns off glibc's dynamic threshold: from then on every allocation of 128 KiB
or more is a fresh `mmap`, unmapped again when freed. A ring collective over
gRPC copies each chunk through several such buffers on both sides (the
RecvBuf response's protobuf, packed, serialized and parsed), and each of
their pages faults in when first touched; so does every CPU tensor of that
size. A training worker of our vgg_small benchmark (two CPU workers, one
3.26 MB all-reduce a step) took 40-76 thousand minor faults a second,
1,300-2,500 a step, most in the collective's gRPC path: CPU time that the
core then lacks for the bytes and the compute.

`configure_heap("keep")` has TensorFlow make its call now, then raises the
thresholds, so that buffers up to 32 MiB come from the heap and are reused.
The price is memory: each of glibc's arenas may keep up to 64 MiB of freed
memory instead of returning it. `configure_heap("tensorflow")` only has
TensorFlow make its call now, so that a process that times collectives
without a distributed dataset (the probes of `tf_preempt.bench`) runs in
the same state as a training worker. Either way the setting is for the
whole process and lasts until it exits.

Importing this module does not import TensorFlow (flags and configs name
its modes before TensorFlow loads); `configure_heap` does.
"""

import ctypes
import platform
from typing import Optional

# What a process does about TensorFlow's mmap threshold; the first is the
# default everywhere (TensorFlow's own behaviour).
HEAP_MODES = ("tensorflow", "keep")
DEFAULT_MODE = HEAP_MODES[0]

_FLAG_HELP = ("Large host buffers: tensorflow (TensorFlow's 128 KiB mmap "
              "threshold, as in any fit under a strategy: every large gRPC "
              "buffer of a collective faults in anew) or keep (up to 32 MiB "
              "from the heap, reused; more memory kept).")

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# glibc's largest mmap threshold on 64-bit (HEAP_MAX_SIZE / 2); larger
# allocations are mmapped whatever the setting.
KEEP_MMAP_THRESHOLD = 32 * 2**20
# Twice the mmap threshold: glibc's own rule when it adjusts the threshold
# dynamically, so that a freed buffer is not trimmed off the heap's top.
KEEP_TRIM_THRESHOLD = 2 * KEEP_MMAP_THRESHOLD

_applied: Optional[str] = None


def define_flag(whose: str = "") -> None:
  """Defines the absl flag --heap (a `HEAP_MODES` mode, `DEFAULT_MODE`).

  Args:
    whose: what the flag applies to, put before the help text (e.g. "The
      workers' heap: ").
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_enum("heap", DEFAULT_MODE, list(HEAP_MODES),
                    whose + _FLAG_HELP)


def applied_mode() -> Optional[str]:
  """The mode `configure_heap` applied in this process, or None."""
  return _applied


def _glibc():
  """The C library, if it is glibc (mallopt and its parameters are glibc's)."""
  name, _ = platform.libc_ver()
  if name != "glibc":
    return None
  return ctypes.CDLL("libc.so.6")


def _trigger_tensorflow_mallopt() -> None:
  """Has tf.data make its one-time mallopt call now, not in a later step."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dataset = tf.data.Dataset.from_generator(
      lambda: iter((0,)), output_signature=tf.TensorSpec([], tf.int32))
  for _ in dataset:
    pass


def configure_heap(mode: str) -> str:
  """Settles where large host buffers live for the rest of this process.

  Call it before training (it runs a one-element tf.data pipeline); calling
  it again with the same mode does nothing.

  Args:
    mode: "tensorflow" (TensorFlow's 128 KiB mmap threshold, as in any
      `model.fit` under a strategy, made to take effect now) or "keep"
      (buffers up to 32 MiB stay in the heap and are reused: fewer page
      faults per collective, more memory kept).

  Returns:
    `mode`.

  Raises:
    ValueError: for a mode not in `HEAP_MODES`, or a mode other than the
      one this process already applied (the first call's mallopt settings
      cannot be undone reliably).
    RuntimeError: "keep" where the C library is not glibc, or glibc refused
      the setting.
  """
  global _applied
  if mode not in HEAP_MODES:
    raise ValueError(f"heap mode must be one of {HEAP_MODES}, got {mode!r}")
  if _applied is not None:
    if _applied != mode:
      raise ValueError(f"this process already configured its heap as "
                       f"{_applied!r}; it cannot change to {mode!r}")
    return mode
  libc = None
  if mode == "keep":
    libc = _glibc()
    if libc is None:
      raise RuntimeError(
          "heap mode 'keep' sets glibc's malloc thresholds, and this C "
          f"library is {platform.libc_ver()[0] or 'unknown'!r}, not glibc; "
          "use 'tensorflow'")
  _trigger_tensorflow_mallopt()
  if libc is not None:
    for parameter, value in ((_M_MMAP_THRESHOLD, KEEP_MMAP_THRESHOLD),
                             (_M_TRIM_THRESHOLD, KEEP_TRIM_THRESHOLD)):
      if libc.mallopt(ctypes.c_int(parameter), ctypes.c_int(value)) != 1:
        raise RuntimeError(f"glibc refused mallopt({parameter}, {value})")
  _applied = mode
  return mode
