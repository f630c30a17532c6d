"""The report rubric (docs/games.md §5), scored by LLM judges criterion by criterion, and the judges' agreement.

A judge is an LLM agent (kind ``llm``) asked once per play, with the prompt template
``data/prompts/game_judge.txt``: the scenario's description, distortion, *intended mechanism*,
trap and optimum designs, what the agent deployed and submitted, and its report.  The judge is
not shown the Stage-2 survival, so the rubric does not echo the outcome.

The rubric (:mod:`heuresis.causal.games.rubric`, 16 points): causal reasoning — CR1 true mechanism
(0-4), CR2 trap avoidance (0-4), CR3 mechanistic depth (0-3) — then ED experimental design (0-2),
RQ reflection (0-2), DU data usage (0-1); each criterion with a one-line reason, and one
failure-mode label from :data:`FAILURE_MODES`.  The answer is read by :func:`parse_scores`
(one JSON object, or failing that ``CR1: 3 - reason`` lines); a criterion missing, not a number
or out of its range, or a label outside the list, makes the judgement ``unparsed`` (scores
null), never a clipped or zero score, and so does a prompt the judge's context window cannot
hold (the error says ``context_overflow``).  A play without a report scores 0 on every
criterion without asking (``no_report``, failure mode ``no_report``).

Agreement across judges is the intraclass correlation ICC(2,k) of Shrout & Fleiss (1979): a
two-way random-effects model (plays and judges random), absolute agreement, reliability of the
mean of the k judges — :func:`icc`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import numpy as np

from heuresis.agents.llm import repair_arguments
from heuresis.causal.games.rubric import CAUSAL, RUBRIC
from heuresis.harness.loop import Request, single_request
from heuresis.harness.prompts import render

__all__ = [
    "CRITERIA",
    "CRITERION_NAMES",
    "FAILURE_MODES",
    "ScoreError",
    "icc",
    "judge_play",
    "judge_prompt",
    "judged_view",
    "parse_scores",
]

#: Rubric criteria (their score columns) and maxima (:data:`heuresis.causal.games.rubric.RUBRIC`).
CRITERIA = {c.column: c.max for c in RUBRIC}
#: What each criterion scores (also the words a judge's answer may use for it).
CRITERION_NAMES = {c.column: c.name for c in RUBRIC}
#: Failure-mode labels a judge chooses one of (``no_report`` is given without asking).
FAILURE_MODES = {
    "none": "no major failure: the true mechanism named and the trap avoided",
    "correlational_reading": "took an observed association for a cause (armour where returned drones were hit, "
                             "a visible correlate)",
    "missed_selection_bias": "did not see that destroyed drones are missing from the observations",
    "missed_confounder": "did not see the hidden variable behind the observed associations",
    "misread_noise": "trusted noisy per-drone values over the exact counts",
    "wrong_mechanism": "names a mechanism that is not the true one",
    "no_mechanism": "names no mechanism (generic or vague statements)",
    "other": "another failure (the reasons say which)",
}


class ScoreError(ValueError):
    """A judge's answer without a readable, in-range score for every criterion (or without a known label)."""


def judge_prompt(play: Mapping, scn) -> str:
    """The judge's prompt for one play (a ``game_plays`` row) of scenario ``scn``."""
    deployed = json.loads(play.get("designs_deployed") or "[]")
    counts = json.loads(play.get("deployment_counts") or "[]")
    lines = []
    for k, d in enumerate(deployed):
        obs = f"; {counts[k][0]} flown; {counts[k][1] / counts[k][0]:.2f} returned" if k < len(counts) else ""
        lines.append(f"{k + 1}. {json.dumps(d, sort_keys=True)}{obs}")
    return render("game_judge", description=scn.spec.get("description", scn.name), bias=scn.spec["bias"],
                  mechanism=" ".join(scn.spec["intended_mechanism"].split()),
                  trap=("(none: no design of this scenario is a trap)" if scn.spec.get("trap_design") is None
                        else json.dumps(scn.spec["trap_design"], sort_keys=True)),
                  optimum=play.get("optimum_design") or "(not given)",
                  deployments="\n".join(lines) or "(none)",
                  submitted=play.get("design") if play.get("submitted") else "(none: the agent did not submit)",
                  report=(play.get("report") or "").strip(),
                  failure_modes="\n".join(f"- {k}: {v}" for k, v in FAILURE_MODES.items()))


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")


_ALIASES = {c: {c, _norm(n), _norm(f"{c} {n}")} for c, n in CRITERION_NAMES.items()}
_ALIASES["cr2"] |= {"trap"}
_ALIASES["rq"] |= {"reflection_quality"}


def _criterion(key: str) -> str | None:
    k = _norm(key)
    for c, names in _ALIASES.items():
        if k in names:
            return c
    return None


def _value(v, item: str) -> float:
    if isinstance(v, bool):
        raise ScoreError(f"{item}: not a number ({v!r})")
    if isinstance(v, str):
        m = re.match(r"\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*\d+)?\s*$", v)
        if not m:
            raise ScoreError(f"{item}: not a number ({v!r})")
        v = float(m.group(1))
    if not isinstance(v, (int, float)) or not np.isfinite(v):
        raise ScoreError(f"{item}: not a number ({v!r})")
    if not 0 <= v <= CRITERIA[item]:
        raise ScoreError(f"{item}: {v} outside 0..{CRITERIA[item]}")
    return float(v)


def _label(v) -> str:
    label = _norm(v or "")
    if label not in FAILURE_MODES:
        raise ScoreError(f"failure_mode: {v!r} is not one of {sorted(FAILURE_MODES)}")
    return label


def _from_object(obj: Mapping) -> dict | None:
    """Scores, reasons and label from one JSON object, None when it holds no criterion."""
    found: dict[str, tuple] = {}
    label = None
    for key, v in obj.items():
        if _norm(key) in ("failure_mode", "failure", "failure_label"):
            label = v
            continue
        reason_key = re.sub(r"_?reason$", "", _norm(key))
        c = _criterion(key)
        if c is None and reason_key != _norm(key):
            c2 = _criterion(reason_key)
            if c2 is not None:
                found.setdefault(c2, [None, ""])[1] = str(v)  # type: ignore[arg-type, index]
            continue
        if c is None:
            continue
        if isinstance(v, Mapping):
            sub = {_norm(k): x for k, x in v.items()}
            found.setdefault(c, [None, ""])[0] = sub.get("score", sub.get("points"))  # type: ignore[arg-type, index]
            found[c][1] = str(sub.get("reason", found[c][1]) or "")  # type: ignore[index]
            if found[c][0] is None:
                raise ScoreError(f"{c}: no score")
        else:
            found.setdefault(c, [None, ""])[0] = v  # type: ignore[arg-type, index]
    if not any(x[0] is not None for x in found.values()):
        return None
    missing = [c for c in CRITERIA if c not in found or found[c][0] is None]
    if missing:
        raise ScoreError(f"no score for {', '.join(m.upper() for m in missing)}")
    out = {c: _value(found[c][0], c) for c in CRITERIA}
    out.update({f"{c}_reason": " ".join(found[c][1].split()) for c in CRITERIA})  # type: ignore[misc]
    out["failure_mode"] = _label(label)  # type: ignore[assignment]
    return out


def parse_scores(text: str | None) -> dict:
    """Each criterion's score and reason and the failure-mode label from a judge's answer, else :class:`ScoreError`.

    Accepted: one JSON object with ``"CR1": {"score": 3, "reason": "..."}`` (or ``"CR1": 3``
    beside ``"CR1_reason"``) per criterion and ``"failure_mode"``; failing that, lines
    ``CR1: 3 - reason`` and ``failure_mode: label``.
    """
    from heuresis.stages.games.play import json_objects

    body = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S | re.I).strip()
    if not body:
        raise ScoreError("empty answer")
    for cand in reversed(json_objects(body)):
        fixed, _ = repair_arguments(cand)
        if fixed is None:
            continue
        obj = json.loads(fixed)
        if isinstance(obj, Mapping):
            out = _from_object(obj)
            if out is not None:
                return out
    out = {}
    for c in CRITERIA:   # fallback: "CR1 (true mechanism): 3/4 - names the storm" lines
        m = re.search(rf"^\W*{c}\b[^:\n]*:\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*\d+)?\s*(?:[-\u2013\u2014:]\s*(.*))?$",
                      body, re.I | re.M)
        if not m:
            raise ScoreError(f"no score for {c.upper()}")
        out[c] = _value(m.group(1), c)
        out[f"{c}_reason"] = (m.group(2) or "").strip()
    m = re.search(r"failure[ _-]?mode\W{0,5}([a-z_ ]+)", body, re.I)
    out["failure_mode"] = _label(m.group(1).strip() if m else None)
    return out


def judged_view(play: Mapping, protocol: str) -> dict:
    """The play as a judge sees it under ``protocol``: its committed report, or (``as_published``) its debrief as the report."""
    if protocol == "committed":
        return dict(play)
    return {**play, "report": play.get("debrief") or ""}


def judge_play(model, judge: str, play: Mapping, scn, protocol: str = "committed") -> dict:
    """One judgement row (``game_judgements``) of ``play`` by the LLM agent ``model``, under ``protocol``.

    ``as_published`` grades the play's debrief (written after the outcome) in place of its report
    (:func:`judged_view`); the prompt is the same.
    """
    play = judged_view(play, protocol)
    row = {"judge": judge, "protocol": protocol, "model": getattr(model, "model", None), "play_id": play["play_id"],
           "agent": play["agent"],
           "mode": play["mode"], "scenario": play["scenario"], "family": play["family"], "repeat": play["repeat"],
           "status": "ok", "error": "", **dict.fromkeys(CRITERIA), **{f"{c}_reason": "" for c in CRITERIA},
           "cr": None, "total": None, "failure_mode": None, "answer": "",
           "tokens_in": 0, "tokens_out": 0, "cost": 0.0, "latency_s": 0.0}
    if play.get("status") == "failed":   # an API or harness error: not a play, so nothing to judge
        row.update(status="play_failed", error="the play failed (API or harness error): not judged")
        return row
    if not (play.get("report") or "").strip():
        row.update(status="no_report", **dict.fromkeys(CRITERIA, 0.0), cr=0.0, total=0.0, failure_mode="no_report",
                   **{f"{c}_reason": "no report written: every criterion scores 0" for c in CRITERIA})
        return row
    messages = [{"role": "system", "content": render("game_judge_system")},
                {"role": "user", "content": judge_prompt(play, scn)}]
    ex = single_request(model, messages)
    if ex.usage is not None:   # the request's record (GAME_JUDGEMENT_REQUESTS), kept with the judgement
        keys = {k: row[k] for k in ("judge", "protocol", "play_id", "agent", "mode", "scenario", "repeat")}
        row["requests"] = [{**keys, "index": 0, **Request(0, ex.wall_s, ex.usage).row()}]
    if ex.ending:   # the prompt does not fit the judge's context: a judgement it cannot make
        row.update(status="unparsed", error=f"{ex.ending.reason}: {ex.ending}", cost=ex.cost,
                   latency_s=round(ex.wall_s, 4))
        return row
    if not ex.ok:   # recorded, never dropped; the other plays go on
        row.update(status="failed", error=f"{type(ex.error).__name__}: {ex.error}", cost=ex.cost,
                   latency_s=round(ex.wall_s, 4))
        return row
    u = ex.usage
    answer = ex.reply.message.get("content") or ""  # type: ignore[union-attr]
    row.update(answer=answer, tokens_in=u.tokens_in, tokens_out=u.tokens_out, cost=ex.cost, latency_s=u.latency_s)  # type: ignore[union-attr]
    try:
        scores = parse_scores(answer)
    except ScoreError as exc:
        row.update(status="unparsed", error=str(exc))
        return row
    row.update(scores, cr=float(sum(scores[k] for k in CAUSAL)), total=float(sum(scores[k] for k in CRITERIA)))
    return row


def icc(ratings) -> dict:
    """Intraclass correlations of an ``n targets x k raters`` matrix (Shrout & Fleiss 1979).

    Returns the mean squares and ICC(1,1), ICC(2,1), ICC(3,1), ICC(1,k), ICC(2,k), ICC(3,k).
    ICC(2,k) — two-way random effects, absolute agreement, mean of k raters — is
    ``(BMS - EMS) / (BMS + (JMS - EMS) / n)``.  Needs n >= 2 complete rows and k >= 2.

    References
    ----------
    Shrout, P. E. & Fleiss, J. L. (1979). Intraclass correlations: uses in assessing rater
    reliability. Psychological Bulletin 86(2), 420-428.
    """
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError(f"ICC needs at least 2 targets x 2 raters, got shape {x.shape}")
    if np.isnan(x).any():
        raise ValueError("ICC needs complete ratings (drop targets with a missing rating first)")
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * ((x.mean(1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(0) - grand) ** 2).sum()
    ss_total = ((x - grand) ** 2).sum()
    ss_err = ss_total - ss_rows - ss_cols
    bms = ss_rows / (n - 1)
    jms = ss_cols / (k - 1)
    ems = ss_err / ((n - 1) * (k - 1))
    wms = (ss_cols + ss_err) / (n * (k - 1))

    def ratio(num, den):
        return float(num / den) if den != 0 else float("nan")

    return {"n": n, "k": k, "BMS": float(bms), "JMS": float(jms), "EMS": float(ems), "WMS": float(wms),
            "ICC1_1": ratio(bms - wms, bms + (k - 1) * wms),
            "ICC2_1": ratio(bms - ems, bms + (k - 1) * ems + k * (jms - ems) / n),
            "ICC3_1": ratio(bms - ems, bms + (k - 1) * ems),
            "ICC1_k": ratio(bms - wms, bms),
            "ICC2_k": ratio(bms - ems, bms + (jms - ems) / n),
            "ICC3_k": ratio(bms - ems, bms)}
