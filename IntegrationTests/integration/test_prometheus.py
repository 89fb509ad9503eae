"""A real Prometheus (Debian's server) scraping the proxy's internal listener with the rules in
deploy/prometheus: a user signs in, the store (a real redis-server) goes away, and Prometheus'
own HTTP API shows the series and the store alert as an on-call engineer would see them."""
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

import yaml

from helpers import REPO_ROOT, closed_port, free_port
from test_redis_store import IOS, callback, idp, redis, start  # noqa: F401  (fixtures)

PROMETHEUS = "/usr/bin/prometheus"
RULES = os.path.join(REPO_ROOT, "deploy", "prometheus", "callback-proxy.rules.yml")
RULE_TESTS = os.path.join(REPO_ROOT, "deploy", "prometheus", "callback-proxy.rules.test.yml")


class Prometheus:
    def __init__(self, tmp_path, targets):
        self.port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
            f"rule_files: [{json.dumps(RULES)}]\n"
            "scrape_configs:\n"
            f"  - {{ job_name: callback-proxy, static_configs: [{{ targets: {json.dumps(targets)} }}] }}\n")
        self.log = open(tmp_path / "prometheus.log", "w")
        self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.wait(lambda: self.get("/-/ready", raw=True) == 200, "Prometheus ready")

    def get(self, path, raw=False):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status if raw else json.loads(r.read())
        except OSError:
            return None

    def query(self, expr):
        """The instant vector's samples as {frozenset(labels): value}."""
        answer = self.get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        if not answer or answer.get("status") != "success":
            return {}
        return {frozenset(s["metric"].items()): float(s["value"][1]) for s in answer["data"]["result"]}

    def alerts(self):
        answer = self.get("/api/v1/alerts") or {}
        return answer.get("data", {}).get("alerts", [])

    def wait(self, predicate, what, timeout=20):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, open(self.log.name).read()[-2000:]
            assert time.monotonic() < deadline, f"{what} not seen in {timeout}s; Prometheus log: {open(self.log.name).read()[-1500:]}"
            time.sleep(0.25)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


@pytest.fixture
def prometheus(tmp_path):
    started = []

    def run(targets):
        p = Prometheus(tmp_path, targets)
        started.append(p)
        return p
    yield run
    for p in started:
        p.stop()


def test_prometheus_sees_a_sign_in_then_the_store_failing_and_the_store_alert(proxy_factory, upstream, tmp_path, idp,
                                                                              redis, prometheus):
    p = start(proxy_factory, upstream, tmp_path, idp, redis, "p")
    prom = prometheus([f"127.0.0.1:{p.internal_port}"])
    prom.wait(lambda: list(prom.query('up{job="callback-proxy"}').values()) == [1.0], "the proxy scraped")
    assert callback(p, idp.get_code(IOS)).status == 200
    prom.wait(lambda: sum(prom.query('callback_proxy_callbacks_total{outcome="success"}').values()) == 1,
              "the sign-in counted")
    assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "CallbackProxyStoreUnavailable"]

    redis.stop()
    for _ in range(3):
        assert callback(p, idp.get_code(IOS)).status == 503
    prom.wait(lambda: sum(prom.query('callback_proxy_callbacks_total{outcome="store_unavailable"}').values()) == 3,
              "the refused sign-ins counted")
    prom.wait(lambda: sum(prom.query('callback_proxy:callbacks:rate10m{outcome="store_unavailable"}').values()) > 0,
              "the recording rule")

    def store_alert():
        return [a for a in prom.alerts() if a["labels"]["alertname"] == "CallbackProxyStoreUnavailable"]
    prom.wait(lambda: store_alert(), "the store alert")
    alert = store_alert()[0]
    # `for: 2m`: pending now, firing if it lasts; its labels route it to the pager
    assert alert["state"] == "pending" and alert["labels"]["severity"] == "page", alert
    assert "store (Redis)" in alert["annotations"]["summary"]


def test_a_stopped_proxy_raises_the_target_down_alert(proxy, prometheus):
    """Every other alert reads the proxy's own metrics, so none of them can tell of a proxy that
    is not there: this one reads Prometheus' `up`. (The target is still configured, so the
    absence alert, for a target no longer scraped at all, stays silent: one page, not two.)"""
    prom = prometheus([f"127.0.0.1:{proxy.internal_port}"])
    prom.wait(lambda: list(prom.query('up{job="callback-proxy"}').values()) == [1.0], "the proxy scraped")
    time.sleep(3)  # a few rule evaluations (one a second) on a healthy proxy

    def names():
        return {a["labels"]["alertname"] for a in prom.alerts()}
    assert not names() & {"CallbackProxyDown", "CallbackProxyAbsent", "CallbackProxyMetricsMissing"}, prom.alerts()
    proxy.signal(signal.SIGKILL)
    proxy.wait_exit(5)
    prom.wait(lambda: "CallbackProxyDown" in names(), "the target-down alert")
    assert "CallbackProxyAbsent" not in names()
    down = [a for a in prom.alerts() if a["labels"]["alertname"] == "CallbackProxyDown"][0]
    assert down["labels"]["instance"] == f"127.0.0.1:{proxy.internal_port}" and down["labels"]["job"] == "callback-proxy"
    assert down["state"] == "pending" and down["labels"]["severity"] == "page", down


def test_the_first_refused_reload_after_a_start_raises_the_reload_alert(proxy_factory, upstream, tmp_path, prometheus):
    """`check` passes a restart-only change, so the unit's ExecReload succeeds and only the
    process refuses it: the alert is all that tells. Its counter must already read 0 when the
    first refusal comes, or increase() sees nothing."""
    config = tmp_path / "proxy.yaml"
    config.write_text("store_max_memory: 64m\n")
    p = proxy_factory(upstream, extra=["--config", str(config)])
    prom = prometheus([f"127.0.0.1:{p.internal_port}"])
    prom.wait(lambda: list(prom.query('callback_proxy_config_reloads_total{result="failure"}').values()) == [0.0],
              "the failure counter scraped at 0 before any reload")
    config.write_text("store_max_memory: 256m\n")      # restart-only
    p.signal(signal.SIGHUP)
    p.stopped_on_purpose = False                        # SIGHUP: it must keep running

    def reload_alert():
        return [a for a in prom.alerts() if a["labels"]["alertname"] == "CallbackProxyReloadFailed"]
    prom.wait(reload_alert, "the reload alert")
    (alert,) = reload_alert()
    assert alert["state"] == "firing" and alert["labels"]["instance"] == f"127.0.0.1:{p.internal_port}", alert
    assert "configuration reload refused" in p.stderr_text()


DASHBOARD = os.path.join(REPO_ROOT, "deploy", "grafana", "callback-proxy.json")


def dashboard_expressions():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]


def grafana_to_promql(expr, instance):
    """What Grafana sends for an expression: its variables replaced (here with what a 1 s scrape
    interval and the one instance would give)."""
    return (expr.replace("$__rate_interval", "1m").replace("$instance", instance))


def test_every_dashboard_expression_evaluates_in_prometheus(proxy, prometheus):
    """Grafana is not packaged for Debian, so the dashboard is checked as far as Prometheus can:
    every expression is valid PromQL that evaluates, names only metrics the proxy documents, and
    the ones a plain proxy already has data for return it for this instance."""
    target = f"127.0.0.1:{proxy.internal_port}"
    prom = prometheus([target])
    prom.wait(lambda: list(prom.query('up{job="callback-proxy"}').values()) == [1.0], "the proxy scraped")
    # The instance variable's query, as Grafana's label_values() runs it.
    assert prom.query("group by (instance) (callback_proxy_build_info)") != {}
    reference = open(os.path.join(REPO_ROOT, "docs", "reference.md")).read()
    expressions = dashboard_expressions()
    assert len(expressions) >= 30
    for title, expr in expressions:
        for metric in set(re.findall(r"callback_proxy_[a-z0-9_]+", expr)):
            base = re.sub(r"_(bucket|count|sum)$", "", metric)
            assert f"| `{base}` |" in reference, f"{title}: {metric} is not a documented metric"
        answer = prom.get("/api/v1/query?" + urllib.parse.urlencode({"query": grafana_to_promql(expr, target)}))
        assert answer and answer["status"] == "success", f"{title}: {expr}: {answer}"
    with_data = {"Open connections", "Running versions", "Heap", "Requests by route and status class"}
    prom.wait(lambda: all(prom.query(grafana_to_promql(e, target)) for t, e in expressions if t in with_data),
              "data in the panels a plain proxy fills", timeout=30)
    (versions,) = prom.query(grafana_to_promql(dict(expressions)["Running versions"], target))
    assert dict(versions)["commit"] != "" and "version" in dict(versions)


# ---------------------------------------------------------------------------------------------
# The promtool tests (callback-proxy.rules.test.yml) prove the alerts only for the series they
# feed; these tests keep those series honest: each one must be what a running proxy exports,
# from its start, before anything has happened.

SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Added by Prometheus to every scraped series (target labels), and its own per-target series.
TARGET_LABELS = {"job", "instance"}
PROMETHEUS_OWN = {"up"}
# Label values the build decides, not the configuration: compared by name only.
BUILD_LABELS = {"version", "commit"}


def parse_series(text):
    """`name{a="b",…}` → (name, frozenset of (label, value)), target labels dropped."""
    m = SERIES.match(text.strip())
    assert m, text
    labels = frozenset((k, "*" if k in BUILD_LABELS else v) for k, v in LABEL.findall(m.group(2) or "")
                       if k not in TARGET_LABELS)
    return m.group(1), labels


def fed_series():
    tests = yaml.safe_load(open(RULE_TESTS))
    return {parse_series(s["series"]) for case in tests["tests"] for s in case.get("input_series", [])
            if parse_series(s["series"])[0] not in PROMETHEUS_OWN}


def scraped_series(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as r:
        text = r.read().decode()
    return {parse_series(line.rsplit(" ", 1)[0]) for line in text.splitlines() if line and not line.startswith("#")}


def self_signed(tmp_path, name):
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
                    "-addext", f"subjectAltName=DNS:{name}"], check=True, capture_output=True)
    return cert, key


def rules_test_proxy(proxy_factory, upstream, tmp_path):
    """The proxy the rule tests describe: google and partner in relay mode, corp in session
    mode, the memory store, TLS with OCSP stapling for two certificates (neither names a
    responder, so neither can be stapled: their gauges are 0 at once), providers whose IdP
    refuses connections (so their probes answer 0 at once)."""
    a_cert, a_key = self_signed(tmp_path, "a.example")
    b_cert, b_key = self_signed(tmp_path, "b.example")
    idp = f"https://127.0.0.1:{closed_port()}"
    config = tmp_path / "rules-test.yaml"
    config.write_text(f"""
store: memory
tls:
  cert: {a_cert}
  key: {a_key}
  ocsp_stapling: true
  sni:
    - {{ names: [b.example], cert: {b_cert}, key: {b_key} }}
oauth:
  idp_timeout: 1s
  session:
    secret_env: SESSION_SECRET
    allowed_email_domains: [example.com]
providers:
  google:
    kind: google
    handoff: relay
    app_callback: /users/auth/google_oauth2/callback
    app_client: {{ id: web, secret_env: APP_SECRET }}
    endpoints: {{ token: "{idp}/token", jwks: "{idp}/jwks", issuer: "{idp}" }}
    native:
      ios: {{ client_id: 123-ios.apps.googleusercontent.com }}
  partner:
    kind: oidc
    handoff: relay
    app_callback: /users/auth/partner/callback
    app_client: {{ id: partner-web, secret_env: APP_SECRET }}
    endpoints: {{ issuer: "{idp}/partner" }}
    native:
      ios: {{ client_id: partner-ios, redirect_uri: "com.example.app:/oauth2redirect" }}
  corp:
    kind: oidc
    handoff: session
    app_client: {{ id: corp-web, secret_env: APP_SECRET }}
    endpoints: {{ issuer: "{idp}/corp", authorization: "{idp}/corp/authorize" }}
    native:
      android: {{ client_id: corp-android, redirect_uri: "com.example.app:/oauth2redirect" }}
""")
    return proxy_factory(upstream, extra=["--config", str(config)],
                         env={"SESSION_SECRET": "s" * 40, "APP_SECRET": "not-a-real-secret"})


def test_every_series_the_rule_tests_feed_is_exported_by_a_proxy_from_its_start(proxy_factory, upstream, tmp_path):
    """Fails for a series born on its first increment (a redeemed counter, a reload counter):
    an alert that compares its increase with 0 can then never see the case it exists for."""
    p = rules_test_proxy(proxy_factory, upstream, tmp_path)
    wanted = fed_series()
    assert {name for name, _ in wanted} >= {"callback_proxy_relay_codes_redeemed_total",
                                            "callback_proxy_config_reloads_total"}
    deadline = time.monotonic() + 15
    while True:
        missing = wanted - scraped_series(p.internal_port)
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert not missing, "series the rule tests feed that the proxy does not export: " + \
        ", ".join(sorted(n + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(l)) + "}" for n, l in missing))
