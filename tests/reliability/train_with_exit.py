"""`scripts/train.py` with op determinism and a test-only exit after an epoch.

Runs scripts/train.py unchanged (same flags, same stats line) after two
test-only additions, so that the runner itself stays free of test hooks:

- `tf.config.experimental.enable_op_determinism()`, so that two runs can
  be compared bit for bit;
- with TF_PREEMPT_TEST_EXIT_AFTER_EPOCH=N, the worker
  TF_PREEMPT_TEST_EXIT_WORKER (default 1) exits with code 3 at the end of
  epoch N (1-based), after every worker's BackupAndRestore has saved that
  epoch -- a crash that loses nothing BackupAndRestore promises to keep.
"""

import json
import os
import runpy
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts",
                     "train.py")
EXIT_CODE = 3


def _backup_epoch(model_dir, worker):
  path = os.path.join(model_dir, f"worker-{worker}", "backup",
                      "training_metadata.json")
  try:
    with open(path) as f:
      return json.load(f).get("epoch")
  except (OSError, ValueError):
    return None


def _install_exit_hook(exit_after, exit_worker):
  import keras  # pylint: disable=g-import-not-at-top
  from tf_preempt.training import runner  # pylint: disable=g-import-not-at-top
  task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  workers = len(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"])
  run = runner.run

  def run_with_exit(config, callbacks=(), verbose=0):

    class ExitAfterEpoch(keras.callbacks.Callback):

      def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 != exit_after or task != exit_worker:
          return
        # The peers save their backups on their own; wait for them so that
        # the launcher's kill cannot cut a save short.
        deadline = time.time() + 60
        while time.time() < deadline and not all(
            _backup_epoch(config.model_dir, w) == exit_after
            for w in range(workers)):
          time.sleep(0.05)
        print(f"test hook: worker {task} exits after epoch {exit_after}",
              file=sys.stderr, flush=True)
        os._exit(EXIT_CODE)  # pylint: disable=protected-access

    return run(config, list(callbacks) + [ExitAfterEpoch()], verbose)

  runner.run = run_with_exit


def main():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.experimental.enable_op_determinism()
  exit_after = os.environ.get("TF_PREEMPT_TEST_EXIT_AFTER_EPOCH")
  if exit_after:
    _install_exit_hook(int(exit_after),
                       int(os.environ.get("TF_PREEMPT_TEST_EXIT_WORKER", "1")))
  sys.argv = [TRAIN] + sys.argv[1:]
  runpy.run_path(TRAIN, run_name="__main__")


if __name__ == "__main__":
  main()
