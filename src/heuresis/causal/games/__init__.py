"""The interventional track's model (docs/games.md): drone-design games over hidden SCMs.

* :mod:`~heuresis.causal.games.scenario` — scenario files (``config/games/causalgame/*.yaml``), loaded by
  name, their ablations;
* :mod:`~heuresis.causal.games.design` — designs, the DEF budget and the trap predicate;
* :mod:`~heuresis.causal.games.causalgame` — CausalGame's scenarios, their SCMs (simulated fleets) and what
  their agent sees;
* :mod:`~heuresis.causal.games.exact`, :mod:`~heuresis.causal.games.exact_integer` — exact survival and the
  optimum over the lattice and over the full integer lattice;
* :mod:`~heuresis.causal.games.game` — one play: history, Stage-1 budget, one Stage-2 submission, report;
* :mod:`~heuresis.causal.games.references` — the exact optimum, trap and standard, flown on fresh fleets,
  and the published thresholds;
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
