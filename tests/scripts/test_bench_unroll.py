"""Tests of scripts/bench_unroll.py's rounds (the training runs stubbed:
scripts/demo.py's own tests run them for real)."""

import io

import pytest

from tf_preempt.testing import scripts


def test_rounds_are_added_until_every_setting_settled(monkeypatch):
  bench = scripts.load_script("bench_unroll")
  # pace K=2's first run is slow: after 2 rounds its median is 25% above
  # its fastest run; a third at 20 ms settles it.
  times = {("tf_default", 1, 0): [0.030] * 4,
           ("pace", 2, 0): [0.030, 0.020, 0.020, 0.020],
           ("pace", 2, 4): [0.022] * 4}
  calls = []

  def train_once(scheduler, unroll, profile_steps, **common):
    assert common["num_workers"] == 2
    key = (scheduler, unroll, profile_steps)
    calls.append(key)
    return {"median_step_s": times[key][calls.count(key) - 1],
            **({"profile": {"summary": "re-planned"}} if profile_steps
               else {})}

  monkeypatch.setattr(bench.demo, "train_once", train_once)
  out = io.StringIO()
  medians = bench.run("vgg_small", 10, 8, 4, [2], 2, 4, out=out,
                      max_rounds=5)
  assert len(calls) == 9
  assert calls[:6] == [("tf_default", 1, 0), ("pace", 2, 0), ("pace", 2, 4),
                       ("pace", 2, 4), ("pace", 2, 0), ("tf_default", 1, 0)]
  assert medians == {"stock fit (tf_default, K=1)": pytest.approx(0.030),
                     "pace, K=2": pytest.approx(0.020),
                     "pace, K=2, re-planned after 4 steps":
                         pytest.approx(0.022)}
  text = out.getvalue()
  assert "repeat 3 (2 to 5, until settled): pace, K=2 ..." in text
  assert "median over 3 run(s):" in text
  assert "1.50x vs stock fit" in text
  assert "profiling (pace, K=2, re-planned after 4 steps): re-planned" in text
  # Without --max_rounds, exactly --rounds; what did not settle is named.
  calls.clear()
  out = io.StringIO()
  bench.run("vgg_small", 10, 8, 4, [2], 2, 4, out=out)
  assert len(calls) == 6
  assert "median over 2 run(s); not settled: pace, K=2:" in out.getvalue()
  with pytest.raises(ValueError, match="one run is always settled"):
    bench.run("vgg_small", 10, 8, 4, [2], 1, 0, max_rounds=3)
