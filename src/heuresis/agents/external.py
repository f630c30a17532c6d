"""An agent outside the harness, served the run's tools over MCP (docs/mcp.md): kind ``external``.

The harness keeps its one loop (:class:`heuresis.harness.loop.AgentLoop`: the episode's or the
game's tools, masking, grades, budgets, last turn, recording); this agent is the loop's
``respond``.  Each ``respond`` blocks until the MCP client makes its next ``tools/call`` and
returns it as an assistant message with exactly that one tool call; the loop executes it and the
next ``respond`` (or the loop's :meth:`~heuresis.agents.base.Agent.end`) hands the text that
answered it — the tool's result with the budgets line, then any user message the loop added
(the last-turn notice) — back to the waiting request as its result.  One MCP tool call is one
turn.

* The task (system message and prompt) is the server's ``instructions`` and its prompt
  ``task``; ``tools/list`` lists the tools the loop offers now (the last turn's only, once the
  budgets are spent), with the harness's own JSON schemas.
* Arguments are never validated by the MCP layer: whatever a client sends — a wrong type, a
  missing field, arguments that are no JSON object, a tool that does not exist — reaches the
  loop, which answers it with its own error and counts the turn, as for a model's reply.
* The run ends on submit, on exhaustion (after the last turn), or when the client leaves
  (:class:`ClientLeft`: stdin closed, the command exited) or makes no call for
  ``idle_timeout_s`` (:class:`ClientIdle`); both are :class:`~heuresis.agents.base.EpisodeEnd`,
  so the run is recorded ``ok`` with that termination and scored like an unsubmitted one.
  Calls after the end are answered with an MCP tool error ``episode ended: <termination>``.
* Usage: the tokens the client reports in a call's ``_meta`` (:data:`USAGE_META`), else unknown
  (``None``, never 0); cost unknown (``None``; price source ``external``); the model and provider
  the config entry names, if any.  One call at a time; the server's limits on connections,
  slow requests, bodies and recorded arguments are the ``MAX_*`` constants (docs/mcp.md).

Transports: ``http`` (streamable HTTP on a loopback address, at an unguessable path printed to
the user; port 0 = a free one) and ``stdio`` (the process's stdin and stdout: ``heuresis
serve-episode --transport stdio``).  With ``command`` the agent starts that program once per run
with the server's URL in :data:`URL_ENV`, its own standard streams (``/dev/null`` and pipes the
harness drains, kept in the transcript: :meth:`ExternalAgent.record`), a stripped environment
(only the names listed in ``env`` pass through) and, by default, bubblewrap isolation
(:func:`command_argv`): the program sees the system, its interpreter and the folders listed in
``expose``, never the harness's working folder (where ``results/`` and the truth live),
``$HOME`` or ``/tmp``; it writes only to size-capped tmpfs folders, under the code tool's limits,
and has a network of its own where only its episode's server is reachable (a forwarder to the
server's Unix socket), unless ``network`` opts into the host's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import ipaddress
import itertools
import json
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from heuresis.agents.base import Agent, AgentReply, EpisodeEnd, Observation, Usage, register_agent
from heuresis.harness.parse import echo

__all__ = ["ISOLATION", "MAX_BODY_BYTES", "MAX_CONNECTIONS", "TRANSPORTS", "URL_ENV", "USAGE_META", "ClientIdle",
           "ClientLeft", "CommandLimits", "ExternalAgent", "command_argv", "command_isolation", "expose_problem",
           "is_loopback", "wait_for_clients"]

#: Environment variable holding the MCP server's URL for the agent's command.
URL_ENV = "HEURESIS_MCP_URL"
#: Values of ``transport``.
TRANSPORTS = ("http", "stdio")
#: Values of ``isolation`` (of the agent's command): bubblewrap or refuse; bubblewrap if it works; none.
ISOLATION = ("required", "best_effort", "none")
#: What one MCP server lets a client cost the harness (docs/mcp.md, "Limits of the server").
MAX_CONNECTIONS = 16          # open connections at once; one more is closed as it is accepted
REQUEST_TIMEOUT_S = 10.0      # from a connection's (or request's) first byte to its whole request, headers and body
KEEP_ALIVE_S = 5.0            # an idle connection between requests
MAX_HEADER_BYTES = 16384      # the request line and headers
MAX_BODY_BYTES = 1 << 20      # a request's body (a Content-Length is required)
MAX_ARGUMENT_CHARS = 65536    # a call's arguments (and 200 for its name) as recorded; longer ones are cut, not run
#: What the harness keeps of the command's stdout and stderr (the tail of each) and reads at most.
OUTPUT_KEEP = 20000
OUTPUT_READ_MAX = 16 << 20
#: The ``_meta`` key of a ``tools/call`` under which a client reports the tokens its model spent on the call.
USAGE_META = "heuresis/usage"
#: Inside the private network: the forwarder's port and where the server's socket is bound.
INNER_PORT = 40000
_SOCKET_DIR = "/heuresis-mcp"
#: The command's work folder inside the sandbox (a size-capped tmpfs).
WORK_DIR = "/agent"
_ENDED = "episode ended"
_PENDING = "another call is pending"
_raw_call: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar("heuresis_raw_call", default=None)
_reported: contextvars.ContextVar[Any] = contextvars.ContextVar("heuresis_reported_usage", default=None)


class ClientLeft(EpisodeEnd):
    """The MCP client went away (stdin closed, its command exited) before the run ended."""

    reason = "client_left"


class ClientIdle(EpisodeEnd):
    """The MCP client made no tool call for ``idle_timeout_s`` seconds."""

    reason = "client_idle"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` or 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class _Call:
    """One ``tools/call`` waiting for its turn: name, arguments as JSON text, where its answer goes, its usage."""

    name: Any
    arguments: str
    answer: concurrent.futures.Future
    usage: Any = None


@dataclass(frozen=True)
class CommandLimits:
    """Limits of an isolated command (config keys of the agent entry; the code tool's machinery sets them)."""

    memory_mb: int = 4096        # address space per process (RLIMIT_AS)
    max_processes: int = 64      # processes and threads in the sandbox (RLIMIT_NPROC)
    disk_mb: int = 1024          # each of its tmpfs (the work folder, /tmp); also the largest file
    max_open_files: int = 1024   # RLIMIT_NOFILE


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
    network : bool
        Whether an isolated command shares the host's network (to reach its model's API);
        default false: a private network where only the episode's server is reachable.
    expose : list of str
        Folders shown read-only to an isolated command (its own code, its environment); never
        inside the harness's working folder or its ``results/``.
    memory_mb, max_processes, disk_mb : int
        Limits of an isolated command (:class:`CommandLimits`).
    model, provider : str, optional
        What stands behind the client, for the records.
    """

    def __init__(self, name: str, *, command: Sequence[str] | None = None, transport: str = "http",
                 host: str = "127.0.0.1", port: int = 0, idle_timeout_s: float = 300.0, exit_grace_s: float = 10.0,
                 env: Sequence[str] = (), isolation: str = "required", network: bool = False,
                 expose: Sequence[str] = (), memory_mb: int = CommandLimits.memory_mb,
                 max_processes: int = CommandLimits.max_processes, disk_mb: int = CommandLimits.disk_mb,
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
        if not isinstance(network, bool):
            raise ValueError(f"{where}: network must be true or false, got {network!r}")
        for key, val in (("memory_mb", memory_mb), ("max_processes", max_processes), ("disk_mb", disk_mb)):
            if isinstance(val, bool) or not isinstance(val, int) or not val > 0:
                raise ValueError(f"{where}: {key} must be a positive integer, got {val!r}")
        super().__init__(name)
        self.command = list(command) if command is not None else None
        self.transport, self.host, self.port = transport, host, int(port)
        self.idle_timeout_s, self.exit_grace_s = float(idle_timeout_s), float(exit_grace_s)
        self.env_names, self.isolation, self.expose = list(env), isolation, list(expose)
        self.network = network
        self.limits = CommandLimits(memory_mb=memory_mb, max_processes=max_processes, disk_mb=disk_mb)
        self._busy = False
        self._sockdir: str | None = None
        self._output: dict[str, _Drain] = {}
        self._model, self._provider = model, provider
        self._calls: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._pending: tuple[str, _Call] | None = None
        self._ok: dict[str, bool] = {}
        self._data: dict[str, dict] = {}
        self._ids = itertools.count(1)
        self._tools: list[dict] = []
        self._instructions = ""
        self._ended = ""
        self._left = threading.Event()
        self._server: _Transport | None = None
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
            self._instructions = "\n\n".join(str(m.get("content") or "") for m in messages
                                             if m.get("role") in ("system", "user"))
            self._start()
            notes = list(self.notes)
        while True:
            try:
                call = self._calls.get(timeout=max(0.0, self.idle_timeout_s - (time.monotonic() - t0)))
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
        assert self._server is not None
        self._server.stop()
        for folder in (self._workdir, self._sockdir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

    def _usage(self, t0: float, notes: list[str], reported: Any = None) -> Usage:
        """The usage of one call: the tokens the client reported with it (``_meta``), else unknown (None)."""
        warn = ([f"external agent {self.name!r} ran without isolation (isolation: {self.isolation})"]
                if self.command is not None and self.isolation_used == "none" else [])
        tokens: dict[str, int | None] = {"tokens_in": None, "tokens_out": None}
        if reported is not None:
            ok = isinstance(reported, Mapping) and all(
                reported.get(k) is None or (isinstance(reported.get(k), int) and not isinstance(reported.get(k), bool)
                                            and reported.get(k) >= 0) for k in tokens)  # type: ignore[operator]
            if ok:
                tokens = {k: reported.get(k) for k in tokens}
            else:
                notes = [*notes, f"unreadable usage report {echo(reported, 120)}: tokens unknown"]
        return Usage(**tokens, cost=None, latency_s=round(time.monotonic() - t0, 4),  # type: ignore[arg-type]
                     model=self._model, provider=self._provider, price_source="external", notes=notes, warnings=warn)

    def record(self) -> dict | None:
        """The command's exit status and the tails of its stdout and stderr (None: no command ran)."""
        if self._proc is None:
            return None
        out = {"command_exit_status": self._proc.returncode}
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
            self._server = _Stdio(server, self)
            self._server.start()
            self.notes.append("external agent: MCP over stdio")
            return
        # the endpoint's unguessable path: a stranger on loopback cannot play the episode
        path = f"/{secrets.token_urlsafe(16)}/mcp"
        if self.command is None:
            self._server = _HTTP(server, self.host, self.port, path, on_delete=self.client_left)
            self._server.start()
            self.url = _url(self.host, self._server.port, path)
            self.notes.append("external agent: MCP over streamable HTTP (served by hand)")
            print(f"heuresis: serving the episode over MCP at {self.url}", file=sys.stderr, flush=True)
            return
        used = command_isolation(self.isolation)
        private = used == "bwrap" and not self.network
        if private:   # the command's own network: the server on a Unix socket, a forwarder inside
            self._sockdir = tempfile.mkdtemp(prefix="heuresis-mcp-")
            if os.geteuid() == 0:
                from heuresis.harness.sandbox import SANDBOX_UID

                os.chown(self._sockdir, SANDBOX_UID, SANDBOX_UID)
            self._server = _HTTP(server, self.host, 0, path, on_delete=self.client_left,
                                 uds=os.path.join(self._sockdir, "mcp.sock"))
            self.url = _url("127.0.0.1", INNER_PORT, path)
        else:
            self._server = _HTTP(server, self.host, self.port, path, on_delete=self.client_left)
            self.url = _url(self.host, self._server.port, path)
        self._server.start()
        if used == "none":
            self._workdir = tempfile.mkdtemp(prefix="heuresis-agent-")
        argv, env, self.isolation_used = command_argv(
            self.command, self._workdir or WORK_DIR, "required" if used == "bwrap" else "none", self.expose,
            {URL_ENV: self.url}, self.env_names, socket_dir=self._sockdir if private else None, limits=self.limits)
        passed = sorted(k for k in self.env_names if k in os.environ)
        net = "private (only this episode's server)" if private else "the host's"
        self.notes.append(f"external agent: command {json.dumps(self.command)}; isolation {self.isolation_used}; "
                          f"network {net}; environment passed: {', '.join(passed) or 'none'}; MCP at {self.url}")
        preexec = None
        if self.isolation_used == "none":
            limits = self.limits

            def preexec() -> None:   # runs in the child before exec: what limits hold without a sandbox
                import resource

                mem = limits.memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        # its own standard streams: /dev/null and two pipes the harness drains; no other descriptor passes
        self._proc = subprocess.Popen(argv, cwd=self._workdir or "/", env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
                                      start_new_session=True, preexec_fn=preexec)
        self._output = {"stdout": _Drain(self._proc.stdout), "stderr": _Drain(self._proc.stderr)}
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


def _url(host: str, port: int, path: str) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"


class _Drain:
    """Reads one of the command's output pipes in a thread: keeps its last :data:`OUTPUT_KEEP` bytes.

    Past :data:`OUTPUT_READ_MAX` bytes the pipe is closed (the command's next write fails).
    """

    def __init__(self, pipe) -> None:
        self.pipe, self.total, self.tail = pipe, 0, bytearray()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True, name="heuresis-agent-output")
        self.thread.start()

    def _read(self) -> None:
        import select

        fd = self.pipe.fileno()
        try:
            while self.total < OUTPUT_READ_MAX and not self._stop.is_set():
                if not select.select([fd], [], [], 0.2)[0]:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self.total += len(chunk)
                self.tail += chunk
                del self.tail[:-OUTPUT_KEEP]
        except (OSError, ValueError):
            pass
        finally:
            self.pipe.close()

    def finish(self, timeout: float = 3.0) -> None:
        """Wait for EOF (a process that left the command's group may hold the pipe: at most ``timeout``)."""
        self.thread.join(timeout)
        self._stop.set()
        self.thread.join()

    def text(self) -> str:
        """The kept tail, decoded."""
        return bytes(self.tail).decode(errors="replace")


# --- the MCP server -------------------------------------------------------------------------------
def build_server(agent: ExternalAgent):
    """The low-level MCP server of one run: the loop's tools, the task as instructions and prompt."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=s["function"]["name"], description=s["function"].get("description", ""),
                       input_schema=s["function"].get("parameters") or {"type": "object"}) for s in agent.tool_list()])

    async def call_tool(ctx, params) -> types.CallToolResult:
        raw = _raw_call.get()
        name, args = raw if raw is not None else (params.name, params.arguments)
        text, is_error, data = await agent.call_tool(name, json.dumps({} if args is None else args), _reported.get())
        structured = json.loads(json.dumps(data, default=str)) if data is not None else None
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error,
                                    structured_content=structured)

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="task", description="the task of this run")])

    async def get_prompt(ctx, params) -> types.GetPromptResult:
        if params.name != "task":
            from mcp.shared.exceptions import MCPError
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}; known: task")
        return types.GetPromptResult(description="the task of this run", messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=agent._instructions))])

    server = Server("heuresis", version=_version(), instructions=agent._instructions, on_list_tools=list_tools,
                    on_call_tool=call_tool, on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    server.middleware.append(_unvalidated_calls)
    return server


async def _unvalidated_calls(ctx, call_next):
    """Let a ``tools/call`` whose name or arguments the SDK would refuse reach the loop as it was sent.

    The MCP types require a string name and an object of arguments; a call with anything else
    is passed on with placeholders and its raw name and arguments in a context variable, so the
    loop answers it with its own error (and counts the turn) like a model's malformed call.
    """
    params = ctx.params
    if ctx.method == "tools/call" and isinstance(params, Mapping):
        meta = params.get("_meta")
        reported = _reported.set(meta.get(USAGE_META) if isinstance(meta, Mapping) else None)
        try:
            name, args = params.get("name"), params.get("arguments")
            if not isinstance(name, str) or not (args is None or isinstance(args, Mapping)):
                token = _raw_call.set((name if isinstance(name, str) else json.dumps(name), args))
                try:
                    return await call_next(replace(ctx, params={**params, "name": "?", "arguments": {}}))
                finally:
                    _raw_call.reset(token)
            return await call_next(ctx)
        finally:
            _reported.reset(reported)
    return await call_next(ctx)


def _version() -> str:
    from heuresis import __version__

    return __version__


class _Transport:
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


class _HTTP(_Transport):
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


class _Stdio(_Transport):
    """The process's stdin and stdout (the client started this process); EOF means the client left."""

    def __init__(self, server, agent: ExternalAgent) -> None:
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


# --- the agent's command ---------------------------------------------------------------------------
#: The forwarder (run by the harness's interpreter, ``-I -S``, inside the private network): it
#: listens on 127.0.0.1:PORT before it starts the command, and joins each connection to the
#: server's Unix socket; it exits with the command's status.
_FORWARDER = """
import os, socket, sys, threading
port, path, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", port))
lst.listen(64)
pid = os.fork()
if pid == 0:
    lst.close()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot start {argv[0]!r}: {exc}", file=sys.stderr)
        os._exit(127)

def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def serve():
    while True:
        c, _ = lst.accept()
        u = socket.socket(socket.AF_UNIX)
        try:
            u.connect(path)
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()
        except (OSError, RuntimeError):
            c.close()
            u.close()

threading.Thread(target=serve, daemon=True).start()
_, status = os.waitpid(pid, 0)
os._exit(os.waitstatus_to_exitcode(status) % 256)
"""


def expose_problem(path: str) -> str:
    """Why an ``expose`` path must not be shown to the command ('' if it may).

    Refused: a path inside the harness's working folder (its sources, config and ``results/``)
    or its ``results/`` wherever that points, and a path containing either or ``$HOME``.
    """
    real = os.path.realpath(path)
    cwd = os.path.realpath(os.getcwd())
    for what, guarded in (("the working folder", cwd), ("results/", os.path.realpath(os.path.join(cwd, "results")))):
        if real == guarded or real.startswith(guarded.rstrip("/") + "/"):
            return f"it is inside {what} ({guarded})"
    from heuresis.harness.sandbox import hidden_inside

    return hidden_inside(real)


def command_isolation(isolation: str) -> str:
    """The isolation an agent's command gets under ``isolation``: ``bwrap`` or ``none``.

    Raises :class:`~heuresis.harness.sandbox.IsolationUnavailable` for ``required`` where
    bubblewrap does not work (fail closed).
    """
    from heuresis.harness.sandbox import IsolationUnavailable, isolation_status

    if isolation == "none":
        return "none"
    ok, why = isolation_status()
    if ok:
        return "bwrap"
    if isolation == "required":
        raise IsolationUnavailable(f"the external agent's isolation is 'required' but bubblewrap does not work "
                                   f"here: {why}; set the agent's isolation to 'best_effort' or 'none' only for "
                                   "a trusted agent (docs/mcp.md)")
    return "none"


def command_argv(command: Sequence[str], workdir: str, isolation: str, expose: Sequence[str] = (),
                 extra_env: Mapping[str, str] | None = None, env_names: Sequence[str] = (), *,
                 socket_dir: str | None = None,
                 limits: CommandLimits = CommandLimits()) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and isolation (``bwrap`` or ``none``) of an agent's command.

    The environment holds only ``PATH``, ``HOME`` and ``TMPDIR`` (the work folder), ``LANG``,
    ``extra_env`` and the harness's variables named in ``env_names``; without isolation the
    work folder is ``workdir``.  Under bubblewrap the command sees, read-only, ``/usr`` (and the
    ``/bin``, ``/lib`` links), ``/etc``, the trees of its interpreter (the harness's environment
    for ``python``, with this package hidden) and ``expose``; writable only its work folder
    :data:`WORK_DIR` and ``/tmp``, each a tmpfs of ``limits.disk_mb``; its own ``/proc`` and
    ``/dev``; the limits of ``limits`` (:func:`~heuresis.harness.sandbox.limit_argv`, as the
    code tool).  With ``socket_dir`` (the folder of the server's Unix socket ``mcp.sock``) it
    has a network of its own, where a forwarder on ``127.0.0.1:``:data:`INNER_PORT` is the
    only thing to reach (the server); without it, it shares the host's network.  A root
    harness never runs the command as root: an outer bwrap and ``setpriv`` drop to
    :data:`~heuresis.harness.sandbox.SANDBOX_UID` first.  ``isolation`` ``required`` raises
    :class:`~heuresis.harness.sandbox.IsolationUnavailable` where bubblewrap does not work;
    ``best_effort`` then runs without it.
    """
    from heuresis.harness.sandbox import (
        SANDBOX_UID,
        IsolationUnavailable,
        bwrap_path,
        hidden_inside,
        limit_argv,
        package_masks,
        parent_dirs,
        prlimit_path,
        python_trees,
        system_args,
    )

    argv = list(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    used = command_isolation(isolation)
    home = workdir if used == "none" else WORK_DIR
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", **{k: os.environ[k] for k in env_names if k in os.environ},
           **dict(extra_env or {})}
    # a command that cannot start is the harness's failure (recorded, retried), not the agent's early exit
    if shutil.which(argv[0], path=env["PATH"]) is None:
        raise FileNotFoundError(f"the external agent's command {argv[0]!r} is not an executable on PATH")
    missing = [p for p in expose if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"the external agent's expose paths do not exist: {missing}")
    for p in expose:
        why = expose_problem(p)
        if why:
            raise IsolationUnavailable(f"the external agent's expose {p!r} refused: {why}")
    if used == "none":
        return argv, env, "none"
    exe = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    trees = python_trees() if os.path.realpath(exe) == os.path.realpath(sys.executable) or socket_dir else []
    if os.path.realpath(exe) != os.path.realpath(sys.executable):
        trees.append(os.path.dirname(os.path.realpath(exe)))
    trees = [t for t in trees if not t.startswith("/usr/")]
    for t in trees:
        why = hidden_inside(os.path.realpath(t))
        if why:
            raise IsolationUnavailable(f"the external agent's command would see what must stay hidden: {why}")
    bwrap = os.path.realpath(bwrap_path())  # type: ignore[type-var]
    prlimit = prlimit_path()
    shown = sorted({os.path.realpath(p) for p in [*trees, *expose]})
    system = system_args(whole_etc=True)
    disk = str(int(limits.disk_mb) * 1024 * 1024)
    views = [*parent_dirs(shown)]
    for p in shown:
        views += ["--ro-bind", p, p]
    net = ["--share-net"] if socket_dir is None else []
    sock = [] if socket_dir is None else ["--ro-bind", socket_dir, _SOCKET_DIR]
    args = [bwrap, "--unshare-all", *net, "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--hostname", "agent", *system, "--proc", "/proc",
            "--dev", "/dev", "--remount-ro", "/dev", "--size", disk, "--tmpfs", "/tmp", *views, *package_masks(trees),
            *sock, "--size", disk, "--tmpfs", WORK_DIR, "--remount-ro", "/", "--chdir", WORK_DIR, "--clearenv"]
    for k, v in env.items():
        args += ["--setenv", k, v]
    args += ["--", *limit_argv(prlimit, memory_mb=limits.memory_mb, max_processes=limits.max_processes,
                               disk_mb=limits.disk_mb, nofile=limits.max_open_files), "--"]
    if socket_dir is not None:
        args += [os.path.realpath(sys.executable), "-I", "-S", "-c", _FORWARDER, str(INNER_PORT),
                 f"{_SOCKET_DIR}/mcp.sock"]
    args += argv
    if os.geteuid() != 0:
        return args, {"PATH": "/usr/bin:/bin"}, "bwrap"  # type: ignore[return-value]
    # a root harness: never run the command as root. As the code tool's sandbox does (docs/sandbox.md), an outer
    # bwrap shows the same trees, setpriv drops to the unprivileged uid, and the bwrap above runs as that user
    setpriv = shutil.which("setpriv")
    if setpriv is None or not os.path.realpath(setpriv).startswith("/usr/"):
        raise IsolationUnavailable("setpriv (util-linux) not found under /usr: needed to leave root before the "
                                   "external agent's command")
    outer = [bwrap, "--unshare-pid", "--die-with-parent", *system, *views]
    if not bwrap.startswith("/usr/"):  # type: ignore[union-attr]
        outer += [*parent_dirs([bwrap]), "--ro-bind", bwrap, bwrap]
    if socket_dir is not None:
        outer += [*parent_dirs([socket_dir]), "--bind", socket_dir, socket_dir]
    outer += ["--dir", "/tmp", "--bind", "/proc", "/proc", "--dev", "/dev", "--",
              os.path.realpath(setpriv), f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
              "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return [*outer, *args], {"PATH": "/usr/bin:/bin"}, "bwrap"  # type: ignore[list-item]
