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
