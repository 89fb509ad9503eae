"""TLS: termination on the proxy's listeners (TLS 1.2/1.3 only, ALPN, SNI, reload on SIGHUP, handshake
timeout, plain HTTP on the TLS port), the plain-HTTP → HTTPS redirect listener, and HTTPS upstreams
(verification against a CA file or the system store, name checks, mutual TLS).

Every certificate is generated per session by the `openssl` CLI into a temporary directory: a test CA,
a second unrelated CA ("wrong CA"), server certificates for several names, a client certificate.
Plain HTTP sent to the TLS port is answered with a plain-text 400 and the connection is closed.
"""

import datetime
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import http.server

import pytest
from cryptography import x509

from helpers import HTTPConn, free_port, serve_http, terminate_all

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"

# The refusal tests build TLS 1.0/1.1 clients on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")


# ---------------------------------------------------------------------------------------------
# Test PKI (openssl CLI)

class PKI:
    def __init__(self, root):
        self.root = root
        self.serial = 1000

    def path(self, name):
        return os.path.join(self.root, name)

    def _run(self, *args):
        subprocess.run([OPENSSL, *args], check=True, capture_output=True, cwd=self.root)

    def key(self, name, kind="ec"):
        out = self.path(f"{name}.key")
        if kind == "ec":
            self._run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out)
        else:
            self._run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", out)
        return out

    def ca(self, name, cn):
        key = self.key(name)
        cert = self.path(f"{name}.pem")
        self._run("req", "-x509", "-new", "-key", key, "-out", cert, "-days", "30", "-subj", f"/CN={cn}",
                  "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return cert, key

    def issue(self, name, cn, sans, ca=("ca.pem", "ca.key"), kind="ec", client=False, extra=()):
        """A certificate for `sans` (DNS names and IP addresses) signed by `ca`; returns (cert, key).
        `extra`: more extension lines (authorityInfoAccess=OCSP;URI:…)."""
        key = self.key(name, kind)
        csr = self.path(f"{name}.csr")
        self._run("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={cn}")
        ext = self.path(f"{name}.ext")
        alt = ",".join(("IP:" if s.replace(".", "").isdigit() or ":" in s else "DNS:") + s for s in sans)
        with open(ext, "w") as f:
            if alt:
                f.write(f"subjectAltName={alt}\n")
            f.write("extendedKeyUsage=" + ("clientAuth" if client else "serverAuth") + "\n")
            for line in extra:
                f.write(line + "\n")
        self.serial += 1
        cert = self.path(f"{name}.pem")
        self._run("x509", "-req", "-in", csr, "-CA", self.path(ca[0]), "-CAkey", self.path(ca[1]),
                  "-set_serial", str(self.serial), "-out", cert, "-days", "30", "-extfile", ext)
        return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    p = PKI(str(tmp_path_factory.mktemp("pki")))
    p.ca("ca", "CallbackProxy Test CA")
    p.ca("wrongca", "Unrelated CA")
    p.issue("default", "default.test", ["default.test", "127.0.0.1"])
    p.issue("default2", "default-v2.test", ["default.test", "127.0.0.1"])
    p.issue("a", "a.test", ["a.test"])
    p.issue("b", "b.test", ["b.test"], kind="rsa")
    p.issue("wild", "wild.test", ["*.wild.test"])
    p.issue("upstream", "upstream-ip", ["127.0.0.1"])
    p.issue("upname", "up.test", ["up.test"])
    p.issue("upwrong", "upstream-wrong-ca", ["127.0.0.1"], ca=("wrongca.pem", "wrongca.key"))
    p.issue("client", "proxy-client", [], client=True)
    return p


def client_context(pki, minimum=None, maximum=None, alpn=("http/1.1",)):
    """A client that speaks HTTP/1.1 (TLSConn's requests are HTTP/1.1 bytes): it offers only
    http/1.1 in ALPN, as a client offering h2 too would be answered in HTTP/2 (test_http2.py)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki.path("ca.pem"))
    if minimum:
        ctx.minimum_version = minimum
    if maximum:
        ctx.maximum_version = maximum
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


class TLSConn(HTTPConn):
    """HTTPConn over TLS (verified against the test CA)."""

    def __init__(self, port, server_hostname="default.test", ctx=None, pki=None, timeout=5.0):
        super().__init__(port, timeout=timeout)
        ctx = ctx or client_context(pki)
        self.sock = ctx.wrap_socket(self.sock, server_hostname=server_hostname)

    def peer_cert(self):
        return x509.load_der_x509_certificate(self.sock.getpeercert(binary_form=True))


def common_name(cert):
    return cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value


def hdr(echo, name):
    return [v for n, v in echo["headers"] if n.lower() == name.lower()]


@pytest.fixture
def tls_files(pki, tmp_path):
    """Copies of the default certificate and key in the test's own directory (reload tests rewrite them)."""
    cert, key = str(tmp_path / "server.pem"), str(tmp_path / "server.key")
    shutil.copy(pki.path("default.pem"), cert)
    shutil.copy(pki.path("default.key"), key)
    return cert, key


@pytest.fixture
def tls_proxy(proxy_factory, upstream, tls_files):
    def start(extra=(), opts=None, **kw):
        cert, key = tls_files
        return proxy_factory(upstream, extra=["--tls-cert", cert, "--tls-key", key, *extra], opts=opts, **kw)
    return start


def wait_for_log(proxy, needle, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in proxy.stderr_text().splitlines():
            if needle in line:
                return json.loads(line)
        time.sleep(0.02)
    raise AssertionError(f"no log line containing {needle!r}; stderr: {proxy.stderr_text()[-2000:]}")


# ---------------------------------------------------------------------------------------------
# Termination

@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"])
def test_python_client_reaches_the_upstream_over_tls_with_forwarded_proto_https(tls_proxy, pki, version):
    proxy = tls_proxy()
    ctx = client_context(pki, minimum=version, maximum=version)
    with TLSConn(proxy.port, ctx=ctx) as c:
        assert c.sock.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        assert c.sock.selected_alpn_protocol() == "http/1.1"
        if version == ssl.TLSVersion.TLSv1_2:
            # ECDHE key exchange with an AEAD cipher only
            name = c.sock.cipher()[0]
            assert name.startswith("ECDHE-") and ("GCM" in name or "CHACHA20" in name), name
        for i in range(3):  # keep-alive over the same TLS connection
            c.request("GET", f"/echo?i={i}", host="default.test")
            r = c.read_response()
            assert r.status == 200
            e = r.json()
            assert hdr(e, "x-forwarded-proto") == ["https"]
            assert e["target"] == f"/echo?i={i}"


@pytest.mark.parametrize("flags,expected", [(["--tlsv1.2", "--tls-max", "1.2"], "TLSv1.2"), (["--tlsv1.3"], "TLSv1.3")])
def test_curl_reaches_the_upstream_over_tls(tls_proxy, pki, flags, expected):
    proxy = tls_proxy()
    out = subprocess.run(
        ["curl", "-sS", "-v", "--http1.1", "--cacert", pki.path("ca.pem"), "--resolve", f"default.test:{proxy.port}:127.0.0.1",
         *flags, f"https://default.test:{proxy.port}/echo?via=curl"],
        capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert f"SSL connection using {expected}" in out.stderr
    assert "ALPN: server accepted http/1.1" in out.stderr
    e = json.loads(out.stdout)
    assert hdr(e, "x-forwarded-proto") == ["https"]
    assert hdr(e, "host") == [f"default.test:{proxy.port}"]


def legacy_client_context(version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = version
    ctx.maximum_version = version
    return ctx


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["tls1.0", "tls1.1"])
def test_tls10_and_tls11_are_refused(tls_proxy, pki, version):
    # The client can really speak the old version: a permissive local server accepts it.
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(pki.path("default.pem"), pki.path("default.key"))
    server_ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    server_ctx.minimum_version = ssl.TLSVersion.TLSv1
    listener = socket.create_server(("127.0.0.1", 0))
    versions = []

    def serve():
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as s:
                versions.append(s.version())
                s.recv(1)
        except (OSError, ssl.SSLError) as e:
            versions.append(f"server error: {e}")
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with socket.create_connection(listener.getsockname(), timeout=5) as raw:
        with legacy_client_context(version).wrap_socket(raw) as s:
            assert s.version() in ("TLSv1", "TLSv1.1")
    t.join(5)
    listener.close()
    assert versions and versions[0] in ("TLSv1", "TLSv1.1"), versions

    proxy = tls_proxy()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as raw:
        with pytest.raises(ssl.SSLError) as e:
            legacy_client_context(version).wrap_socket(raw)
    assert "VERSION" in str(e.value).upper(), e.value
    # and the proxy keeps serving
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_min_version_13_refuses_tls12(tls_proxy, pki):
    proxy = tls_proxy(extra=["--tls-min-version", "1.3"])
    with pytest.raises(ssl.SSLError):
        TLSConn(proxy.port, ctx=client_context(pki, maximum=ssl.TLSVersion.TLSv1_2))
    with TLSConn(proxy.port, pki=pki) as c:
        assert c.sock.version() == "TLSv1.3"


def test_plain_http_on_the_tls_port_gets_a_plain_400_and_a_close(tls_proxy, pki, upstream):
    proxy = tls_proxy()
    with HTTPConn(proxy.port) as c:
        c.request("GET", "/echo")
        r = c.read_response()
        assert r.status == 400
        assert b"HTTPS" in r.body
        assert r.closes()
        assert c.wait_closed(2)
    assert upstream.record.requests() == []
    assert proxy.proc.poll() is None
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    # the failed handshake is counted (the good one is not)
    from test_observability import samples, scrape, value
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_tls_handshake_failures_total", listener="public") == 1
    assert value(s, "callback_proxy_connections_total", listener="public") == 2


def test_garbage_on_the_tls_port_is_closed_without_harm(tls_proxy, pki):
    proxy = tls_proxy()
    with HTTPConn(proxy.port) as c:
        c.send(b"\x16\x03\x01\x00\x05hello-not-tls" + bytes(range(256)))
        assert c.wait_closed(3)
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_large_bodies_cross_tls_both_ways(tls_proxy, pki):
    proxy = tls_proxy()
    with TLSConn(proxy.port, pki=pki, timeout=20) as c:
        body = os.urandom(3 * 1024 * 1024 + 17)
        c.request("POST", "/sink", body=body)
        r = c.read_response(timeout=20)
        assert r.status == 200 and r.json()["len"] == len(body)
        assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()
        c.request("GET", "/bytes?n=5000000")
        r = c.read_response(timeout=20)
        assert r.status == 200 and len(r.body) == 5_000_000


class RecordClient:
    """A TLS client over memory BIOs: it decides which TLS records leave in one TCP write, so a
    test can make several records arrive at the proxy together (with the client's Finished, or
    in one segment after it)."""

    def __init__(self, port, pki, version):
        ctx = client_context(pki, minimum=version, maximum=version)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname="default.test")

    def handshake_holding_the_last_flight(self):
        """Runs the handshake; the client's last flight stays in `outgoing` for `send`."""
        while True:
            try:
                self.tls.do_handshake()
                return
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                assert data, "the proxy closed during the handshake"
                self.incoming.write(data)

    def send(self):
        self.sock.sendall(self.outgoing.read())

    def read_responses(self, count):
        """The bodies of `count` HTTP/1.1 responses (each with a Content-Length)."""
        data, bodies = b"", []
        while len(bodies) < count:
            try:
                data += self.tls.read(65536)
            except ssl.SSLWantReadError:
                chunk = self.sock.recv(65536)
                assert chunk, f"the proxy closed after {len(bodies)} of {count} responses"
                self.incoming.write(chunk)
            while b"\r\n\r\n" in data:
                head, rest = data.split(b"\r\n\r\n", 1)
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
                if len(rest) < length:
                    break
                assert head.startswith(b"HTTP/1.1 200"), head
                bodies.append(rest[:length])
                data = rest[length:]
        return bodies


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"])
def test_records_that_arrive_together_are_all_answered(tls_proxy, pki, version):
    """The proxy reads ahead (one read(2) takes every record the socket holds), so records that
    arrive in one segment sit in OpenSSL, where epoll cannot see them: each must still be
    answered. Twenty pipelined requests, one record each, in one TCP write — in TLS 1.3 together
    with the client's Finished, read by the handshake — then a second batch with an upload whose
    body spans several records."""
    proxy = tls_proxy()
    c = RecordClient(proxy.port, pki, version)
    try:
        c.handshake_holding_the_last_flight()
        for i in range(20):
            c.tls.write(f"GET /echo?i={i} HTTP/1.1\r\nHost: a.test\r\n\r\n".encode())
        c.send()
        bodies = c.read_responses(20)
        assert [json.loads(b)["target"] for b in bodies] == [f"/echo?i={i}" for i in range(20)]

        body = os.urandom(40_000)
        c.tls.write(b"POST /echo?upload HTTP/1.1\r\nHost: a.test\r\nContent-Length: 40000\r\n\r\n")
        for at in range(0, len(body), 10_000):
            c.tls.write(body[at:at + 10_000])
        c.tls.write(b"GET /echo?after HTTP/1.1\r\nHost: a.test\r\n\r\n")
        c.send()
        upload, after = (json.loads(b) for b in c.read_responses(2))
        assert upload["body_len"] == 40_000 and upload["body_sha256"] == hashlib.sha256(body).hexdigest()
        assert after["target"] == "/echo?after"
    finally:
        c.sock.close()


# ---------------------------------------------------------------------------------------------
# SNI

def sni_config(tmp_path, pki, tls_files):
    cert, key = tls_files
    path = tmp_path / "tls.yaml"
    path.write_text(f"""
tls:
  cert: {cert}
  key: {key}
  min_version: "1.2"
  sni:
    - names: [a.test]
      cert: {pki.path('a.pem')}
      key: {pki.path('a.key')}
    - names: [B.test, also-b.test]
      cert: {pki.path('b.pem')}
      key: {pki.path('b.key')}
    - names: ["*.wild.test"]
      cert: {pki.path('wild.pem')}
      key: {pki.path('wild.key')}
""")
    return str(path)


@pytest.mark.parametrize("name,expected_cn", [
    ("a.test", "a.test"),
    ("b.test", "b.test"),
    ("B.TEST", "b.test"),
    ("also-b.test", "b.test"),
    ("x.wild.test", "wild.test"),
    ("wild.test", "default.test"),
    ("a.b.wild.test", "default.test"),
    ("unknown.test", "default.test"),
    (None, "default.test"),
])
def test_sni_picks_the_certificate_for_the_name(proxy_factory, upstream, pki, tls_files, tmp_path, name, expected_cn):
    proxy = proxy_factory(upstream, extra=["--config", sni_config(tmp_path, pki, tls_files)])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # an unknown name gets the default certificate, which does not match it
    ctx.load_verify_locations(pki.path("ca.pem"))
    with TLSConn(proxy.port, server_hostname=name, ctx=ctx) as c:
        cert = c.peer_cert()
        assert common_name(cert) == expected_cn
        c.request("GET", "/echo", host=name or "127.0.0.1")
        assert c.read_response().status == 200


@pytest.mark.parametrize("name,expected_cn", [
    ("a.test", "a.test"),
    ("B.TEST", "b.test"),
    ("also-b.test", "b.test"),
    ("x.wild.test", "wild.test"),
    ("a.b.wild.test", "default.test"),
    ("unknown.test", "default.test"),
    (None, "default.test"),
])
def test_sni_picks_the_same_certificate_over_quic(proxy_factory, upstream, pki, tls_files, tmp_path, name, expected_cn):
    """HTTP/3's handshake (GnuTLS) picks from the same tls.sni table by the same rules as TCP's
    (OpenSSL): exact names without regard to case, one-label wildcards, the default otherwise."""
    from h3client import H3
    cfg = sni_config(tmp_path, pki, tls_files)
    with open(cfg, "a") as f:
        f.write("http3:\n  enabled: true\n")
    proxy = proxy_factory(upstream, extra=["--config", cfg])
    # No verification: an unknown name gets the default certificate, which does not match it.
    with H3(proxy.port, ca=None, server_name=name, authority=name or "127.0.0.1") as c:
        assert common_name(c.peer_certificate()) == expected_cn
        assert c.request("GET", "/echo").status == 200


def test_sni_names_are_verified_by_a_strict_client(proxy_factory, upstream, pki, tls_files, tmp_path):
    proxy = proxy_factory(upstream, extra=["--config", sni_config(tmp_path, pki, tls_files)])
    for name in ("a.test", "b.test", "deep.wild.test", "default.test"):
        with TLSConn(proxy.port, server_hostname=name, pki=pki) as c:  # check_hostname on
            c.request("GET", "/echo", host=name)
            assert c.read_response().status == 200


# ---------------------------------------------------------------------------------------------
# Reload

def replace_files(pki, tls_files, name):
    cert, key = tls_files
    for src, dst in ((pki.path(f"{name}.pem"), cert), (pki.path(f"{name}.key"), key)):
        tmp = dst + ".new"
        shutil.copy(src, tmp)
        os.replace(tmp, dst)


def test_reload_under_load_drops_nothing_and_new_handshakes_see_the_new_certificate(tls_proxy, pki, tls_files):
    proxy = tls_proxy(opts={"--loops": "2"})
    stop = threading.Event()
    results = {"ok": 0, "failed": [], "cns": []}
    lock = threading.Lock()

    def new_connections():
        while not stop.is_set():
            try:
                # When the connection *started*: a handshake begun before the swap may finish after
                # another client's new-certificate handshake, so completion order proves nothing.
                started = time.monotonic()
                with TLSConn(proxy.port, pki=pki, timeout=5) as c:
                    cn = common_name(c.peer_cert())
                    c.request("GET", "/echo")
                    r = c.read_response()
                    with lock:
                        if r.status == 200:
                            results["ok"] += 1
                            results["cns"].append((started, cn))
                        else:
                            results["failed"].append(r.status)
            except Exception as e:  # noqa: BLE001 — every failure counts
                with lock:
                    results["failed"].append(repr(e))

    keepalive_ok = [0]

    def keepalive():
        try:
            with TLSConn(proxy.port, pki=pki, timeout=5) as c:
                while not stop.is_set():
                    c.request("GET", "/echo")
                    assert c.read_response().status == 200
                    keepalive_ok[0] += 1
        except Exception as e:  # noqa: BLE001
            with lock:
                results["failed"].append("keep-alive: " + repr(e))

    threads = [threading.Thread(target=new_connections) for _ in range(3)] + [threading.Thread(target=keepalive)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.7)
        before = keepalive_ok[0]
        replace_files(pki, tls_files, "default2")
        reloaded_at = time.monotonic()
        proxy.signal(signal.SIGHUP)
        proxy.stopped_on_purpose = False
        wait_for_log(proxy, "TLS certificates reloaded")
        swapped_at = time.monotonic()
        time.sleep(0.7)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert results["failed"] == []
    assert results["ok"] > 20, results["ok"]
    assert keepalive_ok[0] > before, "the keep-alive connection made no progress after the reload"
    seen = [cn for _, cn in results["cns"]]
    assert "default.test" in seen
    # every connection started after the reload was logged got the new certificate
    after = [cn for t, cn in results["cns"] if t > swapped_at]
    assert after and all(cn == "default-v2.test" for cn in after), after
    assert any(t > reloaded_at for t, cn in results["cns"] if cn == "default-v2.test")


def test_a_changed_config_reload_keeps_tls_keepalive_connections_and_their_sessions(tls_proxy, pki, tmp_path):
    """A reload that changes the configuration moves each TLS connection to it at its next
    request: the same socket, the same TLS session, no new handshake."""
    cfg = tmp_path / "proxy.yaml"
    cfg.write_text("limits: { max_header_size: 32k }\n")
    proxy = tls_proxy(extra=["--config", str(cfg)])
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/echo?1")
        assert c.read_response().status == 200
        session = c.sock.session
        cfg.write_text("limits: { max_header_size: 33k }\n")
        proxy.signal(signal.SIGHUP)
        proxy.stopped_on_purpose = False
        wait_for_log(proxy, '"configuration reloaded"')
        for n in range(2, 5):
            c.request("GET", f"/echo?{n}")
            r = c.read_response()
            assert r.status == 200 and not r.closes()
        assert c.sock.session.id == session.id and not c.sock.session_reused


def test_a_bad_file_on_reload_keeps_the_old_certificate_and_says_which_file(tls_proxy, pki, tls_files):
    proxy = tls_proxy()
    cert, key = tls_files
    with TLSConn(proxy.port, pki=pki) as kept:
        kept.request("GET", "/echo")
        assert kept.read_response().status == 200
        # a key that does not belong to the certificate
        shutil.copy(pki.path("a.key"), key)
        proxy.signal(signal.SIGHUP)
        proxy.stopped_on_purpose = False
        line = wait_for_log(proxy, "TLS certificate reload failed")
        assert line["level"] == "error"
        assert line["file"] == key
        assert "does not match" in line["error"]
        # then a certificate file that is not a certificate
        with open(cert, "w") as f:
            f.write("not a certificate\n")
        shutil.copy(pki.path("default.key"), key)
        proxy.signal(signal.SIGHUP)
        proxy.stopped_on_purpose = False
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and proxy.stderr_text().count("TLS certificate reload failed") < 2:
            time.sleep(0.02)
        lines = [json.loads(l) for l in proxy.stderr_text().splitlines() if "reload failed" in l]
        assert len(lines) == 2 and lines[1]["file"] == cert, lines
        # the running certificate is still served, and the old connection still works
        with TLSConn(proxy.port, pki=pki) as c:
            assert common_name(c.peer_cert()) == "default.test"
            c.request("GET", "/echo")
            assert c.read_response().status == 200
        kept.request("GET", "/echo")
        assert kept.read_response().status == 200
    key_body = open(pki.path("a.key")).read().split("-----")[2].strip().splitlines()[1]
    assert key_body not in proxy.stderr_text() and "PRIVATE KEY" not in proxy.stderr_text()


# ---------------------------------------------------------------------------------------------
# Start-up errors

def run_briefly(proxy_bin, args, timeout=10):
    return subprocess.run([proxy_bin, "--listen", f"127.0.0.1:{free_port()}", "--internal-listen", "off",
                           "--upstream", "http://127.0.0.1:9", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("case", ["missing-cert", "missing-key", "mismatched-key", "not-a-key", "key-without-cert"])
def test_start_up_problems_exit_2_naming_the_file(proxy_bin, pki, tmp_path, case):
    cert, key = pki.path("default.pem"), pki.path("default.key")
    missing = str(tmp_path / "nope.pem")
    bogus = tmp_path / "bogus.key"
    bogus.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    args, named = {
        "missing-cert": (["--tls-cert", missing, "--tls-key", key], missing),
        "missing-key": (["--tls-cert", cert, "--tls-key", missing], missing),
        "mismatched-key": (["--tls-cert", cert, "--tls-key", pki.path("a.key")], pki.path("a.key")),
        "not-a-key": (["--tls-cert", cert, "--tls-key", str(bogus)], str(bogus)),
        "key-without-cert": (["--tls-key", key], "tls"),
    }[case]
    out = run_briefly(proxy_bin, args)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert named in out.stderr
    assert "PRIVATE KEY" not in out.stderr and "AAAA" not in out.stderr


def test_check_loads_the_certificates_too(proxy_bin, pki, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"upstream: http://127.0.0.1:9\ntls: {{ cert: {pki.path('default.pem')}, key: {pki.path('a.key')} }}\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert pki.path("a.key") in out.stdout and "does not match" in out.stdout


# ---------------------------------------------------------------------------------------------
# Handshake timeout

def client_hello_bytes():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="default.test")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


@pytest.mark.parametrize("sent", ["nothing", "half-a-client-hello"])
def test_a_client_that_stalls_mid_handshake_is_dropped_at_the_timeout(tls_proxy, pki, sent):
    proxy = tls_proxy(extra=["--tls-handshake-timeout", "1s"])
    hello = client_hello_bytes()
    with HTTPConn(proxy.port, timeout=10) as c:
        if sent != "nothing":
            c.send(hello[: len(hello) // 2])
        start = time.monotonic()
        assert not c.wait_closed(0.7), "dropped before the handshake timeout"
        assert c.wait_closed(3), "still open long after the handshake timeout"
        took = time.monotonic() - start
    assert 0.8 <= took <= 2.5, took
    from test_observability import samples, scrape, value
    assert value(samples(scrape(proxy)), "callback_proxy_tls_handshake_failures_total", listener="public") == 1
    # an honest client meanwhile is fine
    with TLSConn(proxy.port, pki=pki) as ok:
        ok.request("GET", "/echo")
        assert ok.read_response().status == 200


def test_handshake_timeout_does_not_cut_established_connections(tls_proxy, pki):
    proxy = tls_proxy(extra=["--tls-handshake-timeout", "1s"])
    with TLSConn(proxy.port, pki=pki) as c:
        time.sleep(1.5)
        c.request("GET", "/echo")
        assert c.read_response().status == 200


# ---------------------------------------------------------------------------------------------
# Redirect listener

@pytest.fixture
def redirecting(tls_proxy):
    port = free_port()
    proxy = tls_proxy(extra=["--redirect-http", f"127.0.0.1:{port}"])
    proxy.redirect_port = port
    return proxy


@pytest.mark.parametrize("host,target,location", [
    ("example.com", "/a/b?c=1&d=%20", "https://example.com:{tls}/a/b?c=1&d=%20"),
    ("Example.COM:{plain}", "/", "https://example.com:{tls}/"),
    ("127.0.0.1:{plain}", "/x?y", "https://127.0.0.1:{tls}/x?y"),
    # The redirect names the canonical target, as every other answer does.
    ("[::1]:{plain}", "//double/./slash", "https://[::1]:{tls}/double/slash"),
])
def test_redirect_listener_answers_308_to_the_same_host_and_path_over_https(redirecting, host, target, location):
    ports = {"plain": redirecting.redirect_port, "tls": redirecting.port}
    with HTTPConn(redirecting.redirect_port) as c:
        c.request("GET", target, host=host.format(**ports))
        r = c.read_response()
    assert r.status == 308
    assert r.one("location") == location.format(**ports)


def test_redirect_keeps_the_method_and_uses_the_absolute_form_authority(redirecting):
    with HTTPConn(redirecting.redirect_port) as c:
        c.send(b"POST http://abs.example/form?q=1 HTTP/1.1\r\nHost: other.example\r\nContent-Length: 3\r\n\r\nabc")
        r = c.read_response("POST")
    assert r.status == 308
    assert r.one("location") == f"https://abs.example:{redirecting.port}/form?q=1"


@pytest.mark.parametrize("host", [
    "evil.example@good.test", "good.test\\@evil.example", "good.test%2f@evil", "good.test:99999",
    "good.test:80:80", "-bad.test", "good..test", "good.test.", "[::1", "[fe80::1%25eth0]", "good.test/x",
    "xn--.test:abc", "a" * 64 + ".test",
])
def test_redirect_refuses_a_hostile_host_with_400(redirecting, host):
    with HTTPConn(redirecting.redirect_port) as c:
        c.request("GET", "/", host=host)
        r = c.read_response()
    assert r.status == 400, r
    assert r.one("location") is None


def test_redirect_without_tls_is_a_configuration_error(proxy_bin):
    out = run_briefly(proxy_bin, ["--redirect-http", f"127.0.0.1:{free_port()}"])
    assert out.returncode == 2 and "redirect_http" in out.stderr


# ---------------------------------------------------------------------------------------------
# HTTPS upstreams

class TLSUpstream:
    """A small HTTPS upstream (threads) that answers every request with what it saw, as JSON."""

    def __init__(self, pki, name, require_client_cert=False):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.path(f"{name}.pem"), pki.path(f"{name}.key"))
        self.sni = []

        def on_sni(sock, server_name, _ctx):
            self.sni.append(server_name)
        ctx.sni_callback = on_sni
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(pki.path("ca.pem"))
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                peer = self.connection.getpeercert()
                body = json.dumps({"path": self.path, "headers": [[k, v] for k, v in self.headers.items()],
                                   "client_cert": bool(peer), "tls": self.connection.version()}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = serve_http(Handler, tls=ctx)
        self.server.handle_error = lambda *a: None  # refused handshakes are the point of some tests
        self.port = self.server.server_address[1]
        outer.url = f"https://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tls_upstream(pki):
    started = []

    def start(name="upstream", **kw):
        u = TLSUpstream(pki, name, **kw)
        started.append(u)
        return u
    yield start
    for u in started:
        u.stop()


def test_https_upstream_with_the_right_ca_works(proxy_factory, tls_upstream, pki):
    up = tls_upstream()
    proxy = proxy_factory(upstream_url=up.url, extra=["--upstream-ca", pki.path("ca.pem")])
    with proxy.conn() as c:
        for i in range(3):  # the pooled TLS connection is reused
            c.request("GET", f"/hello?i={i}", host="app.test")
            r = c.read_response()
            assert r.status == 200, r
            e = r.json()
            assert e["path"] == f"/hello?i={i}"
            assert e["tls"] in ("TLSv1.2", "TLSv1.3")
            assert hdr({"headers": e["headers"]}, "host") == ["app.test"]
    # an IP address is never sent as SNI, and one pooled connection served all three requests
    assert len(up.sni) <= 1 and all(name is None for name in up.sni), up.sni


def test_https_upstream_gets_sni_and_name_verification(proxy_factory, tls_upstream, pki):
    up = tls_upstream("upname")
    proxy = proxy_factory(upstream_url=up.url, extra=["--upstream-ca", pki.path("ca.pem"), "--upstream-server-name", "up.test"])
    with proxy.conn() as c:
        c.request("GET", "/x")
        assert c.read_response().status == 200
    assert up.sni == ["up.test"]


@pytest.mark.parametrize("case", ["wrong-ca", "system-store", "wrong-name", "ip-not-in-certificate"])
def test_https_upstream_that_fails_verification_gives_502_and_a_clear_log_line(proxy_factory, tls_upstream, pki, case):
    name, extra, reason = {
        "wrong-ca": ("upwrong", ["--upstream-ca", pki.path("ca.pem")], "certificate verify failed"),
        "system-store": ("upstream", [], "certificate verify failed"),
        "wrong-name": ("upname", ["--upstream-ca", pki.path("ca.pem"), "--upstream-server-name", "other.test"], "hostname mismatch"),
        "ip-not-in-certificate": ("upname", ["--upstream-ca", pki.path("ca.pem")], "IP address mismatch"),
    }[case]
    up = tls_upstream(name)
    proxy = proxy_factory(upstream_url=up.url, extra=extra)
    with proxy.conn() as c:
        c.request("GET", "/x")
        r = c.read_response()
    assert r.status == 502
    line = wait_for_log(proxy, "request failed")
    assert line["status"] == "502"
    assert "TLS handshake with" in line["reason"] and reason in line["reason"], line


def test_https_upstream_with_mutual_tls(proxy_factory, tls_upstream, pki):
    up = tls_upstream(require_client_cert=True)
    without = proxy_factory(upstream_url=up.url, extra=["--upstream-ca", pki.path("ca.pem")])
    with without.conn() as c:
        c.request("GET", "/x")
        assert c.read_response().status == 502
    with_cert = proxy_factory(upstream_url=up.url, extra=[
        "--upstream-ca", pki.path("ca.pem"),
        "--upstream-client-cert", pki.path("client.pem"), "--upstream-client-key", pki.path("client.key")])
    with with_cert.conn() as c:
        c.request("GET", "/x")
        r = c.read_response()
        assert r.status == 200 and r.json()["client_cert"] is True


def test_tls_on_both_sides(proxy_factory, tls_upstream, pki, tls_files):
    up = tls_upstream()
    cert, key = tls_files
    proxy = proxy_factory(upstream_url=up.url, extra=["--upstream-ca", pki.path("ca.pem"), "--tls-cert", cert, "--tls-key", key])
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/both")
        r = c.read_response()
        assert r.status == 200
        assert hdr({"headers": r.json()["headers"]}, "x-forwarded-proto") == ["https"]


def test_upstream_tls_options_need_an_https_upstream(proxy_bin, pki):
    out = run_briefly(proxy_bin, ["--upstream-ca", pki.path("ca.pem")])
    assert out.returncode == 2 and "upstream_tls" in out.stderr


# ---------------------------------------------------------------------------------------------
# A fleet: shared session ticket keys (tls.session_ticket_keys), HSTS (tls.hsts)


def ticket_key(path):
    path.write_bytes(os.urandom(80))
    return str(path)


def fleet_config(tmp_path, tls_files, name, keys, extra=""):
    cert, key = tls_files
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"tls: {{ cert: {cert}, key: {key}, session_ticket_keys: [{', '.join(keys)}] {extra} }}\n")
    return cfg


def resumed_session(port, ctx, session=None):
    """One request over a new connection, offering `session` (made with the same `ctx`); whether
    it was resumed, and the session to offer next. The response is read to its end so that a
    TLS 1.3 ticket, sent after the handshake, has arrived."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname="default.test", session=session) as s:
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n")
        while s.recv(65536):
            pass
        return s.session_reused, s.session


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"])
def test_instances_sharing_ticket_keys_resume_each_others_sessions(proxy_factory, upstream, pki, tls_files, tmp_path,
                                                                   version):
    ctx = client_context(pki, minimum=version, maximum=version)
    keys = [ticket_key(tmp_path / "ticket.key")]
    a = proxy_factory(upstream, extra=["--config", str(fleet_config(tmp_path, tls_files, "a", keys))])
    b = proxy_factory(upstream, extra=["--config", str(fleet_config(tmp_path, tls_files, "b", keys))])
    other = proxy_factory(upstream, extra=["--config",
                                           str(fleet_config(tmp_path, tls_files, "c", [ticket_key(tmp_path / "other.key")]))])
    reused, session = resumed_session(a.port, ctx)
    assert not reused
    assert resumed_session(b.port, ctx, session)[0], "B decrypts A's ticket"
    assert not resumed_session(other.port, ctx, session)[0], "another key: a full handshake"
    # What an operator watches to see that the fleet's keys agree.
    from test_observability import samples, scrape, value

    def handshakes(proxy):
        s = samples(scrape(proxy))
        return [value(s, "callback_proxy_tls_handshakes_total", listener="public", session=k) for k in ("new", "resumed")]
    assert handshakes(a) == [1, 0] and handshakes(b) == [0, 1] and handshakes(other) == [1, 0]
    # without configured keys each process has its own: no resumption across instances
    plain1, plain2 = proxy_factory(upstream, extra=["--tls-cert", tls_files[0], "--tls-key", tls_files[1]]), \
        proxy_factory(upstream, extra=["--tls-cert", tls_files[0], "--tls-key", tls_files[1]])
    _, session = resumed_session(plain1.port, ctx)
    assert resumed_session(plain1.port, ctx, session)[0]
    assert not resumed_session(plain2.port, ctx, session)[0]


NGINX = "/usr/sbin/nginx"


@pytest.fixture
def nginx_tls(tmp_path):
    """nginx serving a certificate over TLS 1.2 and 1.3 with a session ticket key file
    (`ssl_session_ticket_key`); returns its port."""
    if not os.access(NGINX, os.X_OK):
        pytest.skip("nginx is not installed")
    started = []

    def start(cert, key, ticket):
        port, d = free_port(), tmp_path / "nginx"
        d.mkdir()
        temp = " ".join(f"{k}_temp_path {d}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = d / "nginx.conf"
        conf.write_text(f"""
{'user root;' if os.geteuid() == 0 else ''}
worker_processes 1;
pid {d}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    {temp}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_ticket_key {ticket};
        location / {{ return 200 "nginx\\n"; }}
    }}
}}
""")
        p = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(d), "-e", str(d / "error.log"), "-g", "daemon off;"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(p)
        deadline = time.monotonic() + 10
        while True:
            assert p.poll() is None, (d / "error.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return port
            except OSError:
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.02)
    yield start
    terminate_all(started)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"])
def test_tickets_resume_between_nginx_and_the_proxy_sharing_the_key_and_certificate(
        proxy_factory, upstream, pki, tls_files, tmp_path, nginx_tls, version):
    """A fleet migrating from nginx keeps its resumptions: the same ticket key file and the
    same certificate, and a session made by either resumes on the other. Another certificate
    is another session context: a full handshake, as between two nginx servers."""
    ctx = client_context(pki, minimum=version, maximum=version)
    key = ticket_key(tmp_path / "ticket.key")
    proxy = proxy_factory(upstream, extra=["--config", str(fleet_config(tmp_path, tls_files, "p", [key]))])
    nginx = nginx_tls(*tls_files, key)
    reused, by_nginx = resumed_session(nginx, ctx)
    assert not reused
    assert resumed_session(proxy.port, ctx, by_nginx)[0], "the proxy resumes nginx's session"
    _, by_proxy = resumed_session(proxy.port, ctx)
    assert resumed_session(nginx, ctx, by_proxy)[0], "nginx resumes the proxy's session"
    renewed = (pki.path("default2.pem"), pki.path("default2.key"))
    other = proxy_factory(upstream, extra=["--config", str(fleet_config(tmp_path, renewed, "o", [key]))])
    assert not resumed_session(other.port, ctx, by_nginx)[0], "another certificate: a full handshake"


def test_ticket_keys_rotate_on_a_reload(proxy_factory, upstream, pki, tls_files, tmp_path):
    """The documented rotation: the new key first, the old one second (still decrypts), then the
    old one gone (its tickets stop resuming)."""
    ctx = client_context(pki, minimum=ssl.TLSVersion.TLSv1_3)
    old, new = ticket_key(tmp_path / "old.key"), ticket_key(tmp_path / "new.key")
    cfg = fleet_config(tmp_path, tls_files, "p", [old])
    p = proxy_factory(upstream, extra=["--config", str(cfg)])
    _, by_old = resumed_session(p.port, ctx)

    def reload(keys, expect_reloaded="configuration reloaded"):
        cfg.write_text(fleet_config(tmp_path, tls_files, "p", keys).read_text())
        before = p.stderr_text().count(expect_reloaded)
        p.signal(signal.SIGHUP)
        p.stopped_on_purpose = False
        deadline = time.monotonic() + 5
        while p.stderr_text().count(expect_reloaded) == before:
            assert time.monotonic() < deadline, p.stderr_text()[-2000:]
            time.sleep(0.02)
    reload([new, old])
    reused, renewed = resumed_session(p.port, ctx, by_old)
    assert reused, "the old key still decrypts"
    reload([new])
    assert not resumed_session(p.port, ctx, by_old)[0], "rotated out: no longer decrypts"
    assert resumed_session(p.port, ctx, renewed)[0], "the ticket renewed under the new key resumes"
    # The same file rewritten in place (configuration unchanged) is re-read by a SIGHUP too.
    ticket_key(tmp_path / "new.key")
    p.signal(signal.SIGHUP)
    wait_for_log(p, '"TLS certificates reloaded"')
    assert not resumed_session(p.port, ctx, renewed)[0]


@pytest.mark.parametrize("content, problem", [
    (b"x" * 48, "is 48 bytes: a session ticket key is 80 random bytes"),
    (None, "cannot be read"),
])
def test_a_bad_ticket_key_file_is_named_by_check(proxy_bin, tls_files, tmp_path, content, problem):
    path = tmp_path / "bad.key"
    if content is not None:
        path.write_bytes(content)
    cfg = fleet_config(tmp_path, tls_files, "bad", [str(path)])
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1, out
    assert "tls.session_ticket_keys" in out.stdout + out.stderr and problem in out.stdout + out.stderr, out


def test_check_warns_about_a_ticket_key_that_group_or_others_can_read(proxy_bin, tls_files, tmp_path):
    key = ticket_key(tmp_path / "ticket.key")
    cfg = fleet_config(tmp_path, tls_files, "modes", [key])

    def check():
        return subprocess.run([proxy_bin, "check", "--config", str(cfg), "--upstream", "http://127.0.0.1:3000"],
                              capture_output=True, text=True, timeout=10)
    for mode in (0o644, 0o640):
        os.chmod(key, mode)
        out = check()
        assert out.returncode == 0, out
        assert f"warning: tls.session_ticket_keys: '{key}' has mode 0{mode:o}: group or others can read it" in out.stdout, out
    os.chmod(key, 0o600)
    out = check()
    assert out.returncode == 0 and "warning" not in out.stdout, out


def test_hsts_is_sent_on_every_tls_response_and_replaces_the_apps(proxy_factory, upstream, pki, tls_files, tmp_path):
    cert, key = tls_files
    cfg = tmp_path / "hsts.yaml"
    cfg.write_text(f"tls: {{ cert: {cert}, key: {key}, hsts: {{ max_age: 31536000, include_subdomains: true }} }}\n"
                   "redirect_http: 127.0.0.1:0\n".replace("127.0.0.1:0", f"127.0.0.1:{free_port()}"))
    proxy = proxy_factory(upstream, extra=["--config", str(cfg)])
    assert_on_every_tls_response(proxy, pki, "strict-transport-security", "max-age=31536000; includeSubDomains",
                                 apps_own="max-age%3D0",
                                 redirect_port=int(cfg.read_text().split("redirect_http: 127.0.0.1:")[1].strip()))


def assert_on_every_tls_response(proxy, pki, name, expected, apps_own, redirect_port):
    """`name: expected` on every answer of the TLS listener — the app's (its own `name: apps_own`,
    URL-encoded, replaced) and the proxy's own — over HTTP/1.1 and HTTP/2; never on the plain
    redirect listener."""
    with TLSConn(proxy.port, pki=pki) as c:
        for target in ("/echo", "/status/404", f"/status/200?h={name}:{apps_own}"):
            c.request("GET", target)
            r = c.read_response()
            assert r.header(name) == [expected], (target, r.headers)
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/%00")  # answered by the proxy itself
        r = c.read_response()
        assert r.status == 400 and r.header(name) == [expected]
    # never over plain HTTP: the redirect listener's 308 carries none
    with HTTPConn(redirect_port) as c:
        c.request("GET", "/x", host="default.test")
        r = c.read_response()
        assert r.status == 308 and r.header(name) == []
    # HTTP/2 too
    out = subprocess.run(["curl", "-sS", "--http2", "-o", "/dev/null", "-D", "-", "--cacert", pki.path("ca.pem"),
                          "--resolve", f"default.test:{proxy.port}:127.0.0.1", f"https://default.test:{proxy.port}/echo"],
                         capture_output=True, text=True, timeout=10)
    assert out.stdout.startswith("HTTP/2 200") and f"{name}: {expected}".lower() in out.stdout.lower(), out.stdout


def test_hsts_preload_needs_subdomains_and_a_year(proxy_bin, tls_files, tmp_path):
    cert, key = tls_files
    cfg = tmp_path / "preload.yaml"
    cfg.write_text(f"tls: {{ cert: {cert}, key: {key}, hsts: {{ max_age: 600, preload: true }} }}\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1 and "tls.hsts.preload" in out.stdout + out.stderr, out


# ---------------------------------------------------------------------------------------------
# HTTP/3 (http3): it needs TLS, turning it on or off needs a restart, and the TLS listener
# advertises it with Alt-Svc as HSTS is sent


def http3_config(tmp_path, tls_files, http3, redirect_port=None):
    cert, key = tls_files
    cfg = tmp_path / "http3.yaml"
    cfg.write_text(f"tls: {{ cert: {cert}, key: {key} }}\nhttp3: {http3}\n"
                   + (f"redirect_http: 127.0.0.1:{redirect_port}\n" if redirect_port else ""))
    return cfg


def test_alt_svc_is_sent_on_every_tls_response_while_http3_is_on_and_replaces_the_apps(proxy_factory, upstream, pki,
                                                                                       tls_files, tmp_path):
    redirect_port = free_port()
    cfg = http3_config(tmp_path, tls_files, "{ enabled: true, alt_svc_max_age: 1h }", redirect_port)
    proxy = proxy_factory(upstream, extra=["--config", str(cfg)])
    assert_on_every_tls_response(proxy, pki, "alt-svc", f'h3=":{proxy.port}"; ma=3600', apps_own="h3%3D%22%3A9%22",
                                 redirect_port=redirect_port)


def test_alt_svc_is_not_sent_while_http3_is_off_and_the_apps_own_passes(proxy_factory, upstream, pki, tls_files, tmp_path):
    cfg = http3_config(tmp_path, tls_files, "{ enabled: false }")
    proxy = proxy_factory(upstream, extra=["--config", str(cfg)])
    with TLSConn(proxy.port, pki=pki) as c:
        c.request("GET", "/echo")
        assert c.read_response().header("alt-svc") == []
        c.request("GET", '/status/200?h=alt-svc:h2%3D%22%3A8443%22')
        assert c.read_response().header("alt-svc") == ['h2=":8443"']


def test_http3_needs_tls(proxy_bin, tmp_path):
    cfg = tmp_path / "h3.yaml"
    cfg.write_text("upstream: http://127.0.0.1:3000\nhttp3: { enabled: true }\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1, out
    line = [l for l in out.stdout.splitlines() if "http3.enabled" in l]
    assert line and "tls.cert" in line[0] and "tls.key" in line[0], out.stdout
    started = run_briefly(proxy_bin, ["--config", str(cfg)])
    assert started.returncode == 2 and "http3.enabled" in started.stderr, started.stderr


@pytest.mark.parametrize("before,after", [("false", "true"), ("true", "false")])
def test_a_reload_that_turns_http3_on_or_off_is_refused(proxy_factory, upstream, pki, tls_files, tmp_path, before, after):
    """QUIC's UDP sockets are bound at start: turning it on or off needs a restart."""
    from test_reload import reload
    cfg = http3_config(tmp_path, tls_files, f"{{ enabled: {before} }}")
    proxy = proxy_factory(upstream, extra=["--config", str(cfg)])
    http3_config(tmp_path, tls_files, f"{{ enabled: {after} }}")
    line = reload(proxy, "configuration reload refused")
    assert "http3.enabled" in line["problem"] and "restart" in line["problem"], line
    with TLSConn(proxy.port, pki=pki) as c:  # still the running configuration
        c.request("GET", "/echo")
        r = c.read_response()
        assert r.status == 200 and bool(r.header("alt-svc")) == (before == "true"), r.headers


# ---------------------------------------------------------------------------------------------
# OCSP stapling (tls.ocsp_stapling), with `openssl ocsp` as the CA's responder


class Responder:
    """`openssl ocsp` answering for the certificates in its index (V good, R revoked)."""

    def __init__(self, pki, ca, port, status="V", tmp=None, minutes=10):
        self.port = port
        self.minutes = minutes
        self.index = os.path.join(tmp, "index.txt")
        self.log = open(os.path.join(tmp, "ocsp.log"), "w")
        self.proc = None
        self.pki, self.ca = pki, ca
        self.status = status

    def start(self, serial, subject):
        revoked = "261201000000Z" if self.status == "R" else ""
        with open(self.index, "w") as f:
            f.write(f"{self.status}\t301231000000Z\t{revoked}\t{serial:X}\tunknown\t{subject}\n")
        self.proc = subprocess.Popen([OPENSSL, "ocsp", "-index", self.index, "-port", str(self.port),
                                      "-rsigner", self.pki.path(f"{self.ca}.pem"), "-rkey", self.pki.path(f"{self.ca}.key"),
                                      "-CA", self.pki.path(f"{self.ca}.pem"), "-nmin", str(self.minutes)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        # Its own line says when it listens: a probe connection would hang it (it serves one
        # connection at a time and waits for the request on it).
        deadline = time.monotonic() + 5
        while "waiting for OCSP client connections" not in open(self.log.name).read():
            assert time.monotonic() < deadline, "openssl ocsp did not start"
            time.sleep(0.05)
        return self

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.log.close()


@pytest.fixture
def ocsp_pki(pki, tmp_path):
    """A leaf whose certificate names a responder on a free port, its chain file (leaf, then
    the issuer), and the responder (not started)."""
    port = free_port()
    pki.ca("ocspca", "OCSP Test CA")
    name = f"ocspleaf{port}"
    cert, key = pki.issue(name, "stapled.test", ["stapled.test", "127.0.0.1"], ca=("ocspca.pem", "ocspca.key"),
                          extra=[f"authorityInfoAccess=OCSP;URI:http://127.0.0.1:{port}"])
    chain = tmp_path / "chain.pem"
    chain.write_text(open(cert).read() + open(pki.path("ocspca.pem")).read())
    serial = pki.serial
    responders = []

    def responder(status="V", minutes=10):
        r = Responder(pki, "ocspca", port, status=status, tmp=str(tmp_path), minutes=minutes)
        responders.append(r)
        return r.start(serial, "/CN=stapled.test")
    yield str(chain), key, responder
    for r in responders:
        r.stop()


def stapling_proxy(proxy_factory, upstream, tmp_path, chain, key, on=True):
    cfg = tmp_path / "ocsp.yaml"
    cfg.write_text(f"tls: {{ cert: {chain}, key: {key}, ocsp_stapling: {'true' if on else 'false'} }}\n")
    return proxy_factory(upstream, extra=["--config", str(cfg)])


def s_client_status(port, pki):
    out = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "stapled.test", "-status",
                          "-CAfile", pki.path("ocspca.pem")], input=b"", capture_output=True, timeout=10)
    return out.stdout.decode(errors="replace")


def wait_metric(proxy, name, timeout=10, **labels):
    from test_observability import samples, scrape, value
    deadline = time.monotonic() + timeout
    while True:
        v = value(samples(scrape(proxy)), name, **labels)
        if v:
            return v
        assert time.monotonic() < deadline, f"{name}{labels} never set; stderr: {proxy.stderr_text()[-1500:]}"
        time.sleep(0.1)


def test_a_good_ocsp_response_is_fetched_verified_and_stapled(proxy_factory, upstream, pki, ocsp_pki, tmp_path):
    chain, key, responder = ocsp_pki
    responder()
    proxy = stapling_proxy(proxy_factory, upstream, tmp_path, chain, key)
    wait_metric(proxy, "callback_proxy_tls_ocsp_stapled", certificate="/CN=stapled.test")
    out = s_client_status(proxy.port, pki)
    assert "OCSP Response Status: successful" in out and "Cert Status: good" in out, out
    from test_observability import samples, scrape, value
    assert value(samples(scrape(proxy)), "callback_proxy_tls_ocsp_fetches_total", result="success") >= 1
    # A reload keeps the staple (the same certificate) while the next fetch is due.
    proxy.signal(signal.SIGHUP)
    proxy.stopped_on_purpose = False
    wait_for_log(proxy, '"TLS certificates reloaded"')
    assert "Cert Status: good" in s_client_status(proxy.port, pki)


def test_a_revoked_answer_is_not_stapled_and_is_logged_as_an_error(proxy_factory, upstream, pki, ocsp_pki, tmp_path):
    chain, key, responder = ocsp_pki
    responder(status="R")
    proxy = stapling_proxy(proxy_factory, upstream, tmp_path, chain, key)
    line = wait_for_log(proxy, "REVOKED", timeout=10)
    assert line["level"] == "error" and line["certificate"] == "/CN=stapled.test"
    out = s_client_status(proxy.port, pki)
    assert "OCSP response: no response sent" in out and "Verify return code: 0" in out, out


def test_a_dead_responder_never_blocks_a_handshake(proxy_factory, upstream, pki, ocsp_pki, tmp_path):
    chain, key, _ = ocsp_pki  # no responder started: connections are refused
    proxy = stapling_proxy(proxy_factory, upstream, tmp_path, chain, key)
    line = wait_for_log(proxy, "OCSP response not refreshed", timeout=10)
    assert line["setting"] == "tls.ocsp_stapling" and line["certificate"] == "/CN=stapled.test"
    wait_metric(proxy, "callback_proxy_tls_ocsp_fetches_total", result="failure")
    started = time.monotonic()
    out = s_client_status(proxy.port, pki)
    assert "OCSP response: no response sent" in out and "Verify return code: 0" in out, out
    assert time.monotonic() - started < 3


def test_without_the_setting_nothing_is_fetched_or_stapled(proxy_factory, upstream, pki, ocsp_pki, tmp_path):
    chain, key, responder = ocsp_pki
    r = responder()
    proxy = stapling_proxy(proxy_factory, upstream, tmp_path, chain, key, on=False)
    time.sleep(1)  # with stapling on, the first fetch goes out at start (test above)
    assert "OCSP response: no response sent" in s_client_status(proxy.port, pki)
    assert "Received request" not in open(r.log.name).read(), "the responder was asked"


def test_check_notes_a_certificate_that_cannot_be_stapled(proxy_bin, pki, tmp_path):
    cfg = tmp_path / "nostaple.yaml"
    cfg.write_text(f"tls: {{ cert: {pki.path('default.pem')}, key: {pki.path('default.key')}, ocsp_stapling: true }}\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out
    assert "note: tls.ocsp_stapling: /CN=default.test will not be stapled: the certificate names no OCSP responder" in out.stdout


def stapled_gauge(proxy):
    from test_observability import samples, scrape, value
    return value(samples(scrape(proxy)), "callback_proxy_tls_ocsp_stapled", certificate="/CN=stapled.test")


def ocsp_failures(proxy):
    from test_observability import samples, scrape, value
    return value(samples(scrape(proxy)), "callback_proxy_tls_ocsp_fetches_total", result="failure") or 0


def test_a_reload_that_changes_the_configuration_keeps_the_staple_of_an_unchanged_certificate(
        proxy_factory, upstream, pki, ocsp_pki, tmp_path):
    """The responder is down when the configuration changes (an unrelated setting, then the
    documented ticket key rotation): the certificate did not change, so its response stays
    stapled. A renewed certificate does not inherit it."""
    chain, key, responder = ocsp_pki
    r = responder()
    old, new = ticket_key(tmp_path / "old.key"), ticket_key(tmp_path / "new.key")
    cfg = tmp_path / "ocsp.yaml"

    def write(extra, cert=chain, cert_key=key):
        cfg.write_text(f"tls: {{ cert: {cert}, key: {cert_key}, ocsp_stapling: true, {extra} }}\n")
    write(f"hsts: {{ max_age: 300 }}, session_ticket_keys: [{old}]")
    proxy = proxy_factory(upstream, extra=["--config", str(cfg)])
    wait_metric(proxy, "callback_proxy_tls_ocsp_stapled", certificate="/CN=stapled.test")
    assert "Cert Status: good" in s_client_status(proxy.port, pki)
    r.stop()

    def reload():
        before, failures = proxy.stderr_text().count('"configuration reloaded"'), ocsp_failures(proxy)
        proxy.signal(signal.SIGHUP)
        proxy.stopped_on_purpose = False
        deadline = time.monotonic() + 10
        # Reloaded, and the fetch a reload starts has failed (the responder is down).
        while proxy.stderr_text().count('"configuration reloaded"') == before or ocsp_failures(proxy) == failures:
            assert time.monotonic() < deadline, proxy.stderr_text()[-2000:]
            time.sleep(0.05)

    for extra in (f"hsts: {{ max_age: 301 }}, session_ticket_keys: [{old}]",
                  f"hsts: {{ max_age: 301 }}, session_ticket_keys: [{new}, {old}]"):
        write(extra)
        reload()
        out = s_client_status(proxy.port, pki)
        assert "OCSP Response Status: successful" in out and "Cert Status: good" in out, (extra, out)
        assert stapled_gauge(proxy) == 1, extra

    port = r.port
    renewed, renewed_key = pki.issue(f"renewed{port}", "stapled.test", ["stapled.test", "127.0.0.1"],
                                     ca=("ocspca.pem", "ocspca.key"),
                                     extra=[f"authorityInfoAccess=OCSP;URI:http://127.0.0.1:{port}"])
    renewed_chain = tmp_path / "renewed-chain.pem"
    renewed_chain.write_text(open(renewed).read() + open(pki.path("ocspca.pem")).read())
    write(f"hsts: {{ max_age: 301 }}, session_ticket_keys: [{new}, {old}]", cert=renewed_chain, cert_key=renewed_key)
    reload()
    assert "OCSP response: no response sent" in s_client_status(proxy.port, pki)
    assert stapled_gauge(proxy) == 0


def test_a_response_is_not_stapled_past_its_next_update(proxy_factory, upstream, pki, ocsp_pki, tmp_path):
    """One-minute responses (the responder stays up): the next fetch is 5 minutes away, but
    handshakes stop stapling at nextUpdate, and the gauge and the log say so."""
    chain, key, responder = ocsp_pki
    responder(minutes=1)
    proxy = stapling_proxy(proxy_factory, upstream, tmp_path, chain, key)
    wait_metric(proxy, "callback_proxy_tls_ocsp_stapled", certificate="/CN=stapled.test")
    out = s_client_status(proxy.port, pki)
    assert "Cert Status: good" in out, out
    text = out.split("Next Update:")[1].splitlines()[0].strip()
    next_update = datetime.datetime.strptime(text, "%b %d %H:%M:%S %Y GMT").replace(tzinfo=datetime.timezone.utc).timestamp()
    assert next_update - time.time() < 62, text

    time.sleep(max(0, next_update - 3 - time.time()))
    assert "Cert Status: good" in s_client_status(proxy.port, pki), "stapled until nextUpdate"
    time.sleep(max(0, next_update + 1 - time.time()))
    out = s_client_status(proxy.port, pki)
    assert "OCSP response: no response sent" in out and "Verify return code: 0" in out, out
    deadline = time.monotonic() + 5
    while stapled_gauge(proxy) != 0:
        assert time.monotonic() < deadline, "the gauge still says stapled"
        time.sleep(0.1)
    line = wait_for_log(proxy, "OCSP response expired")
    assert line["level"] == "warn" and line["setting"] == "tls.ocsp_stapling" and line["certificate"] == "/CN=stapled.test"
    assert line["responder"].startswith("http://127.0.0.1:"), line
    assert proxy.stderr_text().count("OCSP response expired") == 1
