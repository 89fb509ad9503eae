"""Fixtures for the strict test IdP, defined in idp_harness.py so other suites can import them too.

    idp_pki      (session)  throwaway CA + server certificate for 127.0.0.1 (openssl CLI)
    idp_server   (session)  one IdP process: HTTPS, --test-hooks, clients.example.json
    idp          (function) idp_server reset (stats, modes, clock); log tail printed on failure
    idp_factory  (function) start extra IdPs with other arguments, stopped at teardown

Run:  python -m pytest -q IntegrationTests/idp     (needs IntegrationTests/requirements.txt and the openssl CLI)
"""

import pytest

from idp_harness import idp, idp_factory, idp_pki, idp_server  # noqa: F401  (fixtures)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep
