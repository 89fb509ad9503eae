"""Connections spread over the event loops by how many each holds (`LoopPlacement`), not by the
kernel's SO_REUSEPORT hash alone: with few keep-alive clients the hash splits them unevenly in
most runs (10 connections on 2 loops: an even split one run in four), and the fuller loop's
clients wait while the other idles. Through the real binary with two loops: plain, behind a
PROXY header, and over TLS (a moved connection does its handshake on the loop it moved to)."""

import signal
import socket
import time

import pytest

from helpers import MiB, HTTPConn, pattern_bytes
from test_observability import samples, scrape, value
from test_proxy_protocol import v1
from test_tls import client_context, pki, tls_files  # noqa: F401 (fixtures)


def per_loop(p):
    """Connections on loop 0 and loop 1, the scrape's own connection included."""
    s = samples(scrape(p))
    return [int(value(s, "callback_proxy_loop_connections", loop=str(i))) for i in (0, 1)]


def moved(p):
    return value(samples(scrape(p)), "callback_proxy_connections_moved_total")


def assert_even(p, n):
    counts = per_loop(p)
    # n client connections and the scrape's: split n/2 : n/2 + 1 whatever the hash did.
    assert sum(counts) == n + 1 and max(counts) - min(counts) <= 1, counts


def settled(p):
    """Waits until only the scrape's connection is left (closes reach the loops a moment later)."""
    deadline = time.monotonic() + 5
    while sum(per_loop(p)) != 1:
        assert time.monotonic() < deadline, per_loop(p)
        time.sleep(0.02)


def read_echo(s):
    """The whole response to one /echo request on a raw socket (its JSON body ends with `}`)."""
    data = b""
    while not data.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_keep_alive_clients_are_split_evenly_over_two_loops(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--loops": "2"})
    # Three rounds of 10: an even split every time by the hash alone would happen 1.5 % of runs.
    for _ in range(3):
        conns = []
        for _ in range(10):
            c = HTTPConn(p.port)
            c.request("GET", "/echo")
            assert c.read_response().status == 200
            conns.append(c)
        assert_even(p, 10)
        # Every connection still serves requests on the loop it lives on.
        for c in conns:
            c.request("GET", "/echo")
            assert c.read_response().status == 200
            c.close()
        settled(p)


def test_one_loop_moves_nothing(proxy_factory, upstream):
    p = proxy_factory(upstream)
    conns = [HTTPConn(p.port) for _ in range(6)]
    for c in conns:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    assert per_loop(p) == [7, 0] and moved(p) == 0
    for c in conns:
        c.close()


def test_connections_behind_a_proxy_header_are_split_and_keep_their_client(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--loops": "2"}, extra=["--proxy-protocol"])
    socks = []
    for i in range(10):
        s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
        s.sendall(v1(src=f"203.0.113.{i + 1}") + b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        data = read_echo(s)
        assert data.startswith(b"HTTP/1.1 200") and f'"203.0.113.{i + 1}"'.encode() in data
        socks.append(s)
    assert_even(p, 10)
    for s in socks:
        s.close()


def test_tls_connections_are_split_and_shake_hands_on_their_loop(proxy_factory, upstream, pki, tls_files):
    cert, key = tls_files
    p = proxy_factory(upstream, opts={"--loops": "2"}, extra=["--tls-cert", cert, "--tls-key", key])
    socks = []
    for _ in range(10):
        s = client_context(pki).wrap_socket(socket.create_connection(("127.0.0.1", p.port), timeout=5),
                                            server_hostname="default.test")
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        data = read_echo(s)
        assert data.startswith(b"HTTP/1.1 200")
        socks.append(s)
    assert_even(p, 10)
    for s in socks:
        s.close()


def test_two_loops_drain_with_moved_connections(proxy_factory, upstream):
    """SIGTERM with connections on both loops, some moved there: the in-flight request finishes
    whole, the idle ones are closed, the process exits 0 at once."""
    p = proxy_factory(upstream, opts={"--loops": "2", "--drain-timeout": "10s", "--keepalive-timeout": "60s"})
    idle = []
    for _ in range(10):
        c = HTTPConn(p.port)
        c.request("GET", "/echo")
        assert c.read_response().status == 200
        idle.append(c)
    assert_even(p, 10)
    n = 2 * MiB
    with HTTPConn(p.port, timeout=10) as busy:
        busy.request("GET", f"/slow?ms=1000&n={n}")
        # The ten /echo requests came first: wait for the slow one to reach the upstream.
        assert upstream.record.wait_for(lambda r: len(r.requests()) > 10, timeout=2)
        time.sleep(0.2)
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        r = busy.read_response(timeout=8)
        assert r.status == 200 and r.body == pattern_bytes(0, n)
    assert p.wait_exit(3) == 0
    assert time.monotonic() - t0 < 3
    for c in idle:
        assert c.wait_closed(1)
        c.close()
