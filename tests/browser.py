"""Headless chromium driven by Playwright, for the view's tests.

Playwright (the test extra) drives the system's chromium (Debian's package; no browser is downloaded):
``executable_path`` points at it. Playwright waits for navigations itself: :meth:`Browser.open` and
:meth:`Browser.back` return once the page's load event has run, and :meth:`Browser.wait_for` polls a
condition in the page until it holds or its deadline passes, failing with the condition and the last
value seen. The page's console errors and uncaught exceptions (a blocked script shows as a
``Refused to ...`` console error) are collected in :attr:`Browser.errors`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

#: Chromium's flags beside Playwright's own: no connection of its own to the (closed) network.
QUIET = ["--disable-gpu", "--no-first-run", "--hide-scrollbars", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic"]


def chromium() -> str | None:
    """The system chromium's path, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


_driver = None
_users = 0


def _playwright():
    """This process's one Playwright driver, shared by the browsers open at once (the sync API allows one per
    thread); :func:`_release` stops it when the last closes, since while it runs the thread counts as inside an
    event loop (a later ``asyncio.run`` in the same worker would be refused)."""
    global _driver, _users
    if _driver is None:
        from playwright.sync_api import sync_playwright

        _driver = sync_playwright().start()
    _users += 1
    return _driver


def _release() -> None:
    global _driver, _users
    _users -= 1
    if _users == 0 and _driver is not None:
        driver, _driver = _driver, None
        driver.stop()


class ConditionNotMet(AssertionError):
    """A condition in the page did not hold before its deadline (the message names both and the last value)."""


class Browser:
    """One headless chromium with one page of ``size`` (CSS pixels); use as a context manager.

    ``timeout`` (seconds) bounds every navigation, evaluation and wait.
    """

    def __init__(self, size: tuple[int, int] = (1100, 760), timeout: float = 60.0) -> None:
        exe = chromium()
        if exe is None:
            raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
        self.timeout = timeout
        self.errors: list[str] = []
        try:
            self._browser = _playwright().chromium.launch(executable_path=exe, headless=True, args=QUIET)
        except BaseException:
            _release()
            raise
        try:
            self.page = self._browser.new_page(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
        except BaseException:
            self.close()
            raise
        self.page.set_default_timeout(timeout * 1000)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"Uncaught {e}"))

    def open(self, url: str) -> None:
        """Navigate to ``url`` and return once its load event has run (a page's scripts have drawn it)."""
        self.page.goto(url, wait_until="load")

    def back(self) -> None:
        """Go Back in the history and return once the page returned to has loaded."""
        if self.page.go_back(wait_until="load") is None and self.page.url == "about:blank":
            raise AssertionError("Back: there was no page to go back to")

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        return self.page.evaluate(expression)

    def press(self, key: str) -> None:
        """Press and release ``key`` on the keyboard (the page's key handlers see it)."""
        self.page.keyboard.press(key)

    def wait_for(self, condition: str, state: str | None = None, timeout: float | None = None) -> None:
        """Wait until the JavaScript expression ``condition`` is true in the page.

        The condition is read every 50 ms through the protocol (the pages' policy forbids a string
        evaluated by the page's own scripts, which ``page.wait_for_function`` needs); a page that is
        navigating meanwhile is read again once it has loaded. On a timeout, fail naming the condition
        and the last value of ``state`` (an expression; default: the page's address).
        """
        from playwright.sync_api import Error

        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        problem = ""
        while time.monotonic() < deadline:
            try:
                if self.eval(condition):
                    return
                problem = ""
            except Error as exc:                   # the context was replaced by a navigation: read again
                problem = f" ({str(exc).splitlines()[0]})"
            self.page.wait_for_timeout(50)          # lets the driver deliver the page's events meanwhile
        try:
            seen = self.eval(state or "location.href")
        except Error as exc:
            seen = f"(unreadable: {str(exc).splitlines()[0]})"
        raise ConditionNotMet(f"not true within {limit:g} s: {condition}; last seen: {json.dumps(seen)[:500]}{problem}")

    def html(self) -> str:
        """The page's current document, serialised."""
        return self.page.content()

    def screenshot(self, path: str | Path, element: str | None = None) -> None:
        """A PNG of the viewport, scrolled first so that the element with id ``element`` is at its top."""
        if element is not None:
            self.eval(f"document.getElementById({json.dumps(element)}).scrollIntoView()")
            self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        self.page.screenshot(path=str(path))

    def close(self) -> None:
        """Close the browser (and the driver, when no other browser uses it)."""
        try:
            self._browser.close()
        finally:
            _release()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
