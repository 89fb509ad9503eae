"""Fixtures: a real upstream process and the proxy binary, each on free loopback ports, started
fresh for every test (so pools, logs and the upstream's byte record belong to that test alone) and
killed at teardown.

The proxy binary comes from $CALLBACK_PROXY_BIN (default: .build/release/callback-proxy under the
repository root). Its stdout (the access log) and stderr (JSON log lines) go to files in the test's
tmp_path; on failure their tails are printed in the teardown section of the report.

Run:  CALLBACK_PROXY_BIN=/path/to/callback-proxy python -m pytest IntegrationTests/integration -q
(needs only pytest: IntegrationTests/requirements.txt; the upstream is IntegrationTests/integration/upstream.py.)
"""

import os

import pytest

from helpers import REPO_ROOT, Proxy, Upstream

DEFAULT_BIN = os.path.join(REPO_ROOT, ".build", "release", "callback-proxy")


def proxy_binary():
    path = os.environ.get("CALLBACK_PROXY_BIN", DEFAULT_BIN)
    if not os.path.isabs(path):
        path = os.path.join(REPO_ROOT, path)
    return path


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep


def _failed(request):
    rep = getattr(request.node, "rep_call", None)
    return rep is not None and rep.failed


@pytest.fixture(scope="session")
def proxy_bin():
    path = proxy_binary()
    if not os.access(path, os.X_OK):
        pytest.fail(f"proxy binary not found or not executable: {path} "
                    f"(build it, or set CALLBACK_PROXY_BIN)", pytrace=False)
    return path


@pytest.fixture
def upstream_factory(tmp_path, request):
    started = []

    def start(unix=False, name=None, host="127.0.0.1", port=0):
        u = Upstream(str(tmp_path), unix=unix, name=name or f"upstream{len(started)}", host=host, port=port)
        started.append(u)
        return u

    yield start
    problems = []
    for u in started:
        alive = u.stopped or u.proc.poll() is None
        violations = u.record.violations()
        if _failed(request):
            print(f"--- {u.record_path} (tail)\n{u.record.describe()}")
        u.stop()
        if not alive:
            problems.append(f"upstream process died: see {u.log.name}")
        if violations:
            problems.append(f"upstream received malformed request(s) from the proxy: "
                            f"{[v['reason'] for v in violations]}")
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


@pytest.fixture
def upstream(upstream_factory):
    return upstream_factory()


@pytest.fixture
def proxy_factory(tmp_path, request, proxy_bin, upstream_factory):
    # depends on upstream_factory so that proxies are torn down before upstreams: the proxy must
    # not see (and log) its upstream dying during teardown
    started = []

    def start(upstream=None, upstream_url=None, opts=None, extra=(), wait=True, env=None):
        url = upstream_url or (upstream.url if upstream else None)
        p = Proxy(proxy_bin, str(tmp_path), url, opts=opts, extra=extra,
                  name=f"proxy{len(started)}", wait=wait, env=env)
        started.append(p)
        return p

    yield start
    problems = []
    for p in started:
        code = p.proc.poll()
        if _failed(request):
            print(f"--- proxy args: {p.args}")
            print(f"--- proxy stderr (tail):\n{p.stderr_text()[-4000:]}")
            print(f"--- proxy stdout (tail):\n{p.stdout_text()[-2000:]}")
        if code is not None and not p.stopped_on_purpose:
            problems.append(f"proxy exited unexpectedly with {code} during the test; stderr tail: "
                            f"{p.stderr_text()[-1500:]}")
        p.kill()
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


@pytest.fixture
def proxy(proxy_factory, upstream):
    return proxy_factory(upstream)
