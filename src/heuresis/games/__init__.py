"""The interventional track (docs/games.md): drone-design games over hidden SCMs.

* :mod:`~heuresis.games.scenario` — scenario files (``config/games/*.yaml``), validation, the
  enforced design space;
* :mod:`~heuresis.games.scm` — the three families' hidden SCMs, vectorized over drones and designs;
* :mod:`~heuresis.games.game` — one play: history, Stage-1 budget, one Stage-2 submission, report;
* :mod:`~heuresis.games.references` — optimum by common-random-number search, verification on
  fresh fleets, trap and standard survival, thresholds;
* :mod:`~heuresis.games.reading` — the correlational reading of observed drones (the trap);
* :mod:`~heuresis.games.tools`, :mod:`~heuresis.games.play` — the game tools through the agent
  interface, the play loop and its records;
* :mod:`~heuresis.games.agents` — offline agents: random, greedy, bandit, mechanism-aware, trap-follower.
"""

from .game import Game, GameError
from .scenario import DesignError, DesignSpace, Scenario, ScenarioError, load_scenario, load_scenarios

__all__ = [
           "DesignError",
           "DesignSpace",
           "Game",
           "GameError",
           "Scenario",
           "ScenarioError",
           "load_scenario",
           "load_scenarios",
]
