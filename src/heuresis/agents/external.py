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
* Usage: no tokens, cost unknown (``None``; price source ``external``), the model and provider
  the config entry names, if any.

Transports: ``http`` (streamable HTTP on a loopback address only; port 0 = a free one) and
``stdio`` (the process's stdin and stdout: ``heuresis serve-episode --transport stdio``).  With
``command`` the agent starts that program once per run, with the server's URL in
:data:`URL_ENV`, a stripped environment (only the names listed in ``env`` pass through), a fresh
temporary working folder and, by default, bubblewrap isolation (:func:`command_argv`): the
program sees the system, its interpreter and the folders listed in ``expose``, never the
harness's working folder (where ``results/`` and the truth live), ``$HOME`` or ``/tmp``.
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

__all__ = ["ISOLATION", "TRANSPORTS", "URL_ENV", "ClientIdle", "ClientLeft", "ExternalAgent", "command_argv",
           "is_loopback", "wait_for_clients"]

#: Environment variable holding the MCP server's URL for the agent's command.
URL_ENV = "HEURESIS_MCP_URL"
#: Values of ``transport``.
TRANSPORTS = ("http", "stdio")
#: Values of ``isolation`` (of the agent's command): bubblewrap or refuse; bubblewrap if it works; none.
ISOLATION = ("required", "best_effort", "none")
_ENDED = "episode ended"
_raw_call: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar("heuresis_raw_call", default=None)


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
    """One ``tools/call`` waiting for its turn: name, arguments as JSON text, and where its answer goes."""

    name: Any
    arguments: str
    answer: concurrent.futures.Future


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
    expose : list of str
        Folders shown read-only to an isolated command (its own code, its environment).
    model, provider : str, optional
        What stands behind the client, for the records.
    """

    def __init__(self, name: str, *, command: Sequence[str] | None = None, transport: str = "http",
                 host: str = "127.0.0.1", port: int = 0, idle_timeout_s: float = 300.0, exit_grace_s: float = 10.0,
                 env: Sequence[str] = (), isolation: str = "required", expose: Sequence[str] = (),
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
        super().__init__(name)
        self.command = list(command) if command is not None else None
        self.transport, self.host, self.port = transport, host, int(port)
        self.idle_timeout_s, self.exit_grace_s = float(idle_timeout_s), float(exit_grace_s)
        self.env_names, self.isolation, self.expose = list(env), isolation, list(expose)
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
        return AgentReply(msg, self._usage(t0, notes))

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
        assert self._server is not None
        self._server.stop()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _usage(self, t0: float, notes: list[str]) -> Usage:
        warn = ([f"external agent {self.name!r} ran without isolation (isolation: {self.isolation})"]
                if self.command is not None and self.isolation_used == "none" else [])
        return Usage(tokens_in=0, tokens_out=0, cost=None, latency_s=round(time.monotonic() - t0, 4),
                     model=self._model, provider=self._provider, price_source="external", notes=notes, warnings=warn)

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
    async def call_tool(self, name: Any, arguments: str) -> tuple[str, bool, dict | None]:
        """Queue one call for the loop and wait for its answer: (text, is_error, structured data)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._ended:
                return f"{_ENDED}: {self._ended}", True, None
            self._calls.put(_Call(name, arguments, fut))
        return await asyncio.wrap_future(fut)

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
        # the command's server answers at an unguessable path: another local user cannot play its episode
        path = "/mcp" if self.command is None else f"/{secrets.token_urlsafe(16)}/mcp"
        self._server = _HTTP(server, self.host, self.port, path, on_delete=self.client_left)
        self._server.start()
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self._server.port}{path}"
        if self.command is None:
            self.notes.append(f"external agent: MCP over streamable HTTP at {self.url}")
            print(f"heuresis: serving the episode over MCP at {self.url}", file=sys.stderr, flush=True)
            return
        self._workdir = tempfile.mkdtemp(prefix="heuresis-agent-")
        argv, env, self.isolation_used = command_argv(self.command, self._workdir, self.isolation, self.expose,
                                                      {URL_ENV: self.url}, self.env_names)
        passed = sorted(k for k in self.env_names if k in os.environ)
        self.notes.append(f"external agent: command {json.dumps(self.command)}; isolation {self.isolation_used}; "
                          f"environment passed: {', '.join(passed) or 'none'}; MCP at {self.url}")
        self._proc = subprocess.Popen(argv, cwd=self._workdir, env=env, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
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
        text, is_error, data = await agent.call_tool(name, json.dumps({} if args is None else args))
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
        name, args = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (args is None or isinstance(args, Mapping)):
            token = _raw_call.set((name if isinstance(name, str) else json.dumps(name), args))
            try:
                return await call_next(replace(ctx, params={**params, "name": "?", "arguments": {}}))
            finally:
                _raw_call.reset(token)
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


class _HTTP(_Transport):
    """Streamable HTTP on a loopback socket, served by uvicorn in a daemon thread.

    ``on_delete`` is called after a ``DELETE`` of the endpoint: a client of the handshake
    protocol (2025-11-25 and before) ending its session.  The per-request protocol (2026-07-28)
    has no session, so its client's leaving is seen only by the idle timeout or its command's exit.
    """

    def __init__(self, server, host: str, port: int, path: str = "/mcp", on_delete=None) -> None:
        import uvicorn

        if not is_loopback(host):
            raise ValueError(f"the MCP server listens on loopback only, not {host!r}")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.port = self.sock.getsockname()[1]
        mcp_app = server.streamable_http_app(host=host, streamable_http_path=path)

        async def app(scope, receive, send) -> None:
            await mcp_app(scope, receive, send)
            # a client of the handshake protocol ends its MCP session with a DELETE: it left
            if on_delete is not None and scope["type"] == "http" and scope["method"] == "DELETE" \
                    and scope["path"] == path:
                on_delete()

        self.uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2))
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
def command_argv(command: Sequence[str], workdir: str, isolation: str, expose: Sequence[str] = (),
                 extra_env: Mapping[str, str] | None = None,
                 env_names: Sequence[str] = ()) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and isolation (``bwrap`` or ``none``) of an agent's command.

    The environment holds only ``PATH``, ``HOME`` and ``TMPDIR`` (the work folder), ``LANG``,
    ``extra_env`` and the harness's variables named in ``env_names``.  Under bubblewrap the
    command sees, read-only, ``/usr`` (and the ``/bin``, ``/lib`` links), ``/etc``, the trees of
    its interpreter (the harness's environment for ``python``, with this package hidden) and
    ``expose``; read-write only the work folder; its own ``/proc``, ``/dev`` and an empty
    ``/tmp``; the host's network (it reaches the server on loopback and, if it wants, its model).
    A root harness never runs the command as root: an outer bwrap and ``setpriv`` drop to
    :data:`~heuresis.harness.sandbox.SANDBOX_UID` first.  ``isolation`` ``required`` raises
    :class:`~heuresis.harness.sandbox.IsolationUnavailable` where bubblewrap does not work;
    ``best_effort`` then runs without it.
    """
    from heuresis.harness.sandbox import (
        SANDBOX_UID,
        IsolationUnavailable,
        bwrap_path,
        hidden_inside,
        isolation_status,
        package_masks,
        parent_dirs,
        python_trees,
        system_args,
    )

    argv = list(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", **{k: os.environ[k] for k in env_names if k in os.environ},
           **dict(extra_env or {})}
    # a command that cannot start is the harness's failure (recorded, retried), not the agent's early exit
    if shutil.which(argv[0], path=env["PATH"]) is None:
        raise FileNotFoundError(f"the external agent's command {argv[0]!r} is not an executable on PATH")
    missing = [p for p in expose if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"the external agent's expose paths do not exist: {missing}")
    if isolation == "none":
        return argv, env, "none"
    ok, why = isolation_status()
    if not ok:
        if isolation == "required":
            raise IsolationUnavailable(f"the external agent's isolation is 'required' but bubblewrap does not work "
                                       f"here: {why}; set the agent's isolation to 'best_effort' or 'none' only for "
                                       "a trusted agent (docs/mcp.md)")
        return argv, env, "none"
    exe = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    trees = python_trees() if os.path.realpath(exe) == os.path.realpath(sys.executable) else \
        [os.path.dirname(os.path.realpath(exe))]
    trees = [t for t in trees if not t.startswith("/usr/")]
    for t in [*trees, *expose]:
        why = hidden_inside(os.path.realpath(t))
        if why:
            raise IsolationUnavailable(f"the external agent's command would see what must stay hidden: {why}")
    bwrap = os.path.realpath(bwrap_path())
    shown = sorted({os.path.realpath(p) for p in [*trees, *expose]})
    system = system_args(whole_etc=True)
    views = [*parent_dirs([*shown, workdir])]
    for p in shown:
        views += ["--ro-bind", p, p]
    args = [bwrap, "--unshare-all", "--share-net", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", *system, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            *views, *package_masks(trees), "--bind", workdir, workdir, "--chdir", workdir, "--clearenv"]
    for k, v in env.items():
        args += ["--setenv", k, v]
    args += ["--", *argv]
    if os.geteuid() != 0:
        return args, {"PATH": "/usr/bin:/bin"}, "bwrap"
    # a root harness: never run the command as root. As the code tool's sandbox does (docs/sandbox.md), an outer
    # bwrap shows the same trees, setpriv drops to the unprivileged uid, and the bwrap above runs as that user
    setpriv = shutil.which("setpriv")
    if setpriv is None or not os.path.realpath(setpriv).startswith("/usr/"):
        raise IsolationUnavailable("setpriv (util-linux) not found under /usr: needed to leave root before the "
                                   "external agent's command")
    os.chown(workdir, SANDBOX_UID, SANDBOX_UID)
    outer = [bwrap, "--unshare-pid", "--die-with-parent", *system, *views]
    if not bwrap.startswith("/usr/"):
        outer += [*parent_dirs([bwrap]), "--ro-bind", bwrap, bwrap]
    outer += ["--bind", workdir, workdir, "--dir", "/tmp", "--bind", "/proc", "/proc", "--dev", "/dev", "--",
              os.path.realpath(setpriv), f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
              "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return [*outer, *args], {"PATH": "/usr/bin:/bin"}, "bwrap"
