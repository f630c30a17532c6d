"""Agents (docs/design.md §5.5): the offline agents, the LLM agent, external agents and the games' players.

The protocol they implement and its registry are the harness's (:mod:`heuresis.harness.protocol`);
``make_agent(name, spec, algorithm_map=...)`` builds an agent from its config entry
(``{kind: ..., **params}``) and is re-exported here with the other functions that resolve a
kind (``agent_class``, ``check_agent``, ``agent_origin``).  Importing this package registers every
built-in kind, the games' offline players (:mod:`.players`) included, so code above this layer
resolves kinds through it: the protocol's registry alone holds only what has been imported.
"""

from heuresis.harness.protocol import (
    AGENTS,
    Agent,
    AgentReply,
    Usage,
    agent_class,
    agent_origin,
    check_agent,
    make_agent,
    register_agent,
    tool_call,
)

from . import external, inspect_model, llm, offline, players  # noqa: F401  (registration; litellm, the MCP SDK and inspect_ai are imported on first use)

__all__ = ["AGENTS", "Agent", "AgentReply", "Usage", "agent_class", "agent_origin", "check_agent", "make_agent",
           "register_agent", "tool_call"]
