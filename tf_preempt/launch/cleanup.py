"""Signal handling shared by everything in `tf_preempt.launch` that must undo.

Worker processes and network namespaces outlive the launcher unless it
removes them, and the default SIGTERM action kills Python without running
`finally` blocks or `__exit__`. So while a launcher owns resources, SIGINT
and SIGTERM are turned into an `Interrupted` exception raised in the main
thread: the stack unwinds through the context managers, which clean up in
reverse order of creation (processes before the namespaces they run in).
While cleaning up, the same signals are deferred so that a second Ctrl-C does
not abort the clean-up half way.
"""

import contextlib
import os
import signal
import threading
from typing import Iterator, Sequence

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
  """SIGINT or SIGTERM arrived while the launcher owned resources.

  A KeyboardInterrupt so that code which already treats Ctrl-C as "stop now"
  treats SIGTERM the same way; `signum` tells them apart and `exit_code` is
  the shell convention 128 + signal number.
  """

  def __init__(self, signum: int):
    super().__init__(f"interrupted by {signal.Signals(signum).name}")
    self.signum = signum

  @property
  def exit_code(self) -> int:
    return 128 + self.signum


def _raise_interrupted(signum, frame):
  del frame  # Unused.
  raise Interrupted(signum)


@contextlib.contextmanager
def raise_on_signals(
    signums: Sequence[int] = HANDLED_SIGNALS) -> Iterator[None]:
  """Within the block, the given signals raise `Interrupted`.

  Only the main thread can install signal handlers; elsewhere this is a no-op
  (the owner of the main thread decides what signals do).

  Args:
    signums: the signals to catch.

  Yields:
    Nothing.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = {s: signal.signal(s, _raise_interrupted) for s in signums}
  try:
    yield
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)


@contextlib.contextmanager
def signals_deferred(
    signums: Sequence[int] = HANDLED_SIGNALS) -> Iterator[None]:
  """Defers the given signals until the block ends (for clean-up code).

  A signal that arrives meanwhile is re-delivered to the handler that was in
  place before the block once the block ends, so it still stops the program,
  just not in the middle of tearing things down. (Blocking the signal with
  `pthread_sigmask` is not enough: TensorFlow's threads do not block it, the
  C-level handler runs on one of them, and Python then runs the Python
  handler on the main thread anyway.)

  Args:
    signums: the signals to defer.

  Yields:
    Nothing.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  pending = []

  def record(signum, frame):
    del frame  # Unused.
    pending.append(signum)

  previous = {s: signal.signal(s, record) for s in signums}
  try:
    yield
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    if pending:
      signum = pending[0]
      handler = previous[signum]
      if callable(handler):
        handler(signum, None)
      elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)


class SignalGuarded:
  """A context manager for something that must be undone, even on a signal.

  Subclasses implement `_acquire()` (start processes, create namespaces) and
  `_release()` (undo it). While inside the `with` block, and if
  `handle_signals` was true, SIGINT and SIGTERM raise `Interrupted` so that
  `_release` runs; a failure in `_acquire` restores the signal handlers.
  """

  def __init__(self, handle_signals: bool):
    self._handle_signals = handle_signals
    self._signal_ctx = None

  def _acquire(self) -> None:
    raise NotImplementedError

  def _release(self) -> None:
    raise NotImplementedError

  def __enter__(self):
    if self._handle_signals:
      self._signal_ctx = raise_on_signals()
      self._signal_ctx.__enter__()
    try:
      self._acquire()
    except BaseException:
      self._exit_signal_ctx()
      raise
    return self

  def __exit__(self, exc_type, exc, tb) -> None:
    try:
      self._release()
    finally:
      self._exit_signal_ctx()

  def _exit_signal_ctx(self) -> None:
    if self._signal_ctx is not None:
      ctx, self._signal_ctx = self._signal_ctx, None
      ctx.__exit__(None, None, None)
