"""Tests of tf_preempt.launch.ports."""

import socket

import pytest

from tf_preempt.launch import ports


def test_ports_are_distinct_and_bindable():
  picked = ports.pick_free_ports(8)
  assert len(set(picked)) == 8
  for port in picked:
    assert 0 < port < 65536
    assert ports.is_port_free(port)


def test_port_in_use_is_not_free():
  with socket.socket() as sock:
    sock.bind((ports.LOOPBACK, 0))
    sock.listen()
    assert not ports.is_port_free(sock.getsockname()[1])


def test_loopback_addresses():
  addresses = ports.loopback_addresses(3)
  assert len(set(addresses)) == 3
  assert all(a.startswith("127.0.0.1:") for a in addresses)
  assert ports.pick_free_ports(0) == []
  with pytest.raises(ValueError):
    ports.pick_free_ports(-1)
