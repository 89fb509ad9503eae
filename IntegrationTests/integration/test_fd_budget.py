"""Out of file descriptors, nothing starves: the public listeners stop accepting at a budget that
leaves every accepted client its upstream connection (no 502 for want of a descriptor), resume
as connections close, and the internal listener's own reserve keeps /healthz answering."""
import json
import resource
import selectors
import socket
import threading
import time

from helpers import Proxy

FLOOD = 2000          # concurrent clients, about twice the proxy's descriptor limit
NOFILE = 1024


def limited_binary(proxy_bin, tmp_path, nofile=NOFILE):
    """The proxy under `ulimit -n nofile` (soft and hard: it cannot raise it)."""
    wrapper = tmp_path / "limited-proxy"
    wrapper.write_text(f"#!/bin/sh\nulimit -n {nofile}\nexec {proxy_bin} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def flood(port, n, target, deadline_s=40):
    """`n` connections at once, each sending one request; returns {status or failure: count}."""
    sel = selectors.DefaultSelector()
    request = f"GET {target} HTTP/1.1\r\nHost: flood\r\nConnection: close\r\n\r\n".encode()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, {"sent": False, "buf": b""})
    results = {}
    deadline = time.monotonic() + deadline_s
    while sel.get_map() and time.monotonic() < deadline:
        for key, events in sel.select(timeout=0.5):
            s, st = key.fileobj, key.data
            if not st["sent"]:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    results[f"connect errno {err}"] = results.get(f"connect errno {err}", 0) + 1
                    sel.unregister(s)
                    s.close()
                    continue
                s.send(request)
                st["sent"] = True
                sel.modify(s, selectors.EVENT_READ, st)
                continue
            try:
                chunk = s.recv(65536)
            except OSError as e:
                chunk, st["error"] = b"", repr(e)
            st["buf"] += chunk
            if not chunk:
                head = st["buf"].split(b"\r\n", 1)[0].split(b" ")
                outcome = head[1].decode() if len(head) > 1 else st.get("error", "closed without a response")
                results[outcome] = results.get(outcome, 0) + 1
                sel.unregister(s)
                s.close()
    left = len(sel.get_map())
    if left:
        results["no answer in time"] = left
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return results


def healthz_latencies(port, stop, out):
    while not stop.is_set():
        started = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
                answer = s.recv(100)
            out.append((time.monotonic() - started, answer.split(b" ")[1] if answer else b"none"))
        except OSError as e:
            out.append((time.monotonic() - started, repr(e).encode()))
        time.sleep(0.02)


def ready_line(p, timeout=5.0):
    """The proxy's `ready` line. The listener accepts (which is what Proxy waits for) a moment
    before the line is written, and on a busy machine that moment is long enough to miss it."""
    deadline = time.monotonic() + timeout
    while True:
        for line in p.stderr_text().splitlines():
            if '"msg":"ready"' in line:
                return json.loads(line)
        assert time.monotonic() < deadline, p.stderr_text()[-2000:]
        time.sleep(0.02)


def test_a_flood_past_the_descriptor_limit_gets_no_502_and_healthz_keeps_answering(proxy_bin, upstream, tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, FLOOD + 512)), hard))
    # Every client here is 127.0.0.1: the per-client cap (half the budget by default) is what
    # stops one address doing this (test_client_limits.py); off, the budget alone is tested.
    cfg = tmp_path / "no-client-cap.yaml"
    cfg.write_text("limits: { max_connections_per_client: 0 }\n")
    p = Proxy(limited_binary(proxy_bin, tmp_path), str(tmp_path), upstream.url, opts={"--loops": "2"},
              extra=["--config", str(cfg)])
    try:
        ready = ready_line(p)
        # (1024 − 64 reserved − 128 internal − 2 loops × 128 pooled) / 2
        assert ready["max_connections"] == "288", ready
        stop, probes = threading.Event(), []
        prober = threading.Thread(target=healthz_latencies, args=(p.internal_port, stop, probes))
        prober.start()
        try:
            results = flood(p.port, FLOOD, "/slow?ms=300")
        finally:
            stop.set()
            prober.join(5)
        assert results == {"200": FLOOD}, results
        assert probes and all(status == b"200" for _, status in probes), probes[:20]
        # the liveness probe's default timeout is 1 s: far from it
        assert max(t for t, _ in probes) < 1.0, sorted(t for t, _ in probes)[-5:]
        assert "accepting paused: connection limit reached" in p.stderr_text()
        assert "Too many open files" not in p.stderr_text()
        # and afterwards the proxy serves as before
        assert flood(p.port, 10, "/echo") == {"200": 10}
    finally:
        p.kill()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_limits_max_connections_lowers_the_budget_and_a_higher_one_is_refused_politely(proxy_bin, upstream, tmp_path):
    cfg = tmp_path / "limits.yaml"
    cfg.write_text("limits: { max_connections: 100 }\n")
    p = Proxy(limited_binary(proxy_bin, tmp_path), str(tmp_path), upstream.url, extra=["--config", str(cfg)])
    try:
        ready = ready_line(p)
        assert ready["max_connections"] == "100"
    finally:
        p.kill()
    cfg.write_text("limits: { max_connections: 100000 }\n")
    p = Proxy(limited_binary(proxy_bin, tmp_path), str(tmp_path), upstream.url, opts={"--loops": "2"},
              extra=["--config", str(cfg)], name="high")
    try:
        lines = [json.loads(l) for l in p.stderr_text().splitlines()]
        warn = next(l for l in lines if "more than the descriptor limit allows" in l["msg"])
        assert (warn["configured"], warn["used"], warn["descriptors"]) == ("100000", "288", "1024"), warn
        assert next(l for l in lines if l["msg"] == "ready")["max_connections"] == "288"
    finally:
        p.kill()
