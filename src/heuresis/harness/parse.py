"""Tolerant parser of a submitted edge list (docs/design.md §5.4).

Accepted forms (``names`` are the instance's columns, X1..Xd):

* text lines ``Xi -> Xj``, ``Xi <- Xj``, ``Xi -- Xj`` (also ``Xi - Xj``, ``Xi — Xj``, ``Xi <-> Xj``
  as undirected), several per line or chained (``X1 -> X2 -> X3``), separated by newlines,
  commas or semicolons, with any surrounding prose or a Markdown code fence;
* JSON text (anywhere in the text, e.g. in a ```json fence) of one of the forms below;
* a JSON list of edges, each a string as above, a pair ``["Xi", "Xj"]`` (meaning ``Xi -> Xj``),
  a triple ``["Xi", "->", "Xj"]``, or an object with source/target keys (``from``/``to``,
  ``source``/``target``, ``x``/``y``, ``u``/``v``) and an optional ``type``/``relation``/``kind``
  (``->``, ``<-``, ``--``, ``directed``, ``undirected``; default ``->``);
* a JSON object ``{"edges": [...]}`` (the list form inside), or an adjacency mapping
  ``{"Xi": ["Xj", ...]}`` meaning ``Xi -> Xj`` for each listed ``Xj``.

An explicitly empty list (``[]``, ``{"edges": []}``) is the empty graph.  Anything else that
yields no edge, names an unknown variable, a self-loop or two different relations for one pair
raises :class:`ParseError` with a message the agent can act on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from heuresis.causal.graph import Graph, Relation

__all__ = ["FORMAT_HELP", "ParseError", "parse_edge_list"]

FORMAT_HELP = ('expected an edge list: lines like "X1 -> X2" or "X1 -- X3", or JSON such as '
               '["X1 -> X2", "X1 -- X3"] or [{"from": "X1", "to": "X2", "type": "->"}]')

_ARROWS = {"->": Relation.FORWARD, "<-": Relation.BACKWARD, "--": Relation.UNDIRECTED, "-": Relation.UNDIRECTED,
           "—": Relation.UNDIRECTED, "–": Relation.UNDIRECTED, "<->": Relation.UNDIRECTED,
           "→": Relation.FORWARD, "←": Relation.BACKWARD}
_EDGE = re.compile(r"(?=\b([Xx]\d+)\s*(<->|->|<-|--|—|–|→|←|-)\s*([Xx]\d+)\b)")
_TYPE = {"->": Relation.FORWARD, "directed": Relation.FORWARD, "<-": Relation.BACKWARD,
         "--": Relation.UNDIRECTED, "-": Relation.UNDIRECTED, "undirected": Relation.UNDIRECTED,
         "<->": Relation.UNDIRECTED, "bidirected": Relation.UNDIRECTED}
_KEYS = (("from", "to"), ("source", "target"), ("x", "y"), ("u", "v"), ("parent", "child"), ("cause", "effect"))


class ParseError(ValueError):
    """A submission that is not a valid edge list (the message says why)."""


class _Builder:
    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.index = {n.upper(): k for k, n in enumerate(self.names)}
        self.rel: dict[tuple[int, int], Relation] = {}

    def node(self, name) -> int:
        if not isinstance(name, str) or name.strip().upper() not in self.index:
            raise ParseError(f"unknown variable {echo(name)}; the variables are {self.names[0]}..{self.names[-1]}")
        return self.index[name.strip().upper()]

    def add(self, a, b, rel: Relation) -> None:
        i, j = self.node(a), self.node(b)
        if i == j:
            raise ParseError(f"self-loop on {self.names[i]} is not an edge")
        if i > j:
            i, j = j, i
            rel = {Relation.FORWARD: Relation.BACKWARD, Relation.BACKWARD: Relation.FORWARD}.get(rel, rel)
        prev = self.rel.get((i, j))
        if prev is not None and prev != rel:
            raise ParseError(f"pair {self.names[i]}, {self.names[j]} is given two different relations")
        self.rel[(i, j)] = rel

    def graph(self) -> Graph:
        g = Graph.empty(len(self.names), self.names)
        for (i, j), rel in self.rel.items():
            g.set(i, j, rel)
        return g


def _from_text(text: str, b: _Builder) -> int:
    n = 0
    for m in _EDGE.finditer(text):
        b.add(m.group(1), m.group(3), _ARROWS[m.group(2)])
        n += 1
    return n


def _from_item(item, b: _Builder) -> None:
    if isinstance(item, str):
        if _from_text(item, b) == 0:
            raise ParseError(f"cannot read edge {echo(item)}; {FORMAT_HELP}")
    elif isinstance(item, (list, tuple)):
        if len(item) == 2:
            b.add(item[0], item[1], Relation.FORWARD)
        elif len(item) == 3 and isinstance(item[1], str) and item[1].strip().lower() in _TYPE:
            b.add(item[0], item[2], _TYPE[item[1].strip().lower()])
        else:
            raise ParseError(f"cannot read edge {echo(item)}; a list edge is [\"Xi\", \"Xj\"] or [\"Xi\", \"->\", \"Xj\"]")
    elif isinstance(item, Mapping):
        low = {str(k).lower(): v for k, v in item.items()}
        for ka, kb in _KEYS:
            if ka in low and kb in low:
                kind = low.get("type", low.get("relation", low.get("kind", "->")))
                kind = str(kind).strip().lower()
                if kind not in _TYPE:
                    raise ParseError(f"unknown edge type {echo(kind)} in {echo(item)}; use '->', '<-' or '--'")
                b.add(low[ka], low[kb], _TYPE[kind])
                return
        raise ParseError(f"cannot read edge {echo(item)}; an edge object needs 'from' and 'to' keys")
    else:
        raise ParseError(f"cannot read edge {echo(item)}; {FORMAT_HELP}")


def _from_json(obj, b: _Builder) -> None:
    if isinstance(obj, Mapping):
        low = {str(k).lower(): v for k, v in obj.items()}
        if "edges" in low:
            return _from_json(low["edges"], b)
        if all(isinstance(v, (list, tuple)) for v in obj.values()) and obj:
            for parent, children in obj.items():
                for child in children:
                    b.add(parent, child, Relation.FORWARD)
            return None
        _from_item(obj, b)  # a single edge object
        return None
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _from_item(item, b)
        return None
    if isinstance(obj, str):
        return _parse_text(obj, b)
    raise ParseError(f"cannot read a {type(obj).__name__} as an edge list; {FORMAT_HELP}")


def _json_candidates(text: str):
    """JSON values embedded in text: fenced blocks first, then the whole text, then [..]/{..} spans."""
    for m in re.finditer(r"```(?:json)?\s*(.*?)```", text, flags=re.S):
        yield m.group(1)
    yield text
    for open_, close in (("[", "]"), ("{", "}")):
        lo, hi = text.find(open_), text.rfind(close)
        if 0 <= lo < hi:
            yield text[lo:hi + 1]


def echo(value, limit: int = 120) -> str:
    """``repr(value)`` capped at ``limit`` characters: what error messages quote of an agent's input."""
    try:
        text = repr(value) if not isinstance(value, str) or len(value) <= 4 * limit else repr(value[: 4 * limit])
    except RecursionError:
        text = f"<deeply nested {type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _parse_text(text: str, b: _Builder) -> None:
    for cand in _json_candidates(text):
        try:
            obj = json.loads(cand)
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
        if isinstance(obj, (list, dict)):
            _from_json(obj, b)
            return
    if _from_text(text, b) == 0:
        raise ParseError(f"no edge found in the text; {FORMAT_HELP}")


def parse_edge_list(obj, names: Sequence[str]) -> Graph:
    """The graph over ``names`` that a submission describes, or :class:`ParseError`."""
    b = _Builder(names)
    if obj is None:
        raise ParseError(f"empty submission; {FORMAT_HELP}")
    try:
        if isinstance(obj, str):
            if not obj.strip():
                raise ParseError(f"empty submission; {FORMAT_HELP}")
            _parse_text(obj, b)
        else:
            _from_json(obj, b)
    except RecursionError:
        raise ParseError(f"the edge list is nested too deeply to read; {FORMAT_HELP}") from None
    return b.graph()
