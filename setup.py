"""Build and install tf_preempt.

TensorFlow itself is an extra so that the CPU wheel can satisfy it:
``pip install tf-preempt[cpu]`` (tensorflow-cpu) or ``tf-preempt[gpu]``
(tensorflow with CUDA). The top-level folders ``strategies/`` and ``models/``
are installed as ``tf_preempt.strategies`` and ``tf_preempt.models`` so that no
generic top-level name lands in site-packages.

The C++ scheduler op (``tf_preempt/ops``) is compiled against the TensorFlow
found in the build environment with the flags of ``tf.sysconfig``; build with
``pip install --no-build-isolation`` so that this is the TensorFlow you run.
"""

import glob
import os
import subprocess
import sys

import setuptools
from setuptools.command.build_py import build_py

_HERE = os.path.dirname(os.path.abspath(__file__))
_OPS_DIR = os.path.join("tf_preempt", "ops")
_OPS_LIBRARY = "_scheduler_ops.so"


def _tensorflow_flags():
  """Returns (compile_flags, link_flags) of the installed TensorFlow."""
  code = ("import tensorflow as tf, json; "
          "print(json.dumps([tf.sysconfig.get_compile_flags(), "
          "tf.sysconfig.get_link_flags()]))")
  out = subprocess.run([sys.executable, "-c", code], check=True,
                       capture_output=True, text=True,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout
  import json  # pylint: disable=g-import-not-at-top
  return json.loads(out.strip().splitlines()[-1])


def build_ops_library(output_dir):
  """Compiles tf_preempt/ops/*.cc into one shared library in output_dir.

  Returns the library path, or None when there are no C++ sources yet.
  """
  sources = sorted(glob.glob(os.path.join(_HERE, _OPS_DIR, "*.cc")))
  if not sources:
    return None
  compile_flags, link_flags = _tensorflow_flags()
  os.makedirs(output_dir, exist_ok=True)
  target = os.path.join(output_dir, _OPS_LIBRARY)
  # -w: TensorFlow's headers emit pages of deprecation warnings of their own.
  cmd = (["g++", "-std=c++17", "-shared", "-fPIC", "-O2", "-w", "-pthread"] +
         [f for f in compile_flags if not f.startswith("--std")] + sources +
         ["-o", target] + link_flags)
  subprocess.run(cmd, check=True)
  return target


class BuildPyWithOps(build_py):
  """build_py that also compiles the scheduler op library."""

  def run(self):
    super().run()
    if self.editable_mode:
      build_ops_library(os.path.join(_HERE, _OPS_DIR))
    else:
      build_ops_library(os.path.join(self.build_lib, _OPS_DIR))


setuptools.setup(
    name="tf-preempt",
    version="0.1.0",
    description=("Preemptive all-reduce scheduling (PACE) for "
                 "tf.distribute and Keras."),
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["tf_preempt", "tf_preempt.*"])
    + ["tf_preempt.strategies", "tf_preempt.models"],
    package_dir={
        "tf_preempt.strategies": "strategies",
        "tf_preempt.models": "models",
    },
    package_data={"tf_preempt.ops": ["*.cc", "*.h", _OPS_LIBRARY]},
    install_requires=[
        "keras>=3",
        "numpy",
        "absl-py",
        "tensorflow-datasets",
    ],
    extras_require={
        "cpu": ["tensorflow-cpu>=2.21,<2.22"],
        "gpu": ["tensorflow[and-cuda]>=2.21,<2.22"],
        "test": ["pytest", "hypothesis", "matplotlib"],
    },
    cmdclass={"build_py": BuildPyWithOps},
)
