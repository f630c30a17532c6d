"""Artifact infrastructure: how every stage's results are named, written, read and accounted for.

* :mod:`~heuresis.artifacts.paths` — every artifact's path template under ``results/``;
* :mod:`~heuresis.artifacts.schemas` — the versioned Parquet schemas;
* :mod:`~heuresis.artifacts.io` — atomic, schema-checked Parquet reading and writing;
* :mod:`~heuresis.artifacts.provenance` — the provenance record every artifact carries;
* :mod:`~heuresis.artifacts.lineage` — an artifact's inputs, back to the config (``heuresis provenance``);
* :mod:`~heuresis.artifacts.integrity` — content digests of results;
* :mod:`~heuresis.artifacts.failures` — failed units, counted and retried;
* :mod:`~heuresis.artifacts.logs` — the stage logs;
* :mod:`~heuresis.artifacts.report` — tables (Parquet, Markdown, LaTeX) and figures (PDF, PNG);
* :mod:`~heuresis.artifacts.sealing` — the secrets regime: the salt and the sealed test seed.

This layer may import the causal layer, never a stage.
"""
