"""The proxy's gateway error pages in the WebView's engine (headless Chromium): a 502 while the
app is down and a 504 while it hangs show a page, not a dead end, and the page comes back to the
site by itself once the app answers — no reload button needed."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import urllib.request

import pytest
from selenium.webdriver.common.by import By

from .harness import free_port

SITE = b"<!doctype html><title>Welcome back</title><h1>the site</h1>"


class App:
    """A tiny upstream on a fixed port: absent (connections refused) until `start`; while
    `hanging`, it reads requests and answers none."""

    def __init__(self, port):
        self.port = port
        self.hanging = False
        self.sock = None

    def start(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn):
        with conn:
            conn.settimeout(30)
            try:
                while True:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        piece = conn.recv(65536)
                        if not piece:
                            return
                        data += piece
                    if self.hanging:
                        time.sleep(30)
                        return
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(SITE) + SITE)
            except OSError:
                return

    def stop(self):
        if self.sock:
            self.sock.close()


@pytest.fixture
def down_app_and_proxy(proxy_bin, tmp_path):
    app = App(free_port())
    port = free_port([app.port])
    internal = free_port([app.port, port])
    log = open(tmp_path / "proxy.log", "wb")
    proc = subprocess.Popen([proxy_bin, "--listen", f"127.0.0.1:{port}", "--internal-listen", f"127.0.0.1:{internal}",
                             "--upstream", f"http://127.0.0.1:{app.port}", "--upstream-timeout", "1s"],
                            stdout=log, stderr=log)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{internal}/healthz", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    yield app, port
    proc.terminate()
    proc.wait(10)
    app.stop()


def wait_title(browser, title, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if browser.title == title:
            return
        time.sleep(0.2)
    raise AssertionError(f"title {browser.title!r} after {seconds} s, not {title!r}: {browser.page_source[:500]}")


def test_a_502_page_shows_and_comes_back_to_the_site_by_itself(browser, down_app_and_proxy):
    app, port = down_app_and_proxy
    browser.get(f"http://127.0.0.1:{port}/welcome")
    assert browser.title == "502 Bad Gateway"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Temporarily unavailable"
    assert "Try again" in browser.find_element(By.CLASS_NAME, "retry").text
    app.start()
    wait_title(browser, "Welcome back", 10)


def test_a_504_page_shows_and_its_link_tries_again(browser, down_app_and_proxy):
    app, port = down_app_and_proxy
    app.hanging = True
    app.start()
    browser.get(f"http://127.0.0.1:{port}/slow")
    assert browser.title == "504 Gateway Timeout"
    app.hanging = False
    browser.find_element(By.CLASS_NAME, "retry").click()
    wait_title(browser, "Welcome back", 5)


def test_a_503_page_shows_while_every_server_is_out_and_comes_back_by_itself(browser, proxy_bin, tmp_path):
    """Two servers, both down: their health checks take them out, so the engine answers its own
    503; once one is up again, its next check brings it back and the page returns to the site."""
    apps = [App(free_port()), App(free_port())]
    port = free_port([a.port for a in apps])
    internal = free_port([a.port for a in apps] + [port])
    cfg = tmp_path / "upstreams.yaml"
    cfg.write_text(f"""upstreams: [{{ url: "http://127.0.0.1:{apps[0].port}" }}, {{ url: "http://127.0.0.1:{apps[1].port}" }}]
upstream_health: {{ fail_timeout: 60s, check_path: /up, check_interval: 1s, check_timeout: 1s }}
""")
    log = open(tmp_path / "proxy.log", "wb")
    proc = subprocess.Popen([proxy_bin, "--listen", f"127.0.0.1:{port}", "--internal-listen", f"127.0.0.1:{internal}",
                             "--config", str(cfg)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{internal}/readyz", timeout=1)
            except urllib.error.HTTPError as e:
                if b"no server available" in e.read():
                    break
            except OSError:
                pass
            time.sleep(0.1)
        browser.get(f"http://127.0.0.1:{port}/welcome")
        assert browser.title == "503 Service Unavailable"
        assert "Try again" in browser.find_element(By.CLASS_NAME, "retry").text
        apps[1].start()
        wait_title(browser, "Welcome back", 12)
    finally:
        proc.terminate()
        proc.wait(10)
        for a in apps:
            a.stop()
