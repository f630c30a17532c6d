"""The CI-test check: our KCI p-values against causal-learn's.

``kci_causallearn``
    Our KCI against causal-learn's ``CIT(data, "kci")`` on random queries over generated
    instances: ``|p - p_cl| <= tolerances.kci_pvalue`` and no verdict flip at alpha.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from heuresis.stages.verification.base import (
    CheckResult,
    Log,
    check_start,
    generated_instances,
    instance_size,
    make_result,
    quiet_blas,
    random_queries,
    register,
)

__all__ = ["check_kci_causallearn"]


# --- KCI against causal-learn --------------------------------------------------------------------------------
@register("kci_causallearn", "KCI p-values", "causal-learn CIT(data, 'kci')", uses_instances=True)
def check_kci_causallearn(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check our KCI p-values against causal-learn's on random queries over generated instances.

    See the module docstring for what counts as a disagreement.
    """
    from causallearn.utils.cit import CIT

    from heuresis.causal.ci import make_ci_test

    sz, rng, ex = check_start(settings)
    alpha = float(settings["alpha"])
    tol = float(settings["tolerances"]["kci_pvalue"])
    n = flips = 0
    worst = 0.0
    for inst in generated_instances(settings, sz["instances"]):
        X = inst.data
        ours = make_ci_test("kci", X)
        with quiet_blas(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = CIT(X, "kci")
            for x, y, S in random_queries(rng, X.shape[1], sz["tests"], sz["max_cond"]):
                p_ours, p_ref = float(ours.pvalue(x, y, S)), float(ref(x, y, S))
                diff = abs(p_ours - p_ref)
                worst = max(worst, diff)
                flip = (p_ours > alpha) != (p_ref > alpha)
                flips += flip
                n += 1
                if diff > tol or flip:
                    ex.add(dict(instance=inst.id, x=f"X{x + 1}", y=f"X{y + 1}", S=[f"X{s + 1}" for s in S],
                                ours=p_ours, causallearn=p_ref, abs_difference=diff, verdict_flip=bool(flip)))
    return make_result(settings, n_cases=n, examples=ex, tolerance=f"p within {tol:g}; no verdict flip",
                   scale_description=(f"{sz['tests']} random tests (set size up to {sz['max_cond']}) on {sz['instances']} "
                                      f"instance(s) per family ({instance_size(settings)})"),
                   finding=f"largest p difference {worst:.1e}; {flips} verdict flips at alpha = {alpha:g}",
                   details={"max_abs_difference": worst, "verdict_flips": flips})
