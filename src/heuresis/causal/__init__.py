"""Causal building blocks: what the benchmark measures with, independent of files and workflow.

* :mod:`~heuresis.causal.graph` — the graph type, d-separation, CPDAGs, Meek rules;
* :mod:`~heuresis.causal.metrics` — adjacency F1, SHD;
* :mod:`~heuresis.causal.mechanisms` — the registered mechanism kinds the families draw from;
* :mod:`~heuresis.causal.grades` — the evidence grades of CI-test p-values;
* :mod:`~heuresis.causal.bootstrap` — paired bootstrap intervals over instances;
* :mod:`~heuresis.causal.networks` — public network structures (BNLearn), anonymized;
* :mod:`~heuresis.causal.foundation` — the foundation-model reference points;
* :mod:`~heuresis.causal.ci` — the registered CI tests (Fisher-z, KCI);
* :mod:`~heuresis.causal.algorithms` — the registered algorithms, PC (:mod:`~heuresis.causal.algorithms.pc`) among them.

This layer imports only :mod:`heuresis.registry` and :mod:`heuresis.config.loading` of the package.
"""
