"""The MCP server's transports: streamable HTTP (loopback or a Unix socket) and stdio.

Each serves one run's server (:func:`heuresis.agents.external.server.build_server`) in a
thread of its own, while the harness's loop runs in the caller's thread.  The HTTP transport
bounds what a client can cost the harness: the ``MAX_*`` constants, :data:`REQUEST_TIMEOUT_S`
and :data:`KEEP_ALIVE_S` (docs/mcp.md, "Limits of the server").
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import threading
import time

__all__ = ["KEEP_ALIVE_S", "MAX_BODY_BYTES", "MAX_CONNECTIONS", "MAX_HEADER_BYTES", "REQUEST_TIMEOUT_S",
           "HTTPTransport", "StdioTransport", "Transport", "endpoint_url", "is_loopback", "redacted"]

#: What one MCP server lets a client cost the harness (docs/mcp.md, "Limits of the server").
MAX_CONNECTIONS = 16          # open connections at once; one more is closed as it is accepted
REQUEST_TIMEOUT_S = 10.0      # from a connection's (or request's) first byte to its whole request, headers and body
KEEP_ALIVE_S = 5.0            # an idle connection between requests
MAX_HEADER_BYTES = 16384      # the request line and headers
MAX_BODY_BYTES = 1 << 20      # a request's body (a Content-Length is required)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` or 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_url(host: str, port: int, path: str) -> str:
    """The URL of an HTTP endpoint (an IPv6 host in brackets)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"


def redacted(url: str) -> str:
    """An endpoint's URL with its unguessable path segment replaced by ``<token>``: what a record may hold."""
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    parts = path.split("/")
    return f"{scheme}://{host}/" + "/".join("<token>" if k == 0 and len(parts) > 1 else p for k, p in enumerate(parts))


class Transport:
    """A server running in a thread of its own (the loop runs in the caller's thread)."""

    def start(self) -> None:
        """Start serving."""

    def stop(self) -> None:
        """Stop serving."""


def _bounded_protocol():
    """uvicorn's h11 protocol with the server's limits on connections and on slow requests.

    At most :data:`MAX_CONNECTIONS` open at once (one more is closed as it is accepted); a
    request must arrive whole, headers and body, within :data:`REQUEST_TIMEOUT_S` of its first
    byte (or of the connection), else the connection is closed; uvicorn closes one idle between
    requests after :data:`KEEP_ALIVE_S`.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Bounded(H11Protocol):
        _refused = False
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            if len(self.connections) >= MAX_CONNECTIONS:
                self._refused = True
                transport.abort()
                return
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            if not self._refused:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            super().data_received(data)
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                self._arm()
            else:
                self._disarm()

        def _arm(self) -> None:
            if self._timer is None:
                self._timer = self.loop.call_later(REQUEST_TIMEOUT_S, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                self.transport.abort()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._disarm()    # between requests: uvicorn's keep-alive timeout

    return Bounded


async def _plain(send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": text.encode()})


class HTTPTransport(Transport):
    """Streamable HTTP on a loopback socket (or a Unix socket), served by uvicorn in a daemon thread.

    The path is the endpoint's only address: any other path is 404.  A request body needs a
    ``Content-Length`` of at most :data:`MAX_BODY_BYTES` (else 411 or 413, unread); connections
    and slow requests are bounded by :func:`_bounded_protocol`.  ``on_delete`` is called after
    a ``DELETE`` of the endpoint: a client of the handshake protocol (2025-11-25 and before)
    ending its session.  The per-request protocol (2026-07-28) has no session, so its client's
    leaving is seen only by the idle timeout or its command's exit.
    """

    def __init__(self, server, host: str, port: int, path: str = "/mcp", on_delete=None,
                 uds: str | None = None) -> None:
        import uvicorn

        if not is_loopback(host):
            raise ValueError(f"the MCP server listens on loopback only, not {host!r}")
        if uds is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(uds)
            os.chmod(uds, 0o666)     # its folder (0700, the command's user) is what guards it
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.sock = socket.socket(family, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
        self.port = self.sock.getsockname()[1] if uds is None else 0
        mcp_app = server.streamable_http_app(host=host, streamable_http_path=path)

        async def app(scope, receive, send) -> None:
            if scope["type"] == "http":
                if scope["path"] != path:
                    return await _plain(send, 404, "not found")
                headers = dict(scope["headers"])
                if b"transfer-encoding" in headers:
                    return await _plain(send, 411, "a request body needs a Content-Length")
                length = headers.get(b"content-length", b"0")
                if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                    return await _plain(send, 413, f"a request body is at most {MAX_BODY_BYTES} bytes")
            await mcp_app(scope, receive, send)
            # a client of the handshake protocol ends its MCP session with a DELETE: it left
            if on_delete is not None and scope["type"] == "http" and scope["method"] == "DELETE":
                on_delete()

        self.uv = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, http=_bounded_protocol(),
            limit_concurrency=MAX_CONNECTIONS, timeout_keep_alive=KEEP_ALIVE_S, backlog=MAX_CONNECTIONS,  # type: ignore[arg-type]
            h11_max_incomplete_event_size=MAX_HEADER_BYTES, ws="none"))
        self.thread = threading.Thread(target=self.uv.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                       name="heuresis-mcp-http")

    def start(self) -> None:
        """Serve, and wait until the socket accepts (at most 30 s)."""
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.uv.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the MCP HTTP server on port {self.port} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        """Shut the server down (open streams get a short grace)."""
        self.uv.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class StdioTransport(Transport):
    """The process's stdin and stdout (the client started this process); EOF means the client left."""

    def __init__(self, server, agent) -> None:
        self.server, self.agent = server, agent
        self.thread = threading.Thread(target=self._run, daemon=True, name="heuresis-mcp-stdio")

    def _run(self) -> None:
        import anyio
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())

        try:
            anyio.run(serve)
        finally:
            self.agent.client_left()

    def start(self) -> None:
        """Serve in a daemon thread (it ends with the process or when stdin closes)."""
        self.thread.start()
