"""Tests of the benchmark's Gantt chart (tf_preempt.bench.timeline)."""

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
