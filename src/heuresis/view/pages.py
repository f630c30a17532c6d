"""The view's pages: one function per page, rendered with Jinja2 from the templates in the package.

Every page has a path (``index.html``, ``episodes/<episode_id>.html``, ``plays/<play_id>.html``,
``compare/<family>/<split>/<instance>[-<page>].html``, ``static/...``, ``files/<run file>``, ``robots.txt``,
``favicon.ico``); :class:`Site` renders a path to bytes, the same for the
server (:mod:`heuresis.view.server`) and the static export (:func:`export_site`). Links are
relative, so an exported folder works from disk and from any web server.

The index carries every episode (and every play) as a JSON blob that ``static/table.js`` filters,
sorts and pages in the browser, its filters kept in the address; ``static/page.js`` steps through
an episode's turns; the episode and play pages are rendered on request (served) or once each (export).
Agent text is untrusted: the templates escape everything they show, the JSON blob is escaped for
its ``<script>`` element, and every page forbids scripts other than the package's own.
"""

from __future__ import annotations

import json
import math
import mimetypes
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote, unquote

import jinja2
import pyarrow as pa

from heuresis.artifacts.schemas import GAME_JUDGEMENTS
from heuresis.artifacts.transcripts import TranscriptProblem, read_episode_transcript, read_play_transcript
from heuresis.causal.graph import Graph, Relation
from heuresis.harness.conditions import condition_label
from heuresis.view.live import run_header, stamp
from heuresis.view.run import Run, loads, number

__all__ = ["INDEX_COLUMNS", "NotFound", "Page", "Site", "edge_table", "html_page", "url_name"]

#: The condition's factors (the columns of the ``episodes`` table that make up ``condition_id``).
FACTORS = ["toolbox", "guided", "prompt_level", "target", "budget", "last_turn", "repeat"]
#: The index's columns: (key, heading, kind); kind ``cat`` filters by value, ``num`` by range.
INDEX_COLUMNS = [
    ("agent", "agent", "cat"), *((f, f.replace("_", " "), "cat") for f in FACTORS),
    ("family", "family", "cat"), ("split", "split", "cat"), ("instance", "instance", "num"),
    ("status", "status", "cat"), ("termination", "termination", "cat"), ("f1", "F1", "num"),
    ("gain_pc", "F1 − PC-KCI", "num"), ("delta_r", "F1 − BCA_f", "num"), ("turns", "turns", "num"),
    ("tokens", "tokens", "num"), ("cost", "cost $", "num"),
]
#: The plays table's columns: (key, heading, kind).
PLAY_COLUMNS = [
    ("play_id", "play id", "cat"), ("agent", "agent", "cat"), ("mode", "mode", "cat"), ("scenario", "scenario", "cat"),
    ("family", "family", "cat"), ("status", "status", "cat"), ("termination", "termination", "cat"),
    ("survival", "survival", "num"), ("optimum", "optimum", "num"), ("threshold", "threshold", "num"),
    ("gap", "gap to optimum", "num"), ("won", "won", "cat"), ("trap_fall", "fell in the trap", "cat"),
    ("deployments", "deployments", "num"), ("turns", "turns", "num"), ("n_judged", "judged", "num"),
]
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
#: The policy the pages carry in their <meta> element: the same, less what only a header can say.
CSP_META = "; ".join(d for d in CSP.split("; ") if not d.startswith("frame-ancestors"))
STATIC = ("view.css", "table.js", "page.js", "live.js")
#: The most episodes a comparison page shows side by side: an instance played by more has one page per
#: this many (sorted by id), each linking to the others, so a page is bounded whatever the episode count.
COMPARE_COLUMNS = 12
#: The content type of a run file by its suffix: text always as UTF-8 (a table's "−" and "×" are not
#: ASCII), shown in the browser rather than downloaded; anything else as :mod:`mimetypes` guesses.
TEXT_TYPES = {".md": "text/plain", ".tex": "text/plain", ".txt": "text/plain", ".csv": "text/csv",
              ".json": "application/json", ".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
#: ``robots.txt``: no crawler reads any page (each holds the hidden truth).
ROBOTS = b"User-agent: *\nDisallow: /\n"


def content_type(name: str) -> str:
    """The Content-Type of a file named ``name``: text types with ``charset=utf-8``."""
    suffix = Path(name).suffix.lower()
    kind = TEXT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind in ("application/json", "image/svg+xml"):
        kind += "; charset=utf-8"
    return kind


def html_page(text: str) -> Page:
    """A rendered HTML page, UTF-8."""
    return Page(text.encode("utf-8"), "text/html; charset=utf-8")


class NotFound(LookupError):
    """No page at a path."""


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("heuresis.view", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _fmt
    env.filters["pretty"] = _pretty
    env.globals["csp"] = CSP_META
    return env


def _fmt(v, digits: int = 3) -> str:
    x = number(v)
    if x is None:
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
    return f"{int(x):,}" if x == int(x) and abs(x) < 1e15 and not isinstance(v, float) else f"{x:.{digits}f}"


def _pretty(text) -> str:
    """A JSON string indented, else the text as it is."""
    if isinstance(text, str):
        try:
            return json.dumps(json.loads(text), indent=1)
        except ValueError:
            return text
    return json.dumps(text, indent=1, default=str)


def url_name(ident: str) -> str:
    """An id (``a/b/c``) as a relative page path: each segment quoted, dot segments refused."""
    parts = ident.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"id {ident!r} cannot name a page (empty or dot segment)")
    return "/".join(quote(p, safe="") for p in parts)


# --- the graph against the truth ----------------------------------------------------------------
_REL = {Relation.NONE: "", Relation.UNDIRECTED: "--", Relation.FORWARD: "->", Relation.BACKWARD: "<-"}


def _rel_text(g: Graph | None, i: int, j: int) -> str:
    if g is None:
        return "?"
    rel = g.relation(i, j)
    a, b = g.names[i], g.names[j]
    return {Relation.NONE: "none", Relation.UNDIRECTED: f"{a} -- {b}", Relation.FORWARD: f"{a} -> {b}",
            Relation.BACKWARD: f"{b} -> {a}"}[rel]


def edge_table(final: Graph, truth_dag: Graph, truth_cpdag: Graph, deletions: list[dict] | None = None) -> list[dict]:
    """Every pair adjacent in the final graph or the true DAG, marked against the truth.

    ``mark`` is ``correct`` (adjacent in both), ``missing`` (only in the truth) or ``extra`` (only
    in the final graph); ``orientation`` says whether the relation equals the true CPDAG's.
    ``deletion``: for a pair in PC-KCI's deletion log (entries with the hidden ``wrong`` label),
    ``recovered`` (wrongly deleted, put back), ``harmful`` (rightly deleted, put back),
    ``wrong, not recovered`` or ``right, kept deleted``.
    """
    names = list(final.names)
    log = {}
    for d in deletions or []:
        i, j = sorted((names.index(d["x"]), names.index(d["y"])))
        log[(i, j)] = d
    fs, ts = final.skeleton(), truth_dag.skeleton()
    rows = []
    for i in range(final.d):
        for j in range(i + 1, final.d):
            if not (fs[i, j] or ts[i, j] or (i, j) in log):
                continue
            mark = "correct" if fs[i, j] and ts[i, j] else "missing" if ts[i, j] else "extra" if fs[i, j] else ""
            dele = ""
            if (i, j) in log:
                wrong = bool(log[(i, j)].get("wrong"))
                dele = (("recovered" if wrong else "harmful") if fs[i, j] else
                        ("wrong, not recovered" if wrong else "right, kept deleted"))
            rows.append({"i": i, "j": j, "pair": f"{names[i]} – {names[j]}", "mark": mark, "deletion": dele,
                         "final": _rel_text(final, i, j) if fs[i, j] else "none",
                         "dag": _rel_text(truth_dag, i, j), "cpdag": _rel_text(truth_cpdag, i, j),
                         "orientation": (final.relation(i, j) == truth_cpdag.relation(i, j)) if mark == "correct"
                         else None})
    return rows


def graph_svg(d: int, names: list[str], edges: list[dict], size: int = 320) -> dict:
    """Positions (a circle) and segments for drawing the pairs of ``edges`` with their marks, as template data."""
    r, c = size / 2 - 30, size / 2
    pos = [(c + r * math.sin(2 * math.pi * k / d), c - r * math.cos(2 * math.pi * k / d)) for k in range(d)]
    segs = []
    for e in edges:
        if not e["mark"]:
            continue
        (x1, y1), (x2, y2) = pos[e["i"]], pos[e["j"]]
        shown = e["final"] if e["mark"] != "missing" else e["dag"]
        if f"{names[e['j']]} -> {names[e['i']]}" == shown:
            x1, y1, x2, y2 = x2, y2, x1, y1
        # stop short of the node circles
        dx, dy = x2 - x1, y2 - y1
        n = math.hypot(dx, dy) or 1.0
        k = 16 / n
        segs.append({"x1": x1 + dx * k, "y1": y1 + dy * k, "x2": x2 - dx * k, "y2": y2 - dy * k,
                     "arrow": "->" in shown, "mark": e["mark"], "deletion": e["deletion"], "title": e["pair"],
                     "changed": bool(e.get("changed"))})
    return {"size": size, "nodes": [{"x": x, "y": y, "name": names[k]} for k, (x, y) in enumerate(pos)],
            "segments": segs}


def working_graphs(start: Graph, calls: list[dict]) -> tuple[dict[int, Graph], int | None, str | None]:
    """The working graph after every turn that has calls: ``start`` changed by each call as the harness applied it.

    Each call is replayed with :func:`heuresis.harness.tools.replay_call`, the tools' own edit code
    (``set_edges``, ``run_algorithm`` with ``adopt``; a failed call changes nothing). Returns the
    graphs by turn (turn 0: ``start``), and, when a recorded call cannot be replayed, its turn and a
    message naming it; the graphs then end with the turn before.
    """
    from heuresis.harness.tools import replay_call

    out = {0: start}
    g = start
    for c in sorted(calls, key=lambda c: (c["turn"], c["index"])):
        t = int(c["turn"])
        try:
            after = replay_call(g, c)
        except (KeyError, TypeError, ValueError) as exc:   # ValueError: ToolError and ParseError too
            out.pop(t, None)
            return out, t, (f"turn {t}, call {c['index']} ({c['tool']}) cannot be replayed: {exc}; the working "
                            f"graph is drawn up to turn {t - 1}")
        if after is not None:
            g = after
        out[t] = g
    return out, None, None


def _graph_rows(g: Graph, truth) -> list[dict]:
    """The pairs adjacent in ``g`` as :func:`graph_svg` rows, marked correct / extra against the truth when known."""
    if truth is not None:
        return [e for e in edge_table(g, truth.dag, truth.cpdag) if e["mark"] in ("correct", "extra")]
    return [{"i": i, "j": j, "pair": f"{g.names[i]} – {g.names[j]}", "mark": "working", "deletion": "",
             "final": _rel_text(g, i, j), "dag": "?"} for i, j, _ in g.pairs()]


def turn_drawings(graphs: Mapping[int, Graph], turns: list[int], truth, size: int = 240) -> dict[int, dict]:
    """For each turn of ``turns``: the working graph after it drawn as the final graph is (:func:`graph_svg`).

    A turn's entry carries its edge lines, its edge count, and the pairs whose relation the turn
    changed (``"X1 -- X2 → none"``), drawn highlighted. A turn after the last call keeps the last graph.
    """
    out: dict[int, dict] = {}
    prev, g = None, None
    for t in sorted(turns):
        known = [k for k in graphs if k <= t]
        if not known:
            continue
        g = graphs[max(known)]
        rows = _graph_rows(g, truth)
        changes = []  # type: ignore[var-annotated]
        if prev is not None and prev != g:
            changed = {(i, j) for i in range(g.d) for j in range(i + 1, g.d) if prev.relation(i, j) != g.relation(i, j)}
            changes = [f"{_rel_text(prev, i, j)} → {_rel_text(g, i, j)}" for i, j in sorted(changed)]
            for e in rows:
                e["changed"] = (e["i"], e["j"]) in changed
        out[t] = {"turn": t, "drawing": graph_svg(g.d, list(g.names), rows, size), "lines": "; ".join(g.to_lines()),
                  "n_edges": g.n_edges(), "changes": changes,
                  "correct": sum(e["mark"] == "correct" for e in rows) if truth is not None else None}
        prev = g
    return out


def _graph_of(flat, d: int | None = None) -> Graph:
    import numpy as np

    g = np.asarray(flat, dtype=np.int8)
    d = d or int(round(math.sqrt(g.size)))
    return Graph(g.reshape(d, d))


def _evidence(calls: list[dict], names: list[str], i: int, j: int) -> list[dict]:
    """Calls that bore on pair (i, j): algorithm runs whose output holds it, calls whose arguments name both ends.

    An algorithm run's output is read from its details as the analysis reads it
    (:func:`heuresis.stages.analysis.scores.algorithm_outputs`).
    """
    a, b = names[i], names[j]
    out = []
    for c in calls:
        det = loads(c.get("details"), {})
        why = ""
        if c["tool"] == "run_algorithm" and c["ok"] and isinstance(det, dict) and "edges" in det:
            lines = det.get("edges") or []
            if any({a, b} == set(_ends(line)) for line in lines):
                why = f"{det.get('algorithm', '?')} proposes it"
        if not why:
            args = loads(c.get("arguments"), {})
            if _names_pair(args, a, b):
                why = f"{c['tool']} on it"
        if why:
            out.append({"turn": c["turn"], "index": c["index"], "tool": c["tool"], "why": why})
    return out


def _ends(line: str) -> list[str]:
    for sep in (" -> ", " -- ", " <- "):
        if sep in line:
            return [s.strip() for s in line.split(sep, 1)]
    return []


def _names_pair(args, a: str, b: str) -> bool:
    """Whether JSON arguments name both variables together: as x and y, or in one edge line."""
    if isinstance(args, dict):
        if {str(args.get("x")), str(args.get("y"))} == {a, b}:
            return True
        return any(_names_pair(v, a, b) for v in args.values())
    if isinstance(args, list):
        return any(_names_pair(v, a, b) for v in args)
    if isinstance(args, str):
        return set(_ends(args)) == {a, b}
    return False


# --- the site -----------------------------------------------------------------------------------
@dataclass
class Page:
    """A rendered page: its bytes and content type."""

    body: bytes
    content_type: str


class Site:
    """Every page of a run's view; :meth:`page` renders one path, :meth:`paths` lists them all."""

    def __init__(self, results: str | Path, live: bool = False):
        self.results = Path(results)
        self.run = Run(self.results)
        self.env = _env()
        #: served: the index follows the run (``live.json``, :meth:`refresh`); an export is a snapshot
        self.live = live
        self.stamp = stamp(self.results) if live else ""

    def refresh(self) -> bool:
        """Read the results folder again if it changed since it was read (a running workflow); True if it did."""
        now = stamp(self.results)
        if now == self.stamp:
            return False
        self.run, self.stamp = Run(self.results), now
        return True

    def live_data(self) -> dict:
        """``live.json``: the results folder's stamp and the run header."""
        return {"stamp": self.stamp, "header": self.header()}

    def header(self) -> dict:
        """The run header (:func:`heuresis.view.live.run_header`) of the results as last read."""
        return run_header(self.results, self.run.episodes.values(), self.run.plays.values())

    # --- routing -------------------------------------------------------------------------------
    def paths(self) -> Iterator[str]:
        """Every page path of the site (what the export writes)."""
        yield "index.html"
        yield "robots.txt"
        yield "favicon.ico"
        for name in STATIC:
            yield f"static/{name}"
        for eid in self.run.episodes:
            yield f"episodes/{url_name(eid)}.html"
        for pid in self.run.plays:
            yield f"plays/{url_name(pid)}.html"
        for key in self.instances():
            for k in range(1, self.compare_pages(key) + 1):
                yield self.compare_path(key, k)
        for rel in self.run.run_files:
            yield f"files/{url_name(rel)}"

    def page(self, path: str) -> Page:
        """Render the page at ``path`` (relative, no leading slash); :class:`NotFound` when there is none."""
        path = path.lstrip("/") or "index.html"
        if path == "index.html":
            return html_page(self.index())
        if path == "live.json" and self.live:
            return Page(json.dumps(self.live_data()).encode(), "application/json")
        if path == "robots.txt":
            return Page(ROBOTS, "text/plain; charset=utf-8")
        if path == "favicon.ico":      # an empty icon: the pages name none (data:), but a browser may still ask
            return Page(b"", "image/x-icon")
        if path.startswith("static/") and path[len("static/"):] in STATIC:
            name = path[len("static/"):]
            body = resources.files("heuresis.view").joinpath("static", name).read_bytes()
            return Page(body, content_type(name))
        if path.startswith("episodes/") and path.endswith(".html"):
            eid = unquote(path[len("episodes/"):-len(".html")])
            if eid in self.run.episodes:
                return html_page(self.episode(eid))
        if path.startswith("plays/") and path.endswith(".html"):
            pid = unquote(path[len("plays/"):-len(".html")])
            if pid in self.run.plays:
                return html_page(self.play(pid))
        if path.startswith("compare/") and path.endswith(".html"):
            key, k = _compare_key(unquote(path[len("compare/"):-len(".html")]))
            if key in self.instances() and k <= self.compare_pages(key):
                return html_page(self.compare(key, k))
        if path.startswith("files/"):
            rel = unquote(path[len("files/"):])
            if rel in self.run.run_files:   # only the listed tables and figures, never another file
                p = self.run.results / rel
                return Page(p.read_bytes(), content_type(p.name))
        raise NotFound(path)


    def render(self, template: str, depth: int, **ctx) -> str:
        """A template rendered for a page ``depth`` folders below the site's root (its links relative)."""
        return self.env.get_template(template).render(root="../" * depth, **{"live": False, "stamp": "", **ctx})

    # --- index ---------------------------------------------------------------------------------
    def index_data(self) -> dict:
        """The index's JSON blob: columns, one row per episode (values in column order, then the page link).

        A categorical column's cells are indices into ``values[key]``, its distinct values (a few
        agents and conditions repeated over thousands of rows: a smaller page, a faster filter).
        """
        cats = [k for k, _, kind in INDEX_COLUMNS if kind == "cat"]
        codes: dict[str, dict] = {k: {} for k in cats}
        rows = []
        for eid, r in self.run.episodes.items():
            s = self.run.scores.get(eid, {})
            f1, pc = number(r.get("f1")), number(r.get("pc_kci_f1"))
            tok = (r.get("tokens_in") or 0) + (r.get("tokens_out") or 0)
            vals = {**r, "gain_pc": None if f1 is None or pc is None else f1 - pc,
                    "delta_r": number(s.get("delta_r")), "tokens": tok, "f1": f1, "cost": number(r.get("cost"))}
            row = []
            for k, _, kind in INDEX_COLUMNS:
                v = _json_value(vals.get(k))
                row.append(codes[k].setdefault(v, len(codes[k])) if kind == "cat" else v)
            rows.append([*row, f"episodes/{url_name(eid)}.html"])
        return {"columns": [{"key": k, "label": lab, "kind": kind} for k, lab, kind in INDEX_COLUMNS], "rows": rows,
                "values": {k: list(codes[k]) for k in cats}, "link": True}

    def summary(self) -> list[dict]:
        """One row per agent × condition: episodes, failed, mean F1, mean gain over PC-KCI, turns, tokens, cost."""
        groups: dict[tuple[str, str], list[dict]] = {}
        for r in self.run.episodes.values():
            groups.setdefault((r["agent"], r["condition_id"]), []).append(r)

        def mean(xs):
            xs = [x for x in xs if x is not None]
            return sum(xs) / len(xs) if xs else None

        out = []
        for (agent, cond), rs in sorted(groups.items()):
            costs = [number(r.get("cost")) for r in rs]
            out.append({"agent": agent, "condition_id": cond, "setting": _setting(rs[0]), "n": len(rs),
                        "failed": sum(r["status"] != "ok" for r in rs),
                        "unsubmitted": sum(not r.get("finished") for r in rs),
                        "f1": mean([number(r.get("f1")) for r in rs]),
                        "gain_pc": mean([None if number(r.get("f1")) is None or number(r.get("pc_kci_f1")) is None
                                         else r["f1"] - r["pc_kci_f1"] for r in rs]),
                        "turns": mean([number(r.get("turns")) for r in rs]),
                        "tokens": sum((r.get("tokens_in") or 0) + (r.get("tokens_out") or 0) for r in rs),
                        "cost": None if any(c is None for c in costs) else sum(costs)})  # type: ignore[arg-type]
        return out

    def summary_data(self) -> dict:
        """The agent × condition summary as a JSON blob for the index's second table."""
        cols = [("agent", "agent", "cat", None), ("condition_id", "condition", "cat", None),
                ("setting", "setting", "cat", None), ("n", "episodes", "num", 0),
                ("failed", "failed", "num", 0), ("unsubmitted", "unsubmitted", "num", 0), ("f1", "mean F1", "num", 3),
                ("gain_pc", "mean F1 − PC-KCI", "num", 3), ("turns", "mean turns", "num", 1),
                ("tokens", "tokens", "num", 0), ("cost", "cost $", "num", 4)]
        return {"columns": [{"key": k, "label": lab, "kind": kind, **({"digits": d} if d else {})}
                            for k, lab, kind, d in cols],
                "rows": [[_json_value(s[k]) for k, *_ in cols] for s in self.summary()]}

    def leaderboard_data(self) -> dict | None:
        """The run's leaderboard over all families (``tables/leaderboard.parquet``) as the front page's table.

        Each row links to the episodes table filtered to that agent and condition (the condition's
        factors, the table's columns); None without a board.
        """
        path = self.run.results / "tables" / "leaderboard.parquet"
        if not path.is_file():
            return None
        import pyarrow.parquet as pq

        board = pq.read_table(path).to_pandas()
        board = board[(board["block"] == "this run") & (board["family"] == "all")] if "block" in board else board.iloc[:0]
        cols = [("rank", "rank", "num", 0), ("agent", "agent", "cat", None), ("condition", "condition", "cat", None),
                ("condition_id", "condition ID", "cat", None), ("f1", "F1", "num", 3), ("delta_r", "Δ^r", "num", 3),
                ("delta_r_lo", "Δ^r low", "num", 3), ("delta_r_hi", "Δ^r high", "num", 3),
                ("headroom_share", "headroom captured", "num", 2), ("n", "episodes", "num", 0),
                ("n_failed", "failed", "num", 0), ("usd_per_episode", "$ / episode", "num", 4),
                ("integrity_per_episode", "integrity events / episode", "num", 2),
                ("tied_with", "tied with", "cat", None)]
        rows = []
        for r in board.to_dict("records"):
            r = {**r, "tied_with": ", ".join(loads(r.get("tied_with"), []) or []) or "—"}
            # the episode table's own columns: the agent and each factor of the condition
            link = "index.html#" + "&".join(f"{k}={quote(_cell_text(r[k]), safe='')}" for k in ("agent", *FACTORS))
            rows.append([*(_json_value(r.get(k)) for k, *_ in cols), link])
        return {"columns": [{"key": k, "label": lab, "kind": kind, **({"digits": d} if d is not None else {})}
                            for k, lab, kind, d in cols], "rows": rows, "link": True}

    def trap_fall(self, play: Mapping) -> bool | None:
        """Whether a play's submitted design follows its scenario's trap pattern (None: nothing submitted, no references)."""
        from heuresis.causal.games.scenario import follows_pattern

        ref = self.run.game_references.get(str(play.get("scenario")))
        design = loads(play.get("design"), None) if play.get("submitted") else None
        pattern = loads(ref.get("trap_pattern"), None) if ref else None
        if not isinstance(design, dict) or pattern is None:
            return None
        return bool(follows_pattern(pattern, design))

    def plays_data(self) -> dict:
        """The plays table as a JSON blob (values in :data:`PLAY_COLUMNS` order, then the page link)."""
        rows = []
        for pid, p in sorted(self.run.plays.items()):
            vals = {**p, "n_judged": len(self.run.judgements.get(pid, [])), "trap_fall": self.trap_fall(p)}
            rows.append([_json_value(vals.get(k)) for k, *_ in PLAY_COLUMNS] + [f"plays/{url_name(pid)}.html"])
        return {"columns": [{"key": k, "label": lab, "kind": kind} for k, lab, kind in PLAY_COLUMNS], "rows": rows,
                "link": True}

    def plays_summary(self) -> list[dict]:
        """One row per agent × mode × scenario: plays, failed, mean survival, win rate, mean gap, trap-fall rate.

        As the games analysis counts them: a failed play is counted, not scored (the means are over
        the plays that did not fail); the trap-fall rate is over the submitted plays among them.
        """
        groups: dict[tuple[str, str, str], list[dict]] = {}
        for p in self.run.plays.values():
            groups.setdefault((p["agent"], p["mode"], p["scenario"]), []).append(p)

        def mean(xs):
            xs = [float(x) for x in xs if x is not None]
            return sum(xs) / len(xs) if xs else None

        out = []
        for (agent, mode, scenario), ps in sorted(groups.items()):
            ok = [p for p in ps if p.get("status") != "failed"]
            falls = [self.trap_fall(p) for p in ok]
            out.append({"agent": agent, "mode": mode, "scenario": scenario, "plays": len(ps), "failed": len(ps) - len(ok),
                        "survival": mean([number(p.get("survival")) for p in ok]),
                        "win_rate": mean([None if p.get("won") is None else float(bool(p["won"])) for p in ok]),
                        "gap": mean([number(p.get("gap")) for p in ok]),
                        "trap_fall": mean([None if f is None else float(f) for f in falls]),
                        "submitted": sum(bool(p.get("submitted")) for p in ok)})
        return out

    def plays_summary_data(self) -> dict:
        """The agent × scenario summary of the plays as a JSON blob."""
        cols = [("agent", "agent", "cat", None), ("mode", "mode", "cat", None), ("scenario", "scenario", "cat", None),
                ("plays", "plays", "num", 0), ("failed", "failed", "num", 0), ("submitted", "submitted", "num", 0),
                ("survival", "mean survival", "num", 3), ("win_rate", "win rate", "num", 3),
                ("gap", "mean gap to optimum", "num", 3), ("trap_fall", "trap-fall rate", "num", 3)]
        return {"columns": [{"key": k, "label": lab, "kind": kind, **({"digits": d} if d else {})}
                            for k, lab, kind, d in cols],
                "rows": [[_json_value(s[k]) for k, *_ in cols] for s in self.plays_summary()]}

    def index(self) -> str:
        """The index page."""
        plays = [{**p, "url": f"plays/{url_name(pid)}.html", "n_judged": len(self.run.judgements.get(pid, []))}
                 for pid, p in sorted(self.run.plays.items())]
        summary = self.summary_data()
        psum = self.plays_summary_data()
        board = self.leaderboard_data()
        figure = "figures/leaderboard_cost.png"
        return self.render("index.html", 0, blob=_script_json(self.index_data()), n=len(self.run.episodes),
                            summary=_script_json(summary), n_summary=len(summary["rows"]), plays=plays,
                            compare=[{"name": f"{k[0]}/{k[1]}/{k[2]:04d}", "url": self.compare_path(k), "n": len(v),
                                      "agents": sorted({self.run.episodes[e]["agent"] for e in v})}
                                     for k, v in self.instances().items()],
                            plays_blob=_script_json(self.plays_data()), plays_summary=_script_json(psum),
                            n_plays_summary=len(psum["rows"]),
                            board=_script_json(board) if board is not None else None,
                            n_board=len(board["rows"]) if board is not None else 0,
                            board_figure=f"files/{url_name(figure)}" if figure in self.run.run_files else None,
                            files=[{"name": f, "url": f"files/{url_name(f)}"} for f in self.run.run_files],
                            problems=self.run.problems, results=str(self.run.results), header=self.header(),
                            live=self.live, stamp=self.stamp)

    # --- episode -------------------------------------------------------------------------------
    def episode(self, eid: str) -> str:
        """The page of one episode."""
        row = self.run.episodes[eid]
        depth = 1 + eid.count("/")
        tpath = self.run.transcript_path(row)
        try:
            tr = read_episode_transcript(tpath)
            problem = None
        except TranscriptProblem as exc:
            tr, problem = None, str(exc)
        final = _graph_of(row["graph"])
        names = list(final.names)
        truth = self.run.truth(row["family"], row["split"], int(row["instance"]))
        pc_row = self.run.pc_kci(row["family"], row["split"], int(row["instance"]))
        deletions = None
        if pc_row is not None and truth is not None:
            from heuresis.stages.references import labelled_log

            deletions = labelled_log(pc_row.get("deletions"), truth.dag)
        calls = tr.calls if tr else []
        edges = edge_table(final, truth.dag, truth.cpdag, deletions) if truth is not None else []
        for e in edges:
            e["evidence"] = _evidence(calls, names, e["i"], e["j"])
        amap = tr.algorithm_map if tr else loads(row.get("algorithm_map"), {})
        by_id = {c["call_id"]: c for c in calls if c.get("call_id")}
        turns = _conversation(tr.messages if tr else [], by_id, calls, amap)
        drawings, graph_note = {}, None
        if tr is not None:
            start, graph_note = self._start_graph(tr.start_graph, pc_row, final.d)
            if start is not None:
                graphs, stop, graph_note = working_graphs(start, calls)
                drawings = turn_drawings(graphs, [t["turn"] for t in turns if stop is None or t["turn"] < stop], truth)
        failures = _failures(row, tr, calls)
        integrity = _integrity(row, tr, calls)
        prev, next_ = _neighbours(sorted(self.run.episodes), eid)
        key = (row["family"], row["split"], int(row["instance"]))
        same = self.instances().get(key, [])
        others = len(same) - 1
        counts = {m: sum(e["mark"] == m for e in edges) for m in ("correct", "missing", "extra")}
        return self.render(
            "episode.html", depth, row=row, eid=eid, problem=problem, transcript=self.run.artifact(tpath),
            condition={f: row.get(f) for f in ["condition_id", *FACTORS]},
            budgets=(tr.budgets if tr else None), truth=truth is not None, edges=edges, counts=counts,
            drawing=graph_svg(final.d, names, edges) if edges else None, amap=amap,
            deletions=deletions, turns=turns, requests=tr.requests if tr else [], failures=failures,
            integrity=integrity,
            scores=self.run.scores.get(eid), file=self.run.artifact(row["_file"]),
            start_graph=tr.start_graph if tr else None, drawings=drawings, graph_note=graph_note,
            compare={"url": self.compare_path(key, same.index(eid) // COMPARE_COLUMNS + 1), "others": others}
            if others > 0 else None,
            prev={"id": prev, "url": f"episodes/{url_name(prev)}.html"} if prev else None,
            next={"id": next_, "url": f"episodes/{url_name(next_)}.html"} if next_ else None)

    @staticmethod
    def _start_graph(kind, pc_row: Mapping | None, d: int) -> tuple[Graph | None, str | None]:
        """The working graph an episode started from (the transcript's ``start_graph``), or None and why not."""
        if kind == "complete":
            return Graph.complete(d), None
        if kind == "pc_kci":
            if pc_row is None or pc_row.get("status") != "ok":
                return None, ("the episode started from PC-KCI's output, which is not under results/references: "
                              "the working graph after each turn cannot be drawn")
            return _graph_of(pc_row["graph"], d), None
        return None, f"unknown start graph {kind!r} in the transcript: the working graph after each turn is not drawn"

    # --- comparison of the episodes of one instance -------------------------------------------
    def instances(self) -> dict[tuple[str, str, int], list[str]]:
        """The instances played by two or more episodes: (family, split, instance) -> their episode ids, sorted."""
        if not hasattr(self, "_instances"):
            groups: dict[tuple[str, str, int], list[str]] = {}
            for eid, r in self.run.episodes.items():
                groups.setdefault((r["family"], r["split"], int(r["instance"])), []).append(eid)
            self._instances = {k: sorted(v) for k, v in sorted(groups.items()) if len(v) >= 2}
        return self._instances

    @staticmethod
    def compare_path(key: tuple[str, str, int], page: int = 1) -> str:
        """Page ``page`` of the comparison of an instance's episodes (``NNNN.html``, then ``NNNN-2.html``, ...)."""
        family, split, instance = key
        return f"compare/{url_name(family)}/{url_name(split)}/{instance:04d}{f'-{page}' if page > 1 else ''}.html"

    def compare_pages(self, key: tuple[str, str, int]) -> int:
        """How many pages the comparison of an instance's episodes takes (:data:`COMPARE_COLUMNS` a page)."""
        return -(-len(self.instances()[key]) // COMPARE_COLUMNS)

    def compare(self, key: tuple[str, str, int], page: int = 1) -> str:
        """Side by side: the episodes of page ``page`` of an instance (:data:`COMPARE_COLUMNS` a page).

        Their calls turn by turn and final graphs against the truth and each other, with links to the other pages.
        """
        eids = self.instances()[key]
        start, n = (page - 1) * COMPARE_COLUMNS, self.compare_pages(key)
        shown = eids[start:start + COMPARE_COLUMNS]
        near = sorted({1, n, *range(max(1, page - 2), min(n, page + 2) + 1)})   # first, last and the nearest
        pager = {"first": start + 1, "last": start + len(shown), "total": len(eids), "more": len(eids) - len(shown),
                 "page": page, "pages": [{"n": k, "url": self.compare_path(key, k), "gap": k > 1 and k - 1 not in near}
                                         for k in near]} if n > 1 else None
        return self.side_by_side(key, [(self.run, eid, "", "") for eid in shown], depth=3, pager=pager)

    def side_by_side(self, key: tuple[str, str, int], columns: list[tuple[Run, str, str, str]], depth: int,
                     pager: dict | None = None) -> str:
        """The comparison page of instance ``key``: one column per (run, episode id, link prefix, label).

        The columns may come from several runs (``heuresis view A B``): each links to its episode's
        page under its prefix, and the truth is the first run's. ``pager``: which of the instance's
        episodes these are and the links to the other pages (:meth:`compare`).
        """
        family, split, instance = key
        truth = columns[0][0].truth(family, split, instance)
        cols, finals, by_turn = [], [], []
        for run, eid, prefix, label in columns:
            row = run.episodes[eid]
            final = _graph_of(row["graph"])
            finals.append(final)
            try:
                calls = read_episode_transcript(run.transcript_path(row)).calls
                problem = None
            except TranscriptProblem as exc:
                calls, problem = [], str(exc)
            turns: dict[int, list[dict]] = {}
            for c in sorted(calls, key=lambda c: (c["turn"], c["index"])):
                turns.setdefault(int(c["turn"]), []).append(
                    {"tool": c["tool"], "ok": c["ok"], "anchor": f"call-{c['turn']}-{c['index']}"})
            by_turn.append(turns)
            cols.append({"eid": eid, "url": f"{prefix}episodes/{url_name(eid)}.html", "row": row, "problem": problem,
                         "setting": _setting(row),
                         "n_edges": final.n_edges(), "label": label})
        names = list(finals[0].names)
        d = finals[0].d
        pairs = []
        for i in range(d):
            for j in range(i + 1, d):
                rels = [g.relation(i, j) for g in finals]
                true_adj = truth is not None and truth.dag.skeleton()[i, j]
                if not true_adj and all(r == Relation.NONE for r in rels):
                    continue
                cells = []
                for g, r in zip(finals, rels):
                    adj = r != Relation.NONE
                    mark = ("" if truth is None else "correct" if adj and true_adj else "missing" if true_adj
                            else "extra" if adj else "")
                    cells.append({"text": _rel_text(g, i, j) if adj else "none", "mark": mark,
                                  "oriented": truth is not None and adj and true_adj
                                  and r == truth.cpdag.relation(i, j)})
                pairs.append({"pair": f"{names[i]} – {names[j]}", "cells": cells, "agree": len(set(rels)) == 1,
                              "dag": _rel_text(truth.dag, i, j) if truth is not None else "?",
                              "cpdag": _rel_text(truth.cpdag, i, j) if truth is not None else "?"})
        marks: list[list[dict]] = [p["cells"] for p in pairs]  # type: ignore[misc]
        differ = [[sum(a.relation(i, j) != b.relation(i, j) for i in range(d) for j in range(i + 1, d))
                   for b in finals] for a in finals]
        last = max((t for turns in by_turn for t in turns), default=0)
        steps = [{"turn": t, "cells": [turns.get(t, []) for turns in by_turn]} for t in range(1, last + 1)]
        return self.render("compare.html", depth, family=family, split=split, instance=instance, cols=cols, pairs=pairs,
                            differ=differ, pager=pager, steps=steps, truth=truth is not None,
                            counts=[{m: sum(cells[k]["mark"] == m for cells in marks) for m in ("correct", "missing",
                                                                                                "extra")}
                                    for k in range(len(cols))])

    # --- game play -----------------------------------------------------------------------------
    def play(self, pid: str) -> str:
        """The page of one game play."""
        row = self.run.plays[pid]
        depth = 1 + pid.count("/")
        tpath = self.run.transcript_path(row, "play")
        try:
            tr = read_play_transcript(tpath)
            problem = None
        except TranscriptProblem as exc:
            tr, problem = None, str(exc)
        ref = self.run.game_references.get(row["scenario"])
        designs = loads(row.get("designs_deployed"), [])
        counts = loads(row.get("deployment_counts"), [])
        deployments = []
        for k, design in enumerate(designs):
            flown, back = (counts[k] + [None, None])[:2] if k < len(counts) else (None, None)
            deployments.append({"n": k + 1, "design": design, "flown": flown, "returned": back,
                                "rate": back / flown if flown else None})
        chart = _survival_chart(deployments, row, ref)
        amap: dict = {}
        calls = tr.calls if tr else []
        turns = _conversation(tr.messages if tr else [], {c["call_id"]: c for c in calls if c.get("call_id")},
                              calls, amap)
        prev, next_ = _neighbours(sorted(self.run.plays), pid)
        return self.render(
            "play.html", depth, prev={"id": prev, "url": f"plays/{url_name(prev)}.html"} if prev else None,
            next={"id": next_, "url": f"plays/{url_name(next_)}.html"} if next_ else None, row=row, pid=pid,
            problem=problem, transcript=self.run.artifact(tpath), ref=ref,
            deployments=deployments, chart=chart, judgements=[
                {**j, "criteria": c, "texts": x} for j in self.run.judgements.get(pid, [])
                for c, x in [judge_criteria(j, GAME_JUDGEMENTS.schema, GAME_JUDGEMENTS.doc)]], turns=turns,
            calls=calls, design=loads(row.get("design"), None), file=self.run.artifact(row["_file"]),
            error=(tr.error if tr else None))


def _setting(row: Mapping) -> str | None:
    """An episode's condition in words (:func:`heuresis.harness.conditions.condition_label`).

    None for a row without the condition's factors (an episode file of an older layout).
    """
    return condition_label(row) if all(row.get(f) is not None for f in FACTORS) else None


def _compare_key(rel: str) -> tuple[tuple[str, str, int] | None, int]:
    """``family/split/NNNN`` (page 1) or ``family/split/NNNN-K`` (page K ≥ 2) as an instance key and page; (None, 0)."""
    parts = rel.split("/")
    m = re.fullmatch(r"(\d+)(?:-([2-9]|[1-9]\d+))?", parts[-1])
    if len(parts) != 3 or m is None:
        return None, 0
    return (parts[0], parts[1], int(m[1])), int(m[2] or 1)


def _neighbours(ids: list[str], ident: str) -> tuple[str | None, str | None]:
    """The ids before and after ``ident`` in ``ids`` (None at either end)."""
    k = ids.index(ident)
    return (ids[k - 1] if k > 0 else None), (ids[k + 1] if k + 1 < len(ids) else None)


#: Columns of a judgements row that say which play and request it is, not how the judge scored it.
JUDGEMENT_KEYS = ("judge", "protocol", "model", "play_id", "agent", "mode", "scenario", "family", "repeat", "status", "error",
                  "answer", "tokens_in", "tokens_out", "cost", "latency_s")
_RANGE = re.compile(r"^(.*?)[,\s]*\b(\d+)\s*-\s*(\d+)$")


def judge_criteria(row: Mapping, schema: pa.Schema, docs: Mapping[str, str]) -> tuple[list[dict], list[dict]]:
    """A judgement row as the play page shows it: its criteria, then its other text columns.

    Whatever columns the judgements table has: each numeric column (other than
    :data:`JUDGEMENT_KEYS`) is a criterion, with its reason from the string column
    ``<column>_reason`` (or ``_rationale``) when there is one, and a label and range from the
    column's description (``"CR1 true mechanism, 0-4: ..."`` gives ``CR1 true mechanism (0–4)``;
    ``"0-11: ..."`` on ``causal_reasoning`` gives ``causal reasoning (0–11)``). Every other string
    column (a rationale, a failure-mode label) is returned as a (label, text) pair.
    """
    criteria, reasons, texts = [], set(), []
    for f in schema:
        name = f.name
        if name in JUDGEMENT_KEYS or not (pa.types.is_floating(f.type) or pa.types.is_integer(f.type)):
            continue
        head = docs.get(name, "").split(":", 1)[0].strip()
        m = _RANGE.match(head)
        label, rng = (m[1].strip(), f"{m[2]}–{m[3]}") if m else (head, None)
        plain = name.replace("_", " ")
        if not label:
            label = plain
        elif not label.upper().startswith(name.upper()):
            label = f"{plain}: {label}"
        reason = next((r for r in (f"{name}_reason", f"{name}_rationale") if r in schema.names), None)
        if reason:
            reasons.add(reason)
        criteria.append({"column": name, "label": f"{label} ({rng})" if rng else label, "score": row.get(name),
                         "reason": row.get(reason) if reason else None, "doc": docs.get(name, "")})
    for f in schema:
        if f.name in JUDGEMENT_KEYS or f.name in reasons or not pa.types.is_string(f.type) or not row.get(f.name):
            continue
        texts.append({"column": f.name, "label": f.name.replace("_", " "), "text": row[f.name]})
    return criteria, texts


def _script_json(data) -> str:
    """JSON for a ``<script type="application/json">`` element: compact, with <, > and & escaped."""
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _cell_text(v) -> str:
    """A value as the index's tables show it (``true``, ``0`` for a whole float), for a filter in an address."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(_json_value(v)).lower()


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _unmask(text: str, amap: Mapping[str, str]) -> list[dict]:
    """Text split into pieces, each masked algorithm name with its real name beside it."""
    if not text or not amap:
        return [{"text": text or ""}]
    import re

    pat = re.compile("|".join(re.escape(k) for k in sorted(amap, key=len, reverse=True)))
    out, pos = [], 0
    for m in pat.finditer(text):
        out.append({"text": text[pos:m.end()]})
        out.append({"real": amap[m.group(0)]})
        pos = m.end()
    out.append({"text": text[pos:]})
    return out


#: A tool result longer than this (lines or characters) is shown folded (a click opens it).
LONG_LINES, LONG_CHARS = 20, 2000


def _text(content) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in content)
    return content or ""


def _fold(text: str) -> dict:
    """How a long text is shown: its line and character counts, and whether it is folded."""
    lines = text.count("\n") + 1 if text else 0
    return {"lines": lines, "chars": len(text), "long": lines > LONG_LINES or len(text) > LONG_CHARS}


def _code_call(name: str | None, arguments: str, amap: Mapping) -> dict | None:
    """A ``run_code`` call's source (real newlines) and its other arguments, or None for any other call."""
    if name != "run_code":
        return None
    args = loads(arguments, None)
    if not isinstance(args, dict) or not isinstance(args.get("code"), str):
        return None
    rest = {k: v for k, v in args.items() if k != "code"}
    return {"source": _unmask(args["code"], amap), **_fold(args["code"]),
            "rest": _unmask(json.dumps(rest, indent=1), amap) if rest else None}


def _conversation(messages: list[dict], by_id: Mapping[str, dict], calls: list[dict], amap: Mapping) -> list[dict]:
    """The messages grouped into turns, as a story: each tool call with its result right after it.

    A call carries its call record and the result the agent saw (the tool message answering it); a
    tool message that answers no call of the replies stays where it was.
    """
    turns: list[dict] = []
    text_calls = {c["turn"]: c for c in calls if c.get("tool") == "(text)"}
    asked = {tc.get("id") for m in messages for tc in (m.get("tool_calls") or []) if tc.get("id")}
    results = {m["tool_call_id"]: m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") in asked}
    for m in messages:
        meta = m.get("meta") or {}
        t = int(meta.get("turn", 0) or 0)
        if m.get("role") == "tool" and m.get("tool_call_id") in results:
            continue                       # shown under its call
        if not turns or turns[-1]["turn"] != t:
            turns.append({"turn": t, "items": []})
        content = _text(m.get("content"))
        item = {"role": m.get("role", "?"), "content": _unmask(content, amap), "calls": [],
                "usage": meta.get("usage"), "last_turn": meta.get("last_turn")}
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            rec = by_id.get(tc.get("id") or "")
            answer = results.get(tc.get("id") or "")
            result = None
            if answer is not None:
                text = _text(answer.get("content"))
                result = {"text": _unmask(text, amap), **_fold(text)}
            item["calls"].append({"id": tc.get("id"), "name": fn.get("name"),
                                  "arguments": _unmask(_pretty(fn.get("arguments") or ""), amap), "record": rec,
                                  "code": _code_call(fn.get("name"), fn.get("arguments") or "", amap),
                                  "result": result,
                                  "details": _pretty(rec.get("details")) if rec and rec.get("details") not in
                                  (None, "", "{}") else None})
        if m.get("role") == "assistant" and t in text_calls and not m.get("tool_calls"):
            item["text_call"] = text_calls[t]
        if m.get("role") == "tool":
            item["result_of"] = m.get("tool_call_id")
        turns[-1]["items"].append(item)
    return turns


def _failures(row: Mapping, tr, calls: list[dict]) -> list[dict]:
    """Why anything went wrong: the episode's error, calls answered with an error, failed or retried requests."""
    out = []
    if row.get("error"):
        out.append({"what": f"episode {row['status']}", "why": row["error"]})
    if tr is not None and tr.error:
        out.append({"what": "agent failure (transcript)", "why": _pretty(tr.error)})
    for c in calls:
        if not c["ok"]:
            out.append({"what": f"turn {c['turn']}, call {c['index']} ({c['tool']})", "why": c.get("error") or "error",
                        "anchor": f"call-{c['turn']}-{c['index']}"})
    for k, r in enumerate(tr.requests if tr is not None else []):
        if r.get("error"):
            out.append({"what": f"request {k} (turn {r.get('turn')})", "why": r["error"]})
        for a in loads(r.get("retry_log"), []):
            out.append({"what": f"request {k} (turn {r.get('turn')}), retried attempt",
                        "why": a.get("error", a) if isinstance(a, dict) else a})
    return [{"anchor": None, **f} for f in out]


def _integrity(row: Mapping, tr, calls: list[dict]) -> dict:
    """The episode's integrity events: counts by category, the calls that made them, the proxy's refusals."""
    counts = loads(row.get("integrity_counts"), {}) or {}
    marked = [{"what": f"turn {c['turn']}, call {c['index']} ({c['tool']})", "categories": list(c["integrity"]),
               "anchor": f"call-{c['turn']}-{c['index']}"} for c in calls if c.get("integrity")]
    record = (tr.agent_record if tr is not None else None) or {}
    proxy = record.get("proxy") if isinstance(record, Mapping) else None
    network = [a for a in (proxy or {}).get("attempts", []) if a.get("verdict") != "allowed"]
    return {"total": int(row.get("integrity_events") or 0), "counts": counts, "calls": marked, "network": network}


#: The survival chart's ticks on its y-axis (survival runs from 0 to 1).
CHART_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: The least vertical distance between two of the chart's labels, and horizontal between two x ticks (px).
CHART_LABEL_GAP, CHART_TICK_GAP = 12, 24


def _survival_chart(deployments: list[dict], row: Mapping, ref: Mapping | None, w: int = 560, h: int = 200) -> dict:
    """Bars of the observed survival per deployment with the optimum, threshold and final survival as lines.

    The plot spans x0..x1 by top..bottom: the y-axis's labelled ticks on its left, the deployments'
    numbers below (every few when they are many, so they do not run together), and the lines'
    labels on its right, each at its line's height or pushed just clear of its neighbours.
    """
    x0, x1, top, bottom = 40, w - 120, 20, h - 34
    n = max(len(deployments), 1)
    bw = (x1 - x0) / n
    step = math.ceil(CHART_TICK_GAP / bw)

    def level(v):
        v = number(v)
        return None if v is None else bottom - v * (bottom - top)

    bars = [{"x": x0 + k * bw + 1, "w": max(bw - 2, 1), "y": level(d["rate"] or 0), "h": (d["rate"] or 0) * (bottom - top),
             "label": d["n"], "rate": d["rate"], "tick": k % step == 0} for k, d in enumerate(deployments)]
    lines = sorted(({"name": name, "y": level(val), "value": number(val)} for name, val in
                    (("optimum", row.get("optimum")), ("threshold", row.get("threshold")),
                     ("submitted", row.get("survival") if row.get("submitted") else None),
                     ("trap", ref.get("trap") if ref else None)) if level(val) is not None), key=lambda line: line["y"])
    for k, line in enumerate(lines):        # down, each clear of the one above; then up, the lowest inside the chart
        line["label_y"] = max(line["y"], lines[k - 1]["label_y"] + CHART_LABEL_GAP) if k else line["y"]
    for k in reversed(range(len(lines))):
        line = lines[k]
        line["label_y"] = min(line["label_y"], lines[k + 1]["label_y"] - CHART_LABEL_GAP if k + 1 < len(lines) else h - 4)
    ticks = [{"y": level(v), "label": f"{v:g}"} for v in CHART_TICKS]
    return {"w": w, "h": h, "x0": x0, "x1": x1, "top": top, "bottom": bottom, "bars": bars, "lines": lines,
            "ticks": ticks}
