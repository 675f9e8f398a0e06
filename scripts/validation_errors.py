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
than the target is one whose runs the machine's noise moved by more than
the target; a row within the target of some repeat is one that a run
would have met.

With --repeat_correlation it asks instead whether a repeat's rows were
slow together with that repeat's own references: scripts/bench.py runs
every row and "compute alone" and "communication alone" once per repeat,
interleaved, so a machine that drifts from repeat to repeat would slow a
repeat's rows and its references together. Per benchmark directory (3 or
more repeats) and pooled: the correlation of each row run's log
deviation from its row's median with the log deviation of its repeat's
reference from the references' median. Near 0, the noise is per run, and
inputs measured per repeat would not predict it.

With --time_correlation it asks on what time scale the noise moves: per
benchmark directory (3 or more repeats) and pooled, every run of the
repeats (rows and references) in the order they ran, as its log deviation
from its setting's median, correlated with the run `lag` runs later. A
correlation that fades only over many runs is a machine state that lasts
that long; near 0 at lag 1, every run is on its own.

With --repeats_needed it asks how many repeats a directory's measurement
needs for its medians to meet the target of its prediction: per report
whose benchmark ran `MIN_SUBSAMPLE_REPEATS` or more repeats, for each k
up to that number, draws of k of its repeats (whole repeats: every row's
run of the same repeat, as they ran together), each row's median over
the draw (its fastest for a report of `--reference=fastest`) against
the report's prediction. It prints the share of draws
in which every row is within the target and the median of the draws'
largest error. The prediction is held fixed (its inputs came from all
the repeats), so this is the measured side's noise alone; and draws of
nearly all N repeats overlap, so only k well below N says what a fresh
run of k repeats would give.

With --offsets it asks how much the errors of a report share: per report,
its rows' mean log error (the common offset; log(1 + error), so that
+10% and -10% of a step weigh alike), their standard deviation around it
(the spread), the median over its rows of the first backward pass's
end in the row's traces over the model's (`first_step` in the report)
and the median over its rows of K >= 2 of how much longer the model's
gap between a block's steps is than the traces' (the first step's last
collective's end to the second step's first ready gradient); then, over
the reports with both of the first, the correlation of the offset with the
log of that ratio and the least-squares slope of one on the other, and
over the reports with a gap, the correlation of the offset with it.

With --against=DIR it compares each report with the report of the same
file name in DIR (the same directories validated with other settings,
e.g. `validate_sim.py --compute_from=step_gaps --json` into /tmp): per
report, the largest error and the rows within the target of each, and in
all, how many reports meet the target with each, how many rows are within
it, and in how many reports the largest error is lower or higher in DIR.
"""

import glob
import itertools
import json
import math
import os
import random
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags

from tf_preempt.bench import trace_calibration
from tf_preempt.bench.results import split_name

_MISSES = flags.DEFINE_bool(
    "misses", False, "List the rows outside their report's target, with "
    "their repeats' spread, instead of the per-row summary.")
_REPEAT_CORRELATION = flags.DEFINE_bool(
    "repeat_correlation", False, "Correlate each repeat's row runs with "
    "that repeat's compute alone and communication alone (details.json) "
    "instead of the per-row summary.")
_TIME_CORRELATION = flags.DEFINE_bool(
    "time_correlation", False, "Correlate each run's deviation with the "
    "runs that followed it (details.json, in run order) instead of the "
    "per-row summary.")
_OFFSETS = flags.DEFINE_bool(
    "offsets", False, "Each report's common offset, its spread, and how "
    "the offsets follow the traced over modelled backward pass and the "
    "gap between steps, instead of the per-row summary.")
_AGAINST = flags.DEFINE_string(
    "against", None, "Compare each report with the one of the same file "
    "name in this directory, instead of the per-row summary.")
_REPEATS_NEEDED = flags.DEFINE_bool(
    "repeats_needed", False, "For draws of k of each directory's repeats, "
    "how often every row's median meets the prediction's target, instead "
    "of the per-row summary.")

# The flags that each print something other than the per-row summary.
_MODES = ("misses", "repeat_correlation", "time_correlation",
          "repeats_needed", "offsets", "against")
# The references scripts/bench.py runs once per repeat beside the rows.
REFERENCES = ("compute alone", "communication alone")
# Fewer repeats than this give no deviation worth correlating.
MIN_REPEATS = 3
# --time_correlation: how many runs apart (a repeat of scripts/bench.py's
# 13 rows and 3 references is 16 runs).
LAGS = (1, 2, 4, 8, 16, 32)
# --repeats_needed: directories with fewer repeats have too few draws.
MIN_SUBSAMPLE_REPEATS = 5
# --repeats_needed: at most this many draws per k (all of them if fewer),
# drawn with a fixed seed so that the figures reproduce.
DRAWS = 2000
# A report's target when it names none (validate_sim's).
TARGET = 0.10


# The repository: a report's results_dir is relative to it.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(path: str) -> Dict[str, Any]:
  with open(path) as f:
    return json.load(f)


def _pct(x: float) -> str:
  return f"{x * 100:+.1f}%"


def row_errors(paths: Sequence[str]) -> Dict[str, List[float]]:
  """{row: its signed errors (fractions)} over the reports at `paths`,
  rows without a prediction left out."""
  errors = {}
  for path in paths:
    report = _load(path)
    for name, row in report["rows"].items():
      if row.get("error") is not None:
        errors.setdefault(name, []).append(row["error"])
  return errors


def format_errors(errors: Dict[str, List[float]]) -> str:
  """One line per row, sorted by name."""
  lines = ["row: reports, under-predicted, error mean / median / min / max"]
  for name, values in sorted(errors.items()):
    lines.append(
        f"{name}: {len(values)}, {sum(v < 0 for v in values)}, "
        f"{_pct(statistics.mean(values))} / "
        f"{_pct(statistics.median(values))} / {_pct(min(values))} / "
        f"{_pct(max(values))}")
  return "\n".join(lines)


def _results_dir(path: str, report: Dict[str, Any]) -> str:
  """The benchmark directory the report at `path` names: absolute, or
  relative to the working directory or else to the repository."""
  results_dir = (report.get("inputs") or {}).get("results_dir")
  if not results_dir:
    raise ValueError(f"{path}: no inputs.results_dir; run "
                     "scripts/validate_sim.py --json to make the report.")
  if not os.path.isdir(results_dir):
    results_dir = os.path.join(_REPO, results_dir)
  return results_dir


def _benchmark_rows(path: str, report: Dict[str, Any]
                    ) -> Tuple[str, Dict[str, Any]]:
  """(the benchmark directory of the report at `path`, its results.json's
  rows)."""
  results_dir = _results_dir(path, report)
  return results_dir, _load(os.path.join(results_dir, "results.json"))[
      "schedulers"]


def _repeats(results_dir: str, schedulers: Dict[str, Any], name: str
             ) -> List[float]:
  """Row `name`'s repeats (seconds) from results.json's `schedulers`.

  Raises:
    ValueError: if it has none or one that is not positive.
  """
  repeats = (schedulers.get(name) or {}).get("step_s")
  if not repeats or min(repeats) <= 0:
    raise ValueError(f"{results_dir}/results.json: row {name!r} has no "
                     f"positive repeats (step_s: {repeats!r}).")
  return list(repeats)


def row_misses(paths: Sequence[str]) -> List[Dict[str, Any]]:
  """The rows outside their report's target, with their repeats.

  Args:
    paths: `validate_sim.py --json` reports; each names its benchmark
      directory (`inputs.results_dir`: absolute, or relative to the
      working directory or else to the repository), whose results.json
      holds each row's repeats (`step_s`).

  Returns:
    One dict per missed row, in report and row order: report (its path),
    row, error, predicted_s, repeats_s, spread (largest repeat over the
    smallest, less 1), nearest_error (the signed error against the
    repeat nearest the prediction) and target (the report's).

  Raises:
    ValueError: if a report names no benchmark directory, or its
      results.json lacks a missed row's repeats or has one that is not
      positive.
    KeyError: if a report or results.json lacks `rows`, `predicted_s` or
      `schedulers` (not made by validate_sim.py and bench.py).
    OSError: if a results.json cannot be read.
  """
  out = []
  for path in paths:
    report = _load(path)
    target = report.get("target", TARGET)
    results_dir, schedulers = _benchmark_rows(path, report)
    for name, row in report["rows"].items():
      error = row.get("error")
      if error is None or abs(error) <= target:
        continue
      repeats = _repeats(results_dir, schedulers, name)
      predicted = row["predicted_s"]
      nearest = min(repeats, key=lambda x: abs(predicted - x))
      out.append({"report": path, "row": name, "error": error,
                  "predicted_s": predicted, "repeats_s": repeats,
                  "spread": max(repeats) / min(repeats) - 1,
                  "nearest_error": (predicted - nearest) / nearest,
                  "target": target})
  return out


def format_misses(misses: Sequence[Dict[str, Any]]) -> str:
  """The misses as text.

  Args:
    misses: `row_misses`'s dicts.

  Returns:
    One line per missed row, then how many have repeats further apart
    than the target and how many are within it of a repeat.
  """
  lines = ["report row: error, repeats ms (spread), error against the "
           "nearest repeat"]
  for m in misses:
    repeats = ", ".join(f"{x * 1e3:.1f}" for x in m["repeats_s"])
    lines.append(
        f"{os.path.basename(m['report'])} {m['row']}: {_pct(m['error'])}, "
        f"{repeats} ({m['spread'] * 100:.0f}%), {_pct(m['nearest_error'])}")
  noisy = sum(m["spread"] > m["target"] for m in misses)
  near = sum(abs(m["nearest_error"]) <= m["target"] for m in misses)
  lines.append(f"{len(misses)} rows miss; {noisy} have repeats further "
               f"apart than the target; {near} are within it of a repeat")
  return "\n".join(lines)


def _correlation(pairs: Sequence[Tuple[float, float]]) -> Optional[float]:
  """Pearson's correlation of the pairs; None if either side is
  constant or there are fewer than 2."""
  if len(pairs) < 2:
    return None
  try:
    return statistics.correlation(*zip(*pairs))
  except statistics.StatisticsError:  # A constant side.
    return None


def _repeat_runs(details: Dict[str, Any]) -> List[Dict[str, Any]]:
  """The runs of a details.json's repeats (no pre-pass), in run order."""
  return [run for run in details.get("runs") or ()
          if str(run.get("tag", "")).startswith("repeat ")
          and run.get("value_s")]


def _repeat_deviations(details: Dict[str, Any], reference: str
                       ) -> List[Tuple[float, float]]:
  """(the reference's log deviation, a row run's log deviation) for every
  row run of a details.json of `MIN_REPEATS` or more repeats, each from
  its own median over the repeats; [] with fewer or without the
  reference in every repeat."""
  by_repeat: Dict[str, Dict[str, float]] = {}
  for run in _repeat_runs(details):
    by_repeat.setdefault(run["tag"], {})[run["name"]] = run["value_s"]
  repeats = list(by_repeat.values())
  if len(repeats) < MIN_REPEATS or any(reference not in r for r in repeats):
    return []

  def deviations(values):
    middle = statistics.median(values)
    return [math.log(v / middle) for v in values]

  ref = deviations([r[reference] for r in repeats])
  pairs = []
  rows = {name for r in repeats for name in r if "@" in name}
  for row in sorted(rows):
    if all(row in r for r in repeats):
      pairs.extend(zip(ref, deviations([r[row] for r in repeats])))
  return pairs


def _benchmark_details(paths: Sequence[str]) -> Dict[str, Dict[str, Any]]:
  """{benchmark directory name: its details.json} of the reports' benchmark
  directories (each once, in name order; those without one left out).

  Raises:
    ValueError: if a report names no benchmark directory.
  """
  out = {}
  for results_dir in sorted({_results_dir(p, _load(p)) for p in paths}):
    path = os.path.join(results_dir, "details.json")
    if os.path.isfile(path):
      out[os.path.basename(os.path.normpath(results_dir))] = _load(path)
  return out


def repeat_correlation(paths: Sequence[str]) -> Dict[str, Any]:
  """How a repeat's row runs follow that repeat's references.

  Args:
    paths: `validate_sim.py --json` reports; their benchmark directories'
      details.json are read (each directory once).

  Returns:
    {reference: {"pooled": correlation or None, "runs": the row runs
    counted, "directories": {directory name: correlation or None}}} for
    each of `REFERENCES`; directories with fewer than `MIN_REPEATS`
    repeats are left out.

  Raises:
    ValueError: if a report names no benchmark directory.
  """
  details_of = _benchmark_details(paths)
  out = {}
  for reference in REFERENCES:
    pooled, per_dir = [], {}
    for name, details in details_of.items():
      pairs = _repeat_deviations(details, reference)
      if pairs:
        per_dir[name] = _correlation(pairs)
        pooled.extend(pairs)
    out[reference] = {"pooled": _correlation(pooled), "runs": len(pooled),
                      "directories": per_dir}
  return out


def _run_deviations(details: Dict[str, Any]) -> List[float]:
  """Each run of the repeats, in run order, as its log deviation from its
  setting's median; [] with fewer than `MIN_REPEATS` repeats."""
  runs = _repeat_runs(details)
  if len({run["tag"] for run in runs}) < MIN_REPEATS:
    return []
  by_name: Dict[str, List[float]] = {}
  for run in runs:
    by_name.setdefault(run["name"], []).append(run["value_s"])
  middle = {name: statistics.median(v) for name, v in by_name.items()}
  return [math.log(run["value_s"] / middle[run["name"]]) for run in runs]


def time_correlation(paths: Sequence[str],
                     lags: Sequence[int] = LAGS) -> Dict[str, Any]:
  """How a run's deviation follows the deviation of the run `lag` before.

  Args:
    paths: `validate_sim.py --json` reports; their benchmark directories'
      details.json are read (each directory once).
    lags: runs apart.

  Returns:
    {"lags": the lags, "runs": the runs counted, "pooled": {lag:
    correlation or None}, "directories": {directory name: {lag:
    correlation or None}}}; directories without a details.json or with
    fewer than `MIN_REPEATS` repeats are left out.

  Raises:
    ValueError: if a report names no benchmark directory.
  """
  pooled: Dict[int, List[Tuple[float, float]]] = {lag: [] for lag in lags}
  per_dir, runs = {}, 0
  for name, details in _benchmark_details(paths).items():
    deviations = _run_deviations(details)
    if not deviations:
      continue
    runs += len(deviations)
    pairs = {lag: list(zip(deviations, deviations[lag:])) for lag in lags}
    per_dir[name] = {lag: _correlation(pairs[lag]) for lag in lags}
    for lag in lags:
      pooled[lag].extend(pairs[lag])
  return {"lags": list(lags), "runs": runs,
          "pooled": {lag: _correlation(pooled[lag]) for lag in lags},
          "directories": per_dir}


def format_time_correlation(correlation: Dict[str, Any]) -> str:
  """`time_correlation`'s result as text."""
  lags = correlation["lags"]
  dirs = len(correlation["directories"])

  def row(by_lag):
    return " ".join(f"{_show(by_lag[lag]):>5}" for lag in lags)

  return "\n".join(
      [f"runs apart: {' '.join(f'{lag:>5}' for lag in lags)}",
       f"pooled:     {row(correlation['pooled'])} over "
       f"{correlation['runs']} runs in {dirs} "
       f"director{'y' if dirs == 1 else 'ies'}"] +
      [f"  {name}: {row(by_lag)}"
       for name, by_lag in sorted(correlation["directories"].items())])


def _draws(n: int, k: int, draws: int, rng: random.Random
           ) -> List[Tuple[int, ...]]:
  """Every k-subset of range(n) if there are at most `draws`, else
  `draws` random ones."""
  if math.comb(n, k) <= draws:
    return list(itertools.combinations(range(n), k))
  return [tuple(rng.sample(range(n), k)) for _ in range(draws)]


def repeats_needed(paths: Sequence[str], draws: int = DRAWS,
                   seed: int = 0) -> Dict[str, Any]:
  """How often draws of k repeats put every row within the target.

  Args:
    paths: `validate_sim.py --json` reports; each names its benchmark
      directory, whose results.json holds each row's repeats (`step_s`,
      in repeat order).
    draws: at most this many draws per k (all subsets if fewer).
    seed: of the random draws (with the report's file name and k, so
      that a report's figures do not depend on the others given).

  Returns:
    {report path: {"repeats": N (every predicted row's), "target": the
    report's, "reference": "median" or "fastest" (what a draw's runs
    are judged by, as the report's rows were), "by_k": {k: {"draws": how
    many, "met": the share of draws with every row within the target,
    "median_max": the median over the draws of the largest absolute
    error}}}}; "by_k" is empty for a report with fewer than
    `MIN_SUBSAMPLE_REPEATS` repeats or no prediction.

  Raises:
    ValueError: if a report names no benchmark directory, a predicted
      row has no positive repeats, or the predicted rows ran different
      numbers of repeats (then repeat i of one row need not have run
      beside repeat i of another).
  """
  out = {}
  for path in paths:
    report = _load(path)
    results_dir, schedulers = _benchmark_rows(path, report)
    predicted = {name: row["predicted_s"]
                 for name, row in report["rows"].items()
                 if row.get("error") is not None}
    runs = {name: _repeats(results_dir, schedulers, name)
            for name in predicted}
    counts = {len(r) for r in runs.values()}
    if len(counts) > 1:
      raise ValueError(
          f"{results_dir}/results.json: the predicted rows ran "
          f"{sorted(counts)} repeats; drawing whole repeats needs the same "
          "number in every row.")
    n = counts.pop() if counts else 0
    target = report.get("target", TARGET)
    reference = ((report.get("inputs") or {}).get("settings") or {}).get(
        "reference", "median")
    measure = min if reference == "fastest" else statistics.median
    by_k = {}
    if n >= MIN_SUBSAMPLE_REPEATS:
      by_k = {k: _drawn_errors(
                  predicted, runs, _draws(n, k, draws, random.Random(
                      f"{seed}/{os.path.basename(path)}/{k}")),
                  measure, target)
              for k in range(1, n + 1)}
    out[path] = {"repeats": n, "target": target, "reference": reference,
                 "by_k": by_k}
  return out


def _drawn_errors(predicted: Dict[str, float],
                  runs: Dict[str, List[float]],
                  draws: Sequence[Sequence[int]], measure, target: float
                  ) -> Dict[str, Any]:
  """`repeats_needed`'s figures for one k: each draw's rows measured by
  `measure` over the draw's repeats, against their predictions."""
  worst = []
  for draw in draws:
    measured = {name: measure([runs[name][i] for i in draw])
                for name in predicted}
    # validate_sim's error, the same expression.
    worst.append(max(abs((predicted[name] - m) / m)
                     for name, m in measured.items()))
  return {"draws": len(worst),
          "met": sum(w <= target for w in worst) / len(worst),
          "median_max": statistics.median(worst)}


def format_repeats_needed(needed: Dict[str, Any]) -> str:
  """`repeats_needed`'s result as text: per report, one line per k, and
  how many reports were left out."""
  lines = ["  k: draws with every row within the target, median of the "
           "draws' largest |error|, draws"]
  left_out = 0
  for path, r in needed.items():
    if not r["by_k"]:
      left_out += 1
      continue
    lines.append(f"{os.path.basename(path)}: {r['repeats']} repeats, target "
                 f"{r['target'] * 100:.0f}% of each row's {r['reference']}")
    lines.extend(f"  {k:>2}: {d['met'] * 100:5.1f}%  "
                 f"{d['median_max'] * 100:5.1f}%  {d['draws']}"
                 for k, d in r["by_k"].items())
  if left_out:
    lines.append(f"{left_out} report{'' if left_out == 1 else 's'} left out"
                 f" (fewer than {MIN_SUBSAMPLE_REPEATS} repeats)")
  return "\n".join(lines)


def offsets(paths: Sequence[str]) -> Dict[str, Any]:
  """Each report's common offset, and how the offsets follow the compute.

  Args:
    paths: `scripts/validate_sim.py --json` reports.

  Returns:
    {"reports": {path: {"rows": how many predicted, "offset": their mean
    log(1 + error), "spread": the standard deviation around it (None
    with one row), "traced_over_modelled": the median over the rows with
    a trace of `first_step`'s traced over modelled backward_end_s (None
    without one), "step_gap_excess_s": the median over the rows with
    both of `first_step`'s modelled less traced step_gap_s (None
    without one), "startup_growth_s": the K >= 2 rows' median fitted
    block start-up (`calibration.block_startup_s`) less the K = 1 rows'
    (None without both), "input_taken_s": the median over the rows of
    the traced time a block took to take its batches
    (`inputs.input_taken_s`; None where untraced)}}, "pairs": the
    reports with both, "correlation": of
    the offset with log(traced_over_modelled), "slope": the offset's
    least-squares slope on it, "gap_reports": the reports with a
    step_gap_excess_s, "gap_correlation": of the offset with it}; None
    where there is too little to compute one.
  """
  reports, pairs, gaps = {}, [], []
  for path in paths:
    report = _load(path)
    rows = [r for r in report["rows"].values() if r.get("error") is not None]
    if not rows:
      continue
    taken = list(((report.get("inputs") or {}).get("input_taken_s")
                  or {}).values())
    logs = [math.log1p(r["error"]) for r in rows]
    ratio = trace_calibration.traced_over_modelled(rows)
    excess = [modelled - traced for traced, modelled in
              trace_calibration.first_step_pairs(rows, "step_gap_s")]
    offset = statistics.mean(logs)
    reports[path] = {
        "rows": len(rows), "offset": offset,
        "spread": statistics.stdev(logs) if len(logs) > 1 else None,
        "traced_over_modelled": ratio,
        "step_gap_excess_s": statistics.median(excess) if excess else None,
        "startup_growth_s": _startup_growth(report),
        "input_taken_s": statistics.median(taken) if taken else None}
    if ratio is not None:
      pairs.append((math.log(ratio), offset))
    if excess:
      gaps.append((statistics.median(excess), offset))
  slope = None
  if _correlation(pairs) is not None:
    slope = statistics.linear_regression(*zip(*pairs)).slope
  return {"reports": reports, "pairs": len(pairs),
          "correlation": _correlation(pairs), "slope": slope,
          "gap_reports": len(gaps), "gap_correlation": _correlation(gaps)}


def format_offsets(found: Dict[str, Any]) -> str:
  """`offsets`'s result as text: one line per report, then the fit."""
  lines = ["report: rows, offset (mean log error), spread, traced over "
           "modelled backward end, modelled less traced gap between steps, "
           "fitted start-up of K >= 2 less K = 1's, batches taken at a "
           "block's start (traced)"]
  ms = lambda s, sign="": "-" if s is None else f"{s * 1e3:{sign}.1f} ms"
  for path, r in found["reports"].items():
    spread = "-" if r["spread"] is None else f"{r['spread'] * 100:.1f}%"
    ratio = ("-" if r["traced_over_modelled"] is None else
             f"{r['traced_over_modelled']:.3f}")
    lines.append(f"{os.path.basename(path)}: {r['rows']}, "
                 f"{_pct(r['offset'])}, {spread}, {ratio}, "
                 f"{ms(r['step_gap_excess_s'], '+')}, "
                 f"{ms(r['startup_growth_s'], '+')}, "
                 f"{ms(r['input_taken_s'])}")
  slope = "-" if found["slope"] is None else f"{found['slope']:+.2f}"
  lines.append(f"offset against log(traced over modelled): correlation "
               f"{_show(found['correlation'])}, slope {slope} over "
               f"{found['pairs']} reports")
  lines.append(f"offset against the modelled less traced gap between "
               f"steps: correlation {_show(found['gap_correlation'])} over "
               f"{found['gap_reports']} reports")
  return "\n".join(lines)


def _verdict(report: Dict[str, Any]) -> Tuple[float, int, int]:
  """(largest |error|, rows within the target, rows)."""
  target = report.get("target", TARGET)
  errors = [abs(r["error"]) for r in report["rows"].values()
            if r.get("error") is not None]
  return (max(errors, default=0.0),
          sum(1 for e in errors if e <= target), len(errors))


def _unrolled_less_k1(report: Dict[str, Any], value, average
                      ) -> Optional[float]:
  """`average` of `value(row)` over a report's rows of K >= 2 less that
  over its K = 1 rows, rows whose value is None left out (None without
  both kinds)."""
  by_k = {True: [], False: []}
  for name, r in report["rows"].items():
    if value(r) is not None:
      by_k[split_name(name)[1] > 1].append(value(r))
  if not (by_k[True] and by_k[False]):
    return None
  return average(by_k[True]) - average(by_k[False])


def _unroll_offset(report: Dict[str, Any]) -> Optional[float]:
  """The mean error of a report's rows of K >= 2 less its K = 1 rows'
  (None without both)."""
  return _unrolled_less_k1(report, lambda r: r.get("error"),
                           statistics.mean)


def _startup_growth(report: Dict[str, Any]) -> Optional[float]:
  """The median fitted block start-up of a report's rows of K >= 2 less
  that of its K = 1 rows (None without both)."""
  return _unrolled_less_k1(
      report, lambda r: (r.get("calibration") or {}).get("block_startup_s"),
      statistics.median)


def _input_work(report: Dict[str, Any]) -> Optional[float]:
  """The median over a report's rows of their fitted input work per step
  (`calibration.input_work_s`, scripts/validate_sim.py --input_work), None
  where no row has one."""
  work = [r["calibration"]["input_work_s"] for r in report["rows"].values()
          if (r.get("calibration") or {}).get("input_work_s") is not None]
  return statistics.median(work) if work else None


def _spread(values: Sequence[Optional[float]]) -> Optional[Dict[str, Any]]:
  """{"median", "below", "above", "of"} over the values that are not None
  (below, above: under 0, over 0), or None where none is."""
  known = [v for v in values if v is not None]
  if not known:
    return None
  return {"median": statistics.median(known),
          "below": sum(1 for v in known if v < 0),
          "above": sum(1 for v in known if v > 0), "of": len(known)}


def against(paths: Sequence[str], other_dir: str) -> Dict[str, Any]:
  """Each report against the one of the same file name in `other_dir`.

  Args:
    paths: `scripts/validate_sim.py --json` reports.
    other_dir: a directory of such reports, of the same directories.

  Returns:
    {"reports": {file name: {"max": (this, other) largest |error|,
    "within": (this, other) rows within the target, "rows": rows}},
    "missing": file names not in `other_dir`, "meets": (this, other)
    reports whose every row is within the target, "within": (this, other)
    rows within it in all, "rows": rows in all, "lower", "higher": reports
    whose largest error is lower, higher in `other_dir`, "unroll_offset":
    (this, other) `_spread` of each report's K >= 2 rows' mean error less
    its K = 1 rows', "input_work": (this, other) `_spread` of each report's
    median fitted input work per step}.
  """
  reports, missing, loaded = {}, [], []
  for path in paths:
    name = os.path.basename(path)
    other_path = os.path.join(other_dir, name)
    if not os.path.isfile(other_path):
      missing.append(name)
      continue
    loaded.append((_load(path), _load(other_path)))
    mine, theirs = (_verdict(r) for r in loaded[-1])
    reports[name] = {"max": (mine[0], theirs[0]),
                     "within": (mine[1], theirs[1]), "rows": mine[2],
                     "meets": (mine[1] == mine[2], theirs[1] == theirs[2])}
  def total(key, i):
    return sum(r[key][i] for r in reports.values())
  return {"reports": reports, "missing": missing,
          "meets": (total("meets", 0), total("meets", 1)),
          "within": (total("within", 0), total("within", 1)),
          "rows": sum(r["rows"] for r in reports.values()),
          "lower": sum(1 for r in reports.values()
                       if r["max"][1] < r["max"][0]),
          "higher": sum(1 for r in reports.values()
                        if r["max"][1] > r["max"][0]),
          **{key: tuple(_spread([of(pair[i]) for pair in loaded])
                        for i in (0, 1))
             for key, of in (("unroll_offset", _unroll_offset),
                             ("input_work", _input_work))}}


def format_against(found: Dict[str, Any], other_dir: str) -> str:
  """`against`'s result as text."""
  lines = [f"report: largest error and rows within the target, here -> in "
           f"{other_dir}"]
  for name, r in found["reports"].items():
    lines.append(f"{name}: {r['max'][0] * 100:.1f}% ({r['within'][0]} of "
                 f"{r['rows']}) -> {r['max'][1] * 100:.1f}% "
                 f"({r['within'][1]} of {r['rows']})")
  if found["missing"]:
    lines.append(f"not in {other_dir}: {', '.join(found['missing'])}")
  n = len(found["reports"])
  for where, i in (("here", 0), (f"in {other_dir}", 1)):
    k, work = found["unroll_offset"][i], found["input_work"][i]
    if k:
      lines.append(
          f"{where}: the K >= 2 rows' mean error less the K = 1 rows': "
          f"median {k['median'] * 100:+.1f} points, below in {k['below']} "
          f"of {k['of']} reports")
    if work:
      lines.append(
          f"{where}: input work per step (the median over a report's "
          f"rows): above 0 in {work['above']} of {work['of']} reports, "
          f"median {work['median'] * 1e3:.1f} ms")
  lines.append(
      f"every row within the target: {found['meets'][0]} -> "
      f"{found['meets'][1]} of {n} reports; rows within it: "
      f"{found['within'][0]} -> {found['within'][1]} of {found['rows']}; "
      f"largest error lower in {found['lower']}, higher in "
      f"{found['higher']}")
  return "\n".join(lines)


def _show(r: Optional[float]) -> str:
  return "-" if r is None else f"{r:+.2f}"


def format_correlation(correlation: Dict[str, Any]) -> str:
  """`repeat_correlation`'s result as text."""
  lines = []
  for reference, c in correlation.items():
    dirs = len(c["directories"])
    lines.append(f"{reference}: pooled {_show(c['pooled'])} over "
                 f"{c['runs']} row runs in {dirs} "
                 f"director{'y' if dirs == 1 else 'ies'}")
    lines.extend(f"  {name}: {_show(r)}"
                 for name, r in sorted(c["directories"].items()))
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
  elif _REPEAT_CORRELATION.value:
    print(format_correlation(repeat_correlation(paths)))
  elif _TIME_CORRELATION.value:
    print(format_time_correlation(time_correlation(paths)))
  elif _REPEATS_NEEDED.value:
    print(format_repeats_needed(repeats_needed(paths)))
  elif _OFFSETS.value:
    print(format_offsets(offsets(paths)))
  elif _AGAINST.value:
    print(format_against(against(paths, _AGAINST.value), _AGAINST.value))
  else:
    print(format_errors(row_errors(paths)))
  return 0


if __name__ == "__main__":
  flags.register_multi_flags_validator(
      list(_MODES), lambda given: sum(bool(v) for v in given.values()) <= 1,
      message=", ".join(f"--{m}" for m in _MODES[:-1]) +
      f" and --{_MODES[-1]} are mutually exclusive")
  app.run(main)
