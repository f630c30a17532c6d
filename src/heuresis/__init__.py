"""Heuresis: a benchmark for LLM agents that do causal discovery from data alone.

The package's folders and top-level modules, by layer (lowest first). A module imports only its
own layer and those below it; each bullet is one layer, and the names before its dash are that
layer's folders and modules (tests/test_structure.py reads this list and checks every import):

* ``registry`` — name registries: how the config names mechanism kinds, CI tests, algorithms, agents;
* ``config`` — reading and merging config files, the schema's defaults, the typed settings;
* ``causal`` — graphs, metrics, mechanisms, CI tests, the algorithms (PC among them), bootstrap,
  and the games' model (``causal.games``: hidden SCMs, scenarios, one game);
* ``artifacts`` — artifact paths, Parquet schemas and IO, provenance, lineage, failures, reports;
* ``harness`` — the agent protocol a plugin implements and its registry, and one episode: prompts,
  tools (the games' too), budgets, the agent loop, the request log, the sandbox;
* ``agents`` — the agents: offline, LLM (litellm), external (MCP), the games' offline players;
* ``stages`` — the workflow's stages, one per rule file, each with its config checks, its job
  planning and its run (``stages.jobs``: what a model-calling job asks for; ``stages.games``: the
  interventional track's plays, judgements and tables);
* ``targets``, ``view`` — the paper's tables and figures, each declared once; the results viewer;
* ``preflight`` — validation of the whole config (each stage's checks), what it may spend, and the
  workflow's plan: what each rule asks of the config (``preflight.plan``);
* ``cli``, ``local_server`` — the ``heuresis`` command (a module per group of commands); the local
  model server.  The inspect_ai tasks are a distribution of their own (``integrations/inspect``).
"""

from heuresis.causal.graph import Graph, Relation, d_separated, dag_to_cpdag, meek_closure
from heuresis.causal.metrics import adjacency_scores, nshd, score_graph, shd

__version__ = "0.1.0"

__all__ = [
    "Graph",
    "Relation",
    "__version__",
    "adjacency_scores",
    "d_separated",
    "dag_to_cpdag",
    "meek_closure",
    "nshd",
    "score_graph",
    "shd",
]
