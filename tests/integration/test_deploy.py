"""Running it like infrastructure: environment overrides, and everything under deploy/ checked
with the tools this machine has (systemd-analyze, nginx, kubectl, apt-cache) and the real binary.

Each check that needs a tool skips only when that tool is absent."""

import os
import subprocess
import time

import pytest

from helpers import REPO_ROOT, free_port, http_get_status, wait_port_refused

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
           "CORP_CLIENT_SECRET": "dummy-corp", "SESSION_SECRET": "s" * 40,
           "REDIS_PASSWORD": "dummy-redis"}

EXAMPLES = sorted(f for f in os.listdir(os.path.join(DEPLOY, "examples")) if f.endswith(".yaml"))


def test_the_named_examples_exist():
    assert {"rails-devise-relay.yaml", "header-auth-session.yaml"} <= set(EXAMPLES)


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
                       ("SystemCallFilter", "@system-service"), ("CapabilityBoundingSet", "")]:
        assert value in s.get(key, []), f"{key}={value} missing: {s.get(key)}"
    assert "/bin/kill -HUP $MAINPID" in s["ExecReload"]
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


def test_the_runtime_packages_exist_in_debian():
    if not os.access("/usr/bin/apt-cache", os.X_OK):
        pytest.skip("apt-cache is not installed")
    install = next(a for w, a in runtime_stage() if w == "RUN" and "apt-get install" in a)
    packages = [t for t in install.split("apt-get install", 1)[1].split("&&")[0].split() if not t.startswith("-")]
    for needed in ("libssl3", "libcurl4", "libyaml-0-2", "zlib1g", "libhiredis0.14", "ca-certificates"):
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
        if pkg in ("libssl3", "libcurl4", "libyaml-0-2", "zlib1g", "libhiredis0.14"):
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
