"""Tests of scripts/validation_errors.py on made-up validation reports."""

import json
import subprocess
import sys

from tf_preempt.testing import scripts

validation_errors = scripts.load_script("validation_errors")


def _report(path, errors):
  path.write_text(json.dumps({"rows": {
      name: {"error": e} for name, e in errors.items()}}))
  return str(path)


def test_errors_per_row_over_the_reports(tmp_path):
  paths = [_report(tmp_path / "a.json", {"pace@2": -0.10, "ddp@1": 0.02}),
           _report(tmp_path / "b.json", {"pace@2": -0.04, "ddp@1": None}),
           _report(tmp_path / "c.json", {"pace@2": 0.02})]
  errors = validation_errors.row_errors(paths)
  assert errors == {"pace@2": [-0.10, -0.04, 0.02], "ddp@1": [0.02]}
  table = validation_errors.format_errors(errors)
  assert "ddp@1: 1, 0, +2.0% / +2.0% / +2.0% / +2.0%" in table
  assert "pace@2: 3, 2, -4.0% / -4.0% / -10.0% / +2.0%" in table


def test_cli_reads_a_glob_and_refuses_none(tmp_path):
  _report(tmp_path / "x-2gbit.json", {"pace@2": -0.05})
  _report(tmp_path / "x-200mbit.json", {"pace@2": 0.5})
  out = subprocess.run(
      [sys.executable, scripts.script_path("validation_errors"),
       str(tmp_path / "*-2gbit.json")], capture_output=True, text=True,
      check=True, cwd=scripts.REPO).stdout
  assert out.splitlines()[0] == "1 reports"
  assert "pace@2: 1, 1, -5.0%" in out
  done = subprocess.run(
      [sys.executable, scripts.script_path("validation_errors"),
       str(tmp_path / "none-*.json")], capture_output=True, text=True,
      cwd=scripts.REPO)
  assert done.returncode == 2 and "no report matches" in done.stderr

