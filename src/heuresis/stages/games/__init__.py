"""The interventional track's stage (docs/games.md, ``rules/games.smk``).

* :mod:`~heuresis.stages.games.workflow` — the games' config section, its checks and the jobs it plans;
* :mod:`~heuresis.stages.games.play` — the play loop and its records;
* :mod:`~heuresis.stages.games.judge` — the judges' panel and its grades;
* :mod:`~heuresis.stages.games.variants` — the disclosure and protocol variants of a scenario;
* :mod:`~heuresis.stages.games.analysis` — the games' tables and figures.

The model they play (scenarios, hidden SCMs, the game) is :mod:`heuresis.causal.games`.
"""
