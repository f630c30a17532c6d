"""The report rubric (docs/games.md §5), scored by LLM judges, and the judges' agreement.

A judge is an LLM agent (kind ``llm``) asked once per play, with the prompt template
``data/prompts/game_judge.txt``: the scenario's description, distortion, *intended mechanism*,
trap and optimum designs, what the agent deployed and submitted, and its report.  The judge is
not shown the Stage-2 survival, so the rubric does not echo the outcome.  Its answer is read by
:func:`parse_scores` (one JSON object, or failing that ``name: value`` lines); a score outside
its range or a missing item makes the judgement ``unparsed`` (scores null), never a clipped or
zero score, and so does a prompt the judge's context window cannot hold (the error says
``context_overflow``).  A play without a report scores 0 without asking (``no_report``).

Rubric (16 points): causal reasoning 11, experimental design 2, reflection 2, data usage 1.

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
from heuresis.harness.loop import Request, single_request
from heuresis.harness.prompts import render

__all__ = ["RUBRIC", "ScoreError", "icc", "judge_play", "judge_prompt", "parse_scores"]

#: Rubric items and their maxima (docs/games.md §5).
RUBRIC = {"causal_reasoning": 11, "experimental_design": 2, "reflection": 2, "data_usage": 1}
RUBRIC_MAX = sum(RUBRIC.values())


class ScoreError(ValueError):
    """A judge's answer without a readable, in-range score for every rubric item."""


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
                  trap=json.dumps(scn.spec["trap_design"], sort_keys=True),
                  optimum=play.get("optimum_design") or "(not given)",
                  deployments="\n".join(lines) or "(none)",
                  submitted=play.get("design") if play.get("submitted") else "(none: the agent did not submit)",
                  report=(play.get("report") or "").strip())


def _norm(key: str) -> str:
    return re.sub(r"[^a-z]+", "_", str(key).lower()).strip("_")


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
    if not 0 <= v <= RUBRIC[item]:
        raise ScoreError(f"{item}: {v} outside 0..{RUBRIC[item]}")
    return float(v)


def parse_scores(text: str | None) -> dict:
    """Rubric scores and rationale from a judge's answer, else :class:`ScoreError`."""
    from heuresis.games.play import json_objects

    body = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S | re.I).strip()
    if not body:
        raise ScoreError("empty answer")
    for cand in reversed(json_objects(body)):
        fixed, _ = repair_arguments(cand)
        if fixed is None:
            continue
        obj = {_norm(k): v for k, v in json.loads(fixed).items()}
        if set(RUBRIC) & set(obj):
            missing = [k for k in RUBRIC if k not in obj]
            if missing:
                raise ScoreError(f"no score for {', '.join(missing)}")
            out = {k: _value(obj[k], k) for k in RUBRIC}
            out["rationale"] = str(obj.get("rationale", ""))
            return out
    out = {}
    for item in RUBRIC:   # fallback: "Causal reasoning: 7/11" lines
        pat = item.replace("_", r"[ _-]?")
        m = re.search(rf"{pat}\W{{0,5}}(-?\d+(?:\.\d+)?)", body, re.I)
        if not m:
            raise ScoreError(f"no score for {item}")
        out[item] = _value(m.group(1), item)
    out["rationale"] = ""
    return out


def judge_play(model, judge: str, play: Mapping, scn) -> dict:
    """One judgement row (``game_judgements``) of ``play`` by the LLM agent ``model``."""
    row = {"judge": judge, "model": getattr(model, "model", None), "play_id": play["play_id"], "agent": play["agent"],
           "mode": play["mode"], "scenario": play["scenario"], "family": play["family"], "repeat": play["repeat"],
           "status": "ok", "error": "", **dict.fromkeys(RUBRIC), "total": None, "rationale": "", "answer": "",
           "tokens_in": 0, "tokens_out": 0, "cost": 0.0, "latency_s": 0.0}
    if play.get("status") == "failed":   # an API or harness error: not a play, so nothing to judge
        row.update(status="play_failed", rationale="the play failed (API or harness error): not judged")
        return row
    if not (play.get("report") or "").strip():
        row.update(status="no_report", **dict.fromkeys(RUBRIC, 0.0), total=0.0,
                   rationale="no report written: every rubric item scores 0")
        return row
    messages = [{"role": "system", "content": render("game_judge_system")},
                {"role": "user", "content": judge_prompt(play, scn)}]
    ex = single_request(model, messages)
    if ex.usage is not None:   # the request's record (GAME_JUDGEMENT_REQUESTS), kept with the judgement
        keys = {k: row[k] for k in ("judge", "play_id", "agent", "mode", "scenario", "repeat")}
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
    answer = ex.reply.message.get("content") or ""
    row.update(answer=answer, tokens_in=u.tokens_in, tokens_out=u.tokens_out, cost=ex.cost, latency_s=u.latency_s)
    try:
        scores = parse_scores(answer)
    except ScoreError as exc:
        row.update(status="unparsed", error=str(exc))
        return row
    row.update(scores, total=float(sum(scores[k] for k in RUBRIC)))
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
