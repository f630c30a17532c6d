"""Serve a run's view on the loopback address, read-only.

A :class:`http.server.ThreadingHTTPServer` bound to 127.0.0.1 answers GET and HEAD with
:meth:`heuresis.view.pages.Site.page` (every other method is refused); no page path reaches the
file system except the run's listed tables and figures. Every page is under an unguessable
path, ``/TOKEN/`` (:func:`make_server` draws it; the URL printed holds it), as the MCP server of a
hand-served episode: another local user or process -- an external agent on the host's network
among them -- that does not know it gets 404 for every path. Requests whose ``Host`` is not the
loopback address are refused too, so that a web page elsewhere cannot read the run's hidden
truth through a DNS name rebound to 127.0.0.1. The index follows a running workflow: it polls
``live.json`` (the results folder's stamp and the run header, :mod:`heuresis.view.live`) and the
server reads the folder again when it changed. Only ``/robots.txt`` (every path disallowed) and an
empty ``/favicon.ico`` answer without the token; every answer carries ``X-Robots-Tag: noindex``.
"""

from __future__ import annotations

import hmac
import http.server
import os
import secrets
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from heuresis.view.diff import RunDiff
from heuresis.view.pages import CSP, NotFound, Site
from heuresis.view.sites import open_site

__all__ = ["HOST", "make_server", "redirect_file", "serve", "view_url"]

HOST = "127.0.0.1"
#: Paths answered without the token: ``robots.txt`` (Disallow: /) and an empty ``favicon.ico``.
PUBLIC = ("/robots.txt", "/favicon.ico")
#: A served index follows its run: the results folder is read again when it changed, checked at most this often.
REFRESH_S = 1.0


class _Handler(http.server.BaseHTTPRequestHandler):
    site: Site | RunDiff
    token: str
    lock: threading.Lock
    checked: list[float]        # when the results were last checked for a change (monotonic seconds)
    server_version = "heuresis-view"

    def _answer(self, head: bool) -> None:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if host not in (HOST, "localhost"):
            self.send_error(421, "the view answers on the loopback address only")
            return
        path = urlsplit(self.path).path
        if path in PUBLIC:      # what a crawler or a browser asks of any site: nothing of the run in either
            self._send(self.site.page(path.lstrip("/")), head)
            return
        head_, _, tail = path.lstrip("/").partition("/")
        if not hmac.compare_digest(head_.encode(), self.token.encode()):
            self.send_error(404, "no such page")
            return
        if not path.lstrip("/").count("/"):      # /TOKEN: its index is /TOKEN/
            self.send_response(301)
            self.send_header("Location", f"/{self.token}/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = "/" + tail
        if path in ("/", "/index.html", "/live.json"):
            self._refresh()
        try:
            page = self.site.page(path)
        except NotFound:
            self.send_error(404, f"no page {path}")
            return
        self._send(page, head)

    def _refresh(self) -> None:
        """Read the results again if they changed, at most once per :data:`REFRESH_S` (many pages may poll)."""
        with self.lock:
            now = time.monotonic()
            if now - self.checked[0] >= REFRESH_S:
                self.checked[0] = now
                self.site.refresh()

    def _send(self, page, head: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", page.content_type)
        self.send_header("Content-Length", str(len(page.body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Robots-Tag", "noindex, nofollow")
        self.end_headers()
        if not head:
            self.wfile.write(page.body)

    def do_GET(self) -> None:
        """Answer a page."""
        self._answer(head=False)

    def do_HEAD(self) -> None:
        """Answer a page's headers."""
        self._answer(head=True)

    def log_message(self, format: str, *args) -> None:
        """Quiet: no line per request."""


def make_server(results: str | Path | Sequence[str | Path], port: int = 0,
                token: str | None = None) -> http.server.ThreadingHTTPServer:
    """A server of the view of ``results`` (one folder, or two to compare) on 127.0.0.1, not yet serving.

    ``port`` 0 takes a free port.

    Its pages are under ``/TOKEN/`` (``token``, default drawn: 128 random bits); the server's
    ``token`` and :func:`view_url` give it.
    """
    site = open_site(results, live=True)
    site.index()   # read every table once now: a bad results folder fails here, not on the first request
    token = token or secrets.token_urlsafe(16)
    handler = type("Handler", (_Handler,), {"site": site, "token": token, "lock": threading.Lock(),
                                            "checked": [time.monotonic()]})
    srv = http.server.ThreadingHTTPServer((HOST, port), handler)
    srv.daemon_threads = True
    srv.token = token  # type: ignore[attr-defined]
    return srv


def view_url(srv: http.server.ThreadingHTTPServer) -> str:
    """The URL of a view server's index (its token in the path)."""
    return f"http://{HOST}:{srv.server_address[1]}/{srv.token}/"  # type: ignore[attr-defined]


def serve(results: str | Path | Sequence[str | Path], port: int = 0, open_browser: bool = True, log=print) -> None:
    """Serve until interrupted; prints the URL and, with ``open_browser``, opens it."""
    srv = make_server(results, port)
    url = view_url(srv)
    what = results if isinstance(results, (str, Path)) else " against ".join(map(str, results))
    log(f"serving {what} at {url} (read-only; Ctrl-C stops)")
    folder = None
    if open_browser:
        import webbrowser

        folder, opener = redirect_file(url)
        threading.Thread(target=webbrowser.open, args=(opener.as_uri(),), daemon=True).start()
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def redirect_file(url: str) -> tuple[Path, Path]:
    """A page that sends the browser on to ``url``, in a new folder only its owner can read: ``(folder, page)``.

    A browser is started with the page's path as its argument, never the URL: another local user can
    read every process's command line (``/proc/*/cmdline``), and the URL's path holds the token.
    """
    import html
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="heuresis-view-"))     # mode 0700
    page = folder / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={html.escape(url)}">'
                 f'<title>heuresis view</title><a href="{html.escape(url)}">open the view</a>\n')
    return folder, page
