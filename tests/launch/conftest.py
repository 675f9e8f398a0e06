"""Helpers shared by the launcher tests: finding processes we started.

Every process a test starts carries a unique token in its environment
(inherited by its children), so "nothing is left behind" is checked by
scanning /proc for live processes with that token, whatever their pid.
"""

import os
import time
import uuid

import pytest

TOKEN_VAR = "TF_PREEMPT_LAUNCH_TEST_TOKEN"


def live_pids_with_token(token, argv_prefixes=None):
  """Pids of live (not zombie) processes whose environment has the token.

  Args:
    token: the token.
    argv_prefixes: if given, only processes whose argv starts with one of
      these tuples, e.g. to count workers but neither the wrappers that exec
      them nor the launcher's forked children (whose argv is the launcher's
      until they exec).
  """
  needle = f"{TOKEN_VAR}={token}".encode()
  found = []
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat", "rb") as f:
        # The state follows the parenthesised command name.
        state = f.read().rsplit(b")", 1)[1].split()[0]
      if state == b"Z":
        continue
      with open(f"/proc/{entry}/environ", "rb") as f:
        if needle not in f.read().split(b"\0"):
          continue
      if argv_prefixes is not None:
        with open(f"/proc/{entry}/cmdline", "rb") as f:
          argv = tuple(a.decode() for a in f.read().split(b"\0"))
        if not any(argv[:len(p)] == tuple(p) for p in argv_prefixes):
          continue
      found.append(int(entry))
    except (OSError, IndexError):
      continue  # Exited meanwhile, or not ours to read.
  return found


def wait_until_gone(token, timeout_s=5.0):
  """Waits for every process with the token to exit; returns the stragglers."""
  deadline = time.monotonic() + timeout_s
  while True:
    left = live_pids_with_token(token)
    if not left or time.monotonic() > deadline:
      return left
    time.sleep(0.05)


class Token:
  """A unique marker for the processes of one test.

  Attributes:
    value: the token.
    env: {TOKEN_VAR: value}, to put in a worker's environment.
  """

  def __init__(self):
    self.value = uuid.uuid4().hex
    self.env = {TOKEN_VAR: self.value}

  def live(self, argv_prefixes=None):
    return live_pids_with_token(self.value, argv_prefixes)

  def wait_gone(self, timeout_s=5.0):
    return wait_until_gone(self.value, timeout_s)


@pytest.fixture
def token():
  """A fresh Token; fails the test if a process with it is still alive."""
  marker = Token()
  yield marker
  left = marker.wait_gone(timeout_s=2.0)
  for pid in left:
    try:
      os.kill(pid, 9)  # Do not leak them into the next test either.
    except OSError:
      pass
  assert not left, f"processes left behind: {left}"
