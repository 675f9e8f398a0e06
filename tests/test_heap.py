"""Tests of tf_preempt.heap: TensorFlow's mmap threshold, and "keep".

Each case runs in a fresh Python process: the setting lasts for the whole
process, and a test process may already have run tf.data.
"""

import json
import platform
import subprocess
import sys

import pytest

from tf_preempt import heap

# After configure_heap(MODE), allocates, touches and frees BUFFERS buffers of
# 1 MiB through the C library on a thread of its own (as gRPC's threads
# allocate the protobuf strings of a collective's chunks, each thread in its
# own malloc arena), and prints the minor page faults that cost.
_PROBE = """
import ctypes, json, resource, sys, threading
from tf_preempt import heap
heap.configure_heap(sys.argv[1])
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size, buffers = 2**20, int(sys.argv[2])
out = {}
def work():
  before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
  for _ in range(buffers):
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
  out["faults"] = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(json.dumps(out))
"""

_BUFFERS = 200
_PAGES_PER_BUFFER = 2**20 // 4096

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="mallopt thresholds are glibc's")


def _faults(mode):
  result = subprocess.run([sys.executable, "-c", _PROBE, mode,
                           str(_BUFFERS)], capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])["faults"]


@glibc_only
def test_tensorflow_mode_faults_every_page_of_every_buffer():
  # TensorFlow's 128 KiB threshold: each 1 MiB buffer is a fresh mmap.
  assert _faults("tensorflow") >= 0.9 * _BUFFERS * _PAGES_PER_BUFFER


@glibc_only
def test_keep_mode_reuses_the_buffers():
  assert _faults("keep") <= 0.05 * _BUFFERS * _PAGES_PER_BUFFER


def test_unknown_mode_is_refused():
  with pytest.raises(ValueError, match="heap mode must be one of"):
    heap.configure_heap("glibc")


def test_a_process_keeps_its_first_mode():
  script = ("from tf_preempt import heap\n"
            "heap.configure_heap('tensorflow')\n"
            "assert heap.configure_heap('tensorflow') == 'tensorflow'\n"
            "assert heap.applied_mode() == 'tensorflow'\n"
            "heap.configure_heap('keep')\n")
  result = subprocess.run([sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=300)
  assert result.returncode != 0
  assert "cannot change to 'keep'" in result.stderr
