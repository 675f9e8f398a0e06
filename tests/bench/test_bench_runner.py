"""Tests of tf_preempt.bench.runner's rows (no run: settings only)."""

from tf_preempt.bench import runner


def _by_name(rows):
  return {r.name: r for r in rows}


def test_baselines_at_both_k_and_pace_at_its_k():
  rows = _by_name(runner.settings_of(["tf_default", "horovod", "pace"], 2))
  assert set(rows) == {"tf_default@1", "tf_default@2", "horovod@1",
                       "horovod@2", "pace@2"}
  assert all(r.profile_steps == 0 for r in rows.values())


def test_pace_options_apply_to_the_pace_row_only():
  rows = _by_name(runner.settings_of(["tf_default", "pace"], 2,
                                     pace_profile_steps=4,
                                     pace_sparse_as_dense=True))
  assert rows["pace@2"].profile_steps == 4
  assert "--sparse_as_dense" in rows["pace@2"].args
  assert "--sparse_as_dense" in rows["pace@2"].description
  for name in ("tf_default@1", "tf_default@2"):
    assert rows[name].profile_steps == 0
    assert "--sparse_as_dense" not in rows[name].args


def test_interleaved_alternates_the_order():
  assert list(runner.interleaved(["a", "b", "c"], 3)) == [
      (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"),
      (2, "a"), (2, "b"), (2, "c")]
