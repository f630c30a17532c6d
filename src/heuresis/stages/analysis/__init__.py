"""Analysis stage (docs/design.md §6-7): per-episode scores, then Tables 4, 6-10, 12, 13 and Figures 6, 7, 9.

* :mod:`heuresis.stages.analysis.scores` — one row per episode (:data:`heuresis.artifacts.schemas.EPISODE_SCORES`):
  scores, gains, drill-down against PC-KCI's deletion log, behaviour, trace attribution;
* :mod:`heuresis.stages.analysis.tables` — the tables, with paired bootstrap intervals over instances;
* :mod:`heuresis.stages.analysis.figures` — the figures;
* :mod:`heuresis.stages.analysis.leaderboard` — the leaderboard, its cost and spend figures, several runs merged.
"""

from heuresis.stages.analysis.scores import (
                                      DrillDown,
                                      drill_down,
                                      load_episode_scores,
                                      merge_by_k,
                                      score_episodes,
                                      unsupported,
                                      write_episode_scores,
)

__all__ = [
                                      "DrillDown",
                                      "drill_down",
                                      "load_episode_scores",
                                      "merge_by_k",
                                      "score_episodes",
                                      "unsupported",
                                      "write_episode_scores",
]
