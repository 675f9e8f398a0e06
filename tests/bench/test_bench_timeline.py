"""Tests of the benchmark's Gantt chart (tf_preempt.bench.timeline)."""

import pytest

from tf_preempt.bench import timeline
from tf_preempt.telemetry import chrome_trace

_MS = 1_000_000


def _trace():
  # Three 100 ms blocks; per block two collectives, ready at +20 and +30 ms.
  blocks, colls = [], []
  for i in range(3):
    t = i * 100 * _MS
    blocks.append({"name": f"block {i} (1 step)", "start": t,
                   "end": t + 100 * _MS})
    for cid, ready in ((0, 20), (1, 30)):
      colls.append({"iteration": i, "collective_id": cid, "nbytes": 4096,
                    "ready_ns": t + ready * _MS,
                    "released_ns": t + (ready + 5 * cid) * _MS,
                    "done_ns": t + (ready + 40) * _MS})
  return chrome_trace.to_chrome_trace({"w0 cpu": colls}, {"w0 steps": blocks},
                                      lanes="collective")


def test_steady_block_is_the_next_to_last_with_its_collectives():
  block, colls = timeline.steady_block(_trace())
  assert block["name"] == "block 1 (1 step)"
  assert [c["args"]["iteration"] for c in colls] == [1, 1]


def test_plot_directory_writes_a_png(tmp_path):
  import json  # pylint: disable=g-import-not-at-top
  (tmp_path / "traces").mkdir()
  for name in ("tf_default@1", "pace@2"):
    stem = timeline.trace_file(name)[:-len(".json")]
    with open(tmp_path / "traces" / f"{stem}.worker-0.json", "w") as f:
      json.dump(_trace(), f)
  path = timeline.plot_directory(str(tmp_path),
                                 ["tf_default@1", "pace@2", "ddp@1"], "t")
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_collective_arrivals_name_the_last_task_and_its_wait():
  def trace(origin_ms, spans):
    # spans: {(iteration, collective id): (start ms, duration ms)}.
    return {"otherData": {"origin_ns": origin_ms * 1_000_000},
            "traceEvents": [
                {"cat": "collective", "ph": "X", "ts": s * 1e3,
                 "dur": d * 1e3,
                 "args": {"iteration": i, "collective_id": c}}
                for (i, c), (s, d) in spans.items()]}

  # Worker 1's clock starts 5 ms later. Collective (0, 0): task 0 at 10,
  # task 1 at 5 + 7 = 12 ms, both end at 30 ms. (1, 0): task 0 last at 50
  # ms, ends 62. (1, 1) is only in task 0's trace.
  arrivals = timeline.collective_arrivals([
      trace(0, {(0, 0): (10, 20), (1, 0): (50, 12), (1, 1): (70, 1)}),
      trace(5, {(0, 0): (7, 18), (1, 0): (40, 17)})])
  assert [(a["iteration"], a["collective_id"], a["last_task"])
          for a in arrivals] == [(0, 0, 1), (1, 0, 0)]
  assert arrivals[0]["skew_s"] == pytest.approx(0.002)
  assert arrivals[0]["from_last_s"] == pytest.approx(0.018)
  assert arrivals[1]["skew_s"] == pytest.approx(0.005)
  assert arrivals[1]["from_last_s"] == pytest.approx(0.012)


def test_block_skews_give_each_task_its_start_lag_and_tail():
  def trace(origin_ms, blocks, colls):
    # blocks: {batch: (start ms, end ms)}; colls: [(start ms, end ms)].
    return {"otherData": {"origin_ns": origin_ms * 1_000_000},
            "traceEvents": [
                {"cat": "compute", "ph": "X", "ts": s * 1e3,
                 "dur": (e - s) * 1e3, "args": {"batch": b}}
                for b, (s, e) in blocks.items()] + [
                {"cat": "collective", "ph": "X", "ts": s * 1e3,
                 "dur": (e - s) * 1e3,
                 "args": {"iteration": i, "collective_id": 0}}
                for i, (s, e) in enumerate(colls)]}

  # Worker 1's clock starts 1 ms later. Block 0: task 0 starts at 0, task
  # 1 at 1 + 0 = 1 ms (1 ms late); both end their collective at 30 ms,
  # task 0 its block at 39 (tail 9), task 1 at 1 + 34 = 35 (tail 5).
  # Block 1: task 1 starts at 35, task 0 at 39 (4 ms late); no collective.
  # Block 2 is only in task 0's trace.
  skews = timeline.block_skews([
      trace(0, {0: (0, 39), 1: (39, 60), 2: (60, 70)}, [(20, 30)]),
      trace(1, {0: (0, 34), 1: (34, 59)}, [(19, 29)])])
  assert [b["batch"] for b in skews] == [0, 1]
  assert skews[0]["start_skew_s"] == pytest.approx([0.0, 0.001])
  assert skews[0]["tail_s"] == pytest.approx([0.009, 0.005])
  assert skews[1]["start_skew_s"] == pytest.approx([0.004, 0.0])
  assert skews[1]["tail_s"] == [None, None]
