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
"""

import glob
import json
import statistics
import sys
from typing import Dict, List, Sequence

from absl import app


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


def main(argv):
  paths = sorted({p for pattern in argv[1:] for p in glob.glob(pattern)})
  if not paths:
    print("validation_errors: no report matches "
          f"{' '.join(argv[1:]) or '(no pattern given)'}", file=sys.stderr)
    return 2
  print(f"{len(paths)} reports")
  print(format_errors(row_errors(paths)))
  return 0


if __name__ == "__main__":
  app.run(main)
