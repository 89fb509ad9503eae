"""What a person does and sees on the legacy site and on the IdP's login page, in the browser."""

from __future__ import annotations

import re

from selenium.common.exceptions import (NoSuchElementException, StaleElementReferenceException,
                                        TimeoutException, WebDriverException)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

TIMEOUT = 15
# Titles of the proxy's own pages on /_oauth_callback: seeing one, waiting longer is pointless.
PROXY_PAGES = ("Sign-in failed", "Signed in")


# A page that is navigating away can drop an element between finding it and reading it:
# that is "not there (yet)", exactly like not finding it.
GONE = (NoSuchElementException, StaleElementReferenceException)


def _swapped_out(exc: WebDriverException) -> bool:
    """Chromium sometimes reports an element replaced by a navigation as a generic inspector error
    ("Node with given id does not belong to the document") instead of a stale reference."""
    return isinstance(exc, GONE) or "does not belong to the document" in (exc.msg or "")


def _text(driver, by, value) -> str | None:
    try:
        return driver.find_element(by, value).text
    except WebDriverException as exc:
        if _swapped_out(exc):
            return None
        raise


def text_of(driver, element_id) -> str | None:
    return _text(driver, By.ID, element_id)


def body(driver) -> str:
    return _text(driver, By.TAG_NAME, "body") or ""


def status(driver):
    """"Signed in as …" / "Not signed in" (None: not the site's home page)."""
    return text_of(driver, "status")


def alert(driver):
    return text_of(driver, "alert")


def notice(driver):
    return text_of(driver, "notice")


def sign_ins(driver) -> int | None:
    text = text_of(driver, "sign-ins")
    m = re.search(r"\d+", text or "")
    return int(m.group()) if m else None


def open_home(driver, base_url):
    driver.get(base_url + "/")
    assert status(driver) is not None, f"not the site's home page: {body(driver)[:500]}"


def tap_sign_in(driver):
    """Tap "Sign in with Google" (a POST form with the CSRF token: OmniAuth 2)."""
    driver.find_element(By.ID, "sign-in-google").click()


def tap_sign_in_in_new_window(driver, how):
    """Tap the sign-in that opens a new window: `blank` (a form with target=_blank) or `popup`
    (window.open, then the form posts into that window)."""
    driver.find_element(By.ID, f"sign-in-google-{how}").click()


def tap_sign_out(driver):
    driver.find_element(By.ID, "sign-out").click()
    wait_for(driver, lambda d: status(d) == "Not signed in", "signed out")


def wait_for(driver, predicate, what, timeout=TIMEOUT):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=GONE).until(predicate)
    except TimeoutException as exc:
        raise AssertionError(f"timed out waiting for {what}; at {driver.current_url}: "
                             f"{body(driver)[:800]!r}") from exc


def wait_home(driver, what="the site's home page"):
    wait_for(driver, lambda d: status(d) is not None or d.title in PROXY_PAGES, what)
    assert status(driver) is not None, \
        f"expected {what}, got the proxy's own page at {driver.current_url}: {body(driver)[:500]!r}"


def idp_login(driver, username, action="approve"):
    """On the IdP's login page (a web sign-in in the browser): type the username and press
    Sign in (or Deny). Returns the redirect URI the page announced."""
    wait_for(driver, lambda d: d.find_elements(By.ID, "username"), "the IdP's login page")
    redirect_uri = text_of(driver, "redirect-uri")
    driver.find_element(By.ID, "username").send_keys(username)
    driver.find_element(By.ID, "approve" if action == "approve" else "deny").click()
    return redirect_uri
