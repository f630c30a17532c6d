"""The MCP server of one run: the loop's tools, the task as instructions and prompt.

:func:`build_server` serves an :class:`~heuresis.agents.external.agent.ExternalAgent`: its
``tool_list`` is ``tools/list``, its ``call_tool`` answers ``tools/call``, its ``instructions``
are the server's instructions and the prompt ``task``.  Arguments are never validated here: a
call the SDK would refuse reaches the loop as it was sent; the tokens a client reports in a
call's ``_meta`` under :data:`USAGE_META` go with it.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

__all__ = ["USAGE_META", "build_server"]

#: The ``_meta`` key of a ``tools/call`` under which a client reports the tokens its model spent on the call.
USAGE_META = "heuresis/usage"
_raw_call: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar("heuresis_raw_call", default=None)
_reported: contextvars.ContextVar[Any] = contextvars.ContextVar("heuresis_reported_usage", default=None)


def build_server(agent):
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
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=agent.instructions))])

    server = Server("heuresis", version=_version(), instructions=agent.instructions, on_list_tools=list_tools,
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
