"""Tests of scripts/train.py as a program: flag errors, TF_CONFIG, 2 workers."""

import json
import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_TRAIN = os.path.join(_ROOT, "scripts", "train.py")
_LAUNCH = os.path.join(_ROOT, "scripts", "launch.py")

# Runs train.py as __main__ and reports on stderr whether TensorFlow was
# imported by the time it exited.
_PROBE = """
import runpy, sys
sys.argv = [{path!r}] + {args!r}
try:
  runpy.run_path({path!r}, run_name="__main__")
finally:
  print("TENSORFLOW_IMPORTED=%s" % ("tensorflow" in sys.modules),
        file=sys.stderr)
"""


def _train(args, tf_config=None, timeout=60):
  env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
  if tf_config is not None:
    env["TF_CONFIG"] = tf_config
  code = _PROBE.format(path=_TRAIN, args=list(args))
  return subprocess.run([sys.executable, "-c", code], env=env, cwd=_ROOT,
                        capture_output=True, text=True, timeout=timeout)


def _fails_early(result, *needles):
  assert result.returncode != 0, result.stdout
  assert "TENSORFLOW_IMPORTED=False" in result.stderr, result.stderr
  for needle in needles:
    assert needle in result.stderr, result.stderr
  assert result.stdout == ""


@pytest.mark.parametrize("args,needle", [
    (["--model=alexnet"], "--model"),
    (["--batch_size=0"], "--batch_size"),
    (["--steps=10", "--epochs=2"], "--steps and --epochs"),
    (["--unroll=3", "--steps=10"], "--unroll=3"),
    (["--strategy=ps"], "--strategy"),
    (["--strategy=mirrored", "--scheduler=lifo"], "--scheduler"),
    (["--strategy=mirrored", "--scheduler=fifo", "--chunk_bytes=1024"],
     "--chunk_bytes"),
    (["--strategy=mirrored", "--bytes_per_pack=1024"], "--bytes_per_pack"),
    (["--scheduler=pace"], "--scheduler has no effect"),
    (["--implementation=mpi"], "--implementation"),
    (["--mixed_precision=half"], "--mixed_precision"),
    (["--data=imagenet"], "--data"),
    (["--data_dir=/tmp"], "--data_dir"),
    (["--plan=/no/such.json", "--strategy=mirrored"], "--plan"),
    (["--profile_steps=-1"], "--profile_steps"),
    (["--intra_op_threads=0"], "--intra_op_threads"),
    (["--strategy=mirrored", "--credit_bytes=5", "--scheduler_op=off"],
     "--credit_bytes"),
])
def test_bad_flags_fail_before_tensorflow(args, needle):
  result = _train(args)
  assert result.returncode == 2
  _fails_early(result, "train: error:", needle)


def test_flag_type_errors_come_from_absl():
  result = _train(["--unroll=two"])
  _fails_early(result, "--unroll")


@pytest.mark.parametrize("tf_config,needle", [
    (None, "needs the TF_CONFIG"),
    ("{'cluster': 1}", "not valid JSON"),
    (json.dumps({"cluster": {"worker": ["localhost:1"]}}),
     "missing 'task'"),
    (json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]},
                 "task": {"type": "worker", "index": 5}}), "out of range"),
    (json.dumps({"cluster": {"worker": ["localhost:1", "localhost:1"]},
                 "task": {"type": "worker", "index": 0}}),
     "duplicate address"),
    (json.dumps({"cluster": {"worker": ["localhost:1"]},
                 "task": {"type": "chief", "index": 0}}),
     "not a job of the cluster"),
])
def test_malformed_tf_config(tf_config, needle):
  result = _train(["--strategy=multi_worker"], tf_config=tf_config)
  assert result.returncode == 2
  _fails_early(result, "TF_CONFIG", needle)


def _launch_two_workers(log_dir, train_args):
  """Runs train.py on two workers through scripts/launch.py; their stats."""
  command = [sys.executable, _LAUNCH, "--num_workers=2", "--timeout_s=240",
             f"--log_dir={log_dir}", "--", sys.executable, _TRAIN,
             "--strategy=multi_worker", "--model=vgg_small",
             "--batch_size=8", "--steps=4", "--unroll=2", "--scheduler=pace",
             "--warmup_blocks=1"] + list(train_args)
  result = subprocess.run(command, cwd=_ROOT, capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stdout + result.stderr
  lines = [l for l in result.stdout.splitlines() if l.startswith("[worker")]
  assert len(lines) == 2, result.stdout
  return [json.loads(l.split("] ", 1)[1]) for l in lines]


@pytest.mark.slow
def test_two_workers_through_the_launcher(tmp_path):
  stats = _launch_two_workers(tmp_path, [f"--model_dir={tmp_path / 'model'}"])
  for i, s in enumerate(stats):
    assert s["workers"] == 2 and s["worker_index"] == i
    assert s["replicas"] == 2 and s["unroll"] == 2
    assert s["scheduler"] == "pace" and s["steps_run"] == 4
    assert s["median_step_s"] > 0 and s["plan"]["tensors"] > 10
    assert os.path.isdir(tmp_path / "model" / f"worker-{i}")
  # Synchronous training: both workers end with the same loss and plan.
  assert stats[0]["final_loss"] == pytest.approx(stats[1]["final_loss"])
  assert stats[0]["plan"]["fingerprint"] == stats[1]["plan"]["fingerprint"]
  # Exactly one stdout line per worker, and it is the JSON stats line.
  for i in range(2):
    with open(tmp_path / f"worker-{i}.stdout.log") as f:
      out = f.read().strip().splitlines()
    assert len(out) == 1 and json.loads(out[0])["worker_index"] == i


@pytest.mark.slow
def test_keeping_buffers_in_the_heap_trains_the_same(tmp_path):
  by_heap = {mode: _launch_two_workers(tmp_path / mode, [f"--heap={mode}"])
             for mode in ("tensorflow", "keep")}
  for mode, stats in by_heap.items():
    assert [s["heap"] for s in stats] == [mode, mode]
  # Where buffers live changes no arithmetic: the same seed, the same loss.
  assert by_heap["keep"][0]["final_loss"] == pytest.approx(
      by_heap["tensorflow"][0]["final_loss"], rel=1e-6)
