"""Agents (docs/design.md §5.5): the interface, its registry, and the offline agents.

``make_agent(name, spec, algorithm_map=...)`` builds an agent from its config entry
(``{kind: ..., **params}``).  Importing this package registers every built-in kind, the games'
offline players included, so that a plugin's kind can be checked against all of them.
"""

from . import external, llm, offline  # noqa: F401  (registration; litellm and the MCP SDK are imported on first use)
from .base import AGENTS, Agent, AgentReply, Usage, make_agent, register_agent, tool_call

__all__ = ["AGENTS", "Agent", "AgentReply", "Usage", "make_agent", "register_agent", "tool_call"]

# the games' offline players register too; imported last, as they import .base
from heuresis.games import agents as _game_players  # noqa: F401
