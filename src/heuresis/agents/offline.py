"""Offline agents (SPEC §5.5): scripted policies that act only through tool calls.

They drive the same interface an LLM agent does — OpenAI-format tool calls with JSON-string
arguments, tool results read back as text — and need no network.  They are **privileged
baselines**: the harness passes them the episode's unmasking map (masked name -> menu name) in
the constructor (recorded in the episode as ``privileged``), because a baseline must know which
masked algorithm is PC-KCI; an agent under study never gets it.

* ``shortcut`` — run PC-KCI, submit its output.
* ``merge`` — run every menu algorithm, add to PC-KCI's output (as undirected) every pair that at
  least ``k`` of the other algorithms join, submit.
* ``evidence`` — start from PC-KCI's output (guided: the starting graph and deletion log of the
  prompt; unguided: run PC-KCI and take every non-adjacent pair as a candidate), re-test each
  candidate with KCI under alternative conditioning sets (the empty set and each endpoint's
  neighbours in the current graph, up to ``max_set`` variables), then run a stability check on
  the candidates dependent under every alternative (at the deleting set when known) and restore
  a pair, undirected, when at least ``min_dependent_share`` of the subsamples find dependence —
  all within the test budget read from the budgets line; then submit.

When offered only ``submit`` (the last turn) every agent submits the best graph it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from heuresis.agents.base import Agent, AgentReply, register_agent, tool_call
from heuresis.graph import Graph, Relation
from heuresis.harness.parse import ParseError, parse_edge_list

__all__ = ["ShortcutAgent", "MergeAgent", "EvidenceAgent"]

_BUDGET = re.compile(r"test units (\d+)/(\d+)")
_LOG = re.compile(r"^(X\d+) -- (X\d+) \| given \{(.*?)\} \| (\w+) \| (.+)$", re.M)


# --- reading the conversation ---------------------------------------------------------------------
def _names(messages: list[dict]) -> list[str]:
    for m in messages:
        if m["role"] == "user":
            hit = re.search(r"columns named X1\.\.X(\d+)", m.get("content") or "")
            if hit:
                return [f"X{k + 1}" for k in range(int(hit.group(1)))]
    raise ValueError("the prompt does not name the columns")


def _prompt(messages: list[dict]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def _results(messages: list[dict]) -> dict[str, str]:
    """Tool results since the last assistant message, by tool-call id."""
    out = {}
    for m in reversed(messages):
        if m["role"] == "assistant":
            break
        if m["role"] == "tool":
            out[m["tool_call_id"]] = m["content"]
    return out


def _body(result: str) -> str:
    return "\n".join(line for line in result.splitlines() if not line.startswith("[budgets left"))


def _graph_of(result: str, names: list[str]) -> Graph | None:
    """The graph in a run_algorithm / view_graph result, or None for an error."""
    if result.startswith("ERROR"):
        return None
    lines = _body(result).splitlines()[1:]
    text = "\n".join(lines)
    if "(no edges)" in text or not text.strip():
        return Graph.empty(len(names), names)
    try:
        return parse_edge_list(text, names)
    except ParseError:
        return None


def _test_units_left(messages: list[dict]) -> int | None:
    for m in reversed(messages):
        hit = _BUDGET.search(m.get("content") or "")
        if hit:
            return int(hit.group(1))
    return None


def _msg(calls: list[dict], content: str | None = None) -> AgentReply:
    return AgentReply({"role": "assistant", "content": content, "tool_calls": calls})


def _submit(g: Graph | None) -> AgentReply:
    args = {} if g is None else {"edges": g.to_lines()}
    return _msg([tool_call("submit", args)])


def _only_submit(tools: list[dict]) -> bool:
    return [t["function"]["name"] for t in tools] == ["submit"]


class _Offline(Agent):
    privileged = True

    def __init__(self, name: str, algorithm_map: Mapping[str, str] | None = None, **params) -> None:
        super().__init__(name, **params)
        self.unmask = dict(algorithm_map or {})
        self.mask = {v: k for k, v in self.unmask.items()}
        self.best: Graph | None = None
        self.step = 0
        self.pending: dict[str, tuple] = {}

    def masked(self, algorithm: str) -> str:
        if algorithm not in self.mask:
            raise ValueError(f"{self.name}: {algorithm!r} is not on the menu of this episode")
        return self.mask[algorithm]

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        if _only_submit(tools):
            return _submit(self.best)
        self.step += 1
        return self.act(messages, _results(messages))

    def act(self, messages: list[dict], results: dict[str, str]) -> AgentReply:
        raise NotImplementedError


@register_agent("shortcut")
class ShortcutAgent(_Offline):
    """Runs PC-KCI through the masked tool and submits its output."""

    def act(self, messages, results):
        names = _names(messages)
        if self.step == 1:
            tc = tool_call("run_algorithm", {"algorithm": self.masked("pc_kci")})
            self.pending = {tc["id"]: ("pc_kci",)}
            return _msg([tc])
        for cid in self.pending:
            self.best = _graph_of(results.get(cid, "ERROR"), names) or self.best
        return _submit(self.best)


@register_agent("merge")
class MergeAgent(_Offline):
    """PC-KCI plus every pair at least ``k`` other menu algorithms join (undirected)."""

    def __init__(self, name: str, algorithm_map=None, k: int = 2, **params) -> None:
        super().__init__(name, algorithm_map, k=k, **params)
        self.k = int(k)

    def act(self, messages, results):
        names = _names(messages)
        if self.step == 1:
            calls = []
            for masked, real in sorted(self.unmask.items()):
                tc = tool_call("run_algorithm", {"algorithm": masked})
                self.pending[tc["id"]] = real
                calls.append(tc)
            return _msg(calls)
        graphs = {real: _graph_of(results.get(cid, "ERROR"), names) for cid, real in self.pending.items()}
        base = graphs.get("pc_kci")
        if base is None:
            return _submit(None)
        merged = base.copy()
        others = [g for a, g in graphs.items() if a != "pc_kci" and g is not None]
        skel = base.skeleton()
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if not skel[i, j] and sum(bool(g.skeleton()[i, j]) for g in others) >= self.k:
                    merged.set(i, j, Relation.UNDIRECTED)
        self.best = merged
        return _submit(merged)


@register_agent("evidence")
class EvidenceAgent(_Offline):
    """Re-tests PC-KCI's deletions under alternative sets and restores robustly dependent pairs."""

    def __init__(self, name: str, algorithm_map=None, test: str = "kci", max_set: int = 3, resamples: int = 6,
                 min_dependent_share: float = 0.5, **params) -> None:
        super().__init__(name, algorithm_map, test=test, max_set=max_set, resamples=resamples,
                         min_dependent_share=min_dependent_share, **params)
        self.test, self.max_set, self.resamples = test, int(max_set), int(resamples)
        self.min_share = float(min_dependent_share)
        self.candidates: list[tuple[int, int, tuple[int, ...] | None, str]] = []
        self.phase = "start"
        self.dependent_all: dict[tuple[int, int], bool] = {}

    def _start_guided(self, messages, names) -> None:
        prompt = _prompt(messages)
        start = prompt.split("Starting graph", 1)[1].split("PC deletion log", 1)[0]
        start = "\n".join(start.splitlines()[1:])
        self.best = Graph.empty(len(names), names) if "(no edges)" in start else parse_edge_list(start, names)
        idx = {n: k for k, n in enumerate(names)}
        for x, y, given, _test, grade in _LOG.findall(prompt):
            sep = tuple(idx[v.strip()] for v in given.split(",") if v.strip())
            self.candidates.append((idx[x], idx[y], sep, grade.strip()))

    def _alternatives(self, x: int, y: int, sep) -> list[tuple[int, ...]]:
        skel = self.best.skeleton()
        sets = [(), tuple(sorted(k for k in range(skel.shape[0]) if skel[x, k] and k != y)),
                tuple(sorted(k for k in range(skel.shape[0]) if skel[y, k] and k != x))]
        out = []
        for s in sets:
            if len(s) <= self.max_set and s != sep and s not in out:
                out.append(s)
        return out

    def act(self, messages, results):
        names = _names(messages)
        if self.phase == "start":
            if "PC deletion log" in _prompt(messages):
                self._start_guided(messages, names)
                self.phase = "retest"
            else:
                tc = tool_call("run_algorithm", {"algorithm": self.masked("pc_kci")})
                self.pending = {tc["id"]: ("pc_kci",)}
                self.phase = "candidates"
                return _msg([tc])
        if self.phase == "candidates":
            g = _graph_of(next(iter(results.values()), "ERROR"), names)
            if g is None:
                return _submit(None)
            self.best = g
            skel = g.skeleton()
            self.candidates = [(i, j, None, "") for i in range(len(names)) for j in range(i + 1, len(names))
                               if not skel[i, j]]
            self.phase = "retest"
        left = _test_units_left(messages) or 0
        if self.phase == "retest":
            # borderline deletions first: the likeliest to be a test without power
            order = sorted(self.candidates, key=lambda c: (0 if "borderline" in c[3] else 1, c[0], c[1]))
            calls, self.pending = [], {}
            reserve = self.resamples
            for x, y, sep, _grade in order:
                alts = self._alternatives(x, y, sep)
                if not alts or len(alts) + reserve > left:
                    continue
                left -= len(alts)
                reserve += self.resamples
                for s in alts:
                    tc = tool_call("ci_test", {"x": names[x], "y": names[y], "given": [names[k] for k in s],
                                               "test": self.test})
                    self.pending[tc["id"]] = (x, y)
                    calls.append(tc)
            self.phase = "stability"
            if calls:
                return _msg(calls)
        if self.phase == "stability":
            dep: dict[tuple[int, int], bool] = {}
            for cid, pair in self.pending.items():
                r = results.get(cid, "ERROR")
                dep[pair] = dep.get(pair, True) and ("verdict: dependent" in r)
            calls, self.pending = [], {}
            seps = {(x, y): sep for x, y, sep, _ in self.candidates}
            for (x, y), all_dep in dep.items():
                if not all_dep or self.resamples > left:
                    continue
                sep = seps[(x, y)]
                if sep is None:  # unguided: the largest alternative set
                    sep = max(self._alternatives(x, y, None), key=len)
                left -= self.resamples
                tc = tool_call("stability_check", {"x": names[x], "y": names[y], "given": [names[k] for k in sep],
                                                   "test": self.test, "resamples": self.resamples})
                self.pending[tc["id"]] = (x, y)
                calls.append(tc)
            self.phase = "decide"
            if calls:
                return _msg(calls)
        if self.phase == "decide":
            g = self.best.copy()
            for cid, (x, y) in self.pending.items():
                hit = re.search(r"dependent (\d+), independent (\d+)", results.get(cid, ""))
                if hit:
                    dep_n, ind_n = int(hit.group(1)), int(hit.group(2))
                    if dep_n / max(1, dep_n + ind_n) >= self.min_share:
                        g.set(x, y, Relation.UNDIRECTED)
            self.best = g
            self.phase = "done"
        return _submit(self.best)
