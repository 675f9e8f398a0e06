"""Gantt chart of one steady-state block per scheduler, from Chrome traces.

Reads the traces `scripts/train.py --timeline` writes (see
`tf_preempt.telemetry.chrome_trace`): on lane 0 the step blocks (one Keras
train-function call of K steps, wall time), on the other lanes the
collectives the scheduler op released, with when each gradient was ready.
The traces do not split a block into forward and backward ops (the runner
records block boundaries only), so the compute lane is the whole block; the
ready times of the gradients show where the backward pass produced them.
"""

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

# A block near the end but not the last: the last one can include the
# end of fit (callbacks, the final metric all-reduce).
_FROM_END = 2


# A block that starts this much after the earliest worker's started late.
LATE_START_S = 1e-3


def load_trace(path: str) -> Dict[str, Any]:
  with open(path) as f:
    return json.load(f)


def steady_block(trace: Mapping[str, Any]
                 ) -> Optional[Tuple[Dict[str, Any], List[Dict[str, Any]]]]:
  """(block event, collective events overlapping it) of one worker's trace.

  Times stay in the trace's microseconds. None if the trace has no blocks.
  """
  events = [e for e in trace.get("traceEvents", ()) if e.get("ph") == "X"]
  blocks = sorted((e for e in events if e.get("cat") == "compute"),
                  key=lambda e: e["ts"])
  if not blocks:
    return None
  block = blocks[max(0, len(blocks) - _FROM_END)]
  start, end = block["ts"], block["ts"] + block["dur"]
  colls = [e for e in events if e.get("cat") == "collective" and
           e["ts"] < end and e["ts"] + e["dur"] > start]
  return block, sorted(colls, key=lambda e: (e["args"]["collective_id"],
                                             e["ts"]))


def plot(traces: Mapping[str, Mapping[str, Any]], path: str,
         title: str = "") -> str:
  """Draws one Gantt panel per row name of `traces`; writes a PNG to `path`.

  Args:
    traces: "NAME@K" -> worker 0's Chrome trace.
    path: the PNG file.
    title: the figure's title.

  Returns:
    `path`.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  panels = []
  for name, trace in traces.items():
    found = steady_block(trace)
    if found is not None:
      panels.append((name, *found))
  if not panels:
    raise ValueError("no trace has a step block to draw")
  lanes = [1 + len({c["args"]["collective_id"] for c in colls})
           for _, _, colls in panels]
  width = max(b["dur"] for _, b, _ in panels) / 1e3
  fig, axes = plt.subplots(
      len(panels), 1, sharex=True, squeeze=False,
      figsize=(11, 1.2 + 0.12 * sum(lanes) + 0.5 * len(panels)),
      gridspec_kw={"height_ratios": [max(2, n) for n in lanes]})
  for ax, (name, block, colls) in zip(axes[:, 0], panels):
    t0 = block["ts"]
    ids = sorted({c["args"]["collective_id"] for c in colls})
    lane_of = {cid: i + 1 for i, cid in enumerate(ids)}
    ax.barh(0, block["dur"] / 1e3, left=0, height=0.8, color="tab:blue")
    ax.text(0.5, 0, f"{block['name']}: fwd+bwd+update, "
            f"{block['dur'] / 1e3:.0f} ms", va="center", fontsize=7,
            color="white")
    for c in colls:
      lane = lane_of[c["args"]["collective_id"]]
      ready = (c["args"]["ready_ns"] / 1e3 - trace_origin_us(traces[name])
               - t0)
      start = c["ts"] - t0
      if start > ready:  # Ready but held back by the schedule.
        ax.barh(lane, (start - ready) / 1e3, left=ready / 1e3, height=0.4,
                color="lightgray")
      ax.barh(lane, c["dur"] / 1e3, left=start / 1e3, height=0.8,
              color="tab:orange", edgecolor="black", linewidth=0.3)
    labels = ["compute"] + [
        f"c{cid} {_size(colls, cid)}" for cid in ids]
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=9)
    ax.axvline(block["dur"] / 1e3, color="tab:blue", linestyle=":",
               linewidth=0.8)
    ax.set_xlim(-0.05 * width, 1.3 * width)
  axes[-1, 0].set_xlabel("ms from the start of the block (worker 0); "
                         "orange: collective running, gray: ready, waiting "
                         "for its turn")
  if title:
    fig.suptitle(title, fontsize=10)
  # Leave the top strip to the title: tight_layout ignores suptitle.
  top_inches = 0.45
  fig.tight_layout(rect=(0, 0, 1, 1 - top_inches / fig.get_figheight()))
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def trace_origin_us(trace: Mapping[str, Any]) -> float:
  """The trace's time origin (its first span) in microseconds."""
  return trace.get("otherData", {}).get("origin_ns", 0) / 1e3


def collective_arrivals(traces: Sequence[Mapping[str, Any]]
                        ) -> List[Dict[str, Any]]:
  """Who reached each collective last, and how long it took from there.

  Args:
    traces: one Chrome trace per worker, in task order, of the same run
      (the workers share the machine's clock: each trace's origin places
      it).

  Returns:
    Per collective every trace has, in (iteration, collective id) order:
    {"iteration", "collective_id", "last_task": the task that started it
    last, "skew_s": by how much, "from_last_s": the latest start to the
    latest end, i.e. the collective's time once every worker is in it}.
  """
  spans = []
  for trace in traces:
    origin = trace_origin_us(trace)
    spans.append({
        (e["args"]["iteration"], e["args"]["collective_id"]):
            (origin + e["ts"], origin + e["ts"] + e["dur"])
        for e in trace.get("traceEvents", ())
        if e.get("cat") == "collective" and e.get("ph") == "X"})
  out = []
  for key in sorted(set.intersection(*(set(s) for s in spans))):
    figures = arrival([s[key][0] / 1e6 for s in spans],
                      [s[key][1] / 1e6 for s in spans])
    out.append({"iteration": key[0], "collective_id": key[1], **figures})
  return out


def arrival(starts_s: Sequence[float], ends_s: Sequence[float]
            ) -> Dict[str, Any]:
  """Who reached one collective last, by how much, and what it cost then.

  Args:
    starts_s: each task's start of the collective, seconds on one clock.
    ends_s: each task's end of it.

  Returns:
    {"last_task", "skew_s": the last start less the first, "from_last_s":
    the last end less the last start}.
  """
  last = max(range(len(starts_s)), key=lambda t: starts_s[t])
  return {"last_task": last,
          "skew_s": starts_s[last] - min(starts_s),
          "from_last_s": max(ends_s) - starts_s[last]}


def block_skews(traces: Sequence[Mapping[str, Any]], first_step: int = 0,
                unroll: int = 1) -> List[Dict[str, Any]]:
  """When each worker starts a block, and its tail after the collectives.

  Args:
    traces: one Chrome trace per worker, in task order, of the same run
      (as for `collective_arrivals`).
    first_step: leave out the blocks that start before this step (the
      warm-up).
    unroll: K, the steps per block: a block's first step is its "batch"
      (its last step) less K - 1.

  Returns:
    Per block every trace has from `first_step` on, in order: {"batch":
    the span's "batch"
    (Keras's index of the block's last step), "start_skew_s": per task,
    its start less the earliest start, "tail_s": per task, the block's
    end less the end of its last collective that ended inside it (None
    without one)}.
  """
  per_task = []
  for trace in traces:
    origin = trace_origin_us(trace)
    events = [e for e in trace.get("traceEvents", ()) if e.get("ph") == "X"]
    blocks = {e["args"]["batch"]: (origin + e["ts"],
                                   origin + e["ts"] + e["dur"])
              for e in events if e.get("cat") == "compute"}
    ends = sorted(origin + e["ts"] + e["dur"] for e in events
                  if e.get("cat") == "collective")
    per_task.append((blocks, ends))
  out = []
  for batch in sorted(set.intersection(*(set(b) for b, _ in per_task))):
    if batch - (unroll - 1) < first_step:
      continue
    starts = [b[batch][0] for b, _ in per_task]
    tails = []
    for blocks, ends in per_task:
      start, end = blocks[batch]
      inside = [e for e in ends if start <= e <= end]
      tails.append((end - inside[-1]) / 1e6 if inside else None)
    out.append({"batch": batch,
                "start_skew_s": [(s - min(starts)) / 1e6 for s in starts],
                "tail_s": tails})
  return out


def late_start_counts(blocks: Sequence[Mapping[str, Any]]) -> List[int]:
  """Per task, the blocks (of `block_skews`) it started late.

  Late: more than LATE_START_S after the earliest worker.
  """
  tasks = len(blocks[0]["start_skew_s"]) if blocks else 0
  return [sum(b["start_skew_s"][task] > LATE_START_S for b in blocks)
          for task in range(tasks)]


def _size(colls, cid) -> str:
  nbytes = next(c["args"]["bytes"] for c in colls
                if c["args"]["collective_id"] == cid)
  if nbytes >= 1 << 20:
    return f"{nbytes / (1 << 20):.1f}MiB"
  if nbytes >= 1 << 10:
    return f"{nbytes / (1 << 10):.0f}KiB"
  return f"{nbytes}B"


def trace_file(name: str) -> str:
  """The --timeline file of row "NAME@K" (train.py adds .worker-I)."""
  return name.replace("@", "_k").replace(" ", "_") + ".json"


def plot_directory(out_dir: str, names, title: str = "") -> str:
  """Draws DIR/timeline.png from DIR/traces/ (worker 0) for rows `names`.

  Also redraws a committed result: `plot_directory(dir, results["schedulers"])`.
  """
  import os  # pylint: disable=g-import-not-at-top
  traces = {}
  for name in names:
    stem, ext = os.path.splitext(trace_file(name))
    path = os.path.join(out_dir, "traces", f"{stem}.worker-0{ext}")
    if os.path.exists(path):
      traces[name] = load_trace(path)
  return plot(traces, os.path.join(out_dir, "timeline.png"), title)
