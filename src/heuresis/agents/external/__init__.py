"""An agent outside the harness, served the run's tools over MCP (docs/mcp.md): kind ``external``.

The harness keeps its one loop (:class:`heuresis.harness.loop.AgentLoop`: the episode's or the
game's tools, masking, grades, budgets, last turn, recording); this agent is the loop's
``respond``.  Each ``respond`` blocks until the MCP client makes its next ``tools/call`` and
returns it as an assistant message with exactly that one tool call; the loop executes it and the
next ``respond`` (or the loop's :meth:`~heuresis.harness.protocol.Agent.end`) hands the text that
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
  ``idle_timeout_s`` (:class:`ClientIdle`); both are :class:`~heuresis.harness.protocol.EpisodeEnd`,
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
server's Unix socket) -- with ``network: {allow: [host:port, ...]}`` also those pairs through the
harness's proxy (:mod:`.proxy`) --, unless ``network: true`` opts into the host's.

The package, one job per module:

* :mod:`.agent` — the kind (:class:`ExternalAgent`): the loop's side and the client's side of each
  turn, the run's end, the command started and stopped;
* :mod:`.server` — the low-level MCP server of one run (:func:`build_server`);
* :mod:`.transport` — streamable HTTP and stdio, with the server's limits (the ``MAX_*`` constants);
* :mod:`.command` — the command's isolation and command line (:func:`command_argv`), its limits
  (:class:`CommandLimits`) and the reading of its output;
* :mod:`.proxy` — the harness's HTTP proxy of an allow-listed network (:class:`~.proxy.AllowProxy`).
"""

from heuresis.agents.external.agent import (
    ISOLATION,
    MAX_ARGUMENT_CHARS,
    TRANSPORTS,
    URL_ENV,
    ClientIdle,
    ClientLeft,
    ExternalAgent,
    wait_for_clients,
)
from heuresis.agents.external.command import (
    INNER_PORT,
    OUTPUT_KEEP,
    OUTPUT_READ_MAX,
    PROXY_PORT,
    WORK_DIR,
    CommandLimits,
    command_argv,
    command_isolation,
    expose_problem,
)
from heuresis.agents.external.server import USAGE_META, build_server
from heuresis.agents.external.transport import MAX_BODY_BYTES, MAX_CONNECTIONS, is_loopback

__all__ = ["INNER_PORT", "ISOLATION", "MAX_ARGUMENT_CHARS", "MAX_BODY_BYTES", "MAX_CONNECTIONS", "OUTPUT_KEEP",
           "OUTPUT_READ_MAX", "PROXY_PORT", "TRANSPORTS", "URL_ENV", "USAGE_META", "WORK_DIR", "ClientIdle", "ClientLeft",
           "CommandLimits", "ExternalAgent", "build_server", "command_argv", "command_isolation", "expose_problem",
           "is_loopback", "wait_for_clients"]
