"""The agent harness (docs/design.md §5): conditions, budgets, tools, the agent loop, scoring.

Also the tools' structured results, the agent loop (:mod:`.loop`, shared with the games' agentic mode),
episodes and their scoring (:mod:`.scoring`), the parser of submitted edge lists, prompt templates
and the code tool's sandbox.
"""

from .budgets import Budgets, BudgetSettings
from .conditions import Condition, expand_conditions
from .parse import ParseError, parse_edge_list

__all__ = ["BudgetSettings", "Budgets", "Condition", "ParseError", "expand_conditions", "parse_edge_list"]
