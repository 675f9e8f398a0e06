"""Runs pytest on the files named on the command line (Bazel's py_test)."""

import sys

import pytest

if __name__ == "__main__":
  sys.exit(pytest.main(sys.argv[1:]))
