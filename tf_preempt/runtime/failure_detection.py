"""How fast a dead peer is noticed, and by whom.

A dead worker can surface three ways on the survivors: a closed socket (at
once, naming the peer, when a transfer with it is open), the coordination
service's heartbeat (naming the peer: "tasks are unhealthy (stopped sending
heartbeats): /job:worker/replica:0/task:K"), or the collective's own
timeout, whose `DeadlineExceededError` does NOT say which peer is missing.
TensorFlow's default heartbeat timeout is 10 s, so with a shorter collective
timeout the anonymous error used to win. The multi-worker strategy
therefore sets the heartbeat timeout from the collective timeout, so that
the heartbeat names the peer first.
"""

from typing import Optional

# TensorFlow's coordination service default.
DEFAULT_HEARTBEAT_TIMEOUT_S = 10.0
# Below this a busy machine (2 shared cores, a long XLA compile) may miss
# heartbeats of live workers.
MIN_HEARTBEAT_TIMEOUT_S = 1.0
# The heartbeat must run out this many times within one collective timeout:
# after it runs out the service still has to notice and tell the survivors.
TIMEOUTS_PER_COLLECTIVE_TIMEOUT = 3.0


def heartbeat_timeout_s(collective_timeout_s: Optional[float]) -> float:
  """The heartbeat timeout that reports a dead peer before the collectives.

  Args:
    collective_timeout_s: the collectives' timeout in seconds, or None/0
      for none.

  Returns:
    Seconds: TensorFlow's default (10 s) when the collective timeout is
    long enough for it or unset, else a third of the collective timeout,
    but no less than `MIN_HEARTBEAT_TIMEOUT_S`.

  Raises:
    ValueError: if `collective_timeout_s` is negative.
  """
  if collective_timeout_s is not None and collective_timeout_s < 0:
    raise ValueError(f"collective timeout must be >= 0 seconds, got "
                     f"{collective_timeout_s}")
  if not collective_timeout_s:
    return DEFAULT_HEARTBEAT_TIMEOUT_S
  return max(MIN_HEARTBEAT_TIMEOUT_S,
             min(DEFAULT_HEARTBEAT_TIMEOUT_S,
                 collective_timeout_s / TIMEOUTS_PER_COLLECTIVE_TIMEOUT))
