"""Two runs side by side (``heuresis view RESULTS_A RESULTS_B``): episodes paired, deltas per condition.

An episode of run A and one of run B form a pair when they share agent, condition, family, split
and instance (the same task given to the same agent twice, e.g. before and after a model update).
The index shows, per agent and condition, the pairs and the episodes left unpaired, the failed
episodes of each run (a failed episode has no F1: its pair is counted as failed, never scored),
the mean F1 of A and of B over the pairs both finished, their mean difference B − A with a 95 %
paired bootstrap interval (:data:`BOOTSTRAP_RESAMPLES` resamples of the pairs, seed
:data:`BOOTSTRAP_SEED`, both shown on the page), and wins, losses and ties; then every pair, each
linking to its side-by-side page (:meth:`Site.side_by_side`). Each run's own pages are under
``a/`` and ``b/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from heuresis.view.pages import NotFound, Page, Site, html_page, url_name
from heuresis.view.run import number

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "PAIR_KEY", "RunDiff"]

#: What makes two episodes of two runs one pair.
PAIR_KEY = ("agent", "condition_id", "family", "split", "instance")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
#: the two runs' prefixes in the site and their labels
SIDES = ("a", "b")


def _key(row) -> tuple:
    return tuple(int(row[k]) if k == "instance" else row[k] for k in PAIR_KEY)


class RunDiff:
    """The pages comparing two runs; :meth:`page` renders one path, :meth:`paths` lists them all."""

    live = False

    def __init__(self, a: str | Path, b: str | Path):
        self.sites = [Site(a), Site(b)]
        self.env = self.sites[0].env
        self.names = [str(a), str(b)]

    def refresh(self) -> bool:
        """Two finished runs: nothing to follow."""
        return False

    # --- pairs -----------------------------------------------------------------------------------
    def pairs(self) -> list[dict]:
        """Every pair: its key, each side's episode id, status, F1, and the difference B − A (None unless both have F1)."""
        by = [{_key(r): eid for eid, r in s.run.episodes.items()} for s in self.sites]
        out = []
        for key in sorted(set(by[0]) & set(by[1])):
            ra, rb = (s.run.episodes[b[key]] for s, b in zip(self.sites, by))
            fa, fb = number(ra.get("f1")), number(rb.get("f1"))
            ok = ra["status"] == "ok" and rb["status"] == "ok" and fa is not None and fb is not None
            out.append({**dict(zip(PAIR_KEY, key)), "eid_a": by[0][key], "eid_b": by[1][key],
                        "status_a": ra["status"], "status_b": rb["status"], "f1_a": fa, "f1_b": fb,
                        "delta": fb - fa if ok and fa is not None and fb is not None else None,
                        "url": self.pair_path(key)})
        return out

    def unpaired(self) -> list[dict[tuple[str, str], int]]:
        """Per side, the episodes the other run has no pair for, counted per (agent, condition)."""
        keys = [{_key(r) for r in s.run.episodes.values()} for s in self.sites]
        out = []
        for mine, other in ((keys[0], keys[1]), (keys[1], keys[0])):
            counts: dict[tuple[str, str], int] = {}
            for k in mine - other:
                counts[(k[0], k[1])] = counts.get((k[0], k[1]), 0) + 1
            out.append(counts)
        return out

    def summary(self, pairs: list[dict] | None = None) -> list[dict]:
        """Per (agent, condition): pairs, unpaired, failed, mean F1 of each side, mean delta and its interval, wins."""
        pairs = self.pairs() if pairs is None else pairs
        only = self.unpaired()
        groups: dict[tuple[str, str], list[dict]] = {}
        for p in pairs:
            groups.setdefault((p["agent"], p["condition_id"]), []).append(p)
        for side in only:
            for g in side:
                groups.setdefault(g, [])
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        rows = []
        for (agent, cond), ps in sorted(groups.items()):
            done = [p for p in ps if p["delta"] is not None]
            d = np.array([p["delta"] for p in done], dtype=float)
            lo = hi = None
            if len(d) >= 2:
                means = d[rng.integers(0, len(d), size=(BOOTSTRAP_RESAMPLES, len(d)))].mean(axis=1)
                lo, hi = (float(x) for x in np.percentile(means, [2.5, 97.5]))
            rows.append({"agent": agent, "condition_id": cond, "pairs": len(ps), "scored": len(done),
                         "only_a": only[0].get((agent, cond), 0), "only_b": only[1].get((agent, cond), 0),
                         "failed_a": sum(p["status_a"] != "ok" for p in ps),
                         "failed_b": sum(p["status_b"] != "ok" for p in ps),
                         "f1_a": float(np.mean([p["f1_a"] for p in done])) if done else None,
                         "f1_b": float(np.mean([p["f1_b"] for p in done])) if done else None,
                         "delta": float(d.mean()) if len(d) else None, "lo": lo, "hi": hi,
                         "wins": int((d > 0).sum()), "losses": int((d < 0).sum()), "ties": int((d == 0).sum())})
        return rows

    @staticmethod
    def pair_path(key: tuple) -> str:
        """The side-by-side page of a pair."""
        agent, cond, family, split, instance = key
        return f"pairs/{url_name(agent)}/{url_name(cond)}/{url_name(family)}/{url_name(split)}/{int(instance):04d}.html"

    # --- routing -----------------------------------------------------------------------------------
    def paths(self) -> Iterator[str]:
        """Every page path (what the export writes): the comparison, each pair, each run's own pages."""
        yield from ("index.html", "robots.txt", "favicon.ico")
        yield from (p for p in self.sites[0].paths() if p.startswith("static/"))
        for pair in self.pairs():
            yield pair["url"]
        for side, site in zip(SIDES, self.sites):
            for p in site.paths():
                if p not in ("robots.txt", "favicon.ico"):
                    yield f"{side}/{p}"

    def page(self, path: str) -> Page:
        """Render the page at ``path``; :class:`NotFound` when there is none."""
        path = path.lstrip("/") or "index.html"
        if path == "index.html":
            return html_page(self.index())
        if path in ("robots.txt", "favicon.ico") or path.startswith("static/"):
            return self.sites[0].page(path)
        head, _, rest = path.partition("/")
        if head in SIDES and rest:
            return self.sites[SIDES.index(head)].page(rest)
        if head == "pairs" and path.endswith(".html"):
            parts = [unquote(x) for x in path[len("pairs/"):-len(".html")].split("/")]
            if len(parts) == 5 and parts[4].isdigit():
                key = (*parts[:4], int(parts[4]))
                found = {(q["agent"], q["condition_id"], q["family"], q["split"], q["instance"]): q
                         for q in self.pairs()}
                if key in found:
                    p = found[key]
                    return html_page(self.sites[0].side_by_side(
                        (p["family"], p["split"], p["instance"]),
                        [(self.sites[0].run, p["eid_a"], "a/", f"A: {self.names[0]}"),
                         (self.sites[1].run, p["eid_b"], "b/", f"B: {self.names[1]}")], depth=5))
        raise NotFound(path)

    def index(self) -> str:
        """The comparison's index."""
        pairs = self.pairs()
        return self.sites[0].render("diff.html", 0, names=self.names, summary=self.summary(pairs), pairs=pairs,
                                     resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED,
                                     n=[len(s.run.episodes) for s in self.sites],
                                     problems=[f"{side.upper()}: {p}" for side, s in zip(SIDES, self.sites)
                                               for p in s.run.problems])
