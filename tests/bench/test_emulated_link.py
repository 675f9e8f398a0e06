"""The emulated link of a results directory: its rate and token bucket."""

import pytest

from tf_preempt.bench import emulated_link


def test_link_rates():
  assert emulated_link.link_bits_per_s("200mbit") == 200e6
  assert emulated_link.link_bits_per_s("2gbit") == 2e9
  assert emulated_link.link_bits_per_s("") is None
  assert emulated_link.link_bits_per_s("fast") is None


def test_link_and_its_token_bucket():
  # tf_preempt.launch.netem: 4 ms of traffic, at least 64 KiB.
  assert emulated_link.link_burst_bytes("200mbit") == 100_000
  assert emulated_link.link_burst_bytes("2gbit") == 1_000_000
  assert emulated_link.link_burst_bytes("100mbit") == 64 * 1024
  assert emulated_link.link_burst_seconds("200mbit") == pytest.approx(4e-3)
  assert emulated_link.link_burst_seconds("100mbit") == pytest.approx(
      64 * 1024 / 12.5e6)
  for loopback in (None, "", "fast"):
    assert emulated_link.link_burst_bytes(loopback) is None
    assert emulated_link.link_burst_seconds(loopback) == 0.0
  # The rate: the command's --bandwidth, else the machine line.
  rate = lambda command, machine="": emulated_link.link_rate(
      {"command": command, "machine": machine})
  assert rate("bench.py --bandwidth 200mbit") == "200mbit"
  assert rate("bench.py --bandwidth=2gbit") == "2gbit"
  assert rate("bench.py --bandwidth= --workers=2",
              "vm; link rate 200mbit; pinned") is None  # loopback
  assert rate("bench.py", "vm; link rate 200mbit; workers pinned") == (
      "200mbit")
  assert rate("bench.py", "vm; link loopback; workers pinned") is None
