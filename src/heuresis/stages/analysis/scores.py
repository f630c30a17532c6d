"""Per-episode scores (docs/design.md §6): one row per episode, the input of every analysis table.

For each episode the submitted (or, unsubmitted, the working) graph is scored against the
truth with :func:`heuresis.harness.scoring.score_episode_graph` (the function the harness scores
it with), set against the references on the same instance
(PC-KCI's output and deletion log from the references stage, BCA_g and BCA_f from the headroom
stage) and against the agent's own calls:

* **drill-down** against PC-KCI's deletion log (:func:`drill_down`): recovered, harmful, PC edges
  dropped, re-oriented;
* **behaviour** from the calls table: the first PC-variant output the agent saw (the guided start
  is PC-KCI's output; else its first ``run_algorithm`` call of a PC variant) and the SHD to it,
  the distinct algorithms run, the tools called;
* **trace attribution** (:func:`merge_by_k`, :func:`unsupported`): F1 of PC-KCI's output plus every
  pair that at least k of the other algorithms the agent ran join, for k = 1..K; recovered pairs
  that no algorithm it ran proposes.

Tables aggregate these rows (:mod:`heuresis.stages.analysis.tables`); nothing there re-reads episodes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from heuresis.artifacts.io import read_table, write_table
from heuresis.artifacts.schemas import CALLS, EPISODE_SCORES, EPISODES, REQUESTS
from heuresis.causal.graph import Graph, Relation
from heuresis.causal.metrics import adjacency_scores, score_graph, shd
from heuresis.harness.parse import parse_edge_list
from heuresis.harness.scoring import score_episode_graph
from heuresis.stages.references import graph_of, labelled_log

__all__ = [
    "PC_VARIANTS",
    "DrillDown",
    "algorithm_outputs",
    "drill_down",
    "load_episode_scores",
    "load_episodes",
    "load_requests",
    "merge_by_k",
    "score_episodes",
    "spend_curve",
    "unsupported",
    "write_episode_scores",
]

PC_VARIANTS = ("pc_kci", "pc_fisherz")


@dataclass(frozen=True)
class DrillDown:
    """A graph against PC-KCI's output and deletion log on the same instance."""

    n_deleted: int
    n_wrong_deleted: int
    recovered: int          # wrongly deleted pairs the graph contains
    harmful: int            # rightly deleted pairs the graph contains
    pc_edges_dropped: int   # PC-KCI edges the graph lacks
    reoriented: int         # pairs adjacent in both, with another relation
    recovered_pairs: tuple[tuple[int, int], ...]

    @property
    def restored(self) -> int:
        """Pairs deleted by PC-KCI that the graph puts back, rightly or wrongly (``recovered + harmful``)."""
        return self.recovered + self.harmful


def _pair(names: Sequence[str], x: str, y: str) -> tuple[int, int]:
    i, j = names.index(x), names.index(y)
    return (i, j) if i < j else (j, i)


def drill_down(graph: Graph, pc_graph: Graph, deletions: Sequence[Mapping]) -> DrillDown:
    """Compare ``graph`` with PC-KCI's output ``pc_graph`` and its deletion log.

    ``deletions`` are the log's entries with their hidden ``wrong`` label (``x``, ``y``,
    ``wrong``); the repair precision is ``recovered / (recovered + harmful)``, the recall
    ``recovered / n_wrong_deleted``.
    """
    names = list(pc_graph.names)
    g, p = graph.skeleton(), pc_graph.skeleton()
    recovered, harmful, n_wrong = [], 0, 0
    for d in deletions:
        i, j = _pair(names, d["x"], d["y"])
        n_wrong += bool(d["wrong"])
        if g[i, j]:
            if d["wrong"]:
                recovered.append((i, j))
            else:
                harmful += 1
    iu = np.triu_indices(pc_graph.d, 1)
    dropped = int(np.sum(p[iu] & ~g[iu]))
    reoriented = sum(1 for i, j in zip(*iu) if p[i, j] and g[i, j] and graph.relation(i, j) != pc_graph.relation(i, j))
    return DrillDown(len(deletions), n_wrong, len(recovered), harmful, dropped, int(reoriented), tuple(recovered))


def merge_by_k(true_dag: Graph, pc_graph: Graph, others: Sequence[Graph], k_max: int) -> list[float]:
    """F1 of PC-KCI's output plus (undirected) every pair joined by >= k of ``others``, k = 1..k_max.

    ``others`` are the outputs of the algorithms other than PC-KCI that the agent ran (each once);
    a k larger than their number adds nothing.
    """
    votes = sum((o.skeleton().astype(int) for o in others), np.zeros((pc_graph.d, pc_graph.d), dtype=int))
    out = []
    for k in range(1, k_max + 1):
        g = pc_graph.copy()
        for i, j in zip(*np.nonzero(np.triu(votes >= k, 1))):
            if not g.skeleton()[i, j]:
                g.set(int(i), int(j), Relation.UNDIRECTED)
        out.append(adjacency_scores(true_dag, g).f1)
    return out


def unsupported(recovered_pairs: Sequence[tuple[int, int]], outputs: Sequence[Graph]) -> int:
    """Recovered pairs that no output in ``outputs`` (every algorithm the agent ran) contains."""
    return sum(1 for i, j in recovered_pairs if not any(o.skeleton()[i, j] for o in outputs))


def _graph_from_lines(lines: Sequence[str], names: Sequence[str]) -> Graph:
    return parse_edge_list(list(lines), names) if len(lines) else Graph.empty(len(names), names)


def algorithm_outputs(calls: pd.DataFrame, names: Sequence[str]) -> list[tuple[str, Graph]]:
    """(unmasked algorithm, output graph) of each successful ``run_algorithm`` call, in call order."""
    out = []
    for c in calls.sort_values(["turn", "index"]).itertuples():
        if c.tool != "run_algorithm" or not c.ok:
            continue
        det = json.loads(c.details or "{}")
        if "algorithm" in det and "edges" in det:
            out.append((det["algorithm"], _graph_from_lines(det["edges"], names)))
    return out


def _tool_counts(calls: pd.DataFrame) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for c in calls.itertuples():
        tool = c.tool
        if tool == "run_algorithm":
            det = json.loads(c.details or "{}")
            tool = f"run_algorithm:{det.get('algorithm', '?')}"
        counts[tool] += 1
    return dict(sorted(counts.items()))


def spend_curve(ep: Mapping, calls: pd.DataFrame, requests: pd.DataFrame, start: Graph, final: Graph,
                truth) -> dict[str, list | None]:
    """How the score grew with spend: per turn 0..T, the working graph's F1 and the tokens and dollars spent so far.

    The working graph after each turn is replayed from the calls (:func:`heuresis.harness.tools.replay_call`,
    the tools' own edit code); after the last turn it is the scored graph (the submission, if any).
    Tokens (prompt + completion) and dollars are cumulative over the episode's requests by turn
    (its calls' tokens when it has no requests table); dollars are null from the first request
    without a known price.  A call that cannot be replayed ends the curve at the turn before.
    """
    from heuresis.harness.tools import replay_call

    last = int(ep.get("turns") or 0)
    by_turn: dict[int, Graph] = {0: start}
    g = start
    for c in calls.sort_values(["turn", "index"]).to_dict("records"):
        try:
            after = replay_call(g, c)
        except (KeyError, TypeError, ValueError):
            last = min(last, int(c["turn"]) - 1)
            break
        g = after if after is not None else g
        by_turn[int(c["turn"])] = g
    f1, g = [], start
    for t in range(last + 1):
        g = final if t == last else by_turn.get(t, g)
        f1.append(float(adjacency_scores(truth.dag, g).f1))
    tok = np.zeros(last + 1)
    usd: np.ndarray | None = np.zeros(last + 1)
    rows = requests[requests["turn"] >= 1] if len(requests) else requests
    if len(rows):
        for r in rows.to_dict("records"):
            t = min(int(r["turn"]), last)
            tok[t:] += float(r.get("tokens_in") or 0) + float(r.get("tokens_out") or 0)
            if usd is not None:
                if r.get("cost") is None or pd.isna(r.get("cost")):
                    usd = None
                else:
                    usd[t:] += float(r["cost"])
    else:
        for c in calls.to_dict("records"):
            t = min(int(c["turn"]), last)
            tok[t:] += float(c.get("tokens_in") or 0) + float(c.get("tokens_out") or 0)
        cost = ep.get("cost")
        if cost is None or pd.isna(cost) or cost:   # spent without requests by turn: not placed in time
            usd = None
    return {"f1_by_turn": f1, "tokens_by_turn": tok.astype(int).tolist(),
            "usd_by_turn": None if usd is None else usd.tolist()}


def score_episode(ep: Mapping, calls: pd.DataFrame, truth, pc_row: Mapping, heads: Mapping[str, float] | None,
                  k_max: int, requests: pd.DataFrame | None = None) -> dict:
    """The :data:`EPISODE_SCORES` row of one episode (see module docstring)."""
    d = truth.dag.d
    names = [f"X{k + 1}" for k in range(d)]
    graph = Graph(np.asarray(ep["graph"], dtype=np.int8).reshape(d, d))
    pc_graph = graph_of(pc_row)
    scored = score_episode_graph(truth.dag, truth.cpdag, graph, pc_graph)
    s, pc = scored.graph, scored.pc_kci
    outputs = algorithm_outputs(calls, names)
    ran = list(dict.fromkeys(a for a, _ in outputs))
    first_out = dict(reversed(outputs))  # first output of each algorithm
    # the in-episode PC-KCI output: the guided start, else the agent's first pc_kci call
    if ep["guided"]:
        episode_pc, episode_pc_graph = "start", pc_graph
    elif "pc_kci" in first_out:
        episode_pc, episode_pc_graph = "call", first_out["pc_kci"]
    else:
        episode_pc, episode_pc_graph = "", None
    epc = score_graph(truth.dag, truth.cpdag, episode_pc_graph) if episode_pc_graph is not None else None
    # the first PC-variant output the agent saw
    first_pc = ("pc_kci", pc_graph) if ep["guided"] else next(((a, g) for a, g in outputs if a in PC_VARIANTS),
                                                               ("", None))
    shd_first = float(shd(first_pc[1], graph)) if first_pc[1] is not None else float("nan")
    dd = drill_down(graph, pc_graph, labelled_log(pc_row["deletions"], truth.dag))
    others = [first_out[a] for a in ran if a != "pc_kci"]
    heads = heads or {}
    bca_g, bca_f = heads.get("bca_g", np.nan), heads.get("bca_f", np.nan)
    termination = ep["termination"]
    return {
        **{k: ep[k] for k in ("episode_id", "agent", "agent_kind", "model", "provider", "toolbox", "guided",
                              "prompt_level", "target", "budget", "last_turn", "repeat", "condition_id", "family",
                              "split", "instance", "code_isolation", "status", "finished", "termination",
                              "tokens_out", "cost", "turns", "tokens_in")},
        "empty_length_replies": int(ep.get("empty_length_replies") or 0),
        "integrity_events": int(ep.get("integrity_events") or 0),
        "integrity_counts": ep.get("integrity_counts") or "{}",
        "wall_reached": bool(ep["exhausted"]),
        "rescued": bool(ep["exhausted"]) and termination in ("submitted_last_turn", "submitted_retry"),
        "unsubmitted": termination in ("unsubmitted", "context_overflow"),
        "f1": s.f1, "precision": s.precision, "recall": s.recall, "shd": s.shd, "nshd": s.nshd,
        "pc_kci_f1": pc.f1, "pc_kci_nshd": pc.nshd, "bca_g_f1": bca_g, "bca_f_f1": bca_f,
        "delta_s": s.f1 - bca_g, "delta_r": s.f1 - bca_f,
        "episode_pc": episode_pc, "episode_pc_f1": epc.f1 if epc else np.nan,
        "episode_pc_nshd": epc.nshd if epc else np.nan,
        "first_pc_variant": first_pc[0], "shd_to_first_pc": shd_first,
        "shortcut": bool(shd_first <= 1) if first_pc[1] is not None else False,
        "returns_pc_output": graph == pc_graph,
        "n_deleted": dd.n_deleted, "n_wrong_deleted": dd.n_wrong_deleted, "recovered": dd.recovered,
        "harmful": dd.harmful, "pc_edges_dropped": dd.pc_edges_dropped, "reoriented": dd.reoriented,
        "recovered_unsupported": unsupported(dd.recovered_pairs, [g for _, g in outputs]),
        "algorithms": ran, "n_algorithms": len(ran), "tool_counts": json.dumps(_tool_counts(calls)),
        "merge_f1": merge_by_k(truth.dag, pc_graph, others, k_max),
        **spend_curve(ep, calls, requests if requests is not None else pd.DataFrame(columns=["turn"]),
                      pc_graph.copy() if ep["guided"] else Graph.complete(d), graph, truth),
    }


def load_episodes(paths: Sequence) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Episode and calls tables of the given episode shards (``shard-XXX.parquet``; calls beside)."""
    eps = [read_table(p, EPISODES).to_pandas() for p in paths]
    calls = [read_table(str(p).replace(".parquet", ".calls.parquet"), CALLS).to_pandas() for p in paths]
    empty_e, empty_c = pd.DataFrame(columns=EPISODES.schema.names), pd.DataFrame(columns=CALLS.schema.names)
    return (pd.concat(eps, ignore_index=True) if eps else empty_e,
            pd.concat(calls, ignore_index=True) if calls else empty_c)


def load_requests(paths: Sequence) -> pd.DataFrame:
    """The requests tables beside the given episode shards (written by the same job), as one frame."""
    frames = [read_table(str(p).replace(".parquet", ".requests.parquet"), REQUESTS).to_pandas() for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=REQUESTS.schema.names)


def score_episodes(episodes: pd.DataFrame, calls: pd.DataFrame, truths: Mapping[tuple[str, str], Mapping],
                   pc_refs: pd.DataFrame, headroom: pd.DataFrame, menu: Sequence[str],
                   requests: pd.DataFrame | None = None) -> pd.DataFrame:
    """Score every episode (one :data:`EPISODE_SCORES` row each).

    ``truths`` maps (family, split) to :func:`heuresis.stages.instances.load_truth` output; ``pc_refs``
    holds PC-KCI's references rows; ``headroom`` the headroom stage's test scores (BCA_g, BCA_f).
    """
    refs = {(r["family"], r["split"], int(r["instance"])): r for r in pc_refs.to_dict("records")}
    heads: dict[tuple[str, int], dict[str, float]] = {}
    for r in headroom[headroom["method"].isin(["bca_g", "bca_f"])].itertuples():
        heads.setdefault((r.family, int(r.instance)), {})[r.method] = float(r.f1)
    by_episode = {k: g for k, g in calls.groupby("episode_id")} if len(calls) else {}  # noqa: C416 (GroupBy has .keys)
    k_max = max(len([a for a in menu if a != "pc_kci"]), 1)
    requests = requests if requests is not None else pd.DataFrame(columns=["episode_id", "turn"])
    asked = {k: g for k, g in requests.groupby("episode_id")} if len(requests) else {}  # noqa: C416
    no_requests = requests.iloc[:0]
    rows = []
    for ep in episodes.to_dict("records"):
        key = (ep["family"], ep["split"], int(ep["instance"]))
        if key not in refs:
            raise ValueError(f"no pc_kci references row for episode {ep['episode_id']}")
        truth = truths[(ep["family"], ep["split"])][int(ep["instance"])]
        h = heads.get((ep["family"], int(ep["instance"]))) if ep["split"] == "test" else None
        rows.append(score_episode(ep, by_episode.get(ep["episode_id"], calls.iloc[:0]), truth, refs[key], h, k_max,
                                  asked.get(ep["episode_id"], no_requests)))
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in EPISODE_SCORES.schema.names})
    return pd.DataFrame(rows)[EPISODE_SCORES.schema.names]


def write_episode_scores(scores: pd.DataFrame, path, meta) -> None:
    """Write the per-episode scores as the ``episode_scores`` artifact (atomically, with ``meta``).

    Parameters
    ----------
    scores : pandas.DataFrame
        Rows from :func:`score_episodes`; an empty frame writes an empty table of the schema.
    path : str or Path
        Destination Parquet file.
    meta : Mapping
        Provenance metadata stored in the file.
    """
    ints = [f.name for f in EPISODE_SCORES.schema if pa.types.is_integer(f.type)]
    rows = [{**r, **{k: None for k in ints if isinstance(r.get(k), float) and np.isnan(r[k])}}   # unknown, not NaN
            for r in scores.to_dict("records")]
    table = pa.Table.from_pylist(rows, schema=EPISODE_SCORES.schema) if rows else EPISODE_SCORES.schema.empty_table()
    write_table(table, path, EPISODE_SCORES, meta)


def load_episode_scores(path) -> pd.DataFrame:
    """Read an ``episode_scores`` artifact, checked against its schema, as a DataFrame."""
    return read_table(path, EPISODE_SCORES).to_pandas()
