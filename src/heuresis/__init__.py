"""Heuresis: a benchmark for LLM agents that do causal discovery from data alone.

The package, by layer (lowest first; a module imports only its own layer and those below it,
which tests/test_structure.py checks):

* ``registry`` — name registries: how the config names mechanism kinds, CI tests, algorithms, agents;
  ``config.loading`` — reading config files and the schema's defaults;
* ``causal`` — graphs, metrics, mechanisms, CI tests, the algorithms (PC among them), bootstrap;
* ``artifacts`` — artifact paths, Parquet schemas and IO, provenance, lineage, failures, reports;
* ``agents.base`` and ``agents.spec`` — the agent protocol a plugin implements;
* ``harness`` — one episode: prompts, tools, budgets, the agent loop, the request log;
* ``agents`` — the agents: offline, LLM (litellm), external (MCP);
* ``stages`` — the workflow's stages, one per rule file, each with its config checks, its job
  planning and its run (``stages.jobs``: what a model-calling job asks for); ``games`` — the interventional track;
  ``view`` — the results viewer;
* ``targets`` — the paper's tables and figures, each declared once;
* ``config`` — validation of the whole config (each stage's checks) and what it may spend;
* ``cli`` — the ``heuresis`` command; ``local_server`` — the local model server.
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
