"""Packaging: the wheel installs everything under the tf_preempt namespace."""

import os
import subprocess
import sys
import zipfile

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  out = tmp_path_factory.mktemp("wheel")
  subprocess.run(
      [sys.executable, "-m", "pip", "wheel", "--no-deps",
       "--no-build-isolation", "-q", "-w", str(out), _REPO],
      check=True, cwd=str(out))
  wheels = [f for f in os.listdir(out) if f.endswith(".whl")]
  assert len(wheels) == 1, wheels
  return os.path.join(out, wheels[0])


def test_wheel_has_no_generic_top_level_names(wheel):
  with zipfile.ZipFile(wheel) as zf:
    top = {name.split("/")[0] for name in zf.namelist()}
  top = {t for t in top if not t.endswith((".dist-info", ".data"))}
  assert top == {"tf_preempt"}


def test_wheel_install_imports_namespaced_folders(wheel, tmp_path):
  target = tmp_path / "site"
  subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                  "--target", str(target), wheel], check=True)
  code = ("import tf_preempt.models, tf_preempt.strategies, tf_preempt.plan;"
          "import sys; print(tf_preempt.models.__file__);"
          "print(tf_preempt.strategies.__file__)")
  # Run outside the repo so the source tree cannot shadow the install.
  out = subprocess.run([sys.executable, "-S", "-c",
                        "import sys; sys.path[:0] = [%r] + %r; %s" % (
                            str(target),
                            [p for p in sys.path if "site-packages" in p],
                            code)],
                       check=True, capture_output=True, text=True,
                       cwd=str(tmp_path))
  for line in out.stdout.split():
    assert line.startswith(str(target)), out.stdout


def test_source_tree_import_names():
  import tf_preempt.models  # pylint: disable=g-import-not-at-top
  import tf_preempt.strategies  # pylint: disable=g-import-not-at-top
  assert os.path.dirname(tf_preempt.models.__file__) == os.path.join(
      _REPO, "models")
  assert os.path.dirname(tf_preempt.strategies.__file__) == os.path.join(
      _REPO, "strategies")
