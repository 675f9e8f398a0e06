"""Builds the scheduler op library for the op tests if it is missing or stale.

`make test` builds it first (through `pip install -e .`); this fixture keeps
`pytest tests/ops` working on its own. It reuses setup.py's
`build_ops_library` (run without executing `setuptools.setup`), builds into a
temporary folder and renames the result into place under a file lock, so
concurrent test runs never load a half-written library.
"""

import ast
import fcntl
import glob
import os
import shutil
import tempfile

import pytest

from tf_preempt.ops import scheduler

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_OPS_DIR = os.path.join(_REPO, "tf_preempt", "ops")


def _setup_functions():
  """The module-level imports and functions of setup.py, without setup()."""
  path = os.path.join(_REPO, "setup.py")
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  tree.body = [n for n in tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef,
                                 ast.Assign))]
  namespace = {"__file__": path, "__name__": "tf_preempt_setup"}
  exec(compile(tree, path, "exec"), namespace)  # pylint: disable=exec-used
  return namespace


def _is_stale(library):
  if not os.path.exists(library):
    return True
  sources = glob.glob(os.path.join(_OPS_DIR, "*.cc"))
  sources += glob.glob(os.path.join(_OPS_DIR, "*.h"))
  built = os.path.getmtime(library)
  return any(os.path.getmtime(s) > built for s in sources)


def build_if_needed(library=scheduler.LIBRARY_PATH):
  """Builds the library at its package path unless it is up to date."""
  if not _is_stale(library):
    return library
  with open(os.path.join(tempfile.gettempdir(),
                         "tf_preempt_ops_build.lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not _is_stale(library):
      return library
    # In the package folder: os.replace cannot cross file systems.
    out_dir = tempfile.mkdtemp(prefix=".build_", dir=_OPS_DIR)
    try:
      built = _setup_functions()["build_ops_library"](out_dir)
      os.replace(built, library)
    finally:
      shutil.rmtree(out_dir, ignore_errors=True)
  return library


@pytest.fixture(scope="session")
def ops_library():
  """The package's OpLibrary, built and loaded."""
  build_if_needed()
  library = scheduler.OpLibrary()
  library.ops  # pylint: disable=pointless-statement
  return library
