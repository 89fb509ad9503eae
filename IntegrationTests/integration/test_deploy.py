"""Running it like infrastructure: environment overrides, and everything under deploy/ checked
with the tools this machine has (systemd-analyze, nginx, kubectl, apt-cache) and the real binary.

Each check that needs a tool skips only when that tool is absent."""

import http.client
import os
import re
import socket
import subprocess
import time

import pytest
import yaml

from helpers import REPO_ROOT, free_port, http_get_status, terminate_all, wait_port_refused

DEPLOY = os.path.join(REPO_ROOT, "deploy")


def clean_env(**extra):
    """This process's environment without any CALLBACK_PROXY_ variable (the harness's own
    CALLBACK_PROXY_BIN stays: the proxy knows it is not a key), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CALLBACK_PROXY_") or k == "CALLBACK_PROXY_BIN"}
    env.update(extra)
    return env


def run(binary, *args, env=None, timeout=20):
    return subprocess.run([binary, *args], capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env if env is not None else clean_env())


def wait_healthy(proc, port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"proxy exited with {proc.returncode}"
        try:
            if http_get_status(port, "/healthz", timeout=0.5)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError("proxy did not become healthy")


class Running:
    """The binary started with an explicit environment; killed by the test's finaliser."""

    def __init__(self, binary, args, env, tmp_path, name="proxy"):
        self.stderr_path = os.path.join(tmp_path, f"{name}.stderr")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([binary, *args], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._err)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


@pytest.fixture
def start(proxy_bin, tmp_path):
    started = []

    def go(args, env, name="proxy"):
        r = Running(proxy_bin, args, env, str(tmp_path), name=f"{name}{len(started)}")
        started.append(r)
        return r

    yield go
    for r in started:
        r.stop()


# ---------------------------------------------------------------------------------------------
# Environment overrides: flags > environment > file > defaults

def test_environment_overrides_the_file_and_a_flag_overrides_the_environment(start, upstream, tmp_path):
    public, env_internal, flag_internal = free_port(), free_port(), free_port()
    config = tmp_path / "proxy.yaml"
    # The file names an upstream where nothing listens and a log level the variable replaces.
    config.write_text(f"listen: 127.0.0.1:{public}\nupstream: http://127.0.0.1:{free_port()}\n"
                      f"log: {{ level: error }}\nloops: 1\naccess_log: off\n")
    env = clean_env(CALLBACK_PROXY_UPSTREAM=upstream.url,
                    CALLBACK_PROXY_INTERNAL_LISTEN=f"127.0.0.1:{env_internal}",
                    CALLBACK_PROXY_LOG__LEVEL="info")
    p = start(["--config", str(config), "--internal-listen", f"127.0.0.1:{flag_internal}"], env)
    wait_healthy(p.proc, flag_internal)
    # the file's upstream would refuse the connection: a 200 means the variable won
    status, body = http_get_status(public, "/status/200")
    assert status == 200, (status, body, p.stderr()[-2000:])
    assert upstream.record.wait_for(lambda r: any(e["target"] == "/status/200" for e in r.requests()))
    # the flag's internal listener is up, the variable's is not
    assert wait_port_refused(env_internal, timeout=0.5)
    # log.level error (file) → info (variable): the info-level "ready" line is logged
    assert f'"msg":"ready"' in p.stderr() and f'"internal":"127.0.0.1:{flag_internal}"' in p.stderr(), \
        p.stderr()[-2000:]


def test_without_a_file_the_environment_alone_configures_the_proxy(start, upstream):
    public, internal = free_port(), free_port()
    env = clean_env(CALLBACK_PROXY_UPSTREAM=upstream.url, CALLBACK_PROXY_LISTEN=f"127.0.0.1:{public}",
                    CALLBACK_PROXY_INTERNAL_LISTEN=f"127.0.0.1:{internal}", CALLBACK_PROXY_LOOPS="1",
                    CALLBACK_PROXY_ACCESS_LOG="off")
    p = start([], env)
    wait_healthy(p.proc, internal)
    assert http_get_status(public, "/status/204")[0] == 204, p.stderr()[-2000:]


def test_an_unknown_variable_fails_check_and_start_naming_it(proxy_bin, tmp_path):
    config = tmp_path / "proxy.yaml"
    config.write_text("upstream: http://127.0.0.1:3000\n")
    env = clean_env(CALLBACK_PROXY_UPSTRAEM="http://127.0.0.1:3001", CALLBACK_PROXY_TIMEOUTS__UPSTREAM="soon")
    r = run(proxy_bin, "check", "--config", str(config), env=env)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert "CALLBACK_PROXY_UPSTRAEM: unknown variable" in out, out
    assert "timeouts.upstream (from CALLBACK_PROXY_TIMEOUTS__UPSTREAM): 'soon' is not a duration" in out, out
    assert "2 problem(s)" in out, out
    # start-up runs the same checks: exit 2 before listening
    r = run(proxy_bin, "--config", str(config), "--listen", f"127.0.0.1:{free_port()}",
            "--internal-listen", "off", env=env)
    assert r.returncode == 2, r
    assert b"CALLBACK_PROXY_UPSTRAEM" in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------
# Example configurations: every one passes check, with the variables they name set

SECRETS = {"GOOGLE_CLIENT_SECRET": "dummy-google", "FACEBOOK_APP_SECRET": "dummy-facebook",
           "CORP_CLIENT_SECRET": "dummy-corp", "CORP_WEB_SECRET": "dummy-corp-web", "SESSION_SECRET": "s" * 40,
           "REDIS_PASSWORD": "dummy-redis", "SENTINEL_PASSWORD": "dummy-sentinel"}

EXAMPLES = sorted(f for f in os.listdir(os.path.join(DEPLOY, "examples")) if f.endswith(".yaml"))


def test_the_named_examples_exist():
    assert {"rails-devise-relay.yaml", "header-auth-session.yaml", "oidc-relay-confidential.yaml",
            "redis-scale-out.yaml", "redis-sentinel.yaml"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_configuration_passes_check(proxy_bin, name):
    path = os.path.join(DEPLOY, "examples", name)
    r = run(proxy_bin, "check", "--config", path, env=clean_env(**SECRETS))
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert b": ok (" in r.stdout
    # the examples keep their secrets out of the file: without the variables, check fails
    r = run(proxy_bin, "check", "--config", path)
    assert r.returncode == 1 and b"is not set" in r.stdout, r.stdout


# ---------------------------------------------------------------------------------------------
# The Sentinel example: its Redis files, moved to loopback, make a set-up the proxy follows

SENTINEL_EXAMPLE = os.path.join(DEPLOY, "examples", "redis-sentinel.yaml")


def example_redis_files(path):
    """The `# --- FILE on HOST …` blocks in an example's comments, {(file, host): text}: each block's
    `#   ` lines up to the first line that is not one."""
    files, current = {}, None
    with open(path) as f:
        for line in f:
            header = re.match(r"# --- (\S+) on (\S+) ", line)
            if header:
                current = files.setdefault((header[1], header[2]), [])
            elif current is not None and line.startswith("#   "):
                current.append(line[4:].rstrip("\n"))
            else:
                current = None
    return {k: "\n".join(v) + "\n" for k, v in files.items()}


def replaced(text, *pairs):
    """`text` with each (old, new) replaced; every old must occur, so no line is skipped silently."""
    for old, new in pairs:
        assert old in text, f"{old!r} not in:\n{text}"
        text = text.replace(old, new)
    return text


def redis_cli(port, password, *args):
    return subprocess.run(["redis-cli", "-p", str(port), "-a", password, "--no-auth-warning", *args],
                          capture_output=True, text=True, timeout=5).stdout


def test_the_sentinel_examples_redis_files_make_a_set_up_the_proxy_follows_through_a_failover(
        start, upstream, tmp_path):
    if not os.access("/usr/bin/redis-server", os.X_OK):
        pytest.skip("redis-server is not installed")
    from test_redis_sentinel import RedisProcesses
    files = example_redis_files(SENTINEL_EXAMPLE)
    assert set(files) == {("redis.conf", "10.0.0.11"), ("redis.conf", "10.0.0.12"), ("sentinel.conf", "10.0.0.11")}
    hosts = ["10.0.0.11", "10.0.0.12", "10.0.0.13"]
    data = {h: free_port() for h in hosts[:2]}          # master, replica
    sentinels = {h: free_port() for h in hosts}
    redis_password = ("@REDIS_PASSWORD@", SECRETS["REDIS_PASSWORD"])
    master_at = ("10.0.0.11 6379", f"127.0.0.1 {data['10.0.0.11']}")
    redis = RedisProcesses()
    try:
        for h in hosts[:2]:
            d = tmp_path / f"redis-{h}"
            d.mkdir()
            extra = [master_at] if h == "10.0.0.12" else []
            conf = replaced(files[("redis.conf", h)], (f"bind {h}", "bind 127.0.0.1"),
                            ("port 6379", f"port {data[h]}"), *extra, redis_password)
            (d / "redis.conf").write_text(conf + f"dir {d}\n")
            redis.spawn(h, ["redis-server", str(d / "redis.conf")], data[h], d)
        for h in hosts:
            d = tmp_path / f"sentinel-{h}"
            d.mkdir()
            # One block for all three sentinels: each with its own address; a shorter failover.
            conf = replaced(files[("sentinel.conf", "10.0.0.11")], ("bind 10.0.0.11", "bind 127.0.0.1"),
                            ("port 26379", f"port {sentinels[h]}"), master_at, redis_password,
                            ("@SENTINEL_PASSWORD@", SECRETS["SENTINEL_PASSWORD"]),
                            ("down-after-milliseconds cbp 5000", "down-after-milliseconds cbp 1000"),
                            ("failover-timeout cbp 60000", "failover-timeout cbp 2000"))
            (d / "sentinel.conf").write_text(conf + f"dir {d}\n")
            redis.spawn(f"sentinel-{h}", ["redis-server", str(d / "sentinel.conf"), "--sentinel"], sentinels[h], d)

        # Settled: the replica in sync, each sentinel knowing it and the two others.
        def settled():
            if "master_link_status:up" not in redis_cli(data["10.0.0.12"], SECRETS["REDIS_PASSWORD"],
                                                        "info", "replication"):
                return False
            for port in sentinels.values():
                lines = redis_cli(port, SECRETS["SENTINEL_PASSWORD"], "sentinel", "master", "cbp").split("\n")
                view = dict(zip(lines[::2], lines[1::2]))
                if view.get("num-slaves") != "1" or view.get("num-other-sentinels") != "2":
                    return False
            return True
        deadline = time.monotonic() + 20
        while not settled():
            assert time.monotonic() < deadline, "the example's master, replica and sentinels did not settle"
            time.sleep(0.1)

        # The proxy with the example file, its sentinel addresses moved to the same loopback ports.
        with open(SENTINEL_EXAMPLE) as f:
            config = f.read()
        config = replaced(config, *[(f"{h}:26379", f"127.0.0.1:{sentinels[h]}") for h in hosts])
        (tmp_path / "redis-sentinel.yaml").write_text(config)
        public, internal = free_port(), free_port()
        p = start(["--config", str(tmp_path / "redis-sentinel.yaml"), "--upstream", upstream.url,
                   "--listen", f"127.0.0.1:{public}", "--internal-listen", f"127.0.0.1:{internal}",
                   "--access-log", "off"], clean_env(**SECRETS))
        wait_healthy(p.proc, internal)

        def ready_on(address, timeout):
            """Polls /readyz (which pings the store, so a lost master is noticed and the sentinels
            asked again) until it is 200 and /metrics names `address` as the master."""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if http_get_status(internal, "/readyz")[0] == 200:
                    body = http_get_status(internal, "/metrics")[1].decode()
                    if f'callback_proxy_store_master_info{{address="{address}"}} 1' in body:
                        return body
                time.sleep(0.1)
            raise AssertionError(f"not ready on {address}: {http_get_status(internal, '/readyz')}, "
                                 f"{p.stderr()[-3000:]}")

        ready_on(f"127.0.0.1:{data['10.0.0.11']}", 10)
        redis.kill("10.0.0.11")
        body = ready_on(f"127.0.0.1:{data['10.0.0.12']}", 20)
        assert "callback_proxy_store_failovers_total 1" in body, body
    finally:
        redis.stop()


def test_the_sentinel_examples_redis_cluster_variant_passes_check(proxy_bin, tmp_path):
    with open(SENTINEL_EXAMPLE) as f:
        text = f.read()
    cluster = re.search(r"^#   (store: redis\+cluster://\S+)$", text, re.M)
    assert cluster, "no commented redis+cluster:// store in the example"
    sentinel_store = re.search(r"^store: redis\+sentinel://\S+$", text, re.M)[0]
    sentinel_password = re.search(r"^store_sentinel_password_env: .*\n", text, re.M)[0]
    path = tmp_path / "redis-cluster.yaml"
    path.write_text(replaced(text, (sentinel_store, cluster[1]), (sentinel_password, "")))
    r = run(proxy_bin, "check", "--config", str(path), env=clean_env(**SECRETS))
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


# ---------------------------------------------------------------------------------------------
# systemd

UNIT = os.path.join(DEPLOY, "systemd", "callback-proxy.service")
SYSTEMD_ANALYZE = "/usr/bin/systemd-analyze"


def unit_settings():
    out = {}
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")) and "=" in line:
                k, v = line.split("=", 1)
                out.setdefault(k, []).append(v)
    return out


def test_the_unit_is_hardened():
    s = unit_settings()
    for key, value in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                       ("PrivateTmp", "yes"), ("PrivateDevices", "yes"), ("MemoryDenyWriteExecute", "yes"),
                       ("LockPersonality", "yes"), ("DynamicUser", "yes"), ("Restart", "on-failure"),
                       ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
                       ("SystemCallFilter", "@system-service"), ("Type", "notify"), ("NotifyAccess", "main")]:
        assert value in s.get(key, []), f"{key}={value} missing: {s.get(key)}"
    # 80 and 443 bindable, and that the only capability the process can ever hold
    assert s["AmbientCapabilities"] == ["CAP_NET_BIND_SERVICE"] and s["CapabilityBoundingSet"] == ["CAP_NET_BIND_SERVICE"]
    assert "/bin/kill -HUP $MAINPID" in s["ExecReload"]
    # check is told the stop timeout, to warn of a drain it would cut short
    (stop,) = s["TimeoutStopSec"]
    checks = [v for v in s["ExecStartPre"] + s["ExecReload"] if " check " in v]
    assert len(checks) == 2 and all(f"--stop-timeout {stop} " in v for v in checks), checks
    assert int(s["LimitNOFILE"][0]) >= 65536
    assert any("/etc/callback-proxy/" in v for v in s["ExecStart"])
    assert any(k in s for k in ("EnvironmentFile", "LoadCredential"))


@pytest.fixture
def unit_copy(proxy_bin, tmp_path):
    """The unit with its binary paths pointing at the built binary (verify checks they exist)."""
    if not os.access(SYSTEMD_ANALYZE, os.X_OK):
        pytest.skip("systemd-analyze is not installed")
    with open(UNIT) as f:
        text = f.read().replace("/usr/local/bin/callback-proxy", proxy_bin)
    path = tmp_path / "callback-proxy.service"
    path.write_text(text)
    return path


def test_systemd_analyze_verifies_the_unit_without_a_warning(unit_copy):
    r = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit_copy)], capture_output=True, timeout=60)
    # verify exits 0 on unknown or unparsable settings too, warning about them on stderr
    assert r.returncode == 0 and r.stderr.strip() == b"", r.stderr.decode()


def test_systemd_analyze_verify_would_catch_a_broken_unit(unit_copy):
    text = unit_copy.read_text().replace("ProtectSystem=strict", "ProtectSystem=stricter")
    unit_copy.write_text(text)
    r = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit_copy)], capture_output=True, timeout=60)
    assert b"stricter" in r.stderr, r.stderr


def test_systemd_rates_the_unit_exposure_at_most_2_of_10(unit_copy):
    # exposure is 0.0 (locked down) … 10.0 (nothing restricted); --threshold is in tenths
    r = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", "--threshold=20", str(unit_copy)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stdout.decode()[-1500:]


# ---------------------------------------------------------------------------------------------
# The container file (no daemon here: check what can be checked without building)

DOCKERFILE = os.path.join(DEPLOY, "container", "Dockerfile")


def dockerfile_instructions():
    """(INSTRUCTION, arguments) with continuation lines joined, per stage."""
    with open(DOCKERFILE) as f:
        text = f.read().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def runtime_stage():
    ins = dockerfile_instructions()
    starts = [i for i, (w, _) in enumerate(ins) if w == "FROM"]
    assert len(starts) >= 2, "not a multi-stage build"
    return ins[starts[-1]:]


def test_the_container_is_multi_stage_and_runs_on_bookworm_slim():
    ins = dockerfile_instructions()
    args = dict(a.split("=", 1) for w, a in ins if w == "ARG" and "=" in a)
    assert args["SWIFT_IMAGE"].startswith("swift:") and "bookworm" in args["SWIFT_IMAGE"]
    assert args["RUNTIME_IMAGE"] == "debian:bookworm-slim"
    assert any(w == "RUN" and "swift build -c release" in a and "--static-swift-stdlib" in a for w, a in ins)
    stage = runtime_stage()
    assert stage[0] == ("FROM", "${RUNTIME_IMAGE}")
    assert any(w == "COPY" and a.startswith("--from=build ") for w, a in stage)


def test_the_build_stage_installs_every_c_library_the_package_names():
    """Package.swift's system libraries name their Debian -dev packages (`providers: [.apt([...])]`):
    each must be installed where the image is built, or `swift build` fails there."""
    with open(os.path.join(REPO_ROOT, "Package.swift")) as f:
        needed = re.findall(r'\.apt\(\["([^"]+)"', f.read())
    assert "libssl-dev" in needed and len(needed) >= 6, needed
    ins = dockerfile_instructions()
    build = ins[:[i for i, (w, _) in enumerate(ins) if w == "FROM"][-1]]
    install = " ".join(a for w, a in build if w == "RUN" and "apt-get install" in a).split()
    missing = [p for p in needed if p not in install]
    assert missing == [], f"the build stage does not install {missing}"


def test_the_runtime_packages_exist_in_debian():
    if not os.access("/usr/bin/apt-cache", os.X_OK):
        pytest.skip("apt-cache is not installed")
    install = next(a for w, a in runtime_stage() if w == "RUN" and "apt-get install" in a)
    packages = [t for t in install.split("apt-get install", 1)[1].split("&&")[0].split() if not t.startswith("-")]
    for needed in ("libssl3", "libcurl4", "libyaml-0-2", "zlib1g", "libhiredis0.14", "libnghttp2-14", "libbrotli1",
                   "libngtcp2-9", "libngtcp2-crypto-gnutls2", "libgnutls30", "libnghttp3-3", "ca-certificates"):
        assert needed in packages, f"{needed} not installed in the runtime image: {packages}"
    for p in packages:
        r = subprocess.run(["apt-cache", "policy", p], capture_output=True, timeout=60)
        assert b"Candidate:" in r.stdout and b"Candidate: (none)" not in r.stdout, f"{p}: {r.stdout!r}"


def test_the_runtime_packages_cover_what_the_binary_links(proxy_bin):
    """Every non-libc shared library the built binary needs comes from a runtime package."""
    if not os.access("/usr/bin/dpkg", os.X_OK):
        pytest.skip("dpkg is not installed")
    install = next(a for w, a in runtime_stage() if w == "RUN" and "apt-get install" in a)
    ldd = subprocess.run(["ldd", proxy_bin], capture_output=True, text=True, timeout=30).stdout
    libs = [l.split("=>")[1].split()[0] for l in ldd.splitlines() if "=>" in l and "/" in l]
    base = {"libc6", "libgcc-s1", "libstdc++6", "libzstd1"}  # in debian:bookworm-slim already
    for lib in libs:
        if "libswift" in lib or "lib_Foundation" in lib or "libFoundation" in lib or "libdispatch" in lib \
                or "libBlocksRuntime" in lib:
            continue  # the Swift runtime: linked statically in the image (--static-swift-stdlib)
        r = subprocess.run(["dpkg", "-S", os.path.realpath(lib)], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            r = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True, timeout=30)
        pkg = r.stdout.split(":")[0]
        # The libraries the binary links itself (others come with these, as their dependencies).
        if pkg in ("libssl3", "libcurl4", "libyaml-0-2", "zlib1g", "libhiredis0.14", "libnghttp2-14", "libbrotli1",
                   "libngtcp2-9", "libngtcp2-crypto-gnutls2", "libgnutls30"):
            assert pkg in install, f"{lib} comes from {pkg}, which the runtime image does not install"


def test_the_container_runs_as_a_non_root_user_with_health_check_and_entrypoint(proxy_bin):
    stage = runtime_stage()
    user = [a for w, a in stage if w == "USER"]
    assert user, "no USER: the container would run as root"
    uid = user[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, user
    assert f"--uid {uid}" in " ".join(a for w, a in stage if w == "RUN")
    exposed = " ".join(a for w, a in stage if w == "EXPOSE").split()
    assert "8080" in exposed
    health = next(a for w, a in stage if w == "HEALTHCHECK")
    assert "http://127.0.0.1:8081/healthz" in health
    import json
    entrypoint = json.loads(next(a for w, a in stage if w == "ENTRYPOINT"))
    cmd = json.loads(next(a for w, a in stage if w == "CMD"))
    assert entrypoint == ["/usr/local/bin/callback-proxy"]
    # The image's configuration is the repository file COPY'd to the path CMD names.
    copies = dict(reversed(a.split()[-2:]) for w, a in stage if w == "COPY" and not a.startswith("--from"))
    config_in_image = cmd[cmd.index("--config") + 1]
    source = copies[config_in_image]
    assert os.path.isfile(os.path.join(REPO_ROOT, source)), source
    # the flags are the binary's: it accepts them (with the repository's file in place) …
    local_cmd = [os.path.join(REPO_ROOT, source) if a == config_in_image else a for a in cmd]
    r = run(proxy_bin, *local_cmd, "--help")
    assert r.returncode == 0, r.stderr
    # … and the image's configuration passes check once the upstream is given
    r = run(proxy_bin, "check", *local_cmd, env=clean_env(CALLBACK_PROXY_UPSTREAM="http://10.0.0.5:3000"))
    assert r.returncode == 0, r.stdout
    # the health check's port is the configuration's internal listener
    with open(os.path.join(REPO_ROOT, source)) as f:
        assert "internal_listen: 0.0.0.0:8081" in f.read()


def test_every_path_the_container_file_copies_exists():
    for w, a in dockerfile_instructions():
        if w == "COPY" and not a.startswith("--from"):
            for src in a.split()[:-1]:
                assert os.path.exists(os.path.join(REPO_ROOT, src)), src


# ---------------------------------------------------------------------------------------------
# Kubernetes: the proxy as a sidecar, sharing one Redis or a Sentinel-watched one (every
# manifest in deploy/kubernetes passes every test below)

K8S_DIR = os.path.join(DEPLOY, "kubernetes")
K8S_MANIFESTS = sorted(f for f in os.listdir(K8S_DIR) if f.endswith(".yaml"))


def test_the_named_manifests_exist():
    assert {"callback-proxy-sidecar.yaml", "callback-proxy-sentinel.yaml"} <= set(K8S_MANIFESTS)


@pytest.fixture(params=K8S_MANIFESTS)
def manifest(request):
    return os.path.join(K8S_DIR, request.param)


def k8s_objects(manifest):
    with open(manifest) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name or ''}: {len(found)} found"
    return found[0]


def proxy_container(objects):
    deployment = next(o for o in objects if o["kind"] == "Deployment"
                      and any(c["name"] == "callback-proxy" for c in o["spec"]["template"]["spec"]["containers"]))
    container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "callback-proxy")
    return deployment, container


def sidecar_config(objects):
    _, container = proxy_container(objects)
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/callback-proxy")
    deployment, _ = proxy_container(objects)
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    config_map = one(objects, "ConfigMap", volume["configMap"]["name"])
    config_path = container["args"][container["args"].index("--config") + 1]
    assert config_path.startswith("/etc/callback-proxy/")
    text = config_map["data"][os.path.basename(config_path)]
    return text, yaml.safe_load(text)


def port_number(container, port):
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


def test_the_sidecar_probes_target_the_internal_listener(manifest):
    objects = k8s_objects(manifest)
    _, container = proxy_container(objects)
    _, config = sidecar_config(objects)
    internal_port = int(config["internal_listen"].rsplit(":", 1)[1])
    # the kubelet probes the pod's address: the internal listener must not be loopback-only
    assert not config["internal_listen"].startswith("127."), config["internal_listen"]
    live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
    assert (live["path"], port_number(container, live["port"])) == ("/healthz", internal_port)
    assert (ready["path"], port_number(container, ready["port"])) == ("/readyz", internal_port)


def test_the_service_sends_traffic_to_the_proxy_not_the_app_nor_the_internal_port(manifest):
    objects = k8s_objects(manifest)
    deployment, container = proxy_container(objects)
    _, config = sidecar_config(objects)
    public_port = int(str(config["listen"]).rsplit(":", 1)[1])
    internal_port = int(config["internal_listen"].rsplit(":", 1)[1])
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    services = [o for o in objects if o["kind"] == "Service"
                and all(labels.get(k) == v for k, v in o["spec"]["selector"].items())]
    assert len(services) == 1
    targets = [port_number(container, p["targetPort"]) for p in services[0]["spec"]["ports"]]
    assert targets == [public_port], targets
    assert internal_port not in targets
    # the proxy's upstream is the app container in the same pod
    app = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] != "callback-proxy")
    app_port = app["ports"][0]["containerPort"]
    assert config["upstream"] == f"http://127.0.0.1:{app_port}"


def test_several_replicas_share_one_redis(manifest):
    objects = k8s_objects(manifest)
    deployment, container = proxy_container(objects)
    _, config = sidecar_config(objects)
    assert deployment["spec"]["replicas"] > 1
    if config["store"].startswith("redis://"):
        redis_host = config["store"][len("redis://"):].split(":")[0].split("/")[0]
        one(objects, "Service", redis_host)
    else:
        # the Redis side is a chart's (test_the_sentinel_manifest_matches_its_chart_command)
        assert config["store"].startswith("redis+sentinel://"), config["store"]
    # the drain fits in the grace period
    drain = int(config.get("timeouts", {}).get("drain", "30s").rstrip("s"))
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > drain


def test_the_sentinel_manifest_matches_its_chart_command():
    """The store URL, the secret and the probes agree with the `helm install` the comments give
    for the Redis side: the chart's pod names, master name, secret, IP announcements and failover
    time (not installed here: there is no cluster)."""
    path = os.path.join(K8S_DIR, "callback-proxy-sentinel.yaml")
    with open(path) as f:
        comments = "\n".join(l[1:].strip() for l in f if l.startswith("#"))
    command = re.search(r"helm install (\S+) (?:[^\n]*\\\n)*[^\n]*", comments)
    assert command, "no helm install in the comments"
    release = command[1]
    values = dict(re.findall(r"--set ([\w.]+)=(\S+)", command[0]))
    objects = k8s_objects(path)
    _, config = sidecar_config(objects)
    _, container = proxy_container(objects)
    hosts, master, db = config["store"][len("redis+sentinel://"):].split("/")
    assert (master, db) == (values["sentinel.masterSet"], "0")
    sentinels = hosts.split(",")
    assert len(sentinels) >= 2 and len(sentinels) <= int(values["replica.replicaCount"]), sentinels
    assert sentinels == [f"{release}-node-{i}.{release}-headless:26379" for i in range(len(sentinels))]
    # host names announced by the sentinels are refused by the proxy
    assert values["useHostnames"] == "false" and values["sentinel.enabled"] == "true"
    # the chart's password is the one the proxy reads, for the master and the sentinels alike
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert config["store_password_env"] == config["store_sentinel_password_env"]
    ref = env[config["store_password_env"]]
    assert (ref["name"], ref["key"]) == (values["auth.existingSecret"], values["auth.existingSecretPasswordKey"])
    # a failover (down-after plus up to 2 s) ends before the readiness probe can take the pod out
    # of the Service: the earliest it can is (failureThreshold - 1) periods after the first failure
    ready = container["readinessProbe"]
    window = int(values["sentinel.downAfterMilliseconds"]) / 1000 + 2
    assert (ready["failureThreshold"] - 1) * ready["periodSeconds"] > window, (ready, window)


def test_secrets_are_referenced_never_inlined(manifest):
    objects = k8s_objects(manifest)
    assert not [o for o in objects if o["kind"] == "Secret"], "a Secret with its values in the example"
    text, config = sidecar_config(objects)
    _, container = proxy_container(objects)
    named = set(re.findall(r"_env: ([A-Z0-9_]+)", text))
    assert named, "the configuration names no secret variable"
    env = {e["name"]: e for e in container.get("env", [])}
    for name in named:
        assert name in env, f"{name} is not set in the container"
        assert "value" not in env[name] and "secretKeyRef" in env[name]["valueFrom"], env[name]
    for c in [c for o in objects if o["kind"] == "Deployment" for c in o["spec"]["template"]["spec"]["containers"]]:
        for e in c.get("env", []):
            if re.search(r"SECRET|PASSWORD", e["name"]):
                assert "value" not in e, f"{c['name']}: {e['name']} has an inline value"


def test_the_sidecar_configuration_passes_check(manifest, proxy_bin, tmp_path):
    objects = k8s_objects(manifest)
    text, _ = sidecar_config(objects)
    path = tmp_path / "callback-proxy.yaml"
    path.write_text(text)
    r = run(proxy_bin, "check", "--config", str(path), env=clean_env(**SECRETS))
    assert r.returncode == 0, r.stdout.decode()


def test_the_proxy_container_runs_unprivileged(manifest):
    _, container = proxy_container(k8s_objects(manifest))
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"] and sc["runAsUser"] != 0


def test_kubectl_renders_the_manifest_offline(manifest, tmp_path):
    # `kubectl apply/create --dry-run=client` asks an API server for its resource types even
    # with --validate=false; kustomize renders offline and refuses objects without kind or name.
    if not os.access("/usr/bin/kubectl", os.X_OK):
        pytest.skip("kubectl is not installed")
    import shutil
    shutil.copy(manifest, tmp_path / "manifest.yaml")
    (tmp_path / "kustomization.yaml").write_text("resources:\n- manifest.yaml\n")
    r = subprocess.run(["/usr/bin/kubectl", "kustomize", str(tmp_path)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    rendered = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert sorted(o["kind"] for o in rendered) == sorted(o["kind"] for o in k8s_objects(manifest))


# ---------------------------------------------------------------------------------------------
# nginx in front: only the proxy's paths go to the proxy

NGINX = "/usr/sbin/nginx"


def nginx_config(tmp_path, snippet, proxy_port, app_port, listen_port, site_root=True):
    with open(os.path.join(DEPLOY, "nginx", snippet)) as f:
        text = f.read().replace("127.0.0.1:8080", f"127.0.0.1:{proxy_port}") \
                       .replace("127.0.0.1:3000", f"127.0.0.1:{app_port}")
    included = tmp_path / snippet
    included.write_text(text)
    root_location = (f"location / {{ proxy_pass http://127.0.0.1:{app_port}; proxy_set_header Host $host; }}"
                     if site_root else "")
    temp = " ".join(f"{k}_temp_path {tmp_path}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""
{'user root;' if os.geteuid() == 0 else ''}
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/nginx-error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    {temp}
    server {{
        listen 127.0.0.1:{listen_port};
        server_name localhost;
        include {included};
        {root_location}
    }}
}}
""")
    return conf


@pytest.fixture
def nginx(tmp_path):
    if not os.access(NGINX, os.X_OK):
        pytest.skip("nginx is not installed")
    started = []

    def go(conf, port):
        r = subprocess.run([NGINX, "-t", "-c", str(conf), "-p", str(tmp_path)], capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr.decode()
        p = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path), "-g", "daemon off;"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(p)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            assert p.poll() is None, (tmp_path / "nginx-error.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return p
            except OSError:
                time.sleep(0.02)
        raise AssertionError("nginx did not start")

    yield go
    terminate_all(started)


def get(port, target, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", target, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def test_nginx_sends_only_the_callback_to_the_proxy(nginx, proxy_factory, upstream, tmp_path, monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    proxy = proxy_factory(upstream, extra=["--config", os.path.join(DEPLOY, "examples", "rails-devise-relay.yaml")])
    port = free_port()
    nginx(nginx_config(tmp_path, "callback-only.conf", proxy.port, upstream.port, port), port)

    # a malformed callback reaches the proxy, which refuses it with its own contract page
    status, headers, body = get(port, "/_oauth_callback?provider=google&platform=ios")
    assert status == 400, (status, body)
    assert headers.get("cache-control") == "no-store" and headers.get("referrer-policy") == "no-referrer", headers
    # everything else goes straight to the app
    status, _, _ = get(port, "/status/200?from=nginx")
    assert status == 200
    assert upstream.record.wait_for(lambda r: any(e["target"] == "/status/200?from=nginx" for e in r.requests()))
    assert not any(e["target"].startswith("/_oauth_callback") for e in upstream.record.requests())
    paths = [e.get("path") for e in proxy.wait_access_log(1)]
    assert "/_oauth_callback" in paths and "/status/200" not in paths, paths


def test_nginx_auth_request_asks_the_proxy_and_never_lets_an_anonymous_request_through(
        nginx, proxy_factory, upstream, tmp_path, monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    proxy = proxy_factory(upstream, extra=["--config", os.path.join(DEPLOY, "examples", "header-auth-session.yaml"),
                                           "--trusted-proxy", "127.0.0.1/32"])
    port = free_port()
    nginx(nginx_config(tmp_path, "session-auth-request.conf", proxy.port, upstream.port, port, site_root=False), port)

    # not signed in: the proxy sends the browser to sign in, with this URL encoded as rd
    status, headers, _ = get(port, "/private/page?a=1&b=2", {"X-Forwarded-Email": "forged@example.com"})
    assert status == 302, headers
    assert headers["location"] == "/_oauth/start?rd=%2Fprivate%2Fpage%3Fa%3D1%26b%3D2", headers
    # a JSON client gets 401 instead
    status, _, body = get(port, "/api/items", {"Accept": "application/json"})
    assert status == 401 and b"unauthorized" in body
    # the proxy's own endpoints answer through nginx
    status, _, body = get(port, "/_oauth/userinfo")
    assert status == 401, body
    status, headers, _ = get(port, "/_oauth/start?provider=google&rd=/private")
    assert status == 302 and headers["location"].startswith("https://accounts.google.com/"), headers
    assert "client_id=123-web.apps.googleusercontent.com" in headers["location"]
    status, _, _ = get(port, "/_oauth_callback?provider=google&platform=ios")
    assert status == 400
    # nothing reached the app: every request above was anonymous
    time.sleep(0.2)
    assert upstream.record.requests() == [], upstream.record.describe()


# ---------------------------------------------------------------------------------------------
# docs/reference.md names every flag the binary accepts (the keys are checked by a Swift test)

def test_the_reference_documents_every_flag(proxy_bin):
    help_text = run(proxy_bin, "--help").stdout.decode()
    flags = sorted(set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", help_text, re.M)))
    assert len(flags) > 20, help_text
    with open(os.path.join(REPO_ROOT, "docs", "reference.md")) as f:
        rows = [l for l in f if l.startswith("| `--")]
    missing = [f for f in flags if not any(r.startswith(f"| `{f}") for r in rows)]
    assert missing == [], f"flags not in docs/reference.md: {missing}"


def test_check_without_a_file_validates_what_the_environment_configures(proxy_bin):
    """A container configured by variables alone can be checked the same way it starts."""
    ok = run(proxy_bin, "check", env=clean_env(CALLBACK_PROXY_UPSTREAM="http://10.0.0.5:3000"))
    assert ok.returncode == 0, ok.stdout.decode() + ok.stderr.decode()
    bad = run(proxy_bin, "check", env=clean_env(CALLBACK_PROXY_UPSTREAM="http://10.0.0.5:3000",
                                                CALLBACK_PROXY_LOOPS="many"))
    out = bad.stdout.decode()
    assert bad.returncode == 1 and "configuration: loops (from CALLBACK_PROXY_LOOPS)" in out, out
    # nothing configures an upstream: the one required setting is named
    none = run(proxy_bin, "check", env=clean_env())
    assert none.returncode == 1 and "upstream" in none.stdout.decode(), none.stdout.decode()


# ---------------------------------------------------------------------------------------------
# deploy/prometheus: the alert and recording rules, checked and unit-tested by Prometheus' own
# promtool (Debian's prometheus package)

PROMETHEUS = os.path.join(DEPLOY, "prometheus")
PROMTOOL = "/usr/bin/promtool"


def promtool(*args, cwd=PROMETHEUS):
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_the_rule_file_parses_and_every_alert_fires_and_stays_silent_as_its_tests_say():
    check = promtool("check", "rules", "callback-proxy.rules.yml")
    assert check.returncode == 0 and "SUCCESS" in check.stdout, check.stdout + check.stderr
    run = promtool("test", "rules", "callback-proxy.rules.test.yml")
    assert run.returncode == 0 and "SUCCESS" in run.stdout, run.stdout + run.stderr


def test_every_alert_has_a_test_that_fires_it():
    rules = yaml.safe_load(open(os.path.join(PROMETHEUS, "callback-proxy.rules.yml")))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load(open(os.path.join(PROMETHEUS, "callback-proxy.rules.test.yml")))
    fired = {t["alertname"] for case in tests["tests"] for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    assert alerts == fired, f"alerts without a firing test: {sorted(alerts - fired)}"


def markdown_anchors(path):
    """The anchors a Markdown renderer gives the file's headings (lowercase, punctuation
    dropped, spaces as '-')."""
    with open(path) as f:
        headings = [l.lstrip("#").strip() for l in f if l.startswith("#")]
    return {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_alert_keeps_job_and_instance_and_says_its_value_and_its_runbook():
    rules = yaml.safe_load(open(os.path.join(PROMETHEUS, "callback-proxy.rules.yml")))
    anchors = markdown_anchors(os.path.join(REPO_ROOT, "docs", "operations.md"))
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        name, notes = rule["alert"], rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(notes), name
        assert "$value" in notes["description"], name
        page, _, anchor = notes["runbook_url"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, f"{name}: no section #{anchor} in operations.md"
        # an aggregation that drops job and instance leaves the alert without its target
        for by in re.findall(r"\b(?:sum|min|max|count) by \(([^)]*)\)", rule["expr"]):
            assert {"job", "instance"} <= {l.strip() for l in by.split(",")}, f"{name}: by ({by})"


def test_every_alert_has_a_test_that_it_stays_silent_on_healthy_traffic():
    rules = yaml.safe_load(open(os.path.join(PROMETHEUS, "callback-proxy.rules.yml")))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load(open(os.path.join(PROMETHEUS, "callback-proxy.rules.test.yml")))
    (healthy,) = [case for case in tests["tests"] if case["name"].startswith("healthy traffic")]
    silent = {t["alertname"] for t in healthy["alert_rule_test"] if t.get("exp_alerts") == []}
    assert alerts == silent, f"alerts not checked silent on healthy traffic: {sorted(alerts - silent)}"


def test_the_rule_tests_would_catch_a_changed_threshold(tmp_path):
    for name in ("callback-proxy.rules.yml", "callback-proxy.rules.test.yml"):
        (tmp_path / name).write_text(open(os.path.join(PROMETHEUS, name)).read())
    rules = tmp_path / "callback-proxy.rules.yml"
    rules.write_text(rules.read_text().replace("ratio_rate5m > 0.02", "ratio_rate5m > 0.2"))
    run = promtool("test", "rules", "callback-proxy.rules.test.yml", cwd=str(tmp_path))
    assert run.returncode != 0 and "CallbackProxyGatewayErrors" in run.stdout + run.stderr


def test_every_metric_the_rules_name_is_documented():
    text = open(os.path.join(PROMETHEUS, "callback-proxy.rules.yml")).read()
    reference = open(os.path.join(REPO_ROOT, "docs", "reference.md")).read()
    named = set(re.findall(r"\b(callback_proxy_[a-z0-9_]+?)(?:_bucket)?\b", text))
    assert named and all(f"`{m}`" in reference for m in named), sorted(m for m in named if f"`{m}`" not in reference)
