"""Headless chromium driven over the DevTools protocol through a pipe, for the view's tests.

``chromium --remote-debugging-pipe`` reads protocol commands (JSON, each ended by a NUL byte) from
its file descriptor 3 and writes answers and events to descriptor 4: no driver binary, no socket,
no library beyond the standard one. :class:`Browser` opens a page, runs an expression in it,
scrolls to an element and takes a screenshot, and collects the page's console errors and
exceptions (a blocked script shows there as a ``Refused to ...`` entry).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Browser:
    """One headless chromium with one page of ``size`` (CSS pixels); use as a context manager."""

    def __init__(self, size: tuple[int, int] = (1100, 760), timeout: float = 60.0) -> None:
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
        self.timeout = timeout
        self.errors: list[str] = []
        self._profile = tempfile.TemporaryDirectory(prefix="heuresis-browser-")
        to_r, self._to = os.pipe()        # we write commands, chromium reads them on fd 3
        self._from, from_w = os.pipe()    # chromium writes on fd 4, we read

        def fds() -> None:                # in the child: the pipe ends at 3 and 4 (to_r < from_w, so no clash)
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)
            os.set_inheritable(3, True)   # dup2 onto itself keeps close-on-exec
            os.set_inheritable(4, True)

        self._proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride", {"width": size[0], "height": size[1], "deviceScaleFactor": 1,
                                                         "mobile": False}, session=True)

    # --- the protocol ----------------------------------------------------------------------------
    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                raise BrowserError("chromium closed its pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        data = json.loads(msg)
        if data.get("method") == "Runtime.exceptionThrown":
            d = data["params"]["exceptionDetails"]
            self.errors.append(f"Uncaught {(d.get('exception') or {}).get('description') or d.get('text')}")
        elif data.get("method") == "Log.entryAdded" and data["params"]["entry"]["level"] == "error":
            self.errors.append(data["params"]["entry"]["text"])
        elif data.get("method") == "Runtime.consoleAPICalled" and data["params"]["type"] == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in data["params"]["args"]))
        return data

    def send(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        """Send a command and wait for its answer (the console errors among the events meanwhile are kept)."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            data = self._read(deadline)
            if data.get("id") == self._id:
                if "error" in data:
                    raise BrowserError(f"{method}: {data['error']}")
                return data.get("result", {})

    # --- what the tests use ------------------------------------------------------------------------
    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait until it has loaded (its load event has run)."""
        out = self.send("Page.navigate", {"url": url}, session=True)
        if out.get("errorText"):
            raise BrowserError(f"{url}: {out['errorText']}")
        want = url.split("#")[0]
        deadline = time.monotonic() + self.timeout
        while self.eval("document.readyState + ' ' + location.href.split('#')[0]") != f"complete {want}":
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not load in time")
            time.sleep(0.02)

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (run by the protocol, not by the page's scripts)."""
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                        session=True)
        if "exceptionDetails" in out:
            raise BrowserError(f"{expression}: {out['exceptionDetails'].get('text')}")
        return out["result"].get("value")

    def screenshot(self, path: str | Path, element: str | None = None) -> None:
        """A PNG of the viewport, scrolled first so that the element with id ``element`` is at its top."""
        if element is not None:
            self.eval(f"document.getElementById({json.dumps(element)}).scrollIntoView()")
            self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        """Close the browser and remove its profile."""
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
