"""The Redis store behind Sentinel: 1 master, 1 replica and 3 sentinels (Debian's redis-server,
run with --sentinel) on loopback, two proxy instances on them. The master is killed under steady
callback load: callbacks fail closed (503, answered at once, no double exchange), then succeed
again on the promoted replica without anything being restarted, and the replay guard still holds
across the instances."""
import socket
import subprocess
import threading
import time

import pytest

from helpers import HTTPConn, free_port
from test_redis_store import callback, make_test_pki, start
from test_session import IOS, idp  # noqa: F401  (the module's IdP fixture)

MASTER_NAME = "cbp"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 2000


def wait_port(port, what):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} did not start")


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=5)
    return out.stdout


class RedisProcesses:
    """redis-server processes by name, each started in its own working directory (a replica's
    full sync writes dump.rdb there: never into the checkout); SIGKILL, not a clean shutdown."""

    def __init__(self):
        self.procs = {}

    def spawn(self, name, argv, port, cwd):
        self.procs[name] = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port, name)

    def kill(self, name):
        p = self.procs[name]
        p.kill()
        p.wait()

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


class Sentinelled(RedisProcesses):
    """A master, its replica and three sentinels (quorum 2), each its own process."""

    def __init__(self, tmp, pki=None, sentinel_tls=False):
        """`pki`: the master and the replica speak TLS only (and to each other, and the sentinels
        to them); the sentinels themselves stay plain unless `sentinel_tls`."""
        super().__init__()
        self.tmp = tmp
        self.pki = pki
        self.sentinel_tls = sentinel_tls
        self.master_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.server("master", self.master_port)
        self.server("replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port))
        for i, port in enumerate(self.sentinel_ports):
            conf = tmp / f"sentinel{i}.conf"   # sentinel rewrites its file: one each
            tls = "" if not pki else f"""tls-replication yes
tls-cert-file {pki.server_cert}
tls-key-file {pki.server_key}
tls-ca-cert-file {pki.ca_cert}
"""
            listen = f"port {port}" if not sentinel_tls else f"""port 0
tls-port {port}
tls-auth-clients no"""
            conf.write_text(f"""{listen}
bind 127.0.0.1
dir {tmp}
{tls}sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} 2
sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}
sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}
sentinel parallel-syncs {MASTER_NAME} 1
""")
            self.spawn(f"sentinel{i}", ["redis-server", str(conf), "--sentinel"], port, tmp)

    def server(self, name, port, *extra):
        d = self.tmp / name
        d.mkdir()
        ports = ["--port", str(port)]
        if self.pki:
            ports = ["--port", "0", "--tls-port", str(port), "--tls-replication", "yes", "--tls-auth-clients", "no",
                     "--tls-cert-file", self.pki.server_cert, "--tls-key-file", self.pki.server_key,
                     "--tls-ca-cert-file", self.pki.ca_cert]
        self.spawn(name, ["redis-server", *ports, "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", str(d), *extra], port, d)

    def wait_settled(self, timeout=15):
        """Until the replica is in sync and every sentinel knows the replica and the two others:
        only then can they agree on a failover."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            synced = "master_link_status:up" in cli(self.replica_port, *self.cli_tls(), "info", "replication")
            views = [self.sentinel_cli(p, "sentinel", "master", MASTER_NAME).split("\n") for p in self.sentinel_ports]
            def field(lines, key):
                return lines[lines.index(key) + 1] if key in lines else None
            if synced and all(field(v, "num-slaves") == "1" and field(v, "num-other-sentinels") == "2" for v in views):
                return
            time.sleep(0.1)
        raise RuntimeError("the sentinels did not settle")

    def sentinel_cli(self, port, *args):
        return cli(port, *(self.cli_tls() if self.sentinel_tls else []), *args)

    def cli_tls(self):
        return ["--tls", "--cacert", self.pki.ca_cert] if self.pki else []

    def store_config(self):
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        if self.pki:
            tls = "\nstore_sentinel_tls: true" if self.sentinel_tls else ""
            return f"store: rediss+sentinel://{hosts}/{MASTER_NAME}/0\nstore_tls_ca: {self.pki.ca_cert}{tls}"
        return f"store: redis+sentinel://{hosts}/{MASTER_NAME}/0"


@pytest.fixture
def sentinelled(tmp_path):
    s = Sentinelled(tmp_path)
    yield s
    s.stop()


@pytest.fixture(params=["plain sentinels", "tls sentinels"])
def tls_sentinelled(tmp_path, request):
    s = Sentinelled(tmp_path, pki=make_test_pki(str(tmp_path / "redis-pki")), sentinel_tls=request.param == "tls sentinels")
    yield s
    s.stop()


def metrics(p):
    with HTTPConn(p.internal_port) as c:
        c.request("GET", "/metrics")
        return c.read_response().body.decode()


def test_a_killed_master_fails_callbacks_closed_until_the_sentinels_promote_the_replica(
        proxy_factory, upstream, tmp_path, idp, sentinelled):  # noqa: F811
    sentinelled.wait_settled()
    a = start(proxy_factory, upstream, tmp_path, idp, None, "a", store=sentinelled.store_config())
    b = start(proxy_factory, upstream, tmp_path, idp, None, "b", store=sentinelled.store_config())
    master = f"127.0.0.1:{sentinelled.master_port}"
    assert f'callback_proxy_store_master_info{{address="{master}"}} 1' not in metrics(a)  # none used yet
    idp.request("POST", "/_test/reset-stats")

    results = []   # (started, finished, status)
    stop = threading.Event()
    failures = []

    def load():
        n = 0
        try:
            while not stop.is_set():
                grant = idp.get_code(IOS)
                p = (a, b)[n % 2]
                n += 1
                t0 = time.monotonic()
                status = callback(p, grant).status
                results.append((t0, time.monotonic(), status))
        except Exception as e:  # surfaced by the asserts below
            failures.append(repr(e))

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    time.sleep(1.5)
    before = list(results)
    assert before and all(s == 200 for _, _, s in before), before
    assert f'callback_proxy_store_master_info{{address="{master}"}} 1' in metrics(a)

    switched = []   # when the first sentinel names the replica: Sentinel's own share of the window

    def watch_sentinel():
        replica = str(sentinelled.replica_port)
        while not stop.is_set() and not switched:
            if replica in cli(sentinelled.sentinel_ports[0], "sentinel", "get-master-addr-by-name", MASTER_NAME):
                switched.append(time.monotonic())
            time.sleep(0.02)

    killed = time.monotonic()
    sentinelled.kill("master")
    watcher = threading.Thread(target=watch_sentinel, daemon=True)
    watcher.start()
    recovered = None
    deadline = killed + 20
    while time.monotonic() < deadline and not failures:
        after = [r for r in results if r[0] > killed]
        ok = [r for r in after if r[2] == 200]
        if recovered is None and ok:
            recovered = ok[0][1]
        if recovered is not None and len(ok) >= 10:
            break
        time.sleep(0.05)
    stop.set()
    worker.join(15)
    watcher.join(5)
    assert not failures, failures
    window = (recovered - killed) if recovered else None
    print(f"\nsentinel failover window (SIGKILL of the master -> first 200): "
          f"{window if window is None else round(window, 2)} s with down-after-milliseconds={DOWN_AFTER_MS}, "
          f"failover-timeout={FAILOVER_TIMEOUT_MS} (the sentinel named the replica after "
          f"{round(switched[0] - killed, 2) if switched else '?'} s); {len(results)} callbacks, "
          f"{sum(1 for r in results if r[2] == 503)} refused 503")
    assert recovered is not None, f"no callback succeeded within 20 s of the kill: {results[-5:]}"

    statuses = {s for _, _, s in results}
    assert statuses <= {200, 503}, statuses
    assert any(s == 503 for _, _, s in results), "the failover was not noticed at all"
    slowest = max(end - begin for begin, end, _ in results)
    print(f"slowest callback {slowest:.3f} s")
    assert slowest < 3, f"a callback took {slowest:.2f} s: fail closed means at once"
    # Every 200 is one exchange, and no refused callback reached the IdP.
    assert idp.stats()["token"]["requests"] == sum(1 for r in results if r[2] == 200)

    # The replay guard holds across the instances on the new master. Each event loop has its own
    # connection: one of a's may still be in its (≤ 500 ms) reconnect backoff when the load above
    # saw its tenth success, and fails closed meanwhile — the app's user would tap again.
    deadline = time.monotonic() + 3
    while True:
        grant = idp.get_code(IOS)
        status = callback(a, grant).status
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200
    # b too may meet the failover only now, its connection to the dead master in reconnect
    # backoff: it fails closed (503, the code unspent, no token request) until it has the new
    # master, and then must see the code as already used.
    tokens = idp.stats()["token"]["requests"]
    deadline = time.monotonic() + 3
    while True:
        status = callback(b, grant).status
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 400
    assert idp.stats()["token"]["requests"] == tokens, "b exchanged a code a had used"
    promoted = f"127.0.0.1:{sentinelled.replica_port}"
    for p in (a, b):
        text = metrics(p)
        assert "callback_proxy_store_failovers_total 1" in text, text
        assert f'callback_proxy_store_master_info{{address="{promoted}"}} 1' in text
        log = p.stderr_text()
        assert "redis master changed" in log and promoted in log, log[-3000:]


def test_over_tls_the_master_is_found_through_the_sentinels_and_the_replay_guard_holds(
        proxy_factory, upstream, tmp_path, idp, tls_sentinelled):  # noqa: F811
    """rediss+sentinel://: the master is spoken to over TLS, its certificate checked against the
    address announced (127.0.0.1, in its IP SANs); the sentinels in plain TCP, or over TLS too with
    `store_sentinel_tls` (each checked against its configured host)."""
    tls_sentinelled.wait_settled()
    config = tls_sentinelled.store_config()
    a = start(proxy_factory, upstream, tmp_path, idp, None, "a", store=config)
    b = start(proxy_factory, upstream, tmp_path, idp, None, "b", store=config)
    grant = idp.get_code(IOS)
    idp.request("POST", "/_test/reset-stats")
    assert callback(a, grant).status == 200
    assert callback(b, grant).status == 400
    assert idp.stats()["token"]["requests"] == 1
    assert f'callback_proxy_store_master_info{{address="127.0.0.1:{tls_sentinelled.master_port}"}} 1' in metrics(a)
    if tls_sentinelled.sentinel_tls:
        # the same sentinels asked in plain TCP: no answer, so no master, so callbacks fail closed
        plain = start(proxy_factory, upstream, tmp_path, idp, None, "c",
                      store=config.replace("\nstore_sentinel_tls: true", ""))
        assert callback(plain, idp.get_code(IOS)).status == 503
        assert "no sentinel gave the address" in plain.stderr_text()


def test_store_wait_replicas_holds_the_callback_until_the_replica_has_the_replay_guard(
        proxy_factory, upstream, tmp_path, idp, sentinelled):  # noqa: F811
    """With `store_wait_replicas: 1` the replay guard is WAITed for: on the replica before the
    code is exchanged. A replica that stops answering makes callbacks fail closed after
    `store_wait_timeout` (503, the IdP never called), and they succeed again once it is back."""
    sentinelled.wait_settled()
    # 600 ms: a replica on a loaded 2-core machine can take a few hundred ms to acknowledge, and
    # the WAIT must still end before the store's 1 s command timeout.
    config = sentinelled.store_config() + "\nstore_wait_replicas: 1\nstore_wait_timeout: 600ms"
    a = start(proxy_factory, upstream, tmp_path, idp, None, "a", store=config)
    idp.request("POST", "/_test/reset-stats")
    grant = idp.get_code(IOS)
    assert callback(a, grant).status == 200
    # the guard is on the replica itself
    keys = cli(sentinelled.replica_port, "--scan", "--pattern", "cbp:*")
    assert keys.strip(), "the replay guard did not reach the replica"
    replica = sentinelled.procs["replica"]
    replica.send_signal(19)  # SIGSTOP: the replica stops acknowledging
    try:
        started = time.monotonic()
        r = callback(a, idp.get_code(IOS))
        took = time.monotonic() - started
        assert r.status == 503, r.status
        assert 0.55 < took < 2.5, took
        line = next(l for l in reversed(a.stderr_text().splitlines()) if "callback failed" in l)
        assert "store_wait_replicas" in line and "store_unavailable" in line, line
    finally:
        replica.send_signal(18)  # SIGCONT
    deadline = time.monotonic() + 5
    status = None
    while time.monotonic() < deadline and status != 200:
        status = callback(a, idp.get_code(IOS)).status
        time.sleep(0.1)
    assert status == 200
    # one exchange per 200: the refused callback never reached the IdP
    assert idp.stats()["token"]["requests"] == 2
