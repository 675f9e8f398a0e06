"""The repository's `scripts/` for tests: paths, and loading one as a module.

`scripts/` is not a package (its files are command lines), so tests load a
script by path to call its testable `run(...)`.
"""

import importlib.util
import os
import subprocess
import sys
from typing import Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def script_path(name: str) -> str:
  """The path of `scripts/<name>.py` in the source tree."""
  return os.path.join(REPO, "scripts", f"{name}.py")


def run_script(name: str, args: Sequence[str], timeout: float
               ) -> subprocess.CompletedProcess:
  """Runs `scripts/<name>.py` with `args` from the repository's root, as a
  user would; returns the finished process, its output captured as text."""
  return subprocess.run([sys.executable, script_path(name), *args],
                        cwd=REPO, capture_output=True, text=True,
                        timeout=timeout)


def load_script(name: str):
  """Imports `scripts/<name>.py` as a module (not run as `__main__`).

  As when the script runs, its folder goes on `sys.path`, so that it can
  import the scripts beside it (`import simulate`, `import demo`).
  """
  folder = os.path.dirname(script_path(name))
  if folder not in sys.path:
    sys.path.insert(0, folder)
  spec = importlib.util.spec_from_file_location(f"{name}_script",
                                                script_path(name))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
