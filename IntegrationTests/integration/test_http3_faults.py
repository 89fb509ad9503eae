"""The fault suite's reload and drain checks with HTTP/3 clients among the others: one proxy
process (two loops) serving HTTP/1.1 over TLS, HTTP/2 and HTTP/3 (QUIC, aioquic) at once.

- Configuration reloads under mixed load: SIGHUPs that each change the configuration while
  keep-alive HTTP/1.1 clients, HTTP/2 clients and HTTP/3 clients send requests as fast as they
  can. HTTP/1.1 connections move to the new configuration in place; HTTP/2 and HTTP/3 ones get a
  GOAWAY, finish their streams and close, and the client opens a new connection. No request may
  fail or go unanswered; a request the GOAWAY left unprocessed (a stream above its last id,
  REFUSED_STREAM, H3_REQUEST_REJECTED) is retried on a new connection and must then be answered.
  A connection that ends without a GOAWAY while a request is unanswered loses that request: the
  client cannot know whether it was processed (RFC 9114 §5.4, RFC 9113 §6.8), so it may not
  retry it.
- SIGTERM with slow requests in flight on all three protocols (and fast clients still sending):
  each slow response arrives whole, idle HTTP/2 and HTTP/3 connections get a GOAWAY before they
  are closed, new TCP connections are refused and new QUIC connections get no answer, every fast
  request is either answered or cleanly left unprocessed, and the process exits 0 well within
  the drain timeout.
- A certificate-only SIGHUP under mixed load: nothing is dropped, established connections of every
  protocol stay open (no GOAWAY: the configuration did not change), and new handshakes of every
  protocol present the new certificate.

Every request carries a unique id in its query; the upstream's record is the ground truth the
clients' accounts are checked against: each answered request reached the app exactly once, and a
request reported as unprocessed never reached it.
"""

import asyncio
import collections
import json
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from aioquic.quic.events import StreamDataReceived
from cryptography import x509
from cryptography.x509.oid import NameOID

from h2client import RawH2, SettingsFrame
from h3client import H3, _Protocol
from helpers import ClosedEarly, HTTPConn, pattern_bytes, wait_port_refused
from test_http2 import cert  # noqa: F401 (the module's certificate fixture, shared)
from test_observability import samples, scrape, value
from test_reload import reload, write_config

# RFC 9114 §8.1
H3_NO_ERROR = 0x100
H3_REQUEST_REJECTED = 0x10B

RELOADS = 20
# Streams each HTTP/2 and HTTP/3 client keeps in flight on its connection, so that a GOAWAY
# usually arrives while requests are in flight rather than between two.
DEPTH = 4
# A request that gets no answer within this counts as lost (nothing here takes more than a few ms).
ANSWER_TIMEOUT = 10.0
# A new QUIC handshake normally completes in milliseconds; during the drain one gets no answer,
# and this bounds how long a client waits for it.
H3_CONNECT_TIMEOUT = 5.0


def protocol_of(rid):
    return rid.split("-", 1)[0]


# ---------------------------------------------------------------------------------------------
# Clients


def tls_context(ca, alpn):
    ctx = ssl.create_default_context(cafile=ca) if ca else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not ca:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols([alpn])
    return ctx


class H1TLS(HTTPConn):
    """HTTPConn (the strict HTTP/1.1 reader) over TLS, offering only http/1.1 in ALPN."""

    def __init__(self, port, ca, timeout=ANSWER_TIMEOUT):
        super().__init__(port, timeout=timeout)
        self.sock = tls_context(ca, "http/1.1").wrap_socket(self.sock, server_hostname="localhost")
        assert self.sock.selected_alpn_protocol() == "http/1.1"

    def _fill(self, deadline):
        # A TCP close without TLS's close_notify is a close like any other here: the reader then
        # says how much of an answer had come (ClosedEarly), as it does for a reset.
        try:
            return super()._fill(deadline)
        except ssl.SSLEOFError:
            self.eof = "eof without close_notify"
            return False

    def organisation(self):
        return organisation_of(x509.load_der_x509_certificate(self.sock.getpeercert(binary_form=True)))


class H2(RawH2):
    """RawH2 whose writes never raise: a write to a connection the proxy has closed marks it, and
    the frames that arrived before the close (a GOAWAY, the last answers) are still read."""

    send_failed = False

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        # Each request is its own write: without this, Nagle holds it for the proxy's ACK.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, *frames):
        try:
            super().send(*frames)
        except OSError:
            self.send_failed = True

    def read_until(self, predicate, timeout=5.0):
        try:
            return super().read_until(predicate, timeout)
        except OSError:  # a read after the proxy's close (TLS alert, reset)
            self.closed = True
            return predicate(self)

    def organisation(self):
        return organisation_of(x509.load_der_x509_certificate(self.sock.getpeercert(binary_form=True)))

    def server_started(self):
        """Whether the proxy sent its connection preface (SETTINGS): before it, no stream of
        this connection can have been processed."""
        return any(isinstance(f, SettingsFrame) and "ACK" not in f.flags for f in self.frames)


def _varint(buf, at):
    """A QUIC variable-length integer at buf[at:]: (value, end), or None if incomplete."""
    if at >= len(buf):
        return None
    n = 1 << (buf[at] >> 6)
    if at + n > len(buf):
        return None
    v = buf[at] & 0x3F
    for b in buf[at + 1:at + n]:
        v = (v << 8) | b
    return v, at + n


class _GoawayWatchingProtocol(_Protocol):
    """aioquic reads the server's GOAWAY and drops it; this reads the server's control stream too,
    for the GOAWAY's stream id (RFC 9114 §5.2: requests at or above it were not processed)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.goaway_id = None
        self.goaways = 0
        self.settings_seen = False  # the server's SETTINGS: its HTTP/3 layer has started
        self._uni = {}

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.stream_id % 4 == 3:  # server uni stream
            self._read_uni(event.stream_id, event.data)
        super().quic_event_received(event)

    def _read_uni(self, sid, data):
        st = self._uni.setdefault(sid, {"buf": bytearray(), "type": None})
        if st["type"] not in (None, 0):
            return
        buf = st["buf"]
        buf += data
        if st["type"] is None:
            t = _varint(buf, 0)
            if t is None:
                return
            st["type"] = t[0]
            del buf[:t[1]]
            if st["type"] != 0:  # not the control stream (QPACK streams)
                buf.clear()
                return
        while True:
            ft = _varint(buf, 0)
            fl = ft and _varint(buf, ft[1])
            if not fl or len(buf) < fl[1] + fl[0]:
                return
            payload = bytes(buf[fl[1]:fl[1] + fl[0]])
            del buf[:fl[1] + fl[0]]
            if ft[0] == 0x4:  # SETTINGS
                self.settings_seen = True
            if ft[0] == 0x7:  # GOAWAY
                self.goaway_id = _varint(payload, 0)[0]
                self.goaways += 1


class H3Client(H3):
    """h3client.H3 that sees GOAWAY and sends a batch of requests only while none has arrived
    (checked on the connection's own loop, so the check and the sending are one step)."""

    protocol = _GoawayWatchingProtocol

    def batch(self, paths, timeout=ANSWER_TIMEOUT):
        """Sends GETs for `paths` on new streams at once; [(stream id, response)], answered or not
        after `timeout`. None when a GOAWAY or a close came first (nothing sent)."""
        async def run():
            p = self.proto
            if p.goaway_id is not None or p.terminated is not None:
                return None
            sent = []
            for path in paths:
                sid = self.quic.get_next_available_stream_id()
                sent.append((sid, p.send("GET", path)))
            await asyncio.wait([r.done for _, r in sent], timeout=timeout)
            return sent
        return self._call(run(), timeout=timeout + 5)

    def organisation(self):
        return organisation_of(self.quic.tls._peer_certificate)


def open_h3(port, ca, timeout=H3_CONNECT_TIMEOUT):
    """A connected H3Client, or raises (and stops the client's loop) if the handshake fails."""
    c = H3Client(port, ca=ca, timeout=ANSWER_TIMEOUT)
    c.thread.start()
    fut = asyncio.run_coroutine_threadsafe(c._open(), c.loop)
    try:
        fut.result(timeout)
    except BaseException:
        fut.cancel()
        c.loop.call_soon_threadsafe(c.loop.stop)
        c.thread.join(2)
        raise
    return c


def organisation_of(certificate):
    return certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value


def check_echo(rid, status, body, content_length=None):
    """None if this is /echo's whole answer to request `rid`, else what is wrong."""
    if status != 200:
        return f"status {status}: {bytes(body[:200])!r}"
    if content_length is not None and int(content_length) != len(body):
        return f"body cut: {len(body)} of {content_length} bytes"
    try:
        target = json.loads(bytes(body))["target"]
    except (ValueError, KeyError):
        return f"not /echo's JSON: {bytes(body[:200])!r}"
    if parse_qs(urlsplit(target).query).get("id") != [rid]:
        return f"the answer to another request: {target}"
    return None


# ---------------------------------------------------------------------------------------------
# Mixed load


class Ledger:
    """Every request's outcomes, by id: "ok" (answered whole), "unprocessed" (left unprocessed by
    a GOAWAY or a close before any byte of an answer: may be retried) or "failed"."""

    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = collections.defaultdict(list)
        self.connections = collections.Counter()
        self.goaways = collections.Counter()
        self.refused = collections.Counter()  # new connections refused (during the drain)
        self.errors = []  # failures not tied to one request (a connection that could not open)

    def note(self, rid, kind, detail=""):
        with self.lock:
            self.outcomes[rid].append((kind, detail))

    def count(self, what, proto):
        with self.lock:
            what[proto] += 1

    def error(self, detail):
        with self.lock:
            self.errors.append(detail)

    def ok(self, proto=None):
        with self.lock:
            return sum(1 for rid, o in self.outcomes.items()
                       if (proto is None or protocol_of(rid) == proto) and o[-1][0] == "ok")

    def failures(self):
        with self.lock:
            return self.errors + [(rid, d) for rid, o in self.outcomes.items() for k, d in o if k == "failed"]

    def unprocessed(self, proto):
        with self.lock:
            return sum(1 for rid, o in self.outcomes.items() if protocol_of(rid) == proto
                       for k, _ in o if k == "unprocessed")

    def final(self, kind):
        with self.lock:
            return {rid for rid, o in self.outcomes.items() if o[-1][0] == kind}


class MixedLoad:
    """HTTP/1.1 (TLS, keep-alive), HTTP/2 and HTTP/3 clients against one proxy, each thread sending
    /echo requests as fast as it can until stop(). `draining` (set by a test about to send
    SIGTERM) makes a refused new connection and a clean close the expected end rather than a
    failure."""

    def __init__(self, proxy, ca, h1=3, h2=3, h3=3):
        self.port, self.ca = proxy.port, ca
        self.authority = f"localhost:{proxy.port}"
        self.ledger = Ledger()
        self.stopping = threading.Event()
        self.draining = threading.Event()
        self.threads = ([threading.Thread(target=self.h1, args=(i,)) for i in range(h1)]
                        + [threading.Thread(target=self.h2, args=(i,)) for i in range(h2)]
                        + [threading.Thread(target=self.h3, args=(i,)) for i in range(h3)])
        self.started = {"h1": h1, "h2": h2, "h3": h3}

    def start(self):
        for t in self.threads:
            t.start()

    def wait_serving(self, each=1, timeout=15):
        """Until every protocol has answered `each` requests."""
        deadline = time.monotonic() + timeout
        while any(self.ledger.ok(p) < each for p, n in self.started.items() if n):
            assert time.monotonic() < deadline, \
                f"not every protocol is serving: {[(p, self.ledger.ok(p)) for p in self.started]}; " \
                f"failures: {self.ledger.failures()[:10]}"
            assert not self.ledger.failures(), report(self.ledger.failures())
            time.sleep(0.05)

    def stop(self, timeout=30):
        """Stops the clients (each first retries what it still owes); returns the names of the
        threads still running after `timeout`."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
        return [t.name for t in self.threads if t.is_alive()]

    def _ids(self, proto, n):
        i = 0
        while True:
            yield f"{proto}-{n}-{i}"
            i += 1

    # ---- HTTP/1.1 over TLS: one keep-alive connection, reopened only if the proxy closes it
    def h1(self, n):
        ids = self._ids("h1", n)
        c = None
        while not self.stopping.is_set():
            if c is None:
                try:
                    c = H1TLS(self.port, self.ca)
                except OSError as e:
                    if self.draining.is_set():
                        self.ledger.count(self.ledger.refused, "h1")
                        return
                    self.ledger.error(f"h1-{n}: new connection failed: {e!r}")
                    return
                self.ledger.count(self.ledger.connections, "h1")
            rid = next(ids)
            try:
                c.request("GET", f"/echo?id={rid}", host=self.authority)
            except OSError as e:  # the proxy closed the connection before the request was out
                if self.draining.is_set():
                    self.ledger.note(rid, "unprocessed", f"could not be sent (drain): {e!r}")
                else:
                    self.ledger.note(rid, "failed", f"could not be sent: {e!r}")
                c.close()
                c = None
                continue
            try:
                r = c.read_response(timeout=ANSWER_TIMEOUT)
            except ClosedEarly as e:
                # Closed before any byte of an answer: allowed during the drain only (and then
                # the record must show the app never saw it).
                if self.draining.is_set() and not e.partial:
                    self.ledger.note(rid, "unprocessed", "closed before an answer (drain)")
                else:
                    self.ledger.note(rid, "failed", repr(e))
                c.close()
                c = None
                continue
            except Exception as e:  # noqa: BLE001 — a reset, a timeout, a malformed answer
                self.ledger.note(rid, "failed", repr(e))
                c.close()
                c = None
                continue
            wrong = check_echo(rid, r.status, r.body, r.one("content-length"))
            self.ledger.note(rid, "failed" if wrong else "ok", wrong or "")
            if r.closes():
                # Connection: close ends a keep-alive connection: expected in the drain only.
                if not self.draining.is_set():
                    self.ledger.error(f"{rid}: answered with Connection: close outside a drain")
                c.close()
                c = None
        if c is not None:
            c.close()

    # ---- HTTP/2: DEPTH streams at a time; a new connection after a GOAWAY
    def h2(self, n):
        ids = self._ids("h2", n)
        retry = []
        while not self.stopping.is_set() or retry:
            try:
                c = H2(self.port, cafile=self.ca, timeout=ANSWER_TIMEOUT)
            except OSError as e:
                if self.draining.is_set():
                    self.ledger.count(self.ledger.refused, "h2")
                    return
                self.ledger.error(f"h2-{n}: new connection failed: {e!r}")
                return
            self.ledger.count(self.ledger.connections, "h2")
            try:
                self._h2_connection(c, ids, retry)
            finally:
                c.close()

    def _h2_connection(self, c, ids, retry):
        sid = 1
        while c.goaway is None and not c.closed and not c.send_failed:
            if self.stopping.is_set() and not retry:
                return
            batch = []
            for _ in range(DEPTH):
                rid = retry.pop(0) if retry else (None if self.stopping.is_set() else next(ids))
                if rid is None:
                    break
                c.request(sid, path=f"/echo?id={rid}", authority=self.authority)
                batch.append((sid, rid))
                sid += 2

            def settled(c):
                return all(s in c.responses and (c.responses[s].ended or c.responses[s].reset) for s, _ in batch)
            c.read_until(settled, timeout=ANSWER_TIMEOUT)
            if not settled(c) and not c.closed:
                c.read_until(lambda c: False, timeout=0.2)  # the connection's last frames, if closing
            for s, rid in batch:
                r = c.responses.get(s)
                if r is not None and r.ended:
                    wrong = check_echo(rid, r.status, r.body, (r.header("content-length") or [None])[0])
                    self.ledger.note(rid, "failed" if wrong else "ok", wrong or "")
                elif r is not None and r.reset == "REFUSED_STREAM":
                    self.ledger.note(rid, "unprocessed", f"stream {s}: REFUSED_STREAM")
                    retry.append(rid)
                elif r is not None and r.reset is not None:
                    self.ledger.note(rid, "failed", f"stream {s} reset {r.reset}")
                elif c.goaway is not None and s > c.goaway.last_stream_id:
                    self.ledger.note(rid, "unprocessed", f"stream {s} above GOAWAY's last {c.goaway.last_stream_id}")
                    retry.append(rid)
                elif self.draining.is_set() and c.closed and not c.server_started():
                    # A connection the drain closed before the proxy's HTTP/2 preface (its TLS
                    # handshake done as SIGTERM came): like HTTP/1.1's close before any byte.
                    self.ledger.note(rid, "unprocessed", f"stream {s}: closed before the server's preface (drain)")
                    retry.append(rid)
                else:
                    why = "connection closed" if c.closed else f"no answer in {ANSWER_TIMEOUT}s"
                    last = None if c.goaway is None else c.goaway.last_stream_id
                    self.ledger.note(rid, "failed", f"stream {s}: {why}, GOAWAY last stream {last}, "
                                                    f"partial {r and (r.status, len(r.body))}")
        if c.goaway is not None:
            self.ledger.count(self.ledger.goaways, "h2")
            if c.goaway_code != "NO_ERROR":
                self.ledger.error(f"HTTP/2 GOAWAY {c.goaway_code}")
        elif not self.draining.is_set():
            self.ledger.error(f"HTTP/2 connection ended without a GOAWAY (closed={c.closed}, "
                              f"send_failed={c.send_failed})")

    # ---- HTTP/3: DEPTH streams at a time; a new connection after a GOAWAY
    def h3(self, n):
        ids = self._ids("h3", n)
        retry = []
        while not self.stopping.is_set() or retry:
            try:
                c = open_h3(self.port, self.ca)
            except Exception as e:  # noqa: BLE001 — a handshake that got no answer
                if self.draining.is_set():
                    self.ledger.count(self.ledger.refused, "h3")
                    return
                self.ledger.error(f"h3-{n}: new connection failed: {e!r}")
                return
            self.ledger.count(self.ledger.connections, "h3")
            try:
                self._h3_connection(c, ids, retry)
            finally:
                try:
                    c.__exit__(None, None, None)
                except Exception:  # noqa: BLE001 — closing a connection the proxy already closed
                    pass

    def _h3_connection(self, c, ids, retry):
        while True:
            if self.stopping.is_set() and not retry:
                return
            rids = []
            for _ in range(DEPTH):
                rid = retry.pop(0) if retry else (None if self.stopping.is_set() else next(ids))
                if rid is None:
                    break
                rids.append(rid)
            sent = c.batch([f"/echo?id={rid}" for rid in rids])
            if sent is None:  # GOAWAY or close before sending: to the next connection
                retry[:0] = rids
                break
            goaway, ended = c.proto.goaway_id, c.terminated()
            for (s, r), rid in zip(sent, rids):
                if r.reset == H3_REQUEST_REJECTED:
                    self.ledger.note(rid, "unprocessed", f"stream {s}: H3_REQUEST_REJECTED")
                    retry.append(rid)
                elif r.reset is not None:
                    self.ledger.note(rid, "failed", f"stream {s} reset {r.reset:#x}")
                elif r.status and r.done.done():
                    wrong = check_echo(rid, r.status, r.body, r.header("content-length"))
                    self.ledger.note(rid, "failed" if wrong else "ok", wrong or "")
                elif r.done.done() and goaway is not None and s >= goaway:
                    self.ledger.note(rid, "unprocessed", f"stream {s} at or above GOAWAY's {goaway}")
                    retry.append(rid)
                elif self.draining.is_set() and ended is not None and not c.proto.settings_seen:
                    # Closed by the drain before the proxy's HTTP/3 layer started (no SETTINGS):
                    # the handshake was still under way on its side.
                    self.ledger.note(rid, "unprocessed", f"stream {s}: closed before the server's SETTINGS (drain)")
                    retry.append(rid)
                else:
                    why = (f"connection ended ({ended.error_code:#x} {ended.reason_phrase!r})"
                           if ended is not None else f"no answer in {ANSWER_TIMEOUT}s")
                    self.ledger.note(rid, "failed", f"stream {s}: {why}, GOAWAY id {goaway}, "
                                                    f"status {r.status}, {len(r.body)} body bytes")
            if c.proto.goaway_id is not None or c.terminated() is not None:
                break
        if c.proto.goaway_id is not None:
            self.ledger.count(self.ledger.goaways, "h3")
        elif not self.draining.is_set():
            t = c.terminated()
            self.ledger.error(f"HTTP/3 connection ended without a GOAWAY: {t and (hex(t.error_code), t.reason_phrase)}")


def report(failures, *upstreams):
    """Failures grouped by kind (numbers elided), each kind with its count and first example; a
    failed request is marked with whether the app got it (its answer lost) or not (the request
    itself lost)."""
    seen = collections.Counter()
    for ids in upstream_ids(*upstreams).values():
        seen.update(ids)
    groups = collections.defaultdict(list)
    for f in failures:
        if isinstance(f, str):
            text = f
        else:
            text = f"{f[0]}: {f[1]} [{'the app answered it' if seen[f[0]] else 'the app never got it'}]"
        groups[re.sub(r"\d+", "N", text)].append(text)
    return "\n".join(f"{len(v)} x {v[0]}" for v in sorted(groups.values(), key=len, reverse=True))


def upstream_ids(*upstreams):
    """{upstream: Counter of the request ids in its record}."""
    out = {}
    for u in upstreams:
        ids = collections.Counter()
        for e in u.record.requests():
            q = parse_qs(urlsplit(e["target"]).query)
            if "id" in q:
                ids[q["id"][0]] += 1
        out[u] = ids
    return out


def check_against_the_app(ledger, *upstreams):
    """Each answered request reached the app exactly once; one reported unprocessed (and never
    answered) never reached it."""
    seen = collections.Counter()
    for ids in upstream_ids(*upstreams).values():
        seen.update(ids)
    twice = sorted(rid for rid, k in seen.items() if k > 1 and rid.split("-")[0] in ("h1", "h2", "h3"))
    assert twice == [], f"requests that reached the app more than once: {twice[:20]}"
    ok = ledger.final("ok")
    unanswered = sorted(ok - set(seen))
    assert unanswered == [], f"answered, yet never seen by the app: {unanswered[:20]}"
    processed = sorted(ledger.final("unprocessed") & set(seen))
    assert processed == [], f"reported unprocessed, yet the app got them (their answers lost): {processed[:20]}"
    return seen


@pytest.fixture
def mixed_proxy(proxy_factory, cert, tmp_path):
    """A TLS proxy, two loops, HTTP/3 on, its configuration file at proxy.cfg."""
    def start(config, upstream=None, opts=None):
        crt, key = cert
        cfg = tmp_path / "proxy.yaml"
        cfg.write_text(config)
        p = proxy_factory(upstream, opts={"--loops": "2", **(opts or {})},
                          extra=["--tls-cert", crt, "--tls-key", key, "--config", str(cfg)])
        p.cfg = cfg
        return p
    return start


def settings(keepalive):
    return f"http3:\n  enabled: true\ntimeouts: {{ keepalive: {keepalive}s }}\n"


# ---------------------------------------------------------------------------------------------
# Reloads


def test_changed_config_reloads_under_mixed_h1_h2_h3_load_drop_no_request(mixed_proxy, upstream_factory, cert):
    """20 reloads, each changing the upstream (a, b, a, ...) and timeouts.keepalive, under 3+3+3
    clients: every request answered (after a retry at most, for one a GOAWAY left unprocessed),
    every HTTP/1.1 client on its one connection, every HTTP/2 and HTTP/3 connection ended by a
    NO_ERROR GOAWAY, and both configurations served every protocol."""
    a, b = upstream_factory(name="a"), upstream_factory(name="b")
    # No --keepalive-timeout on the command line: it would override the file's timeouts.keepalive
    # and make that change invisible.
    p = mixed_proxy(f"upstream: {a.url}\n{settings(30)}", opts={"--keepalive-timeout": None})
    load = MixedLoad(p, cert[0])
    load.start()
    try:
        load.wait_serving(each=20)
        for i in range(RELOADS):
            write_config(p.cfg, b if i % 2 == 0 else a, settings(31 + i))
            reload(p, "configuration reloaded")
            time.sleep(0.2)  # long enough for every client to see the GOAWAY and reconnect
        time.sleep(0.3)
    finally:
        stuck = load.stop()
    ledger = load.ledger
    assert stuck == [], f"clients still waiting for an answer: {stuck}"
    assert ledger.failures() == [], report(ledger.failures(), a, b)
    owed = sorted(set(ledger.outcomes) - ledger.final("ok"))
    assert owed == [], f"never answered: {[(r, ledger.outcomes[r]) for r in owed[:20]]}"
    summary = {proto: (ledger.ok(proto), ledger.unprocessed(proto), ledger.connections[proto], ledger.goaways[proto])
               for proto in ("h1", "h2", "h3")}
    print(f"(answered, retried, connections, goaways) per protocol: {summary}")
    for proto in ("h1", "h2", "h3"):
        assert ledger.ok(proto) > 50, summary
    assert ledger.connections["h1"] == 3, f"an HTTP/1.1 connection was closed by a reload: {summary}"
    for proto in ("h2", "h3"):
        # each reload sends every open connection of the old configuration a GOAWAY
        assert ledger.goaways[proto] >= RELOADS, summary
        assert ledger.connections[proto] >= ledger.goaways[proto], summary
    check_against_the_app(ledger, a, b)
    ids = upstream_ids(a, b)
    for proto in ("h1", "h2", "h3"):
        served = [sum(1 for rid in ids[u] if protocol_of(rid) == proto) for u in (a, b)]
        assert all(served), f"{proto}: requests per configuration (a, b): {served}"
    s = samples(scrape(p))
    assert value(s, "callback_proxy_config_reloads_total", result="success") == RELOADS
    assert value(s, "callback_proxy_config_reloads_total", result="failure") == 0
    assert value(s, "callback_proxy_http3_connection_errors_total") == 0
    assert p.proc.poll() is None


# ---------------------------------------------------------------------------------------------
# Drain


SLOW_MS = 4000
SLOW_BYTES = 300 * 1024


def slow_targets(proto):
    """A response whose head comes after the wait, and one whose head comes at once and whose
    body comes after it: both in flight at the SIGTERM."""
    return [f"/slow?ms={SLOW_MS}&n={SLOW_BYTES}&id=slow{proto}-head",
            f"/slow?ms={SLOW_MS}&n={SLOW_BYTES}&phase=body&id=slow{proto}-body"]


def test_sigterm_finishes_slow_requests_on_h1_h2_h3_refuses_new_connections_and_exits_0(mixed_proxy, upstream, cert):
    """Two slow requests in flight per protocol at the SIGTERM (one waiting for its head, one
    for its body), while 2+2+2 fast clients keep sending: the slow ones finish whole, their
    connections end (close, GOAWAY NO_ERROR, H3_NO_ERROR), idle HTTP/2 and HTTP/3 connections
    get a GOAWAY before their close, new TCP and QUIC connections get nowhere, every fast
    request is answered or cleanly left unprocessed, and the process exits 0 once the slow ones
    are done, well before the drain timeout."""
    crt = cert[0]
    p = mixed_proxy("http3:\n  enabled: true\n", upstream=upstream,
                    opts={"--drain-timeout": "10s", "--upstream-timeout": "10s"})
    load = MixedLoad(p, crt, h1=2, h2=2, h3=2)
    results, h1s = {}, []
    cleanup = [load.stop]
    try:
        load.start()
        load.wait_serving(each=50)

        def h1_slow(target):
            c = H1TLS(p.port, crt, timeout=15)
            h1s.append(c)
            cleanup.append(c.close)
            c.request("GET", target, host=f"localhost:{p.port}")
            results[target] = c.read_response(timeout=15)

        h2c = H2(p.port, cafile=crt, timeout=15)
        cleanup.append(h2c.close)
        h3c = open_h3(p.port, crt)
        cleanup.append(lambda: h3c.__exit__(None, None, None))
        h3c.timeout = 15
        # An idle keep-alive connection of each multiplexed protocol (one request answered, none
        # in flight): the drain must tell it too with a GOAWAY before closing it, or a request its
        # client sends meanwhile is lost without a word.
        idle_h2 = H2(p.port, cafile=crt)
        cleanup.append(idle_h2.close)
        idle_h2.request(1, path="/echo?id=idle-h2", authority=f"localhost:{p.port}")
        assert idle_h2.response(1).status == 200
        idle_h3 = open_h3(p.port, crt)
        cleanup.append(lambda: idle_h3.__exit__(None, None, None))
        assert idle_h3.request("GET", "/echo?id=idle-h3").status == 200

        def h2_slow():
            for i, target in enumerate(slow_targets("h2")):
                h2c.request(1 + 2 * i, path=target, authority=f"localhost:{p.port}")
            # this thread alone reads the connection: until both streams end and the proxy closes it
            h2c.wait_closed(15)

        def h3_slow():
            for target, r in zip(slow_targets("h3"), h3c.many([("GET", t) for t in slow_targets("h3")])):
                results[target] = r

        threads = ([threading.Thread(target=h1_slow, args=(t,)) for t in slow_targets("h1")]
                   + [threading.Thread(target=h2_slow), threading.Thread(target=h3_slow)])
        for t in threads:
            t.start()
        slow_ids = [f"slow{proto}-{kind}" for proto in ("h1", "h2", "h3") for kind in ("head", "body")]
        assert upstream.record.wait_for(
            lambda r: set(slow_ids) <= set(upstream_ids(upstream)[upstream]), timeout=5), \
            "the slow requests did not all reach the app"
        load.draining.set()
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        assert wait_port_refused(p.port, timeout=1.0), "new TCP connections are still accepted after SIGTERM"
        # A new QUIC connection gets no answer (or a close), never a served request.
        with pytest.raises(Exception):
            c = open_h3(p.port, crt, timeout=2)
            try:
                c.request("GET", "/echo?id=late-h3")
            finally:
                c.__exit__(None, None, None)
        assert p.proc.poll() is None, "exited before the requests in flight finished"
        for t in threads:
            t.join(15)
        assert not any(t.is_alive() for t in threads), "a slow request is still waiting"
        finished = time.monotonic() - t0

        body = pattern_bytes(0, SLOW_BYTES)
        for target in slow_targets("h1"):
            r = results[target]
            assert r.status == 200 and r.body == body, (target, r.status, len(r.body))
        for c in h1s:
            assert c.wait_closed(2), "an HTTP/1.1 connection stayed open after its drained request"
        for i, target in enumerate(slow_targets("h2")):
            r = h2c.responses.get(1 + 2 * i)
            assert r is not None and r.ended and r.status == 200 and bytes(r.body) == body, \
                (target, r and (r.status, r.reset, len(r.body)))
        assert h2c.goaway_code == "NO_ERROR" and h2c.goaway.last_stream_id >= 3, h2c.goaway
        assert h2c.closed, "the HTTP/2 connection stayed open after its streams finished"
        for target in slow_targets("h3"):
            r = results[target]
            assert r.status == 200 and r.body == body, (target, r.status, r.reset, len(r.body))
        deadline = time.monotonic() + 3
        while h3c.terminated() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert h3c.proto.goaway_id is not None, "no HTTP/3 GOAWAY on SIGTERM"
        assert h3c.terminated() is not None and h3c.terminated().error_code == H3_NO_ERROR, h3c.terminated()

        code = p.wait_exit(8)
        exited = time.monotonic() - t0
        assert code == 0, f"exit {code}; stderr: {p.stderr_text()[-1500:]}"
        # The drain waited for the slow requests (about SLOW_MS after they started), not for its
        # 10 s timeout.
        assert exited < 8, f"exited {exited:.1f}s after SIGTERM (the last request finished at {finished:.1f}s)"

        assert idle_h2.wait_closed(2) and idle_h2.goaway_code == "NO_ERROR", \
            "the idle HTTP/2 connection was not closed with a GOAWAY NO_ERROR"
        assert idle_h3.terminated() is not None and idle_h3.terminated().error_code == H3_NO_ERROR, idle_h3.terminated()
        assert idle_h3.proto.goaway_id is not None, \
            "the idle HTTP/3 connection was closed (H3_NO_ERROR) without a GOAWAY first"

        # The fast clients: each request answered or cleanly left unprocessed, nothing lost.
        stuck = load.stop()
        ledger = load.ledger
        assert stuck == [], f"fast clients still waiting for an answer: {stuck}"
        assert ledger.failures() == [], report(ledger.failures(), upstream)
        for proto in ("h1", "h2", "h3"):
            assert ledger.ok(proto) > 50, (proto, ledger.ok(proto))
            assert ledger.refused[proto] == load.started[proto], \
                f"{proto}: clients whose next connection was refused: {ledger.refused[proto]}"
        assert "late-h3" not in upstream_ids(upstream)[upstream], "a QUIC connection opened after SIGTERM was served"
        check_against_the_app(ledger, upstream)
    finally:
        for f in reversed(cleanup):
            try:
                f()
            except Exception:  # noqa: BLE001 — closing what the proxy already closed
                pass


# ---------------------------------------------------------------------------------------------
# Certificate reload


def make_certificate(tmp_path, name):
    key, crt = tmp_path / f"{name}.key", tmp_path / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", f"/CN=localhost/O={name}",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return crt.read_bytes(), key.read_bytes()


def test_a_certificate_reload_under_mixed_load_drops_nothing_and_new_handshakes_of_every_protocol_see_it(
        proxy_factory, upstream, tmp_path):
    """Only the certificate files change: established connections of every protocol go on (no
    GOAWAY, the configuration is the same), and every handshake begun after the reload was logged
    presents the new certificate, over TCP (HTTP/1.1, HTTP/2) and QUIC alike."""
    first, second = make_certificate(tmp_path, "first"), make_certificate(tmp_path, "second")
    crt, key = tmp_path / "live.pem", tmp_path / "live.key"
    crt.write_bytes(first[0])
    key.write_bytes(first[1])
    cfg = tmp_path / "proxy.yaml"
    cfg.write_text("http3:\n  enabled: true\n")
    p = proxy_factory(upstream, opts={"--loops": "2"},
                      extra=["--tls-cert", str(crt), "--tls-key", str(key), "--config", str(cfg)])
    # Both certificates are self-signed, so nothing is verified here: the point is which one is
    # presented.
    load = MixedLoad(p, None, h1=2, h2=2, h3=2)
    handshakes = []  # (protocol, started at, organisation)
    problems = []
    lock = threading.Lock()
    stop = threading.Event()

    def new_connections(proto):
        i = 0
        while not stop.is_set():
            rid = f"new{proto}-{i}"
            i += 1
            started = time.monotonic()
            try:
                if proto == "h3":
                    c = open_h3(p.port, None)
                    try:
                        org, r = c.organisation(), c.request("GET", f"/echo?id={rid}")
                        wrong = check_echo(rid, r.status, r.body, r.header("content-length"))
                    finally:
                        c.__exit__(None, None, None)
                elif proto == "h2":
                    with H2(p.port, timeout=ANSWER_TIMEOUT) as c:
                        org = c.organisation()
                        c.request(1, path=f"/echo?id={rid}", authority=f"localhost:{p.port}")
                        r = c.response(1, timeout=ANSWER_TIMEOUT)
                        wrong = "no answer" if r is None or not r.ended else \
                            check_echo(rid, r.status, r.body, (r.header("content-length") or [None])[0])
                else:
                    with H1TLS(p.port, None) as c:
                        org = c.organisation()
                        c.request("GET", f"/echo?id={rid}", host=f"localhost:{p.port}")
                        r = c.read_response()
                        wrong = check_echo(rid, r.status, r.body, r.one("content-length"))
            except Exception as e:  # noqa: BLE001 — every failure counts
                with lock:
                    problems.append(f"{rid}: {e!r}")
                continue
            with lock:
                if wrong:
                    problems.append(f"{rid}: {wrong}")
                else:
                    handshakes.append((proto, started, org))

    threads = [threading.Thread(target=new_connections, args=(proto,)) for proto in ("h1", "h2", "h3")]
    load.start()
    for t in threads:
        t.start()
    try:
        load.wait_serving(each=50)
        before = {proto: load.ledger.ok(proto) for proto in ("h1", "h2", "h3")}
        crt.write_bytes(second[0])
        key.write_bytes(second[1])
        reloaded_at = time.monotonic()
        p.signal(signal.SIGHUP)
        p.stopped_on_purpose = False
        deadline = time.monotonic() + 5
        while "TLS certificates reloaded" not in p.stderr_text():
            assert time.monotonic() < deadline, p.stderr_text()[-2000:]
            time.sleep(0.02)
        swapped_at = time.monotonic()
        time.sleep(1.5)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        stuck = load.stop()
    ledger = load.ledger
    assert stuck == [] and not any(t.is_alive() for t in threads), f"clients still waiting: {stuck}"
    assert problems == [], problems[:20]
    assert ledger.failures() == [], report(ledger.failures(), upstream)
    for proto in ("h1", "h2", "h3"):
        assert ledger.ok(proto) - before[proto] > 50, f"{proto} made little progress after the reload"
        assert ledger.connections[proto] == load.started[proto], \
            f"{proto}: a connection was ended by a certificate-only reload: {dict(ledger.connections)}"
        assert ledger.goaways[proto] == 0, f"{proto}: GOAWAY on a certificate-only reload"
        seen = [(t, org) for pr, t, org in handshakes if pr == proto]
        assert any(org == "first" for t, org in seen if t < reloaded_at), proto
        after = [org for t, org in seen if t > swapped_at]
        assert after and set(after) == {"second"}, (proto, collections.Counter(after))
    check_against_the_app(ledger, upstream)
    s = samples(scrape(p))
    assert value(s, "callback_proxy_config_reloads_total", result="failure") == 0
    assert p.proc.poll() is None
