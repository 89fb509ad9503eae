"""The background provider probe: `check --online`'s fetches of each provider's discovery document
and keys, at start-up, after a reload and every `oauth.provider_check_interval`, reported in
`callback_proxy_provider_up`, in `/readyz`'s body (never its status: plain proxying goes on) and in
an error line naming the setting to fix."""
import json
import signal
import time
import pytest

from test_observability import readyz
from test_session import IOS, idp  # noqa: F401  (idp: the strict test IdP, one per module)
from test_upstream_names import wait_until


@pytest.fixture(autouse=True)
def idp_answers_normally_again(idp):
    yield
    idp.reset()


def write(tmp_path, idp, *, ca=True, interval=None, providers=("corp",)):
    oauth = [f"ca_file: {idp.ca_cert}"] if ca else []
    oauth += ["idp_timeout: 2s"] + ([f"provider_check_interval: {interval}"] if interval else [])
    text = "oauth: { " + ", ".join(oauth) + " }\nproviders:\n"
    for name in providers:
        text += f"""  {name}:
    kind: oidc
    handoff: verify
    endpoints: {{ issuer: "{idp.base_url}" }}
    native: {{ ios: {{ client_id: {IOS}, redirect_uri: "com.example.app:/cb" }} }}
"""
    path = tmp_path / "probe.yaml"
    path.write_text(text)
    return str(path)


def log_lines(p, msg):
    return [json.loads(l) for l in p.stderr_text().splitlines() if f'"msg":"{msg}"' in l]


def test_a_usable_provider_is_up_and_readyz_names_nothing(proxy_factory, upstream, tmp_path, idp):
    idp.reset_stats()
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, idp)])
    assert p.wait_providers_probed(["corp"]) == {"corp": 1}
    assert readyz(p) == (200, {"ready": True})
    # the probe read the public documents only: nothing was redeemed
    stats = idp.stats()
    assert stats["endpoints"]["discovery"] == 1 and stats["endpoints"]["jwks"] == 1, stats
    assert stats["token"]["requests"] == 0
    assert log_lines(p, "provider cannot complete a sign-in") == []


def test_a_private_ca_without_ca_file_is_named_but_readyz_stays_200(proxy_factory, upstream, tmp_path, idp):
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, idp, ca=False)],
                      env={"SSL_CERT_FILE": "/nonexistent", "SSL_CERT_DIR": "/nonexistent"})
    assert p.wait_providers_probed(["corp"]) == {"corp": 0}
    status, body = readyz(p)
    # the site's plain traffic is unaffected: a load balancer must keep sending it here
    assert status == 200 and body["ready"] is True, body
    problem = body["providers_unusable"]["corp"]
    assert problem.startswith("oauth.ca_file: ") and "does not verify against the system CA store" in problem, body
    with p.conn() as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    [line] = log_lines(p, "provider cannot complete a sign-in")
    assert (line["level"], line["provider"], line["setting"]) == ("error", "corp", "oauth.ca_file"), line


def test_a_reload_probes_again_and_the_recovery_is_logged(proxy_factory, upstream, tmp_path, idp):
    idp.set_mode(discovery="500")
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, idp)])
    assert p.wait_providers_probed(["corp"]) == {"corp": 0}
    assert "answered HTTP 500" in readyz(p)[1]["providers_unusable"]["corp"]
    [line] = log_lines(p, "provider cannot complete a sign-in")
    assert line["setting"] == "providers.corp.endpoints.discovery", line
    idp.reset()
    p.signal(signal.SIGHUP)     # the same file: the providers are probed again all the same
    assert wait_until(lambda: p.providers_up() == {"corp": 1}, timeout=5), "the provider is up after the reload"
    assert readyz(p) == (200, {"ready": True})
    assert wait_until(lambda: log_lines(p, "provider usable again"), timeout=3), "the recovery is logged"


def test_the_providers_are_probed_again_every_interval(proxy_factory, upstream, tmp_path, idp):
    idp.set_mode(discovery="500")
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, idp, interval="10s")])
    assert p.wait_providers_probed(["corp"]) == {"corp": 0}
    idp.reset()
    # no signal, no request: the next round (10 s after the first) finds it usable
    assert wait_until(lambda: p.providers_up() == {"corp": 1}, timeout=14), "the provider is up after one interval"
    assert "providers_unusable" not in readyz(p)[1]


def test_a_provider_removed_by_a_reload_leaves_no_series(proxy_factory, upstream, tmp_path, idp):
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, idp, providers=("corp", "other"))])
    assert p.wait_providers_probed(["corp", "other"]) == {"corp": 1, "other": 1}
    write(tmp_path, idp, providers=("corp",))
    p.signal(signal.SIGHUP)
    assert wait_until(lambda: "configuration reloaded" in p.stderr_text(), timeout=5), "the reload applied"
    assert wait_until(lambda: p.providers_up() == {"corp": 1}, timeout=5), "only corp's series is left"


def test_provider_check_interval_0_turns_the_probe_off(proxy_factory, upstream, tmp_path, idp):
    idp.reset_stats()
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, idp, interval="0")])
    time.sleep(0.5)
    assert p.providers_up() == {}
    assert idp.stats()["endpoints"]["discovery"] == 0
    assert readyz(p) == (200, {"ready": True})
