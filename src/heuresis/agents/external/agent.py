"""The ``external`` agent kind: the loop's ``respond`` answered by an outside MCP client.

:class:`ExternalAgent` queues each ``tools/call`` of its client as one turn of the loop and hands
the loop's answer back to the waiting request; it starts its server (:mod:`.server`) on a
transport (:mod:`.transport`) with its first ``respond`` and, with a ``command``, the program
that is its client (:mod:`.command`).  The run ends on submit, on exhaustion, or when the
client leaves (:class:`ClientLeft`) or idles (:class:`ClientIdle`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from heuresis.agents.external.command import (
    INNER_PORT,
    TMPFS_FOLDERS,
    WORK_DIR,
    CommandLimits,
    Drain,
    command_argv,
    command_isolation,
    command_uid,
    expose_problem,
)
from heuresis.agents.external.server import build_server
from heuresis.agents.external.transport import (
    HTTPTransport,
    StdioTransport,
    Transport,
    endpoint_url,
    is_loopback,
    redacted,
)
from heuresis.harness.parse import echo
from heuresis.harness.protocol import Agent, AgentReply, EpisodeEnd, Observation, Usage, register_agent

__all__ = ["ISOLATION", "MAX_ARGUMENT_CHARS", "TRANSPORTS", "URL_ENV", "ClientIdle", "ClientLeft", "ExternalAgent",
           "wait_for_clients"]

#: Environment variable holding the MCP server's URL for the agent's command.
URL_ENV = "HEURESIS_MCP_URL"
#: Values of ``transport``.
TRANSPORTS = ("http", "stdio")
#: Values of ``isolation`` (of the agent's command): bubblewrap or refuse; bubblewrap if it works; none.
ISOLATION = ("required", "best_effort", "none")
#: The server's limit on what a call records (docs/mcp.md, "Limits of the server").
MAX_ARGUMENT_CHARS = 65536    # a call's arguments (and 200 for its name) as recorded; longer ones are cut, not run
_ENDED = "episode ended"
_PENDING = "another call is pending"


#: The most tokens one reported model call may count (above any context window): a report of more,
#: or of none (0: a model call always reads its prompt), is implausible and recorded as unknown.
PLAUSIBLE_TOKENS = 10_000_000

class ClientLeft(EpisodeEnd):
    """The MCP client went away (stdin closed, its command exited) before the run ended."""

    reason = "client_left"


class ClientIdle(EpisodeEnd):
    """The MCP client made no tool call for ``idle_timeout_s`` seconds."""

    reason = "client_idle"


@dataclass
class _Call:
    """One ``tools/call`` waiting for its turn: name, arguments as JSON text, where its answer goes, its usage."""

    name: Any
    arguments: str
    answer: concurrent.futures.Future
    usage: Any = None


_LEFT = object()   # queued when the client leaves
_LINGERING: list[threading.Thread] = []   # servers still answering "episode ended" after their run


def wait_for_clients() -> None:
    """Wait until every server whose run ended has let its client go (at most its ``exit_grace_s``)."""
    while _LINGERING:
        _LINGERING.pop().join()


@register_agent("external")
class ExternalAgent(Agent):
    """The run's tools served over MCP to an outside client; each of its tool calls is one turn.

    Parameters (the config entry's keys)
    ------------------------------------
    command : list of str, optional
        Program started once per run (``python`` means the harness's interpreter); without
        it the server waits for a client that connects by itself (``heuresis serve-episode``).
    transport : {"http", "stdio"}
        ``stdio`` serves the process's own stdin/stdout (no ``command``).
    host, port
        Address of the HTTP server: loopback only; port 0 (default) picks a free one.
    idle_timeout_s : float
        Seconds without a tool call after which the run ends as ``client_idle`` (default 300).
    exit_grace_s : float
        Seconds the command (or client) gets to leave once the run ended, before it is
        terminated (default 10).
    env : list of str
        Names of the harness's environment variables passed to the command (default none).
    isolation : {"required", "best_effort", "none"}
        How the command runs (default ``required``: bubblewrap, else the run fails).
    network : bool or mapping
        Default false: a private network where only the episode's server is reachable;
        ``{allow: [host:port, ...], private_addresses: [...]}``: the same network, and through the
        harness's proxy (:mod:`.proxy`) the allowed hosts and ports (its model's API) on public
        addresses, or on the private ones listed; true: the host's whole network (an opt-out,
        recorded with a warning).
    expose : list of str
        Folders shown read-only to an isolated command (its own code, its environment); never
        inside the harness's working folder or its ``results/``.
    memory_mb, max_processes, disk_mb, cpu_seconds : int
        Limits of an isolated command (:class:`CommandLimits`): ``memory_mb`` in all where a
        cgroup of its own holds it, else shared by its processes (:mod:`heuresis.harness.bounds`).
    cpus : float
        Its cgroup's CPU quota (default 1).
    memory_bound : {"any", "cgroup"}
        ``cgroup`` refuses to run the command where no cgroup can be created.
    model, provider : str, optional
        What stands behind the client, for the records.
    """

    def __init__(self, name: str, *, command: Sequence[str] | None = None, transport: str = "http",
                 host: str = "127.0.0.1", port: int = 0, idle_timeout_s: float = 300.0, exit_grace_s: float = 10.0,
                 env: Sequence[str] = (), isolation: str = "required", network: bool | Mapping = False,
                 expose: Sequence[str] = (), memory_mb: int = CommandLimits.memory_mb,
                 max_processes: int = CommandLimits.max_processes, disk_mb: int = CommandLimits.disk_mb,
                 cpu_seconds: int = CommandLimits.cpu_seconds, cpus: float = CommandLimits.cpus,
                 memory_bound: str = CommandLimits.memory_bound,
                 model: str | None = None, provider: str | None = None) -> None:
        where = f"agent {name!r}"
        if command is not None and (isinstance(command, str) or not command
                                    or not all(isinstance(c, str) and c for c in command)):
            raise ValueError(f"{where}: command must be a non-empty list of strings, got {command!r}")
        if transport not in TRANSPORTS:
            raise ValueError(f"{where}: transport must be one of {list(TRANSPORTS)}, got {transport!r}")
        if transport == "stdio" and command is not None:
            raise ValueError(f"{where}: a command is served over http, not stdio (transport {transport!r})")
        if not isinstance(host, str) or not is_loopback(host):
            raise ValueError(f"{where}: host must be a loopback address (127.0.0.1, ::1, localhost), got {host!r}")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
            raise ValueError(f"{where}: port must be an integer 0..65535 (0: a free one), got {port!r}")
        for key, val in (("idle_timeout_s", idle_timeout_s), ("exit_grace_s", exit_grace_s)):
            if isinstance(val, bool) or not isinstance(val, (int, float)) or not val > 0:
                raise ValueError(f"{where}: {key} must be a positive number of seconds, got {val!r}")
        if isinstance(env, str) or not all(isinstance(e, str) and e and "=" not in e for e in env):
            raise ValueError(f"{where}: env must be a list of environment variable names, got {env!r}")
        if isolation not in ISOLATION:
            raise ValueError(f"{where}: isolation must be one of {list(ISOLATION)}, got {isolation!r}")
        if isinstance(expose, str) or not all(isinstance(p, str) and os.path.isabs(p) for p in expose):
            raise ValueError(f"{where}: expose must be a list of absolute paths, got {expose!r}")
        for p in expose:
            why = expose_problem(p)
            if why:
                raise ValueError(f"{where}: expose {p!r} refused: {why}")
        self.allow: list[str] = []
        self.private_addresses: list[str] = []
        if isinstance(network, Mapping):
            from heuresis.agents.external.proxy import parse_allow

            extra = sorted(set(network) - {"allow", "private_addresses"})
            if extra:
                raise ValueError(f"{where}: network takes the keys allow and private_addresses, not {extra}")
            allow, private_addresses = network.get("allow"), network.get("private_addresses", [])
            if isinstance(allow, str) or not isinstance(allow, Sequence) or not allow:
                raise ValueError(f"{where}: network.allow must be a non-empty list of host:port, got {allow!r}")
            for a in allow:
                try:
                    parse_allow(a)
                except ValueError as exc:
                    raise ValueError(f"{where}: network.allow entry {exc}") from None
            if isinstance(private_addresses, str) or not isinstance(private_addresses, Sequence):
                raise ValueError(f"{where}: network.private_addresses must be a list of IP addresses, "
                                 f"got {private_addresses!r}")
            import ipaddress

            for a in private_addresses:
                try:
                    ipaddress.ip_address(a)
                except (ValueError, TypeError):
                    raise ValueError(f"{where}: network.private_addresses entry {a!r} is not an IP address "
                                     "(name the address itself, not a host name)") from None
            self.allow, self.private_addresses = list(allow), list(private_addresses)
        elif not isinstance(network, bool):
            raise ValueError(f"{where}: network must be false, true or {{allow: [host:port, ...]}}, got {network!r}")
        for key, val in (("memory_mb", memory_mb), ("max_processes", max_processes), ("disk_mb", disk_mb),
                         ("cpu_seconds", cpu_seconds)):
            if isinstance(val, bool) or not isinstance(val, int) or not val > 0:
                raise ValueError(f"{where}: {key} must be a positive integer, got {val!r}")
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not 0 < cpus <= 1024:
            raise ValueError(f"{where}: cpus must be a positive number of CPUs, got {cpus!r}")
        from heuresis.harness.bounds import BOUNDS

        if memory_bound not in BOUNDS:
            raise ValueError(f"{where}: memory_bound must be one of {list(BOUNDS)}, got {memory_bound!r}")
        super().__init__(name)
        self.command = list(command) if command is not None else None
        self.transport, self.host, self.port = transport, host, int(port)
        self.idle_timeout_s, self.exit_grace_s = float(idle_timeout_s), float(exit_grace_s)
        self.env_names, self.isolation, self.expose = list(env), isolation, list(expose)
        self.network = network if isinstance(network, bool) else "allow"
        self._proxy: Any = None   # the harness's proxy of an allowlisted network (proxy.AllowProxy)
        self.network_used = ""    # what the command had: private, allow (private and the proxy) or host
        self.limits = CommandLimits(memory_mb=memory_mb, max_processes=max_processes, disk_mb=disk_mb,
                                    cpu_seconds=cpu_seconds, cpus=float(cpus), memory_bound=memory_bound)
        self._bound: Any = None   # the sandbox's total bound (heuresis.harness.bounds.Bound) while its command runs
        self._busy = False
        self._sockdir: str | None = None
        self._uid: int | None = None   # a root harness: the uid its command runs as (command_uid)
        self._output: dict[str, Drain] = {}
        self._model, self._provider = model, provider
        self._calls: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._pending: tuple[str, _Call] | None = None
        self._ok: dict[str, bool] = {}
        self._data: dict[str, dict] = {}
        self._ids = itertools.count(1)
        self._tools: list[dict] = []
        self.instructions = ""
        self._ended = ""
        self._left = threading.Event()
        self._server: Transport | None = None
        self._proc: subprocess.Popen | None = None
        self._workdir: str | None = None
        self.url = ""
        self.isolation_used = ""
        self.notes: list[str] = []

    @property
    def model(self) -> str | None:
        """The model the config entry names (None: not said)."""
        return self._model

    @property
    def provider(self) -> str | None:
        """The provider the config entry names (None: not said)."""
        return self._provider

    # --- the loop's side ------------------------------------------------------------------------
    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Answer the previous call, then wait for the client's next ``tools/call`` and return it."""
        t0 = time.monotonic()
        self._deliver(messages)
        self._tools = [dict(t) for t in tools]
        notes: list[str] = []
        if self._server is None:
            self.instructions = "\n\n".join(str(m.get("content") or "") for m in messages
                                             if m.get("role") in ("system", "user"))
            self._start()
            notes = list(self.notes)
        idle_from = time.monotonic()      # the client's idle time: our answer delivered and the server up
        while True:
            try:
                call = self._calls.get(timeout=max(0.0, self.idle_timeout_s - (time.monotonic() - idle_from)))
            except queue.Empty:
                raise ClientIdle(f"no tool call from the MCP client in {self.idle_timeout_s:g} s",
                                 self._usage(t0, notes)) from None
            # a call its client withdrew (cancelled, disconnected) before its turn is not made
            if call is _LEFT or call.answer.set_running_or_notify_cancel():
                break
        if call is _LEFT:
            raise ClientLeft(self._left_text(), self._usage(t0, notes))
        call_id = f"mcp_{next(self._ids)}"
        self._pending = (call_id, call)
        msg = {"role": "assistant", "content": None,
               "tool_calls": [{"id": call_id, "type": "function",
                               "function": {"name": call.name, "arguments": call.arguments}}]}
        return AgentReply(msg, self._usage(t0, notes, call.usage))

    def observe(self, observation: Observation) -> None:
        """Keep whether each answered call succeeded (an MCP tool error otherwise) and its data."""
        if observation.key != "task":
            self._ok[observation.key] = observation.ok
            self._data[observation.key] = {"ok": observation.ok, "data": observation.data,
                                           "budgets": observation.budgets}

    def end(self, messages: list[dict], termination: str) -> None:
        """Answer the last call, refuse every later one, let the client go and stop serving."""
        self._deliver(messages)
        with self._lock:
            self._ended = termination or "ended"
            while True:
                try:
                    call = self._calls.get_nowait()
                except queue.Empty:
                    break
                if call is not _LEFT and call.answer.set_running_or_notify_cancel():
                    call.answer.set_result((f"{_ENDED}: {self._ended}", True, None))
        if self._server is None:
            return
        if self._proc is None:   # a client that connected by itself: served a little longer, while the run is written
            t = threading.Thread(target=self._close, daemon=True, name="heuresis-mcp-linger")
            t.start()
            _LINGERING.append(t)
            return
        self._close()

    def _close(self) -> None:
        """Give the client ``exit_grace_s`` to leave, then terminate its command and stop serving."""
        self._left.wait(self.exit_grace_s)
        self._stop_command()
        for drain in self._output.values():
            drain.finish()
        if self._bound is not None:
            self._bound.close()
        if self._proxy is not None:
            self._proxy.stop()
        assert self._server is not None
        self._server.stop()
        for folder in (self._workdir, self._sockdir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

    def _usage(self, t0: float, notes: list[str], reported: Any = None) -> Usage:
        """The usage of one call: the tokens the client reported with it (``_meta``), else unknown (None)."""
        warn = ([f"external agent {self.name!r} ran without isolation (isolation: {self.isolation})"]
                if self.command is not None and self.isolation_used == "none" else [])
        if self.command is not None and self.isolation_used == "none" and self.network == "allow":
            warn.append(f"external agent {self.name!r}: network allow list unenforced without isolation (the host's "
                        "network)")
        if self.command is not None and self.isolation_used == "bwrap" and self.network is True:
            warn.append(f"external agent {self.name!r} shared the host's network (network: true): it could reach "
                        "every loopback and private service")
        tokens: dict[str, int | None] = {"tokens_in": None, "tokens_out": None}
        if reported is not None:
            ok = isinstance(reported, Mapping) and all(
                reported.get(k) is None or (isinstance(reported.get(k), int) and not isinstance(reported.get(k), bool)
                                            and 0 < reported.get(k) <= PLAUSIBLE_TOKENS)  # type: ignore[operator]
                for k in tokens)
            if ok:
                tokens = {k: reported.get(k) for k in tokens}
            else:
                notes = [*notes, f"unreadable or implausible usage report {echo(reported, 120)} (each count a whole "
                                 f"number from 1 to {PLAUSIBLE_TOKENS:,}): tokens unknown"]
        return Usage(**tokens, cost=None, latency_s=round(time.monotonic() - t0, 4),  # type: ignore[arg-type]
                     model=self._model, provider=self._provider, price_source="external", notes=notes, warnings=warn)

    def record(self) -> dict | None:
        """What the command did: exit status, network, output tails, bound, proxy attempts (None: no command ran).

        ``network`` is ``private``, ``allow`` (private and the proxy's pairs) or ``host``.
        """
        if self._proc is None:
            return None
        out: dict = {"command_exit_status": self._proc.returncode, "network": self.network_used}
        if self._bound is not None:
            out["bound"] = self._bound.record()
        if self._proxy is not None:
            out["proxy"] = self._proxy.record()
        for name, drain in self._output.items():
            out[name] = drain.text()
            out[f"{name}_bytes"] = drain.total
        return out

    def _left_text(self) -> str:
        if self._proc is not None and self._proc.poll() is not None:
            return f"the agent's command exited (status {self._proc.returncode}) before the run ended"
        return "the MCP client left before the run ended"

    def _deliver(self, messages: list[dict]) -> None:
        """Hand the answer of the pending call (and the user messages after it) to its request."""
        if self._pending is None:
            return
        call_id, call = self._pending
        self._pending = None
        at = next((k for k, m in enumerate(messages) if m.get("role") == "tool" and m.get("tool_call_id") == call_id),
                  None)
        if at is None:   # the loop never answered it (it cannot happen: every call is answered once)
            call.answer.set_result((f"{_ENDED}: the call was not executed", True, None))
            return
        parts = [str(messages[at].get("content") or "")]
        parts += [str(m.get("content") or "") for m in messages[at + 1:] if m.get("role") == "user"]
        call.answer.set_result(("\n\n".join(parts), not self._ok.get(call_id, False), self._data.get(call_id)))

    # --- the client's side (called on the server's event loop) ----------------------------------
    async def call_tool(self, name: Any, arguments: str, usage: Any = None) -> tuple[str, bool, dict | None]:
        """Queue one call for the loop and wait for its answer: (text, is_error, structured data).

        One call at a time: a call made while another waits for its answer is refused (no turn).
        A name or arguments longer than the limits are recorded cut, with their size; such a
        call is answered by the loop as unreadable arguments.
        """
        if not isinstance(name, str) or len(name) > 200:
            name = name if isinstance(name, str) else str(name)
            name = name if len(name) <= 200 else f"{name[:200]} [cut: {len(name)} characters]"
        if len(arguments) > MAX_ARGUMENT_CHARS:
            arguments = f"{arguments[:MAX_ARGUMENT_CHARS]} [cut: {len(arguments)} characters]"
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._ended:
                return f"{_ENDED}: {self._ended}", True, None
            if self._busy:
                return f"{_PENDING}: one call at a time (this one was not made and is no turn)", True, None
            self._busy = True
            self._calls.put(_Call(name, arguments, fut, usage))
        try:
            return await asyncio.wrap_future(fut)
        finally:
            with self._lock:
                self._busy = False

    def tool_list(self) -> list[dict]:
        """The specs of the tools the loop offers now."""
        return list(self._tools)

    def client_left(self) -> None:
        """The client went away: a waiting ``respond`` ends the run as ``client_left``."""
        self._left.set()
        with self._lock:
            if not self._ended:
                self._calls.put(_LEFT)

    # --- serving ----------------------------------------------------------------------------------
    def _start(self) -> None:
        server = build_server(self)
        if self.transport == "stdio":
            self._server = StdioTransport(server, self)
            self._server.start()
            self.notes.append("external agent: MCP over stdio")
            return
        # the endpoint's unguessable path: a stranger on loopback cannot play the episode
        path = f"/{secrets.token_urlsafe(16)}/mcp"
        if self.command is None:
            self._server = HTTPTransport(server, self.host, self.port, path, on_delete=self.client_left)
            self._server.start()
            self.url = endpoint_url(self.host, self._server.port, path)
            self.notes.append("external agent: MCP over streamable HTTP (served by hand)")
            print(f"heuresis: serving the episode over MCP at {self.url}", file=sys.stderr, flush=True)
            return
        used = command_isolation(self.isolation, f"agents.{self.name}.isolation")
        private = used == "bwrap" and self.network is not True
        if private:   # the command's own network: the server on a Unix socket, a forwarder inside
            self._sockdir = tempfile.mkdtemp(prefix="heuresis-mcp-")
            if os.geteuid() == 0:
                self._uid = command_uid()
                os.chown(self._sockdir, self._uid, self._uid)
            self._server = HTTPTransport(server, self.host, 0, path, on_delete=self.client_left,
                                 uds=os.path.join(self._sockdir, "mcp.sock"))
            if self.allow:
                from heuresis.agents.external.proxy import AllowProxy

                self._proxy = AllowProxy(os.path.join(self._sockdir, "proxy.sock"), self.allow, self.private_addresses)
                self._proxy.start()
            self.url = endpoint_url("127.0.0.1", INNER_PORT, path)
        else:
            self._server = HTTPTransport(server, self.host, self.port, path, on_delete=self.client_left)
            self.url = endpoint_url(self.host, self._server.port, path)
        self._server.start()
        if used == "none":
            self._workdir = tempfile.mkdtemp(prefix="heuresis-agent-")
        fd = None
        if used == "bwrap":
            from heuresis.harness.bounds import BoundUnavailable, sandbox_bound
            from heuresis.harness.sandbox import IsolationUnavailable

            try:
                self._bound = sandbox_bound(self.limits.memory_mb, self.limits.max_processes, cpus=self.limits.cpus,
                                            required=self.limits.memory_bound,
                                            key=f"agents.{self.name}.memory_bound",
                                            tmpfs_mb=TMPFS_FOLDERS * self.limits.disk_mb)
            except BoundUnavailable as exc:
                raise IsolationUnavailable(str(exc)) from None
            fd = self._bound.seccomp_fd()
        try:
            argv, env, self.isolation_used = command_argv(
                self.command, self._workdir or WORK_DIR, "required" if used == "bwrap" else "none", self.expose,
                {URL_ENV: self.url}, self.env_names, socket_dir=self._sockdir if private else None,
                limits=self.limits, uid=self._uid, bound=self._bound, seccomp_fd=fd,
                proxy=self._proxy is not None)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        passed = sorted(k for k in self.env_names if k in os.environ)
        self.network_used = ("private" if self._proxy is None else "allow") if private else "host"
        net = ("private (only this episode's server)" if private and self._proxy is None else
               f"private, and through the harness's proxy only {', '.join(self.allow)}"
               + (f" (private addresses allowed: {', '.join(self.private_addresses)})" if self.private_addresses else "")
               if private else "the host's")
        bound = (self._bound.describe() if self._bound is not None else
                 f"memory bound rlimit: {self.limits.memory_mb} MB of address space per process, no total")
        self.notes.append(f"external agent: command {json.dumps(self.command)}; isolation {self.isolation_used}; "
                          f"network {net}; {bound}; CPU {self.limits.cpu_seconds} s per process; "
                          f"environment passed: {', '.join(passed) or 'none'}; MCP at {redacted(self.url)}")
        preexec = self._bound.preexec if self._bound is not None and self._bound.dirs else None
        if self.isolation_used == "none":
            limits = self.limits

            def preexec() -> None:   # runs in the child before exec: what limits hold without a sandbox
                import resource

                mem = limits.memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
                resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        # its own standard streams: /dev/null and two pipes the harness drains; no other descriptor passes (but
        # the seccomp filter's, read by bwrap before the command starts)
        try:
            self._proc = subprocess.Popen(argv, cwd=self._workdir or "/", env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
                                          start_new_session=True, preexec_fn=preexec,
                                          pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        self._output = {"stdout": Drain(self._proc.stdout), "stderr": Drain(self._proc.stderr)}
        threading.Thread(target=self._watch, daemon=True, name="heuresis-agent-watch").start()

    def _watch(self) -> None:
        assert self._proc is not None
        self._proc.wait()
        self.client_left()

    def _stop_command(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=3)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
