r"""Each row's error over several validation reports.

  python scripts/validation_errors.py \
      'benchmarks/simulation/validation/2026-12-0[34]-vgg_small-2gbit*.json'

Reads `scripts/validate_sim.py --json` reports (the JSON files in
benchmarks/simulation/validation/) and prints, per row name (scheduler@K),
over the reports that have it: how many, how many under-predicted, and
the mean, median, smallest and largest signed error. The cross-directory
figures of benchmarks/simulation/README.md (a row's mean error over the
2 Gbit/s vgg_small directories) come from here; for an older model's
figures, run it in a worktree of that commit (its reports are in git).

With --misses it lists instead every row outside its report's target,
with the row's repeats from the benchmark's results.json: how far apart
they are (the largest over the smallest, less 1) and the error against
the repeat nearest the prediction. A row whose repeats are further apart
than the target has a median that the machine's noise moves by more than
the target; a row within the target of some repeat is one that a single
undisturbed run would have met.
"""

import glob
import json
import os
import statistics
import sys
from typing import Any, Dict, List, Sequence

from absl import app
from absl import flags

_MISSES = flags.DEFINE_bool(
    "misses", False, "List the rows outside their report's target, with "
    "their repeats' spread, instead of the per-row summary.")


def row_errors(paths: Sequence[str]) -> Dict[str, List[float]]:
  """{row: its signed errors (fractions)} over the reports at `paths`,
  rows without a prediction left out."""
  errors = {}
  for path in paths:
    with open(path) as f:
      report = json.load(f)
    for name, row in report["rows"].items():
      if row.get("error") is not None:
        errors.setdefault(name, []).append(row["error"])
  return errors


def format_errors(errors: Dict[str, List[float]]) -> str:
  """One line per row, sorted by name."""
  lines = ["row: reports, under-predicted, error mean / median / min / max"]
  for name, values in sorted(errors.items()):
    pct = lambda x: f"{x * 100:+.1f}%"
    lines.append(
        f"{name}: {len(values)}, {sum(v < 0 for v in values)}, "
        f"{pct(statistics.mean(values))} / {pct(statistics.median(values))}"
        f" / {pct(min(values))} / {pct(max(values))}")
  return "\n".join(lines)


def row_misses(paths: Sequence[str]) -> List[Dict[str, Any]]:
  """The rows outside their report's target, with their repeats.

  Args:
    paths: `validate_sim.py --json` reports; each names its benchmark
      directory (`inputs.results_dir`, relative to the working directory
      or absolute), whose results.json holds each row's repeats
      (`step_s`).

  Returns:
    One dict per missed row, in report and row order: report (its path),
    row, error, predicted_s, repeats_s, spread (largest repeat over the
    smallest, less 1) and nearest_error (the signed error against the
    repeat nearest the prediction).

  Raises:
    ValueError: if a report names no benchmark directory, or its
      results.json lacks a missed row's repeats.
    OSError: if a results.json cannot be read.
  """
  out = []
  for path in paths:
    with open(path) as f:
      report = json.load(f)
    target = report.get("target", 0.10)
    results_dir = (report.get("inputs") or {}).get("results_dir")
    if not results_dir:
      raise ValueError(f"{path}: no inputs.results_dir; run "
                       "scripts/validate_sim.py --json to make the report.")
    with open(os.path.join(results_dir, "results.json")) as f:
      schedulers = json.load(f)["schedulers"]
    for name, row in report["rows"].items():
      error = row.get("error")
      if error is None or abs(error) <= target:
        continue
      repeats = (schedulers.get(name) or {}).get("step_s")
      if not repeats:
        raise ValueError(f"{results_dir}/results.json: row {name!r} has no "
                         "repeats (step_s).")
      predicted = row["predicted_s"]
      nearest = min(repeats, key=lambda x: abs(predicted - x))
      out.append({"report": path, "row": name, "error": error,
                  "predicted_s": predicted, "repeats_s": list(repeats),
                  "spread": max(repeats) / min(repeats) - 1,
                  "nearest_error": (predicted - nearest) / nearest,
                  "target": target})
  return out


def format_misses(misses: Sequence[Dict[str, Any]]) -> str:
  """One line per missed row, then how many are noisier than the target."""
  pct = lambda x: f"{x * 100:+.1f}%"
  lines = ["report row: error, repeats ms (spread), error against the "
           "nearest repeat"]
  for m in misses:
    repeats = ", ".join(f"{x * 1e3:.1f}" for x in m["repeats_s"])
    lines.append(
        f"{os.path.basename(m['report'])} {m['row']}: {pct(m['error'])}, "
        f"{repeats} ({m['spread'] * 100:.0f}%), {pct(m['nearest_error'])}")
  noisy = sum(m["spread"] > m["target"] for m in misses)
  near = sum(abs(m["nearest_error"]) <= m["target"] for m in misses)
  lines.append(f"{len(misses)} rows miss; {noisy} have repeats further "
               f"apart than the target; {near} are within it of a repeat")
  return "\n".join(lines)


def main(argv):
  paths = sorted({p for pattern in argv[1:] for p in glob.glob(pattern)})
  if not paths:
    print("validation_errors: no report matches "
          f"{' '.join(argv[1:]) or '(no pattern given)'}", file=sys.stderr)
    return 2
  print(f"{len(paths)} reports")
  if _MISSES.value:
    print(format_misses(row_misses(paths)))
  else:
    print(format_errors(row_errors(paths)))
  return 0


if __name__ == "__main__":
  app.run(main)
