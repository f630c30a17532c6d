"""The workflow's stages, one module (or package) per rule file under ``rules/``.

* :mod:`~heuresis.stages.instances` — anonymous simulated instances and their hidden truth;
* :mod:`~heuresis.stages.references` — the reference algorithm sweeps;
* :mod:`~heuresis.stages.headroom` — BCA (global and per family), the oracle, the headrooms;
  :mod:`~heuresis.stages.headroom_targets` builds Tables 2, 3, 11 and Figure 1c from them;
* :mod:`~heuresis.stages.verification` — the instrument checks and Table 5;
* :mod:`~heuresis.stages.episodes` — agent episodes, sharded;
* :mod:`~heuresis.stages.leakage` — the leakage probe and Figure 1a;
* :mod:`~heuresis.stages.saturation` — public network structures and Figure 1b;
* :mod:`~heuresis.stages.repairs` — scripted repairs of PC-KCI and Figure 8;
* :mod:`~heuresis.stages.analysis` — episode scores, the analysis tables and figures, the leaderboard;
* :mod:`~heuresis.stages.bundle` — a run's episode record packed with digests, and its check
  (``heuresis bundle``, ``heuresis verify-bundle``; no rule of its own).

Each stage module checks its own config section (``config_errors``). Stages may import the causal
and artifact layers, the harness and the agents; never the targets registry, the config
validation or the CLI.
"""
