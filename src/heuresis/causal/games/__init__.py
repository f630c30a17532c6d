"""The interventional track's model (docs/games.md): drone-design games over hidden SCMs.

* :mod:`~heuresis.causal.games.scenario` — scenario files (``config/games/*.yaml``), validation, the
  enforced design space;
* :mod:`~heuresis.causal.games.design` — designs, the DEF budget and the lattice of designs;
* :mod:`~heuresis.causal.games.scm` — the hidden SCMs, vectorized over drones and designs;
* :mod:`~heuresis.causal.games.causalgame` — CausalGame's scenarios, their SCMs and what their agent sees;
* :mod:`~heuresis.causal.games.game` — one play: history, Stage-1 budget, one Stage-2 submission, report;
* :mod:`~heuresis.causal.games.references` — optimum by common-random-number search, verification on
  fresh fleets, trap and standard survival, thresholds;
* :mod:`~heuresis.causal.games.reading` — the correlational reading of observed drones (the trap).

The game tools are the harness's (:mod:`heuresis.harness.game_tools`), the offline players are agents
(:mod:`heuresis.agents.players`), and the plays, judgements and tables are a stage
(:mod:`heuresis.stages.games`).
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
