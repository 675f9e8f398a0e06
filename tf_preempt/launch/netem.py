"""Emulates a cluster network on one machine with network namespaces and tc.

Topology for N workers (all of it inside namespaces this module creates; the
host's own network is never touched):

    ns <prefix>-w0            ns <prefix>-br             ns <prefix>-w1
    eth0 10.213.0.1/24 <-veth-> p0 -- br0 -- p1 <-veth-> eth0 10.213.0.2/24
    lo up                                                lo up

The bridge lives in its own namespace, so the private addresses exist only
inside the worker namespaces. Every veth end gets a token-bucket filter (tc
tbf, the rate) with netem (the delay) under it, so both directions of every
link are shaped. A packet from worker i to worker j leaves through w_i's eth0
and then through the bridge's p_j, i.e. two shaped hops: each hop carries
half the configured one-way latency, and the rate of each hop is the
configured rate (the path's bottleneck).

Namespace names carry the creating process's pid, so `remove_stale` can
delete those of a launcher that died by SIGKILL (the one case no clean-up
code can handle).

Root only. `check_available` probes, once per process, what this kernel can
do: some kernels (e.g. minimal VM kernels) have tbf but no netem, and then
rate emulation works but latency emulation does not.
"""

import atexit
import dataclasses
import functools
import itertools
import os
import re
import shutil
import subprocess
from typing import List, Optional, Sequence

from tf_preempt.launch import cleanup

NAMESPACE_BASE = "tfpre"
DEFAULT_SUBNET = "10.213.0"

# tbf's queue limit, expressed as time: packets that would wait longer are
# dropped, as a switch buffer would drop them.
_TBF_QUEUE_LATENCY = "50ms"
# netem holds delayed packets in its own queue (default 1000 packets); at
# 2 Gbit/s and a few ms of delay that is too short and drops look like loss.
_NETEM_LIMIT_PACKETS = 100000

_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|"
                      r"bps|kbps|mbps|gbps|tbps)$", re.IGNORECASE)
_RATE_UNITS_BITS = {
    "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    # tc's "bps" is BYTES per second.
    "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}
_TIME_RE = re.compile(r"^(\d+(?:\.\d+)?)(us|usec|ms|msec|s|sec)$",
                      re.IGNORECASE)
_TIME_UNITS_S = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
                 "s": 1.0, "sec": 1.0}

_counter = itertools.count()


class EmulationUnavailable(RuntimeError):
  """Network emulation cannot run here; the message says why."""


def parse_rate(rate: str) -> float:
  """Parses a tc rate such as "2gbit" or "100mbit" into bits per second.

  Args:
    rate: number and tc unit (bit, kbit, mbit, gbit, tbit; bps, kbps, ...
      are BYTES per second, as in tc).

  Returns:
    Bits per second.

  Raises:
    ValueError: if the string is not such a rate or is zero.
  """
  match = _RATE_RE.match(str(rate).strip())
  if not match:
    raise ValueError(f"bad rate {rate!r}: expected a number and a tc unit, "
                     f"e.g. '2gbit', '100mbit', '500kbit'")
  bits = float(match.group(1)) * _RATE_UNITS_BITS[match.group(2).lower()]
  if bits <= 0:
    raise ValueError(f"bad rate {rate!r}: must be positive")
  return bits


def parse_time(value: str) -> float:
  """Parses a tc time such as "200us" or "1.5ms" into seconds.

  Args:
    value: number and unit (us, ms, s).

  Returns:
    Seconds.

  Raises:
    ValueError: if the string is not such a time.
  """
  match = _TIME_RE.match(str(value).strip())
  if not match:
    raise ValueError(f"bad time {value!r}: expected a number and a unit, "
                     f"e.g. '200us', '1ms'")
  return float(match.group(1)) * _TIME_UNITS_S[match.group(2).lower()]


@dataclasses.dataclass(frozen=True)
class LinkConfig:
  """What the emulated network does to traffic between two workers.

  Attributes:
    rate: bandwidth of every link as a tc rate ("2gbit"), or None for no
      limit.
    latency: one-way worker-to-worker delay as a tc time ("200us"), or None
      for none. The round trip is twice this.
    burst_bytes: the token bucket of each link (tc tbf's burst) in bytes, or
      None for the default, 4 ms of traffic at the rate (at least 64 KiB);
      needs `rate`.
  """
  rate: Optional[str] = None
  latency: Optional[str] = None
  burst_bytes: Optional[int] = None

  def __post_init__(self):
    if self.rate is not None:
      parse_rate(self.rate)
    if self.latency is not None:
      parse_time(self.latency)
    if self.burst_bytes is not None:
      if (isinstance(self.burst_bytes, bool) or
          not isinstance(self.burst_bytes, int) or self.burst_bytes < 1):
        raise ValueError(f"burst_bytes must be a positive integer, got "
                         f"{self.burst_bytes!r}")
      if self.rate is None:
        raise ValueError("burst_bytes needs a rate (the bucket is tbf's)")

  @property
  def rate_bits_per_s(self) -> Optional[float]:
    return None if self.rate is None else parse_rate(self.rate)

  @property
  def latency_s(self) -> Optional[float]:
    return None if self.latency is None else parse_time(self.latency)

  def describe(self) -> str:
    parts = []
    if self.rate is not None:
      parts.append(f"rate {self.rate}")
    if self.latency is not None:
      parts.append(f"one-way latency {self.latency}")
    if self.burst_bytes is not None:
      parts.append(f"token bucket {self.burst_bytes} B")
    return ", ".join(parts) or "no shaping"


@dataclasses.dataclass(frozen=True)
class Support:
  """What network emulation can do on this machine.

  Attributes:
    namespaces: network namespaces, veth pairs and a bridge can be made.
    rate: tc tbf works (bandwidth emulation).
    delay: tc netem works (latency emulation).
    reasons: why something does not work, one sentence each.
  """
  namespaces: bool
  rate: bool
  delay: bool
  reasons: tuple = ()

  def require(self, link: LinkConfig) -> None:
    """Raises EmulationUnavailable unless `link` can be emulated here."""
    missing = []
    if not self.namespaces:
      missing.append("network namespaces")
    else:
      if link.rate is not None and not self.rate:
        missing.append(f"rate {link.rate} (tc tbf)")
      if link.latency is not None and not self.delay:
        missing.append(f"latency {link.latency} (tc netem)")
    if missing:
      works = self.describe_working()
      raise EmulationUnavailable(
          f"cannot emulate {', '.join(missing)}: {' '.join(self.reasons)}"
          + (f" What works here: {works}." if works else ""))

  def describe_working(self) -> str:
    if not self.namespaces:
      return ""
    works = ["namespaces"]
    if self.rate:
      works.append("rate limits (--emulate_bandwidth)")
    if self.delay:
      works.append("delay (--emulate_latency)")
    return ", ".join(works)


def _run(argv: Sequence[str],
         check: bool = True) -> subprocess.CompletedProcess:
  proc = subprocess.run(list(argv), capture_output=True, text=True,
                        stdin=subprocess.DEVNULL, check=False)
  if check and proc.returncode != 0:
    raise RuntimeError(f"`{' '.join(argv)}` failed with exit code "
                       f"{proc.returncode}: {proc.stderr.strip()}")
  return proc


@functools.lru_cache(maxsize=None)
def check_available() -> Support:
  """Probes, once per process, whether and how emulation can run here.

  Creates a scratch namespace with a veth pair, tries tbf and netem on it and
  deletes it.

  Returns:
    What works, and the reasons for what does not.
  """
  if os.geteuid() != 0:
    return Support(False, False, False, (
        f"Network emulation needs root (to create network namespaces and "
        f"qdiscs); this process runs as uid {os.geteuid()}.",))
  missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
  if missing:
    return Support(False, False, False, (
        f"{' and '.join(missing)} not found on PATH; install iproute2 "
        f"(apt-get install iproute2).",))
  ns = f"{NAMESPACE_BASE}-{os.getpid()}-probe"
  reasons = []
  try:
    proc = _run(["ip", "netns", "add", ns], check=False)
    if proc.returncode != 0:
      return Support(False, False, False, (
          f"`ip netns add` failed: {proc.stderr.strip()}.",))
    proc = _run(["ip", "-n", ns, "link", "add", "name", "va", "type", "veth",
                 "peer", "name", "vb"], check=False)
    bridge = _run(["ip", "-n", ns, "link", "add", "name", "vbr", "type",
                   "bridge"],
                  check=False)
    if proc.returncode != 0 or bridge.returncode != 0:
      return Support(False, False, False, (
          f"veth or bridge devices cannot be created: "
          f"{(proc.stderr + bridge.stderr).strip()}.",))
    tbf = _run(["tc", "-n", ns, "qdisc", "add", "dev", "va", "root", "tbf",
                "rate", "1gbit", "burst", "64kb", "latency", "50ms"],
               check=False)
    if tbf.returncode != 0:
      reasons.append(f"tc tbf is unavailable ({tbf.stderr.strip()}); the "
                     f"kernel lacks sch_tbf (CONFIG_NET_SCH_TBF).")
    netem = _run(["tc", "-n", ns, "qdisc", "add", "dev", "vb", "root",
                  "netem", "delay", "1ms"], check=False)
    if netem.returncode != 0:
      reasons.append(
          f"tc netem is unavailable ({netem.stderr.strip()}): the running "
          f"kernel {os.uname().release} has no sch_netem (CONFIG_NET_SCH_NETEM"
          f" is not set and there is no module to load), so latency cannot "
          f"be emulated; installing packages does not fix this.")
    return Support(True, tbf.returncode == 0, netem.returncode == 0,
                   tuple(reasons))
  finally:
    _run(["ip", "netns", "del", ns], check=False)


def list_namespaces(prefix: str = NAMESPACE_BASE + "-") -> List[str]:
  """Names of the network namespaces starting with `prefix` (ip netns list)."""
  if shutil.which("ip") is None:
    return []
  out = _run(["ip", "netns", "list"], check=False).stdout
  # Lines look like "name" or "name (id: 3)".
  names = [line.split()[0] for line in out.splitlines() if line.strip()]
  return [n for n in names if n.startswith(prefix)]


def remove_stale() -> List[str]:
  """Deletes this module's namespaces whose creating process is gone.

  Returns:
    The names deleted.
  """
  removed = []
  for name in list_namespaces():
    match = re.match(rf"^{NAMESPACE_BASE}-(\d+)-", name)
    if match and not os.path.exists(f"/proc/{match.group(1)}"):
      _run(["ip", "netns", "del", name], check=False)
      removed.append(name)
  return removed


def tc_commands(namespace: str, device: str, rate: Optional[str],
                delay_s: Optional[float],
                burst_bytes: Optional[int] = None) -> List[List[str]]:
  """The tc commands that shape one device's egress.

  Args:
    namespace: the namespace the device is in.
    device: the device.
    rate: tc rate, or None.
    delay_s: delay of this hop in seconds, or None.
    burst_bytes: tbf's bucket in bytes; None for the default (below).

  Returns:
    argv lists, to run in order.
  """
  base = ["tc", "-n", namespace, "qdisc", "add", "dev", device]
  netem = ["netem", "delay", f"{delay_s * 1e6:.0f}us",
           "limit", str(_NETEM_LIMIT_PACKETS)] if delay_s else None
  if rate is None:
    return [base + ["root", "handle", "1:"] + netem] if netem else []
  # tbf can only send `burst` bytes per timer tick; below rate/HZ it cannot
  # reach the rate. 4 ms of traffic covers HZ=250 kernels with margin, and
  # 64 KiB fits one GSO super-packet.
  burst = (burst_bytes if burst_bytes is not None else
           max(64 * 1024, int(parse_rate(rate) / 8 * 0.004)))
  commands = [base + ["root", "handle", "1:", "tbf", "rate", rate,
                      "burst", str(burst), "latency", _TBF_QUEUE_LATENCY]]
  if netem:
    commands.append(base + ["parent", "1:1", "handle", "10:"] + netem)
  return commands


class EmulatedNetwork(cleanup.SignalGuarded):
  """Namespaces, bridge, veths and qdiscs for N workers; always removed.

  Use as a context manager:

    with EmulatedNetwork(2, LinkConfig(rate="100mbit")) as net:
      net.exec_prefix(0)   # ["ip", "netns", "exec", "<prefix>-w0"]
      net.addresses        # ["10.213.0.1", "10.213.0.2"]

  Leaving the block (normally, by an exception, or by SIGINT/SIGTERM, which
  raise `cleanup.Interrupted` inside it) deletes every namespace it created;
  so does interpreter exit, for objects used without `with`.
  """

  def __init__(self, num_workers: int, link: LinkConfig = LinkConfig(),
               subnet: str = DEFAULT_SUBNET, handle_signals: bool = True):
    """Describes the network; nothing is created before `create`.

    Args:
      num_workers: how many worker namespaces (1..253).
      link: rate and latency of every link.
      subnet: first three octets of the private /24 used inside the
        namespaces.
      handle_signals: turn SIGINT/SIGTERM into `cleanup.Interrupted` inside
        the `with` block (main thread only).

    Raises:
      ValueError: on a bad worker count or subnet.
    """
    if not 1 <= num_workers <= 253:
      raise ValueError(f"num_workers must be in 1..253, got {num_workers}")
    if not re.match(r"^\d{1,3}\.\d{1,3}\.\d{1,3}$", subnet):
      raise ValueError(f"subnet must be three octets like '10.213.0', got "
                       f"{subnet!r}")
    self.num_workers = num_workers
    self.link = link
    self.subnet = subnet
    self.prefix = f"{NAMESPACE_BASE}-{os.getpid()}-{next(_counter)}"
    super().__init__(handle_signals)
    self._created: List[str] = []

  @property
  def bridge_namespace(self) -> str:
    return f"{self.prefix}-br"

  def worker_namespace(self, index: int) -> str:
    return f"{self.prefix}-w{index}"

  @property
  def worker_namespaces(self) -> List[str]:
    return [self.worker_namespace(i) for i in range(self.num_workers)]

  @property
  def addresses(self) -> List[str]:
    """The IPv4 address of each worker, valid inside its namespace only."""
    return [f"{self.subnet}.{i + 1}" for i in range(self.num_workers)]

  def exec_prefix(self, index: int) -> List[str]:
    """argv prefix that runs a program inside worker `index`'s namespace."""
    return ["ip", "netns", "exec", self.worker_namespace(index)]

  def create(self) -> None:
    """Creates everything; on any failure removes what was made, then raises.

    Raises:
      EmulationUnavailable: if this machine cannot emulate `link`.
      RuntimeError: if an ip/tc command fails.
    """
    check_available().require(self.link)
    remove_stale()
    atexit.register(self.destroy)
    try:
      self._create()
    except BaseException:
      self.destroy()
      raise

  def _create(self) -> None:
    br = self.bridge_namespace
    self._add_namespace(br)
    _run(["ip", "-n", br, "link", "add", "name", "br0", "type", "bridge"])
    _run(["ip", "-n", br, "link", "set", "br0", "up"])
    hop_delay = (self.link.latency_s / 2) if self.link.latency_s else None
    for i, ns in enumerate(self.worker_namespaces):
      self._add_namespace(ns)
      _run(["ip", "-n", ns, "link", "set", "lo", "up"])
      port = f"p{i}"
      # "name" is spelled out: ip reads a bare "p0" or "a" as an
      # abbreviated keyword.
      _run(["ip", "-n", br, "link", "add", "name", port, "type", "veth",
            "peer", "name", "eth0", "netns", ns])
      _run(["ip", "-n", br, "link", "set", port, "master", "br0"])
      _run(["ip", "-n", br, "link", "set", port, "up"])
      _run(["ip", "-n", ns, "addr", "add", f"{self.addresses[i]}/24", "dev",
            "eth0"])
      _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
      for namespace, device in ((ns, "eth0"), (br, port)):
        for argv in tc_commands(namespace, device, self.link.rate, hop_delay,
                                self.link.burst_bytes):
          _run(argv)

  def _add_namespace(self, name: str) -> None:
    _run(["ip", "netns", "add", name])
    self._created.append(name)

  def destroy(self) -> None:
    """Deletes every namespace this object created. Idempotent.

    Raises:
      RuntimeError: if a namespace is still listed afterwards.
    """
    atexit.unregister(self.destroy)
    with cleanup.signals_deferred():
      # Deleting the bridge namespace first removes the veth pairs with it.
      for name in reversed(self._created):
        _run(["ip", "netns", "del", name], check=False)
      left = [n for n in list_namespaces(self.prefix + "-")
              if n in self._created]
      for name in left:
        _run(["ip", "netns", "del", name], check=False)
      self._created = [n for n in list_namespaces(self.prefix + "-")
                       if n in self._created]
    if self._created:
      raise RuntimeError(f"could not delete network namespaces "
                         f"{self._created}")

  # cleanup.SignalGuarded: the `with` block creates and destroys.
  def _acquire(self) -> None:
    self.create()

  def _release(self) -> None:
    self.destroy()
