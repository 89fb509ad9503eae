"""The command line: --help and --version exit 0; any bad flag or value exits 2 with a message on
stderr and without starting to listen."""

import os
import re
import subprocess

import pytest

from helpers import free_port, wait_port_refused


def run(binary, *args, timeout=10):
    return subprocess.run([binary, *args], capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_help_exits_0_and_documents_the_flags(proxy_bin):
    r = run(proxy_bin, "--help")
    assert r.returncode == 0, r
    text = (r.stdout + r.stderr).decode()
    for flag in ("--listen", "--upstream", "--internal-listen", "--max-body-size",
                 "--client-header-timeout", "--upstream-timeout", "--drain-timeout",
                 "--trusted-proxy", "--access-log"):
        assert flag in text, f"--help does not mention {flag}"


def test_version_prints_name_version_and_commit(proxy_bin):
    r = run(proxy_bin, "--version")
    assert r.returncode == 0, r
    # scripts/build records the commit; a plain `swift build` says "unknown".
    assert re.fullmatch(rb"callback-proxy \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n", r.stdout), r.stdout


BAD = [
    ("unknown-flag", ["--no-such-flag"], "--no-such-flag"),
    ("missing-value", ["--listen"], "--listen"),
    ("bad-size", ["--max-body-size", "12q"], "12q"),
    ("negative-size", ["--max-body-size", "-1m"], "-1m"),
    ("bad-duration", ["--upstream-timeout", "soon"], "soon"),
    ("duration-without-unit-garbage", ["--client-header-timeout", "5x"], "5x"),
    ("bad-listen", ["--listen", "not-an-address"], "not-an-address"),
    ("bad-listen-port", ["--listen", "127.0.0.1:99999"], "99999"),
    ("bad-upstream-scheme", ["--upstream", "ftp://127.0.0.1:21"], "ftp"),
    ("bad-cidr", ["--trusted-proxy", "300.1.1.1/8"], "300.1.1.1"),
    ("bad-cidr-prefix", ["--trusted-proxy", "10.0.0.0/33"], "10.0.0.0/33"),
    ("bad-loops", ["--loops", "zero"], "zero"),
    ("stray-argument", ["unexpected-positional"], "unexpected-positional"),
]


@pytest.mark.parametrize("name, args, mention", BAD, ids=[b[0] for b in BAD])
def test_bad_flags_exit_2_with_a_message(proxy_bin, name, args, mention):
    port = free_port()
    base = {"--listen": f"127.0.0.1:{port}", "--upstream": "http://127.0.0.1:9",
            "--internal-listen": f"127.0.0.1:{free_port()}"}
    # an otherwise valid command line, with the flag under test last and not repeated
    argv = [x for k, v in base.items() if k != args[0] for x in (k, v)] + args
    r = run(proxy_bin, *argv, timeout=5)
    assert r.returncode == 2, f"{name}: exit {r.returncode}; stderr {r.stderr[-500:]!r}"
    err = r.stderr.decode("utf-8", "replace")
    assert err.strip(), f"{name}: no message on stderr"
    assert mention.lower() in err.lower(), f"{name}: stderr does not name {mention!r}: {err!r}"
    assert wait_port_refused(port, 0.2)


def test_good_sizes_and_durations_are_accepted(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "512k", "--client-header-timeout": "1500ms",
                                      "--keepalive-timeout": "2s", "--drain-timeout": "1s",
                                      "--loops": "2"})
    with p.conn() as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200



@pytest.mark.parametrize("graph,note", [
    ("endpoints: { graph: https://graph.facebook.com/v19.0 }",
     "note: providers.fb.endpoints.graph: Graph API v19.0 is no longer served (available until 2026-05-21"),
    ("", None),
])
def test_check_notes_a_retired_facebook_graph_version(proxy_bin, tmp_path, graph, note):
    config = tmp_path / "fb.yaml"
    config.write_text(f"""
upstream: http://127.0.0.1:9
providers:
  fb:
    kind: facebook
    handoff: verify
    app_id: "1234567890"
    app_secret_env: FB_SECRET
    native: {{ ios: {{ client_id: "1234567890" }} }}
    {graph}
""")
    out = subprocess.run([proxy_bin, "check", "--config", str(config)], capture_output=True, text=True,
                         env={**os.environ, "FB_SECRET": "not-a-real-secret"}, timeout=10)
    assert out.returncode == 0, out.stdout + out.stderr
    notes = [l for l in out.stdout.splitlines() if "endpoints.graph" in l]
    if note is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].startswith(note), out.stdout
        assert "Use v26.0" in notes[0]


@pytest.mark.parametrize("content,reason", [("not a certificate\n", "holds no PEM certificate"), (None, "cannot read")])
def test_check_and_start_up_name_an_oauth_ca_file_that_is_not_a_pem_certificate(proxy_bin, tmp_path, content, reason):
    ca = tmp_path / "idp-ca.pem"
    if content is not None:
        ca.write_text(content)
    config = tmp_path / "ca.yaml"
    config.write_text(f"upstream: http://127.0.0.1:9\noauth: {{ ca_file: {ca} }}\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(config)], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1, out.stdout
    line = [l for l in out.stdout.splitlines() if "oauth.ca_file" in l]
    assert line and reason in line[0], out.stdout
    started = run(proxy_bin, "--config", str(config), "--listen", f"127.0.0.1:{free_port()}", "--internal-listen", "off")
    assert started.returncode == 2 and b"oauth.ca_file" in started.stderr, started.stderr


@pytest.mark.parametrize("address,warned", [
    ("0.0.0.0:8081", True), ("'[::]:8081'", True), ("10.1.2.3:8081", True),
    ("127.0.0.1:8081", False), ("'[::1]:8081'", False), ("unix:/run/callback-proxy/internal.sock", False),
])
def test_check_warns_when_the_internal_listener_is_not_loopback(proxy_bin, tmp_path, address, warned):
    """The internal listener answers /metrics and hands out tokens for relay codes: on every
    interface, whoever reaches the port can ask. A warning, not a problem: check still passes."""
    config = tmp_path / "internal.yaml"
    config.write_text(f"upstream: http://127.0.0.1:9\ninternal_listen: {address}\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(config)], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stdout + out.stderr
    warnings = [l for l in out.stdout.splitlines() if l.startswith("warning: internal_listen")]
    assert bool(warnings) == warned, out.stdout


@pytest.mark.parametrize("drain,stop,warned", [("60s", "45s", True), ("45s", "45s", True), ("30s", "45s", False),
                                               ("60s", None, False)])
def test_check_warns_when_the_drain_does_not_fit_in_the_stop_timeout(proxy_bin, tmp_path, drain, stop, warned):
    """systemd sends SIGKILL at TimeoutStopSec: a longer drain is cut short, its requests lost."""
    config = tmp_path / "drain.yaml"
    config.write_text(f"upstream: http://127.0.0.1:9\ntimeouts: {{ drain: {drain} }}\n")
    args = [proxy_bin, "check", *(["--stop-timeout", stop] if stop else []), "--config", str(config)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stdout + out.stderr
    warnings = [l for l in out.stdout.splitlines() if l.startswith("warning: timeouts.drain")]
    assert bool(warnings) == warned, out.stdout
    if warned:
        assert f"{drain} does not fit in the stop timeout of {stop}" in warnings[0]


def test_stop_timeout_is_a_check_option_only(proxy_bin):
    out = subprocess.run([proxy_bin, "--stop-timeout", "45s", "--upstream", "http://127.0.0.1:9"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "--stop-timeout is a check option" in out.stderr
