"""A minimal MCP client of a Heuresis episode (docs/mcp.md), written with the official ``mcp`` SDK.

It stands for your agent: it reads the task (the server's instructions), lists the tools, runs
the first masked algorithm, adopts its graph, looks at it, and submits it.  Replace ``decide``
with your agent (an LLM behind any framework that speaks MCP).

Two ways to run it:

* as the command of a config entry ``{kind: external, command: [python, /abs/path/mcp_client.py]}``:
  the harness starts it once per episode with the server's URL in ``HEURESIS_MCP_URL``;
* by hand over stdio: ``python examples/mcp_client.py heuresis serve-episode --condition ...
  --instance ...`` starts the server as its child process.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def decide(client: Client) -> None:
    """The agent: a few tool calls, then submit (every call is one turn of the episode)."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    print(f"task: {len(client.instructions or '')} characters; tools: {', '.join(sorted(tools))}", file=sys.stderr)
    first = tools["run_algorithm"].input_schema["properties"]["algorithm"]["enum"][0]   # masked: algorithm_A
    for name, args in (("run_algorithm", {"algorithm": first, "adopt": True}), ("view_graph", {})):
        result = await client.call_tool(name, args)
        print(result.content[0].text, file=sys.stderr)
        if "last turn" in result.content[0].text.lower():   # the budgets ran out: only submit is left
            break
    final = await client.call_tool("submit", {})
    print(final.content[0].text, file=sys.stderr)


async def main() -> None:
    url = os.environ.get("HEURESIS_MCP_URL")
    if url:
        server = url
    elif len(sys.argv) > 1:
        server = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    else:
        sys.exit("usage: mcp_client.py SERVER-COMMAND... (or set HEURESIS_MCP_URL)")
    async with Client(server) as client:
        await decide(client)


if __name__ == "__main__":
    asyncio.run(main())
