"""What operators watch: Prometheus metrics on the internal listener, the request id carried
from the client (or generated) to the upstream and the access log, and /readyz."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

from helpers import HTTPConn, closed_port, http_get_status


def scrape(proxy):
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.internal_port}/metrics", timeout=3) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def samples(text):
    """{(name, frozenset(labels)): value} for every sample line; checks the exposition syntax."""
    out = {}
    declared = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            declared.add(name)
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"not an exposition line: {line!r}"
        name, labels, value = m.groups()
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or base in declared, f"sample without # TYPE: {line!r}"
        pairs = frozenset(re.findall(r'([a-z_]+)="([^"]*)"', labels or ""))
        key = (name, pairs)
        assert key not in out, f"duplicate series {line!r}"
        out[key] = float(value)
    return out


def value(s, name, **labels):
    return s.get((name, frozenset(labels.items())), 0.0)


def test_the_proxys_own_502_503_504_are_told_apart_from_the_apps_5xx(proxy):
    """The app's own 500 and 503 are proxied 5xx, not gateway errors; a response the proxy could
    not read from the app is its own 502 — the first pages nobody at the proxy's door, the
    second does (deploy/prometheus: CallbackProxyApp5xx, CallbackProxyGatewayErrors)."""
    s = samples(scrape(proxy))
    for status in ("502", "503", "504"):  # every status from the start, at 0
        assert ("callback_proxy_gateway_errors_total", frozenset({("status", status)})) in s
    for target, status in (("/status/500", 500), ("/status/503", 503), ("/garbage", 502)):
        with proxy.conn() as c:
            c.request("GET", target)
            assert c.read_response().status == status
    time.sleep(0.1)
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="5xx") == 3
    assert value(s, "callback_proxy_gateway_errors_total", status="502") == 1
    assert value(s, "callback_proxy_gateway_errors_total", status="503") == 0


def test_an_unreachable_upstream_is_a_proxied_502_of_the_proxys_own(proxy_factory):
    proxy = proxy_factory(upstream_url=f"http://127.0.0.1:{closed_port()}")
    with proxy.conn() as c:
        c.request("GET", "/")
        assert c.read_response().status == 502
    time.sleep(0.1)
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="5xx") == 1
    assert value(s, "callback_proxy_gateway_errors_total", status="502") == 1


def test_requests_are_counted_by_route_and_status_class(proxy):
    with proxy.conn() as c:
        for _ in range(3):
            c.request("GET", "/echo")
            assert c.read_response().status == 200
        c.request("GET", "/status/404")
        assert c.read_response().status == 404
    with proxy.conn() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")  # refused by the proxy itself
        assert c.read_response().status == 400
    time.sleep(0.1)  # the metrics are counted when the request is logged, after the response
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="2xx") == 3
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="4xx") == 1
    assert value(s, "callback_proxy_requests_total", route="local", code_class="4xx") == 1
    # the upstream latency histogram saw the four proxied responses, cumulatively
    assert value(s, "callback_proxy_upstream_response_seconds_count") == 4
    assert value(s, "callback_proxy_upstream_response_seconds_bucket", le="+Inf") == 4
    buckets = sorted(((float(dict(k[1])["le"]), v) for k, v in s.items()
                      if k[0] == "callback_proxy_upstream_response_seconds_bucket"
                      and dict(k[1])["le"] != "+Inf"))
    counts = [v for _, v in buckets]
    assert counts == sorted(counts), f"buckets are not cumulative: {buckets}"
    assert value(s, "callback_proxy_connections_total", listener="public") == 2
    assert value(s, "callback_proxy_open_connections", listener="public") == 0
    # the internal listener's own requests: the readiness polls of the fixture, this scrape not yet
    assert value(s, "callback_proxy_requests_total", route="internal", code_class="2xx") >= 1
    (build,) = [(dict(k[1]), v) for k, v in s.items() if k[0] == "callback_proxy_build_info"]
    assert build[1] == 1 and re.fullmatch(r"\d+\.\d+\.\d+", build[0]["version"]), build
    # The commit scripts/build recorded, as --version prints it.
    version = subprocess.run([proxy.args[0], "--version"], capture_output=True, text=True).stdout
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", build[0]["commit"]) and f"(commit {build[0]['commit']})" in version, build
    assert abs(value(s, "callback_proxy_process_start_time_seconds") - time.time()) < 600


def proc_limits_soft(pid, name):
    with open(f"/proc/{pid}/limits") as f:
        line = next(l for l in f if l.startswith(name))
    return int(line[len(name):].split()[0])


def test_the_standard_process_metrics_agree_with_proc(proxy):
    """process_* under the names every Prometheus client library uses, checked against what
    /proc says about the same process."""
    text = scrape(proxy)
    for name, kind in [("process_resident_memory_bytes", "gauge"), ("process_virtual_memory_bytes", "gauge"),
                       ("process_open_fds", "gauge"), ("process_max_fds", "gauge"),
                       ("process_cpu_seconds_total", "counter"), ("process_start_time_seconds", "gauge"),
                       ("callback_proxy_heap_trims_total", "counter")]:
        assert f"# TYPE {name} {kind}\n" in text, name
    s = samples(text)
    with open(f"/proc/{proxy.pid}/status") as f:
        status = dict(l.split(":", 1) for l in f)
    rss = int(status["VmRSS"].split()[0]) * 1024
    assert 0.5 * rss < value(s, "process_resident_memory_bytes") < 2 * rss
    assert value(s, "process_virtual_memory_bytes") >= value(s, "process_resident_memory_bytes")
    # listeners, epoll and eventfds, the log files: a few dozen; the kernel's own count, give or take
    # the connection this scrape came on and the moment between the two readings
    fds = len(os.listdir(f"/proc/{proxy.pid}/fd"))
    assert abs(value(s, "process_open_fds") - fds) <= 3, (value(s, "process_open_fds"), fds)
    assert value(s, "process_max_fds") == proc_limits_soft(proxy.pid, "Max open files")
    with open(f"/proc/{proxy.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks        # utime, stime
    assert abs(value(s, "process_cpu_seconds_total") - cpu) < 0.5
    assert value(s, "process_start_time_seconds") == value(s, "callback_proxy_process_start_time_seconds")
    assert abs(value(s, "process_start_time_seconds") - time.time()) < 600
    # a counter grows: burn some CPU in the proxy and look again
    with proxy.conn() as c:
        for _ in range(200):
            c.request("GET", "/echo")
            assert c.read_response().status == 200
    assert value(samples(scrape(proxy)), "process_cpu_seconds_total") >= value(s, "process_cpu_seconds_total")


def test_open_connections_gauge_follows_clients(proxy):
    conns = [HTTPConn(proxy.port) for _ in range(3)]
    try:
        for c in conns:
            c.request("GET", "/echo")
            assert c.read_response().status == 200
        assert value(samples(scrape(proxy)), "callback_proxy_open_connections", listener="public") == 3
    finally:
        for c in conns:
            c.close()
    deadline = time.monotonic() + 3
    while value(samples(scrape(proxy)), "callback_proxy_open_connections", listener="public") != 0:
        assert time.monotonic() < deadline, "open connections gauge did not return to 0"
        time.sleep(0.02)


def hdr(echo, name):
    return [v for n, v in echo["headers"] if n.lower() == name.lower()]


def test_a_usable_client_request_id_is_passed_upstream_and_logged(proxy):
    rid = "req-7f3a:abc/DEF+1=2"
    with proxy.conn() as c:
        c.request("GET", "/echo", headers=[("X-Request-Id", rid)])
        e = c.read_response().json()
    assert hdr(e, "x-request-id") == [rid]
    (line,) = proxy.wait_access_log(1)
    assert line["request_id"] == rid


def test_a_missing_or_unusable_request_id_is_replaced_by_a_generated_one(proxy):
    unusable = ["", "x" * 129, 'has"quote', "back\\slash", "with space"]
    seen = []
    with proxy.conn() as c:
        c.request("GET", "/echo")
        seen.append(hdr(c.read_response().json(), "x-request-id"))
        for bad in unusable:
            c.request("GET", "/echo", headers=[("X-Request-Id", bad)])
            seen.append(hdr(c.read_response().json(), "x-request-id"))
    ids = []
    for got in seen:
        assert len(got) == 1, f"upstream must see exactly one X-Request-Id: {got}"
        assert re.fullmatch(r"[0-9a-f]{32}", got[0]), got
        ids.append(got[0])
    assert len(set(ids)) == len(ids), f"generated ids repeat: {ids}"
    lines = proxy.wait_access_log(len(ids))
    assert [l["request_id"] for l in lines] == ids


def test_only_one_request_id_reaches_the_upstream(proxy):
    with proxy.conn() as c:
        c.request("GET", "/echo", headers=[("X-Request-Id", "first"), ("x-request-id", "second")])
        e = c.read_response().json()
    assert hdr(e, "x-request-id") == ["first"]


def test_requests_refused_by_the_proxy_are_logged_under_their_id(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "1k"})
    with p.conn() as c:
        # a well-formed head the proxy refuses (body too large): the client's id is kept
        c.send(b"POST /sink HTTP/1.1\r\nHost: a\r\nX-Request-Id: too-big-1\r\nContent-Length: 5000\r\n\r\n")
        assert c.read_response().status == 413
    with p.conn() as c:
        # a malformed head: nothing in it is trusted, the id is generated
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\nX-Request-Id: dup-host\r\n\r\n")
        assert c.read_response().status == 400
    big, bad = p.wait_access_log(2)
    assert big["request_id"] == "too-big-1"
    assert re.fullmatch(r"[0-9a-f]{32}", bad["request_id"]), bad
    # the operator's log line for the refusal carries the same id as the access-log line
    refusals = [json.loads(l) for l in p.stderr_text().splitlines() if '"request refused"' in l]
    assert [r["request_id"] for r in refusals] == ["too-big-1", bad["request_id"]]


def readyz(proxy):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy.internal_port}/readyz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_readyz_says_ready_when_the_upstream_accepts_connections(proxy):
    assert readyz(proxy) == (200, {"ready": True})


def test_readyz_names_an_unreachable_upstream(proxy_factory):
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{closed_port()}")
    status, body = readyz(p)
    assert status == 503
    assert body["ready"] is False
    assert "refused" in body["failed"]["upstream"].lower(), body
    # /healthz is about the process, not its dependencies
    assert http_get_status(p.internal_port, "/healthz")[0] == 200


def test_readyz_turns_unready_while_draining(proxy):
    # a slow request keeps the proxy draining after SIGTERM; meanwhile /readyz must say 503 so
    # a load balancer stops sending new work
    result = {}

    def slow():
        with proxy.conn() as c:
            c.request("GET", "/slow?ms=1500")
            result["status"] = c.read_response(timeout=5).status

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.3)
    proxy.signal(signal.SIGTERM)
    time.sleep(0.2)
    status, body = readyz(proxy)
    t.join()
    assert status == 503 and body["failed"]["listeners"] == "draining", body
    assert result["status"] == 200, "the in-flight request must still complete"


def test_metrics_and_readyz_are_not_on_the_public_listener(proxy, upstream):
    with proxy.conn() as c:
        c.request("GET", "/metrics")
        r = c.read_response()
    # forwarded like any other path: the upstream answers (its /metrics is not ours)
    assert upstream.record.requests()[-1]["target"] == "/metrics"
    assert b"callback_proxy_" not in r.body
