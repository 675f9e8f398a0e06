"""The emulated link of a benchmark: its tc rate and its token bucket.

A `scripts/bench.py` results directory names its link's rate in the command
(--bandwidth) or in its machine line; `tf_preempt.launch.netem` gives that
rate a token bucket (tc tbf), which the execution model takes in seconds of
traffic (`ExecutionModel.link_burst`). Pure Python; netem on first use.
"""

import re
from typing import Any, Dict, Optional


def link_rate(results: Dict[str, Any]) -> Optional[str]:
  """The emulated link's tc rate ("200mbit"), or None (loopback, unknown).

  From the command's --bandwidth, else the results' "machine" line
  ("link rate 200mbit", written by bench.py).
  """
  m = re.search(r"--bandwidth[= ](\S*)", results.get("command", ""))
  if m:
    return m.group(1) or None
  m = re.search(r"\blink rate ([0-9.]+[a-zA-Z]+)", results.get("machine", ""))
  return m.group(1) if m else None


def link_bits_per_s(rate: str) -> Optional[float]:
  """Bits per second of a tc rate ("200mbit", "2gbit"); None if unknown."""
  m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", rate.strip().lower())
  if not m:
    return None
  return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def link_burst_bytes(rate: Optional[str]) -> Optional[int]:
  """The burst of the token bucket (tc tbf) that `tf_preempt.launch.netem`
  gives a link of `rate`, in bytes; None for loopback or a rate it does
  not take."""
  if not rate:
    return None
  from tf_preempt.launch import netem  # pylint: disable=g-import-not-at-top
  try:
    (tbf,) = netem.tc_commands("ns", "dev", rate, None)
  except ValueError:
    return None
  return int(tbf[tbf.index("burst") + 1])


def link_burst_seconds(rate: Optional[str]) -> float:
  """Seconds of traffic at `rate` that the link's token bucket holds
  (`ExecutionModel.link_burst`); 0 (a plain rate) for loopback or an
  unknown link."""
  burst = link_burst_bytes(rate)
  if burst is None:
    return 0.0
  from tf_preempt.launch import netem  # pylint: disable=g-import-not-at-top
  return burst / (netem.parse_rate(rate) / 8)
