"""Chrome trace export: valid JSON, well-formed events, one pid per worker."""

import json
import os

import pytest

from tf_preempt.ops import records
from tf_preempt.telemetry import chrome_trace

_US = 1000  # Nanoseconds per microsecond.


def _record(iteration, cid, nbytes, ready, released, done):
  return records.CollectiveRecord(iteration, cid, nbytes, ready * _US,
                                  released * _US,
                                  None if done is None else done * _US)


def _workers():
  # Worker 0: collectives 1 and 2 overlap, 3 reuses the free slot.
  # Worker 1: given as dicts; one still in flight.
  w0 = [_record(0, 1, 100, 1000, 1000, 1050),
        _record(0, 2, 200, 1010, 1020, 1080),
        _record(0, 3, 300, 1030, 1060, 1100)]
  w1 = [r.as_dict() for r in (_record(0, 1, 100, 1005, 1005, 1040),
                              _record(0, 2, 200, 1006, 1041, None))]
  compute = {0: [{"name": "backward", "start": 900 * _US,
                  "end": 1030 * _US, "args": {"step": 0}}],
             1: [{"name": "backward", "start": 910 * _US, "end": 1040 * _US}]}
  return {0: w0, 1: w1}, compute


def _check_events(trace):
  assert set(trace) >= {"traceEvents", "displayTimeUnit"}
  for event in trace["traceEvents"]:
    assert event["ph"] in ("X", "M"), event
    assert isinstance(event["pid"], int)
    assert isinstance(event["name"], str)
    if event["ph"] == "X":
      assert isinstance(event["tid"], int)
      assert event["ts"] >= 0 and event["dur"] >= 0
      assert isinstance(event["args"], dict)


def test_trace_is_valid_json_with_one_pid_per_worker(tmp_path):
  collectives, compute = _workers()
  path = str(tmp_path / "out" / "trace.json")
  assert chrome_trace.write_chrome_trace(path, collectives, compute) == path
  with open(path) as f:
    trace = json.load(f)
  _check_events(trace)
  spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
  assert {e["pid"] for e in trace["traceEvents"]} == {0, 1}
  names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
           if e["name"] == "process_name"}
  assert names == {0: "worker 0", 1: "worker 1"}
  # 3 + 1 collectives (one in flight is skipped), 2 compute spans.
  assert sum(e["cat"] == "collective" for e in spans) == 4
  assert sum(e["cat"] == "compute" for e in spans) == 2
  assert all(e["tid"] == chrome_trace.COMPUTE_TID for e in spans
             if e["cat"] == "compute")
  assert min(e["ts"] for e in spans) == 0  # Relative to the earliest span.
  assert os.listdir(tmp_path / "out") == ["trace.json"]  # No temp left.


def test_slot_lanes_follow_overlap():
  collectives, _ = _workers()
  trace = chrome_trace.to_chrome_trace(collectives)
  lanes = {e["args"]["collective_id"]: e["tid"] for e in trace["traceEvents"]
           if e["ph"] == "X" and e["pid"] == 0}
  assert lanes == {1: 1, 2: 2, 3: 1}
  first = next(e for e in trace["traceEvents"]
               if e["ph"] == "X" and e["args"]["collective_id"] == 2)
  assert first["dur"] == pytest.approx(60.0)
  assert first["args"]["wait_us"] == pytest.approx(10.0)
  assert first["args"]["bytes"] == 200


def test_collective_lanes_and_named_workers():
  collectives, compute = _workers()
  named = {"host-a": collectives[0], "host-b": collectives[1]}
  trace = chrome_trace.to_chrome_trace(
      named, {"host-a": compute[0]}, lanes="collective",
      metadata={"plan": "abc"})
  _check_events(trace)
  assert trace["metadata"] == {"plan": "abc"}
  spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
  assert {e["pid"] for e in spans} == {0, 1}
  tids = {(e["pid"], e["args"]["collective_id"]): e["tid"] for e in spans
          if e["cat"] == "collective"}
  assert tids == {(0, 1): 1, (0, 2): 2, (0, 3): 3, (1, 1): 1}
  json.dumps(trace)


def test_bad_input_is_rejected():
  with pytest.raises(ValueError, match="lanes"):
    chrome_trace.to_chrome_trace({}, lanes="bogus")
  with pytest.raises(ValueError, match="lacks"):
    chrome_trace.to_chrome_trace({0: [{"collective_id": 1}]})
  with pytest.raises(ValueError, match="ends before"):
    chrome_trace.to_chrome_trace({}, {0: [{"name": "x", "start": 5,
                                           "end": 1}]})
  assert chrome_trace.to_chrome_trace({})["traceEvents"] == []
