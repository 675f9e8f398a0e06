r"""Which worker reaches each collective last, and what that costs.

  python scripts/trace_arrivals.py benchmarks/results/DIR tf_default@1 [ROW ...]

Reads the row's traces (traces/NAME_kK.worker-I.json, one per worker) and
prints, per task that arrived last, in how many collectives it did and the
median time from its start to the collective's end, over the collectives of
one size (the first, by id, unless --collective_id); then, per task, in how
many blocks it started late and its median tail after its last collective.
The figures of benchmarks/simulation/README.md on (b') and (n3)'s
tf_default@1 come from here.
"""

import glob
import os
import statistics
import sys

from absl import app
from absl import flags

from tf_preempt.bench import results
from tf_preempt.bench import timeline

_ID = flags.DEFINE_integer("collective_id", 0, "The collective to report.")
_SKIP = flags.DEFINE_integer("skip_iterations", 8,
                             "Iterations left out (tracing, warm-up).")


def report(results_dir: str, row: str) -> str:
  """The summary lines of `row` in `results_dir`."""
  stem = timeline.trace_file(row)[:-len(".json")]
  paths = sorted(glob.glob(os.path.join(results_dir, "traces",
                                        f"{stem}.worker-*.json")))
  if len(paths) < 2:
    raise ValueError(f"{row}: fewer than two worker traces in "
                     f"{results_dir}/traces")
  traces = [timeline.load_trace(p) for p in paths]
  arrivals = [a for a in timeline.collective_arrivals(traces)
              if a["collective_id"] == _ID.value and
              a["iteration"] >= _SKIP.value]
  lines = [f"{row}: collective {_ID.value}, {len(arrivals)} iterations"]
  for task in sorted({a["last_task"] for a in arrivals}):
    mine = [a for a in arrivals if a["last_task"] == task]
    lines.append(
        f"  task {task} last in {len(mine)}: from its start to the end "
        f"median {statistics.median(a['from_last_s'] for a in mine) * 1e3:.1f}"
        f" ms, skew median "
        f"{statistics.median(a['skew_s'] for a in mine) * 1e3:.1f} ms")
  # The same warm-up as the iterations'.
  blocks = timeline.block_skews(traces, first_step=_SKIP.value,
                                unroll=results.split_name(row)[1])
  if not blocks:
    lines.append("  no timed blocks in the traces")
    return "\n".join(lines)
  lines.append(f"  {len(blocks)} blocks:")
  late = timeline.late_start_counts(blocks)
  for task in range(len(traces)):
    skews = [b["start_skew_s"][task] for b in blocks]
    tails = [b["tail_s"][task] for b in blocks
             if b["tail_s"][task] is not None]
    tail = (f"{statistics.median(tails) * 1e3:.1f} ms" if tails
            else "none (no collective)")
    lines.append(
        f"    task {task} started > {timeline.LATE_START_S * 1e3:g} ms "
        f"after the first in {late[task]}, median "
        f"{statistics.median(skews) * 1e3:.2f} ms after it; tail after its "
        f"last collective median {tail}")
  return "\n".join(lines)


def main(argv):
  if len(argv) < 3:
    raise app.UsageError("usage: trace_arrivals.py RESULTS_DIR ROW [ROW ...]")
  try:
    print("\n".join(report(argv[1], row) for row in argv[2:]))
  except ValueError as e:
    print(f"trace_arrivals: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  app.run(main)
