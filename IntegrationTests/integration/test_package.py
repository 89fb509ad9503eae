"""The Debian package as an operator meets it: built by scripts/package (lintian clean), installed
on this machine with dpkg, its unit verified by systemd-analyze, the binary started exactly as the
unit's ExecStart says, as the package's user, proxying a request; then purged, leaving nothing.

It installs into the real system (/usr/bin, /etc, /lib/systemd), so it needs root; scripts/test
runs it as root in CI. The package comes from $DEB_PACKAGE (scripts/test builds it once)
or is built here.
"""

import grp
import gzip
import os
import pwd
import re
import shlex
import signal
import socket
import subprocess
import time

import pytest

from helpers import REPO_ROOT, free_port, http_get_status

PACKAGE = "callback-proxy"
UNIT = "/lib/systemd/system/callback-proxy.service"
CONFFILE = "/etc/callback-proxy/callback-proxy.yaml"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installs a package: needs root (CI runs as root)")


def run(*args, check=True, **kw):
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=300, **kw)
    if check and result.returncode != 0:
        raise AssertionError(f"{shlex.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def installed():
    status = run("dpkg-query", "-W", "-f=${db:Status-Status}", PACKAGE, check=False)
    return status.returncode == 0 and status.stdout not in ("", "not-installed")


def unit_lines(key):
    with open(UNIT) as f:
        return [line.split("=", 1)[1].strip() for line in f if line.startswith(key + "=")]


@pytest.fixture(scope="module")
def deb():
    path = os.environ.get("DEB_PACKAGE")
    if not path:
        path = run(os.path.join(REPO_ROOT, "scripts", "package")).stdout.strip().splitlines()[-1]
    assert path.endswith("_amd64.deb") and os.path.isfile(path), path
    return path


@pytest.fixture(scope="module")
def package(deb):
    """The package installed for the module's tests, purged afterwards whatever happened."""
    if installed():                      # a run that died half-way: start from nothing
        run("dpkg", "--purge", PACKAGE)
    run("dpkg", "-i", deb)
    files = [p for p in run("dpkg", "-L", PACKAGE).stdout.splitlines() if p.strip()]
    yield files
    if installed():
        run("dpkg", "--purge", PACKAGE)


def test_the_package_says_what_it_is(deb):
    fields = dict(line.split(": ", 1) for line in run("dpkg-deb", "-f", deb, "Package", "Version",
                                                          "Architecture", "Depends").stdout.splitlines())
    assert fields["Package"] == PACKAGE and fields["Architecture"] == "amd64"
    # The release, the commits on the branch and the commit: builds of one release order by commit.
    count = run("git", "-C", REPO_ROOT, "rev-list", "--count", "HEAD").stdout.strip()
    head = run("git", "-C", REPO_ROOT, "rev-parse", "--short=12", "HEAD").stdout.strip()
    assert re.fullmatch(rf"\d+\.\d+\.\d+\+git{count}\.{head}(\.dirty)?", fields["Version"]), (fields["Version"], count, head)
    older = fields["Version"].replace(f"+git{count}.", f"+git{int(count) - 1}.")
    assert run("dpkg", "--compare-versions", fields["Version"], "gt", older, check=False).returncode == 0
    # Depends computed by dpkg-shlibdeps from what the binary links: Debian's C libraries, and
    # no Swift runtime (linked in).
    depends = fields["Depends"]
    for library in ("libssl3", "libcurl4", "libyaml-0-2", "libhiredis0.14", "libnghttp2-14", "zlib1g", "libbrotli1"):
        assert library in depends, depends
    assert "swift" not in depends.lower()
    contents = run("dpkg-deb", "-c", deb).stdout
    for path in ("./usr/bin/callback-proxy", "./etc/callback-proxy/callback-proxy.yaml", "." + UNIT,
                 "./usr/lib/sysusers.d/callback-proxy.conf", "./usr/share/man/man1/callback-proxy.1.gz",
                 "./usr/share/doc/callback-proxy/copyright", "./etc/logrotate.d/callback-proxy"):
        assert path in contents, path
    # Only the usual places.
    for line in contents.splitlines():
        path = line.split()[-1]
        assert re.match(r"\./(etc/callback-proxy|etc/logrotate\.d/callback-proxy$|lib/systemd/system|usr/bin|usr/lib/sysusers\.d|"
                        r"usr/share/(doc|man)|(etc|etc/logrotate\.d|lib|lib/systemd|usr|usr/lib|usr/share|usr/share/man/man1)/?$|$)",
                        path), path


def test_the_package_carries_its_documentation_and_a_man_page_with_every_key(deb, tmp_path):
    run("dpkg-deb", "-x", deb, str(tmp_path))
    doc = tmp_path / "usr/share/doc/callback-proxy"
    for name in ("reference.md.gz", "operations.md.gz", "handoff.md.gz", "architecture.md.gz", "native.md.gz",
                 "README.md.gz", "examples/callback-proxy.rules.yml", "examples/callback-proxy.rules.test.yml",
                 "examples/callback-proxy.json", "examples/rails-devise-relay.yaml", "examples/session-auth-request.conf"):
        assert (doc / name).exists(), name
    page = gzip.decompress((tmp_path / "usr/share/man/man1/callback-proxy.1.gz").read_bytes()).decode()
    for heading in (".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH CONFIGURATION"):
        assert heading in page, heading
    reference = open(os.path.join(REPO_ROOT, "docs/reference.md"), encoding="utf-8").read()
    keys = re.findall(r"^\| `([a-z_][a-z0-9_.\[\]<>]*)` \| [^|]+\| [^|]*\| (?:`CALLBACK_PROXY_[A-Z0-9_]+`)? *\|", reference, re.M)
    assert len(keys) > 200
    missing = [k for k in keys if f".B {k.replace('-', chr(92) + '-')}\n" not in page]
    assert missing == [], missing
    # No RUNPATH: the Swift runtime is linked in, the C libraries are Debian's.
    dynamic = run("readelf", "-d", str(tmp_path / "usr/bin/callback-proxy")).stdout
    assert "RUNPATH" not in dynamic and "RPATH" not in dynamic, dynamic


def test_lintian_passes(deb):
    # scripts/package already fails on errors and warnings; this holds the package to it.
    result = run("lintian", "--fail-on", "error,warning", deb, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not re.search(r"^[EW]: ", result.stdout, re.M), result.stdout


def test_the_binary_is_hardened_as_the_docs_say(package):
    """operations.md: PIE with full RELRO and BIND_NOW (scripts/build's linker flags)."""
    dynamic = run("readelf", "-d", "/usr/bin/callback-proxy").stdout
    assert re.search(r"\(FLAGS\)\s+BIND_NOW", dynamic) and re.search(r"\(FLAGS_1\)\s+Flags: NOW PIE", dynamic), dynamic
    assert "GNU_RELRO" in run("readelf", "-l", "/usr/bin/callback-proxy").stdout


def test_install_makes_the_user_and_a_conffile(package):
    user = pwd.getpwnam(PACKAGE)
    assert user.pw_uid < 1000 and user.pw_shell in ("/usr/sbin/nologin", "/sbin/nologin"), user
    assert grp.getgrgid(user.pw_gid).gr_name == PACKAGE
    assert CONFFILE in run("dpkg-query", "-W", "-f=${Conffiles}", PACKAGE).stdout
    assert os.access("/usr/bin/callback-proxy", os.X_OK)


def test_unit_passes_systemd_analyze_verify(package):
    result = run("systemd-analyze", "verify", UNIT, check=False)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stdout + result.stderr
    assert unit_lines("User") == [PACKAGE]


def test_version_names_the_commit(package):
    out = run("/usr/bin/callback-proxy", "--version").stdout.strip()
    match = re.fullmatch(r"callback-proxy (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}(-dirty)?)\)", out)
    assert match, out
    head = run("git", "-C", REPO_ROOT, "rev-parse", "--short=12", "HEAD").stdout.strip()
    assert match.group(2).removesuffix("-dirty") == head


def test_the_shipped_configuration_checks(package):
    (pre,) = unit_lines("ExecStartPre")
    result = run(*shlex.split(pre))
    assert "ok" in result.stdout, result.stdout


def test_runs_as_the_unit_says_and_proxies(package, upstream):
    """ExecStart word for word, as User=callback-proxy; the listeners and upstream moved to free
    ports through CALLBACK_PROXY_… variables, as an operator's EnvironmentFile would."""
    (start,) = unit_lines("ExecStart")
    port, internal = free_port(), free_port()
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CALLBACK_PROXY_LISTEN": f"127.0.0.1:{port}",
           "CALLBACK_PROXY_INTERNAL_LISTEN": f"127.0.0.1:{internal}", "CALLBACK_PROXY_UPSTREAM": upstream.url}
    proc = subprocess.Popen(["setpriv", f"--reuid={PACKAGE}", f"--regid={PACKAGE}", "--clear-groups", "--"]
                            + shlex.split(start), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                if http_get_status(internal, "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "the packaged binary did not become ready"
            time.sleep(0.05)
        with open(f"/proc/{proc.pid}/status") as f:
            uids = next(line for line in f if line.startswith("Uid:")).split()[1:]
        assert {int(u) for u in uids} == {pwd.getpwnam(PACKAGE).pw_uid}
        status, body = http_get_status(port, "/echo?through=package")
        assert status == 200, body
        assert upstream.record.requests()[-1]["target"] == "/echo?through=package"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def free_privileged_port():
    """A port below 1024 that nothing on this machine listens on (80 and 443 may be taken)."""
    for port in [80, 443, *range(600, 1024)]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port below 1024")


def capabilities(pid):
    with open(f"/proc/{pid}/status") as f:
        return {k: int(v, 16) for k, v in (line.split(":\t", 1) for line in f) if k.startswith("Cap")}


CAP_NET_BIND_SERVICE = 10


def test_the_unit_binds_a_privileged_port_with_its_one_capability_and_says_ready(package, upstream):
    """There is no systemd on the test machine to start the unit: ExecStart runs as the unit's
    user with the capabilities its AmbientCapabilities and CapabilityBoundingSet give (setpriv
    sets exactly those), NoNewPrivileges, and a NOTIFY_SOCKET as Type=notify provides. Without the
    capability the same start fails on the port, as it did before the unit had it."""
    (start,) = unit_lines("ExecStart")
    (ambient,) = unit_lines("AmbientCapabilities")
    (bounding,) = unit_lines("CapabilityBoundingSet")
    assert ambient == bounding == "CAP_NET_BIND_SERVICE"
    cap = ambient.removeprefix("CAP_").lower()
    port, internal = free_privileged_port(), free_port()
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CALLBACK_PROXY_LISTEN": f"127.0.0.1:{port}",
           "CALLBACK_PROXY_INTERNAL_LISTEN": f"127.0.0.1:{internal}", "CALLBACK_PROXY_UPSTREAM": upstream.url}
    as_user = ["setpriv", f"--reuid={PACKAGE}", f"--regid={PACKAGE}", "--clear-groups", "--no-new-privs"]

    refused = subprocess.run(as_user + ["--"] + shlex.split(start), env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "Permission denied" in refused.stderr, refused.stderr

    # abstract, as systemd's own is: no directory between the test's root-only tmp_path and the user
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify_name = f"callback-proxy-package-test-{os.getpid()}"
    notify.bind("\0" + notify_name)
    notify.settimeout(10)
    proc = subprocess.Popen(as_user + [f"--inh-caps=+{cap}", f"--ambient-caps=+{cap}", f"--bounding-set=-all,+{cap}", "--"]
                            + shlex.split(start), env={**env, "NOTIFY_SOCKET": "@" + notify_name},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert notify.recv(4096) == b"READY=1", proc.stdout.read().decode() if proc.poll() is not None else ""
        status, body = http_get_status(port, "/echo?through=port-below-1024")
        assert status == 200, body
        caps = capabilities(proc.pid)
        assert caps["CapEff"] == caps["CapBnd"] == caps["CapAmb"] == 1 << CAP_NET_BIND_SERVICE, caps
        proc.send_signal(signal.SIGTERM)
        assert notify.recv(4096) == b"STOPPING=1"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        notify.close()


def test_purge_leaves_nothing(package):
    run("dpkg", "--purge", PACKAGE)
    assert not installed()
    # /etc/logrotate.d is shared too (nginx's and redis's rules live there).
    shared = {"/.", "/etc", "/etc/logrotate.d", "/lib", "/lib/systemd", "/lib/systemd/system", "/usr", "/usr/bin", "/usr/lib",
              "/usr/lib/sysusers.d", "/usr/share", "/usr/share/doc", "/usr/share/man", "/usr/share/man/man1"}
    left = [p for p in package if p not in shared and os.path.lexists(p)]
    assert left == [], left
    assert not os.path.exists("/etc/callback-proxy")
    helper_state = "/var/lib/systemd/deb-systemd-helper-enabled"
    if os.path.isdir(helper_state):
        assert not [n for n in os.listdir(helper_state) if "callback-proxy" in n]
    # The system user stays, as Debian's sysusers users do: removing it could hand its uid to
    # another account while files it wrote (an access log under LogsDirectory=) remain.
    pwd.getpwnam(PACKAGE)
