"""Exports compute and collective spans to Chrome trace / Perfetto JSON.

Open the file in https://ui.perfetto.dev or chrome://tracing. Each worker is
a process (`pid`); in it, thread lane 0 holds the compute spans and the other
lanes the collectives, either one lane per in-flight slot (the default: a
collective takes the lowest free slot, so the number of lanes shows how many
collectives overlapped) or one lane per collective id.

Inputs are plain records, so this module needs neither TensorFlow nor the op
library:

- collective records: `tf_preempt.ops.CollectiveRecord`s, or mappings with
  the same keys (`iteration`, `collective_id`, `nbytes`, `ready_ns`,
  `released_ns`, `done_ns`); a collective spans released_ns..done_ns, the
  time it waited at the gate is in its args. Records still in flight
  (done_ns None or < 0) are skipped.
- compute spans (optional): mappings or objects with `name`, `start` and
  `end` in nanoseconds of the same clock (`time.monotonic_ns()`), and
  optional `args`.

Times are written in microseconds relative to the earliest span of all
workers, so workers on one machine line up.
"""

import json
import os
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

COMPUTE_TID = 0
LANES = ("slot", "collective")

_COLLECTIVE_KEYS = ("iteration", "collective_id", "nbytes", "ready_ns",
                    "released_ns", "done_ns")


def _field(record: Any, key: str, default: Any = None) -> Any:
  if isinstance(record, Mapping):
    return record.get(key, default)
  return getattr(record, key, default)


def _collectives(records: Iterable[Any]) -> List[Dict[str, int]]:
  """Completed collectives as dicts, ordered by release time."""
  out = []
  for record in records:
    values = {key: _field(record, key) for key in _COLLECTIVE_KEYS}
    missing = [k for k in _COLLECTIVE_KEYS if k != "done_ns" and
               values[k] is None]
    if missing:
      raise ValueError(f"collective record {record!r} lacks {missing}")
    if values["done_ns"] is None or values["done_ns"] < 0:
      continue
    out.append({k: int(v) for k, v in values.items()})
  out.sort(key=lambda r: (r["released_ns"], r["done_ns"]))
  return out


def _computes(spans: Iterable[Any]) -> List[Dict[str, Any]]:
  out = []
  for span in spans:
    name, start, end = (_field(span, "name"), _field(span, "start"),
                        _field(span, "end"))
    if name is None or start is None or end is None:
      raise ValueError(f"compute span {span!r} needs name, start and end")
    if end < start:
      raise ValueError(f"compute span {span!r} ends before it starts")
    out.append({"name": str(name), "start": int(start), "end": int(end),
                "args": dict(_field(span, "args", None) or {})})
  return out


def _assign_slots(collectives: Sequence[Dict[str, int]]) -> List[int]:
  """Lowest free slot for each collective (ordered by release time)."""
  slot_end = []  # Per slot, when its last collective ends.
  slots = []
  for c in collectives:
    for slot, end in enumerate(slot_end):
      if end <= c["released_ns"]:
        slot_end[slot] = c["done_ns"]
        break
    else:
      slot = len(slot_end)
      slot_end.append(c["done_ns"])
    slots.append(slot)
  return slots


def _meta(name: str, pid: int, tid: Optional[int],
          args: Dict[str, Any]) -> Dict[str, Any]:
  """A metadata ("M") event: process/thread names and sort order."""
  event = {"name": name, "ph": "M", "pid": pid, "args": args}
  if tid is not None:
    event["tid"] = tid
  return event


def to_chrome_trace(collectives: Mapping[Any, Iterable[Any]],
                    compute: Optional[Mapping[Any, Iterable[Any]]] = None,
                    lanes: str = "slot",
                    metadata: Optional[Mapping[str, Any]] = None,
                    ) -> Dict[str, Any]:
  """Builds the trace as a JSON-serialisable dict.

  Args:
    collectives: worker -> collective records. Workers are ints (used as
      pids) or names (pids 0, 1, ... in sorted order).
    compute: optional worker -> compute spans.
    lanes: "slot" (one lane per in-flight slot) or "collective" (one lane
      per collective id).
    metadata: optional values stored under the trace's "metadata" key.

  Returns:
    {"traceEvents": [...], "displayTimeUnit": "ms", ...}.

  Raises:
    ValueError: on an unknown `lanes` or a malformed record.
  """
  if lanes not in LANES:
    raise ValueError(f"Unknown lanes {lanes!r}; valid values: {LANES}")
  compute = compute or {}
  workers = sorted(set(collectives) | set(compute), key=str)
  if all(isinstance(w, int) for w in workers):
    pids = {w: w for w in workers}
  else:
    pids = {w: i for i, w in enumerate(workers)}

  per_worker = {w: (_collectives(collectives.get(w, ())),
                    _computes(compute.get(w, ()))) for w in workers}
  starts = [c["released_ns"] for cs, _ in per_worker.values() for c in cs]
  starts += [s["start"] for _, ss in per_worker.values() for s in ss]
  origin = min(starts) if starts else 0

  def us(ns):
    return (ns - origin) / 1e3

  events = []
  for worker in workers:
    pid = pids[worker]
    colls, spans = per_worker[worker]
    events.append(_meta("process_name", pid, None,
                        {"name": f"worker {worker}"}))
    events.append(_meta("process_sort_index", pid, None, {"sort_index": pid}))
    events.append(_meta("thread_name", pid, COMPUTE_TID, {"name": "compute"}))
    events.append(_meta("thread_sort_index", pid, COMPUTE_TID,
                        {"sort_index": COMPUTE_TID}))
    for span in spans:
      events.append({"name": span["name"], "cat": "compute", "ph": "X",
                     "pid": pid, "tid": COMPUTE_TID, "ts": us(span["start"]),
                     "dur": (span["end"] - span["start"]) / 1e3,
                     "args": span["args"]})
    if lanes == "slot":
      tids = [1 + s for s in _assign_slots(colls)]
      names = {t: f"in-flight slot {t - 1}" for t in tids}
    else:
      ids = sorted({c["collective_id"] for c in colls})
      lane = {cid: 1 + i for i, cid in enumerate(ids)}
      tids = [lane[c["collective_id"]] for c in colls]
      names = {lane[cid]: f"collective {cid}" for cid in ids}
    for tid in sorted(names):
      events.append(_meta("thread_name", pid, tid, {"name": names[tid]}))
      events.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
    for c, tid in zip(colls, tids):
      events.append({
          "name": f"collective {c['collective_id']}", "cat": "collective",
          "ph": "X", "pid": pid, "tid": tid, "ts": us(c["released_ns"]),
          "dur": (c["done_ns"] - c["released_ns"]) / 1e3,
          "args": {"iteration": c["iteration"],
                   "collective_id": c["collective_id"],
                   "bytes": c["nbytes"],
                   "wait_us": (c["released_ns"] - c["ready_ns"]) / 1e3,
                   "ready_ns": c["ready_ns"]}})
  trace = {"traceEvents": events, "displayTimeUnit": "ms",
           "otherData": {"origin_ns": origin}}
  if metadata:
    trace["metadata"] = dict(metadata)
  return trace


def write_chrome_trace(path: str,
                       collectives: Mapping[Any, Iterable[Any]],
                       compute: Optional[Mapping[Any, Iterable[Any]]] = None,
                       lanes: str = "slot",
                       metadata: Optional[Mapping[str, Any]] = None) -> str:
  """Writes `to_chrome_trace(...)` to `path` atomically; returns `path`.

  The JSON goes to a temporary file in the same folder that is then renamed
  over `path`, so a reader never sees a half-written trace.
  """
  trace = to_chrome_trace(collectives, compute, lanes, metadata)
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=".trace_", suffix=".json", dir=folder)
  try:
    with os.fdopen(fd, "w") as f:
      json.dump(trace, f)
    os.chmod(tmp, 0o644)  # mkstemp creates it private.
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise
  return path
