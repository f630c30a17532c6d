"""Serve a run's view on the loopback address, read-only.

A :class:`http.server.ThreadingHTTPServer` bound to 127.0.0.1 answers GET and HEAD with
:meth:`heuresis.view.pages.Site.page` (every other method is refused); no page path reaches the
file system except the run's listed tables and figures. Requests whose ``Host`` is not the
loopback address are refused, so that a web page elsewhere cannot read the run's hidden truth
through a DNS name rebound to 127.0.0.1.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from urllib.parse import urlsplit

from heuresis.view.pages import CSP, NotFound, Site

__all__ = ["HOST", "make_server", "serve"]

HOST = "127.0.0.1"


class _Handler(http.server.BaseHTTPRequestHandler):
    site: Site
    server_version = "heuresis-view"

    def _answer(self, head: bool) -> None:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if host not in (HOST, "localhost"):
            self.send_error(421, "the view answers on the loopback address only")
            return
        path = urlsplit(self.path).path
        try:
            page = self.site.page(path)
        except NotFound:
            self.send_error(404, f"no page {path}")
            return
        self.send_response(200)
        self.send_header("Content-Type", page.content_type)
        self.send_header("Content-Length", str(len(page.body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
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


def make_server(results: str | Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server of ``results``'s view on 127.0.0.1:``port`` (0: a free port), not yet serving."""
    site = Site(results)
    site.index()   # read every table once now: a bad results folder fails here, not on the first request
    handler = type("Handler", (_Handler,), {"site": site})
    srv = http.server.ThreadingHTTPServer((HOST, port), handler)
    srv.daemon_threads = True
    return srv


def serve(results: str | Path, port: int = 0, open_browser: bool = True, log=print) -> None:
    """Serve until interrupted; prints the URL and, with ``open_browser``, opens it."""
    srv = make_server(results, port)
    url = f"http://{HOST}:{srv.server_address[1]}/"
    log(f"serving {results} at {url} (read-only; Ctrl-C stops)")
    if open_browser:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
