"""The paper's tables and figures, each declared once (:mod:`~heuresis.targets.registry`).

* :mod:`~heuresis.targets.table1` — Table 1, from its data file;
* :mod:`~heuresis.targets.published` — the published Table 2, beside ours.
"""
