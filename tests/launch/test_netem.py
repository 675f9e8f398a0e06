"""Tests of tf_preempt.launch.netem: parsing, and real namespaces as root.

The namespace tests measure the emulated links with a small TCP probe (a
Python server in one worker namespace, a client in the other): throughput of
a few MB against the tbf rate, and round-trip time against the netem delay.
They skip, saying why, where emulation (or netem alone) is unavailable.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from tf_preempt.launch import netem

_PORT = 5001

# Server: accept one connection; "rate" mode counts bytes until EOF, "echo"
# mode echoes small messages. Prints one JSON line.
_SERVER = textwrap.dedent("""
    import json, socket, sys, time
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port)); srv.listen(1); srv.settimeout(20)
    print("listening", flush=True)
    conn, _ = srv.accept(); conn.settimeout(20)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    total, first = 0, None
    while True:
      data = conn.recv(1 << 16)
      if not data:
        break
      if mode == "echo":
        conn.sendall(data)
        continue
      if first is None:
        first = time.perf_counter()
      total += len(data)
    elapsed = time.perf_counter() - first if first else 0.0
    print(json.dumps({"bytes": total, "seconds": elapsed}), flush=True)
""")

# Client: connect (timing the handshake, one round trip), then send N bytes
# ("rate") or 20 one-byte ping-pongs ("echo"). Prints one JSON line.
_CLIENT = textwrap.dedent("""
    import json, socket, sys, time
    host, port, mode, size = sys.argv[1], int(sys.argv[2]), *sys.argv[3:5]
    size = int(size)
    deadline = time.monotonic() + 10
    while True:
      sock = socket.socket(); sock.settimeout(20)
      start = time.perf_counter()
      try:
        sock.connect((host, port)); break
      except OSError:
        sock.close()
        if time.monotonic() > deadline: raise
        time.sleep(0.05)
    connect_s = time.perf_counter() - start
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    if mode == "echo":
      for _ in range(20):
        t = time.perf_counter(); sock.sendall(b"x"); sock.recv(1)
        rtts.append(time.perf_counter() - t)
    else:
      chunk = b"\\0" * (1 << 16)
      sent = 0
      while sent < size:
        sock.sendall(chunk); sent += len(chunk)
    sock.close()
    print(json.dumps({"connect_s": connect_s, "rtts": sorted(rtts)}),
          flush=True)
""")


def _ours_left():
  return netem.list_namespaces()


def _skip_unless(feature):
  support = netem.check_available()
  if not support.namespaces or not getattr(support, feature):
    pytest.skip(f"network emulation ({feature}) unavailable: "
                f"{' '.join(support.reasons)}")


def _probe(net, tmp_path, mode, size=0):
  """Runs the TCP probe from worker 0 to worker 1; returns both JSON lines."""
  server_py = tmp_path / "server.py"
  client_py = tmp_path / "client.py"
  server_py.write_text(_SERVER)
  client_py.write_text(_CLIENT)
  host = net.addresses[1]
  server = subprocess.Popen(
      net.exec_prefix(1) + [sys.executable, str(server_py), host, str(_PORT),
                            mode],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    assert server.stdout.readline().strip() == "listening"
    client = subprocess.run(
        net.exec_prefix(0) + [sys.executable, str(client_py), host,
                              str(_PORT), mode, str(size)],
        capture_output=True, text=True, timeout=30)
    assert client.returncode == 0, client.stderr
    out, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
  finally:
    if server.poll() is None:
      server.kill()
      server.wait()
  return json.loads(out.strip().splitlines()[-1]), json.loads(
      client.stdout.strip().splitlines()[-1])


def test_parse_rate_and_time():
  assert netem.parse_rate("2gbit") == 2e9
  assert netem.parse_rate("100mbit") == 1e8
  assert netem.parse_rate("1.5Mbit") == 1.5e6
  assert netem.parse_rate("10mbps") == 8e7  # tc: bps is bytes per second.
  assert netem.parse_time("200us") == pytest.approx(2e-4)
  assert netem.parse_time("1.5ms") == pytest.approx(1.5e-3)
  for bad in ("fast", "2 gbit", "0mbit", "-1mbit", "2gb"):
    with pytest.raises(ValueError, match="bad rate"):
      netem.parse_rate(bad)
  with pytest.raises(ValueError, match="bad time"):
    netem.parse_time("200")
  with pytest.raises(ValueError, match="bad rate"):
    netem.LinkConfig(rate="lots")


def test_tc_commands_shape_with_tbf_and_netem_under_it():
  both = netem.tc_commands("ns", "eth0", "100mbit", 1e-4)
  assert both[0][:8] == ["tc", "-n", "ns", "qdisc", "add", "dev", "eth0",
                         "root"]
  assert "tbf" in both[0] and "100mbit" in both[0]
  assert both[1][7:12] == ["parent", "1:1", "handle", "10:", "netem"]
  assert "100us" in both[1]
  assert netem.tc_commands("ns", "eth0", None, None) == []
  delay_only = netem.tc_commands("ns", "eth0", None, 1e-3)
  assert len(delay_only) == 1 and "netem" in delay_only[0]
  # The burst must carry at least 4 ms of traffic at high rates.
  fast = netem.tc_commands("ns", "eth0", "2gbit", None)[0]
  assert int(fast[fast.index("burst") + 1]) >= 2e9 / 8 * 0.004
  # A link's own bucket replaces the default.
  mine = netem.tc_commands("ns", "eth0", "2gbit", None, burst_bytes=4000000)
  assert mine[0][mine[0].index("burst") + 1] == "4000000"
  assert "token bucket 4000000 B" in netem.LinkConfig(
      rate="2gbit", burst_bytes=4000000).describe()


@pytest.mark.parametrize("kwargs,message", [
    (dict(rate="1gbit", burst_bytes=0), "positive integer"),
    (dict(rate="1gbit", burst_bytes=1.5), "positive integer"),
    (dict(rate="1gbit", burst_bytes=True), "positive integer"),
    (dict(burst_bytes=100000), "needs a rate"),
])
def test_link_burst_must_be_a_positive_count_with_a_rate(kwargs, message):
  with pytest.raises(ValueError, match=message):
    netem.LinkConfig(**kwargs)


def test_support_require_says_what_is_missing_and_what_works():
  support = netem.Support(True, True, False, ("no netem here.",))
  support.require(netem.LinkConfig(rate="1gbit"))
  with pytest.raises(netem.EmulationUnavailable,
                     match=r"cannot emulate latency 1ms \(tc netem\): no "
                           r"netem here\. What works here: namespaces, rate"):
    support.require(netem.LinkConfig(rate="1gbit", latency="1ms"))
  nothing = netem.Support(False, False, False, ("needs root.",))
  with pytest.raises(netem.EmulationUnavailable, match="needs root"):
    nothing.require(netem.LinkConfig(rate="1gbit"))


def test_bad_network_arguments():
  with pytest.raises(ValueError, match="num_workers"):
    netem.EmulatedNetwork(0)
  with pytest.raises(ValueError, match="subnet"):
    netem.EmulatedNetwork(2, subnet="10.213")


@pytest.mark.slow
def test_rate_is_emulated_and_everything_is_removed(tmp_path):
  _skip_unless("rate")
  link = netem.LinkConfig(rate="100mbit")
  with netem.EmulatedNetwork(2, link) as net:
    names = set(net.worker_namespaces + [net.bridge_namespace])
    assert names <= set(_ours_left())
    # The private addresses exist only inside the worker namespaces.
    host_addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True,
                                text=True, check=True).stdout
    assert net.subnet + "." not in host_addrs
    received, _ = _probe(net, tmp_path, "rate", size=6 << 20)
  rate_mb_s = received["bytes"] / received["seconds"] / 1e6
  print(f"emulated 100mbit: {rate_mb_s:.2f} MB/s over "
        f"{received['bytes'] / 1e6:.1f} MB")
  assert received["bytes"] >= 6 << 20
  # 100 Mbit/s is 12.5 MB/s on the wire, about 11.9 MB/s of TCP payload.
  assert 5 < rate_mb_s < 15
  assert not names & set(_ours_left())


@pytest.mark.slow
def test_latency_is_emulated(tmp_path):
  _skip_unless("delay")
  link = netem.LinkConfig(rate="1gbit", latency="5ms")
  with netem.EmulatedNetwork(2, link) as net:
    _, sent = _probe(net, tmp_path, "echo")
    names = set(net.worker_namespaces + [net.bridge_namespace])
  median_rtt = sent["rtts"][len(sent["rtts"]) // 2]
  print(f"emulated 5ms one-way: connect {sent['connect_s'] * 1e3:.2f} ms, "
        f"median RTT {median_rtt * 1e3:.2f} ms")
  # Round trip = 2 x one-way latency = 10 ms, plus a little processing.
  assert 9e-3 < median_rtt < 20e-3
  assert 9e-3 < sent["connect_s"] < 30e-3
  assert not names & set(_ours_left())


@pytest.mark.slow
def test_failure_inside_block_removes_namespaces():
  _skip_unless("namespaces")
  with pytest.raises(RuntimeError, match="worker crashed"):
    with netem.EmulatedNetwork(3, netem.LinkConfig()) as net:
      prefix = net.prefix
      assert len(netem.list_namespaces(prefix + "-")) == 4
      raise RuntimeError("worker crashed")
  assert netem.list_namespaces(prefix + "-") == []


@pytest.mark.slow
def test_failure_while_creating_removes_what_was_made():
  _skip_unless("namespaces")
  # 300 is not an IPv4 octet: `ip addr add` fails after the bridge and the
  # first worker namespace exist.
  net = netem.EmulatedNetwork(2, netem.LinkConfig(), subnet="10.213.300")
  with pytest.raises(RuntimeError, match="ip -n .* addr add"):
    with net:
      pass
  assert netem.list_namespaces(net.prefix + "-") == []


@pytest.mark.slow
def test_latency_unavailable_is_a_clear_error():
  support = netem.check_available()
  if support.delay or not support.namespaces:
    pytest.skip("netem works here (or nothing does)")
  net = netem.EmulatedNetwork(2, netem.LinkConfig(latency="200us"))
  with pytest.raises(netem.EmulationUnavailable,
                     match=r"cannot emulate latency 200us \(tc netem\)"):
    with net:
      pass
  assert netem.list_namespaces(net.prefix) == []  # Nothing was created.
