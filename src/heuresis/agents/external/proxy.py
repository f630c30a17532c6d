"""The harness's proxy for an external agent's allowlisted network (``network: {allow: [...]}``).

:class:`AllowProxy` listens on a Unix socket bound into the command's sandbox (a relay inside
makes it ``127.0.0.1:``:data:`~heuresis.agents.external.command.PROXY_PORT`, the command's
``HTTPS_PROXY`` and ``HTTP_PROXY``).  It answers an HTTP ``CONNECT host:port`` (HTTPS) or a
request in absolute form (``GET http://host:port/...``) by connecting to that host and port only
if the pair is in the allow list and every address the host resolves to is a public one
(never loopback, private, link-local, multicast or reserved) -- but the addresses named in
``private_addresses``.  It connects to the address it checked (no second lookup), and records
every attempt.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["MAX_PROXY_CONNECTIONS", "TUNNEL_IDLE_S", "TUNNEL_TOTAL_S", "AllowProxy", "parse_allow"]

#: Connections the proxy serves at once (one more is refused); a request head's largest size; timeouts.
MAX_PROXY_CONNECTIONS = 32
_HEAD_MAX = 16384
_HEAD_TIMEOUT_S = 10.0       # the whole head, however slowly it comes
_CONNECT_TIMEOUT_S = 10.0
#: A tunnel (or relayed request) in which neither side sends for this long ends, and one that lasts this long in all.
TUNNEL_IDLE_S = 300.0
TUNNEL_TOTAL_S = 3600.0
_RECORD_MAX = 200


def parse_allow(entry: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets) as (lower-case host, port); ValueError naming the entry."""
    if not isinstance(entry, str) or ":" not in entry:
        raise ValueError(f"{entry!r} is not host:port")
    host, _, port = entry.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in "/@ \t"):
        raise ValueError(f"{entry!r} is not host:port (a host name or address and a port 1..65535)")
    return host.lower().rstrip("."), int(port)


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address; an IPv6 one that carries an IPv4 address (mapped, 6to4, Teredo) only if that is too."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        else:
            embedded = [a for a in (ip.sixtofour, *(ip.teredo or ())) if a is not None]
            if not all(_public(a) for a in embedded):
                return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_loopback or ip.is_link_local
                                 or ip.is_private or ip.is_unspecified)


class AllowProxy:
    """An HTTP proxy on a Unix socket that reaches only the allowed ``host:port`` pairs, on public addresses."""

    def __init__(self, path: str, allow: Sequence[str], private_addresses: Sequence[str] = ()) -> None:
        self.allow = {parse_allow(a) for a in allow}
        self.private = {ipaddress.ip_address(a) for a in private_addresses}
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o666)     # its folder (0700, the command's user) is what guards it
        self.sock.listen(64)
        self.attempts: list[dict] = []
        self.counts = {"allowed": 0, "refused": 0}
        #: how the tunnels ended that the proxy ended itself: idle, over their total time, at stop()
        self.ended = {"idle": 0, "total": 0, "stopped": 0, "slow_head": 0}
        self._slots = threading.BoundedSemaphore(MAX_PROXY_CONNECTIONS)
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()          # every open socket of a connection (client and upstream)
        self._handlers: set[threading.Thread] = set()
        self._stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True, name="heuresis-agent-proxy")

    def start(self) -> None:
        """Serve in a daemon thread."""
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, end every open connection and tunnel (both ends), and wait for their threads."""
        self._stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            live, handlers = list(self._live), list(self._handlers)
        for s in live:
            try:
                s.shutdown(socket.SHUT_RDWR)       # wakes a handler blocked on it
            except OSError:
                pass
        for t in handlers:
            t.join(timeout)

    def record(self) -> dict:
        """What the command asked the proxy for: counts, the first attempts (target, verdict), the tunnels it ended."""
        with self._lock:
            return {"allow": sorted(f"{h}:{p}" for h, p in self.allow), **self.counts,
                    "ended": dict(self.ended), "attempts": list(self.attempts)}

    def _track(self, s: socket.socket | None, live: bool) -> None:
        if s is None:
            return
        with self._lock:
            (self._live.add if live else self._live.discard)(s)

    def _note(self, target: str, verdict: str) -> None:
        with self._lock:
            self.counts["allowed" if verdict == "allowed" else "refused"] += 1
            if len(self.attempts) < _RECORD_MAX:
                self.attempts.append({"target": target[:300], "verdict": verdict})

    def _serve(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self._stopped or not self._slots.acquire(blocking=False):
                conn.close()
                continue
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True, name="heuresis-proxy-conn")
            with self._lock:
                self._handlers = {h for h in self._handlers if h.is_alive()} | {t}
            t.start()

    def check(self, host: str, port: int) -> tuple[str, str | None]:
        """(the address to connect to, or '' and why not) for ``host:port``."""
        host = host.lower().rstrip(".")
        if (host, port) not in self.allow:
            return "", f"{host}:{port} is not in the allow list"
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            return "", f"{host} does not resolve: {exc}"
        addrs = [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]
        bad = [a for a in addrs if not _public(a) and a not in self.private]
        if bad or not addrs:
            return "", f"{host} resolves to {', '.join(map(str, bad)) or 'nothing'}: not a public address"
        return str(addrs[0]), None

    def _handle(self, conn: socket.socket) -> None:
        up = None
        self._track(conn, True)
        try:
            head, deadline = b"", time.monotonic() + _HEAD_TIMEOUT_S
            while b"\r\n\r\n" not in head:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._end("slow_head", "request head", f"not complete in {_HEAD_TIMEOUT_S:g} s")
                    return
                conn.settimeout(left)
                try:
                    chunk = conn.recv(4096)
                except TimeoutError:
                    continue
                if not chunk or len(head) > _HEAD_MAX:
                    return
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            parts = lines[0].decode("latin-1").split()
            if len(parts) != 3:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                return
            method, target, version = parts
            if method.upper() == "CONNECT":
                try:
                    host, port = parse_allow(target)
                except ValueError as exc:
                    self._note(target, f"refused: {exc}")
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                    return
                forward = rest
            else:
                try:
                    url = urlsplit(target)
                    name, given = url.hostname, url.port   # ValueError: a bracketed host or a port that is not one
                except ValueError:
                    name = given = None
                if not name or given == 0 or url.scheme != "http":
                    self._note(target, "refused: not a CONNECT or an absolute http://host[:port] request")
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                    return
                host, port = name, 80 if given is None else given
                path = url.path or "/"
                if url.query:
                    path += "?" + url.query
                forward = b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), *lines[1:]]) + b"\r\n\r\n" + rest
            addr, why = self.check(host, port)
            shown = f"{method} {host}:{port}"
            if why is not None:
                self._note(shown, f"refused: {why}")
                msg = f"heuresis proxy: refused: {why}\n".encode()
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                             b"Content-Length: " + str(len(msg)).encode() + b"\r\n\r\n" + msg)
                return
            if self._stopped:
                return
            try:
                up = socket.create_connection((addr, port), timeout=_CONNECT_TIMEOUT_S)
                self._track(up, True)
            except OSError as exc:
                self._note(shown, f"failed: {exc}")
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
                return
            self._note(shown, "allowed")
            if method.upper() == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if forward:
                up.sendall(forward)
            why = _relay(conn, up, lambda: self._stopped)
            if why:
                self._end(why, shown, {"idle": f"idle {TUNNEL_IDLE_S:g} s", "total": f"open {TUNNEL_TOTAL_S:g} s",
                                       "stopped": "the episode ended"}[why])
        except Exception:
            pass
        finally:
            for sock in (conn, up):
                if sock is not None:
                    self._track(sock, False)
                    sock.close()
            self._slots.release()

    def _end(self, why: str, target: str, detail: str) -> None:
        with self._lock:
            self.ended[why] += 1
            if len(self.attempts) < _RECORD_MAX:
                self.attempts.append({"target": target[:300], "verdict": f"ended: {detail}"})


def _relay(a: socket.socket, b: socket.socket, stopped) -> str:
    """Copy both ways until both sides have ended (then '') or a limit ends the tunnel.

    The limits: no byte either way for :data:`TUNNEL_IDLE_S` ('idle'), open for :data:`TUNNEL_TOTAL_S`
    ('total'), the proxy stopped ('stopped'). A side that ends (EOF) has the other's writing shut, so an
    upstream learns when its client has gone.
    """
    import select

    start = last = time.monotonic()
    open_from = {a: b, b: a}                    # a side still sending -> where its bytes go
    for sock in (a, b):
        sock.setblocking(False)
    while open_from:
        now = time.monotonic()
        if stopped():
            return "stopped"
        if now - last >= TUNNEL_IDLE_S:
            return "idle"
        if now - start >= TUNNEL_TOTAL_S:
            return "total"
        wait = min(TUNNEL_IDLE_S - (now - last), TUNNEL_TOTAL_S - (now - start), 1.0)
        ready, _, _ = select.select(list(open_from), [], [], max(wait, 0.0))
        for src in ready:
            dst = open_from[src]
            try:
                data = src.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:                          # this side ended: the other stops receiving from it
                del open_from[src]
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            last = time.monotonic()
            dst.setblocking(True)
            dst.settimeout(TUNNEL_IDLE_S)
            try:
                dst.sendall(data)
            except OSError:
                break
            finally:
                dst.setblocking(False)
    return "stopped" if stopped() else ""       # stop() shuts both sides: the EOFs that end the loop are its
