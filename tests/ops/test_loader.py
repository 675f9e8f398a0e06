"""The op library loads lazily and explains how to rebuild when it cannot."""

import subprocess
import sys

import pytest

from tf_preempt.ops import scheduler


def _assert_helpful(error, path):
  message = str(error)
  assert "pip install --no-build-isolation -e ." in message
  assert "make venv" in message
  assert path in message
  assert isinstance(error, ImportError)
  assert isinstance(error, RuntimeError)


def test_missing_library_raises_on_first_use_only(tmp_path):
  path = str(tmp_path / "missing" / "_scheduler_ops.so")
  library = scheduler.OpLibrary(path)  # Constructing never loads.
  assert not library.is_available()
  with pytest.raises(scheduler.SchedulerOpsUnavailableError) as info:
    scheduler.configure([1], [4], library=library)
  _assert_helpful(info.value, path)
  assert "does not exist" in str(info.value)


def test_broken_library_includes_loader_error(tmp_path):
  path = tmp_path / "_scheduler_ops.so"
  path.write_bytes(b"this is not an ELF file")
  library = scheduler.OpLibrary(str(path))
  assert not library.is_available()
  with pytest.raises(scheduler.SchedulerOpsUnavailableError) as info:
    library.ops  # pylint: disable=pointless-statement
  _assert_helpful(info.value, str(path))
  # The dynamic loader's own words.
  assert "ELF" in str(info.value) or "too short" in str(info.value)
  assert info.value.__cause__ is not None


def test_importing_the_package_does_not_load_the_library():
  code = ("import tf_preempt, tf_preempt.ops as o; "
          "print(o.scheduler._LIBRARY._module is None)")
  out = subprocess.run([sys.executable, "-c", code], check=True,
                       capture_output=True, text=True).stdout
  assert out.strip().splitlines()[-1] == "True"
