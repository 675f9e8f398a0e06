"""Picks free TCP ports on the loopback interface for local clusters.

The ports are found by binding to port 0 and reading what the kernel chose.
All N sockets are held open at once so that the N ports are distinct; they
are closed before returning, so another process could take a port before the
worker binds it. That race is rare on a test machine (the kernel hands out
ephemeral ports round-robin), and a lost race shows up as a worker that fails
to start its server, which the launcher reports like any other failure.
"""

import contextlib
import socket
from typing import List

LOOPBACK = "127.0.0.1"


def pick_free_ports(num: int, host: str = LOOPBACK) -> List[int]:
  """Returns `num` distinct TCP ports that were free on `host` just now.

  Args:
    num: how many ports.
    host: the address to bind, loopback by default.

  Returns:
    The port numbers, distinct.

  Raises:
    ValueError: if num is negative.
    OSError: if the kernel has no free port.
  """
  if num < 0:
    raise ValueError(f"num must be >= 0, got {num}")
  with contextlib.ExitStack() as stack:
    ports = []
    for _ in range(num):
      sock = stack.enter_context(
          socket.socket(socket.AF_INET, socket.SOCK_STREAM))
      sock.bind((host, 0))
      ports.append(sock.getsockname()[1])
  return ports


def is_port_free(port: int, host: str = LOOPBACK) -> bool:
  """Whether a TCP socket can bind `host:port` right now."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
    try:
      sock.bind((host, port))
    except OSError:
      return False
  return True


def loopback_addresses(num: int, host: str = LOOPBACK) -> List[str]:
  """Returns `num` "host:port" addresses with free ports, for TF_CONFIG."""
  return [f"{host}:{port}" for port in pick_free_ports(num, host)]
