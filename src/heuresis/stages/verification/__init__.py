"""Instrument verification (docs/design.md §8, Table 5): every instrument checked against an independent truth.

Each check is one registered function ``check(settings, workers=1, log=None) -> CheckResult``.
``settings`` is the config slice of that check (:func:`check_settings`): the scale name and its
sizes, the seed, alpha, the tolerances and — for checks that need data — the instance spec of
every family.  A result carries the number of cases, the number of disagreements with the
reference, pass/fail, the tolerance, a one-line finding, and up to ``max_examples`` examples of
disagreements (written as JSON files next to the record).

* :mod:`~heuresis.stages.verification.base` — the record (:class:`CheckResult`), the registry
  (:data:`CHECKS`), the examples and the random cases every check shares;
* :mod:`~heuresis.stages.verification.dsep` — ``dsep``: d-separation three ways;
* :mod:`~heuresis.stages.verification.cpdag` — ``cpdag_bruteforce`` (every labeled DAG up to
  ``max_d`` nodes, :func:`enumerate_dags`) and ``cpdag_causallearn``: DAG -> CPDAG;
* :mod:`~heuresis.stages.verification.pc` — ``oracle_pc`` and ``pc_vs_causallearn``: PC;
* :mod:`~heuresis.stages.verification.metrics` — ``shd_gadjid``: SHD and nSHD;
* :mod:`~heuresis.stages.verification.ci` — ``kci_causallearn``: KCI p-values;
* :mod:`~heuresis.stages.verification.invariance` — ``invariance_no_repair`` and
  ``invariance_relabel``: PC against its own output;
* :mod:`~heuresis.stages.verification.determinism` — ``determinism``: seeded runs in fresh
  processes across BLAS thread counts and hash seeds;
* :mod:`~heuresis.stages.verification.runner` — :func:`run_check`, :func:`write_check`;
* :mod:`~heuresis.stages.verification.tables` — Table 5 (:func:`read_checks`, :func:`table5`,
  :func:`write_checks_table`);
* :mod:`~heuresis.stages.verification.settings` — :func:`check_settings` and the section's
  :func:`config_errors`.

Each check module's docstring says what counts as a disagreement.  Importing this package
registers the checks in the order below, which is the row order of Table 5 and of the workflow's
check jobs.
"""

from heuresis.stages.verification.base import CHECKS, CheckResult

# isort: off
# The order of these imports is the order of registration (list(CHECKS), Table 5's rows).
from heuresis.stages.verification.dsep import check_dsep
from heuresis.stages.verification.cpdag import (
    A003024,
    ESSENTIAL_GRAPHS,
    check_cpdag_bruteforce,
    check_cpdag_causallearn,
    enumerate_dags,
)
from heuresis.stages.verification.pc import check_oracle_pc, check_pc_vs_causallearn
from heuresis.stages.verification.metrics import check_shd_gadjid
from heuresis.stages.verification.ci import check_kci_causallearn
from heuresis.stages.verification.invariance import check_invariance_no_repair, check_invariance_relabel
from heuresis.stages.verification.determinism import check_determinism
# isort: on

from heuresis.stages.verification.runner import run_check, write_check
from heuresis.stages.verification.settings import check_settings, config_errors
from heuresis.stages.verification.tables import read_checks, table5, write_checks_table

__all__ = [
    "A003024",
    "CHECKS",
    "ESSENTIAL_GRAPHS",
    "CheckResult",
    "check_cpdag_bruteforce",
    "check_cpdag_causallearn",
    "check_determinism",
    "check_dsep",
    "check_invariance_no_repair",
    "check_invariance_relabel",
    "check_kci_causallearn",
    "check_oracle_pc",
    "check_pc_vs_causallearn",
    "check_settings",
    "check_shd_gadjid",
    "config_errors",
    "enumerate_dags",
    "read_checks",
    "run_check",
    "table5",
    "write_check",
    "write_checks_table",
]
