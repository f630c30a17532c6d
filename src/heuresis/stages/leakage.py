"""Figure 1a, the leakage probe: whether an LLM knows public causal graphs from variable names alone.

For each configured LLM agent, each public network (:mod:`heuresis.causal.networks`, read offline from
the BNLearn files bundled in ``pgmpy-no-torch``) and each repeat, the model is asked, in one
text-only request, for the causal graph over a list of variables, in two conditions:

* ``names``   — the network's own variable names (e.g. ``smoke``, ``lung``, ``xray`` for Asia);
* ``indices`` — the control: the same structure with the names replaced by ``X1..Xd`` in a
  random (seeded) assignment, so nothing but chance can produce the graph.

Variables are listed in a seeded random order in both conditions (the files list them in an
order that leaks the topological order).  The answer is parsed with the harness's tolerant
edge-list parser after mapping the listed labels back to node indices, and scored by adjacency
precision / recall / F1 against the true skeleton and by **direction accuracy** (among the
predicted directed edges on true adjacencies, the share oriented as in the true DAG).  A reply
that holds no readable edge list scores as the empty graph and is flagged ``unparsed`` (so does a
prompt the model's context cannot hold: its error says ``context_overflow``); a failed
request is recorded ``failed`` with its error and, like a failed episode, is not checkpointed:
rerunning the target retries only the failed probes (:mod:`heuresis.artifacts.failures`).  Each answered
probe is checkpointed, so a killed job resumes without paying twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from heuresis.agents import make_agent
from heuresis.artifacts.failures import FIRST_ATTEMPT, failure_metadata, record_attempt
from heuresis.artifacts.io import Checkpoint, write_table
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.report import pyplot
from heuresis.artifacts.schemas import LEAKAGE
from heuresis.causal.graph import Graph, Relation
from heuresis.causal.metrics import adjacency_scores
from heuresis.causal.networks import Network, load_network
from heuresis.config.loading import agent_errors, config_digest
from heuresis.harness.agent_spec import result_spec
from heuresis.harness.loop import single_request
from heuresis.harness.parse import ParseError, parse_edge_list
from heuresis.harness.prompts import render
from heuresis.registry import MODEL_KINDS
from heuresis.stages.jobs import job_minutes, request_seconds

__all__ = [
    "CONDITIONS",
    "config_errors",
    "figure1a",
    "leakage_job_runtime",
    "probe_labels",
    "probe_prompt",
    "probe_seed",
    "run_leakage",
    "score_reply",
    "to_tokens",
]

CONDITIONS = ("names", "indices")


def probe_seed(seed: int, agent: str, network: str, condition: str, repeat: int) -> int:
    """Seed of one probe (the index assignment and the listing order), stable across runs."""
    h = hashlib.sha256(f"{seed}/leakage/{agent}/{network}/{condition}/{repeat}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def probe_labels(net: Network, condition: str, rng: np.random.Generator) -> tuple[list[str], list[int]]:
    """(label of each node in network order, presentation order of the nodes)."""
    d = len(net.variables)
    if condition == "names":
        labels = list(net.variables)
    elif condition == "indices":
        labels = [f"X{k + 1}" for k in rng.permutation(d)]
    else:
        raise ValueError(f"unknown leakage condition {condition!r}; known: {CONDITIONS}")
    return labels, [int(k) for k in rng.permutation(d)]


def probe_prompt(labels: Sequence[str], order: Sequence[int]) -> str:
    """The probe's request: the variables listed in ``order`` under their labels."""
    return render("leakage", d=len(labels), variables="\n".join(f"- {labels[k]}" for k in order))


def to_tokens(text: str, labels: Sequence[str]) -> str:
    """``text`` with each label replaced (whole words, one pass) by its node's token ``X{index+1}``.

    Matching ignores case when the labels stay distinct that way (models often re-case names).
    """
    distinct_ci = len({lab.lower() for lab in labels}) == len(labels)
    key = (lambda s: s.lower()) if distinct_ci else (lambda s: s)
    token = {key(lab): f"X{k + 1}" for k, lab in enumerate(labels)}
    alternatives = "|".join(re.escape(lab) for lab in sorted(labels, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.])({alternatives})(?![\w])", re.IGNORECASE if distinct_ci else 0)
    return pattern.sub(lambda m: token[key(m.group(1))], text)


def score_reply(text: str, labels: Sequence[str], true_adj: np.ndarray) -> dict:
    """Adjacency precision/recall/F1 and direction accuracy of a reply; unparsed -> empty graph."""
    d = len(labels)
    names = [f"X{k + 1}" for k in range(d)]
    status, error = "ok", ""
    try:
        g = parse_edge_list(to_tokens(text or "", labels), names)
    except ParseError as exc:
        g, status, error = Graph.empty(d), "unparsed", str(exc)
    s = adjacency_scores(true_adj, g)
    right = judged = 0
    for i, j in zip(*np.nonzero(np.triu(np.ones((d, d), bool), 1))):
        rel = g.relation(int(i), int(j))
        if rel in (Relation.FORWARD, Relation.BACKWARD) and (true_adj[i, j] or true_adj[j, i]):
            judged += 1
            right += int((rel == Relation.FORWARD) == bool(true_adj[i, j]))
    return {"f1": s.f1, "precision": s.precision, "recall": s.recall, "n_edges": int(g.n_edges()),
            "n_directed_judged": judged, "direction_accuracy": right / judged if judged else float("nan"),
            "status": status, "error": error}


def run_leakage(agent: str, spec: Mapping, networks: Sequence[str], repeats: int, seed: int, out: str | Path, *,
                log: Callable[[str], None] = lambda m: None, attempt: str = FIRST_ATTEMPT) -> Path:
    """Probe one agent on every network x condition x repeat; write :data:`LEAKAGE` to ``out``.

    A failed probe (a request that failed for good) is recorded ``failed`` but not checkpointed:
    the job records the next ``attempt`` (the rule's parameter of that name,
    :func:`heuresis.artifacts.failures.attempt_param`) and rerunning the target asks only the failed probes again.
    """
    started = utc_now()
    cfg_slice = {"agent": agent, "spec": result_spec(spec), "networks": list(networks), "repeats": int(repeats),
                 "seed": int(seed)}
    ckpt = Checkpoint(out, config_digest(cfg_slice))
    model = make_agent(agent, spec)
    units = [(net, cond, r) for net in networks for cond in CONDITIONS for r in range(int(repeats))]
    for unit in units:
        key = "/".join(map(str, unit))
        if key in ckpt:
            continue
        net_name, cond, r = unit
        net = load_network(net_name)
        s = probe_seed(seed, agent, net_name, cond, r)
        labels, order = probe_labels(net, cond, np.random.default_rng(s))
        messages = [{"role": "system", "content": render("leakage_system")},
                    {"role": "user", "content": probe_prompt(labels, order)}]
        row = {"agent": agent, "model": model.model, "provider": model.provider, "network": net_name,
               "condition": cond, "repeat": r, "seed": s, "d": len(labels),
               "n_true_edges": int(net.adjacency.sum()), "labels": "; ".join(labels[k] for k in order)}
        ex = single_request(model, messages)
        u = ex.usage
        if ex.ending:   # the prompt does not fit the model's context: no answer, scored as an unreadable one
            row.update(score_reply("", labels, net.adjacency), status="unparsed", reply="",  # type: ignore[call-overload]
                       error=f"{ex.ending.reason}: {ex.ending}",
                       tokens_in=0, tokens_out=0, cost=ex.cost, latency_s=round(ex.wall_s, 4),
                       retries=0 if u is None else u.retries)
        elif not ex.ok:   # recorded, never dropped; the other probes go on
            row.update(status="failed", error=f"{type(ex.error).__name__}: {ex.error}", reply="", f1=float("nan"),  # type: ignore[call-overload]
                       precision=float("nan"), recall=float("nan"), n_edges=0, n_directed_judged=0,
                       direction_accuracy=float("nan"), tokens_in=0, tokens_out=0,
                       cost=ex.cost, latency_s=0.0, retries=0 if u is None else u.retries)
        else:
            text = ex.reply.message.get("content") or ""  # type: ignore[union-attr]
            row.update(score_reply(text, labels, net.adjacency), reply=text, tokens_in=u.tokens_in,  # type: ignore[misc, union-attr]
                       tokens_out=u.tokens_out, cost=ex.cost, latency_s=u.latency_s, retries=u.retries)  # type: ignore[arg-type, union-attr]
        if row["status"] == "failed":   # written, not saved: a rerun retries it
            ckpt.fail(key, row)
        else:
            ckpt.save(key, row)
        log(f"leakage {agent} {net_name} {cond} r{r}: {row['status']} F1={row['f1']:.3f}"
            + (f" ERROR {row['error']}" if row["status"] == "failed" else ""))
    rows = ckpt.values("/".join(map(str, u)) for u in units)
    prov = provenance_record(stage="leakage", config=cfg_slice, seeds={"seed": int(seed)}, started=started)
    table = pa.table({c: [r[c] for r in rows] for c in LEAKAGE.schema.names}, schema=LEAKAGE.schema)
    failed = len(ckpt.failed)
    record_attempt(out, attempt, failed, "probes")   # first: a kill after it still leaves a retry
    write_table(table, out, LEAKAGE, {PROVENANCE_KEY: dumps(prov), **failure_metadata(failed, attempt)})
    if ckpt.finish():
        log(f"leakage {agent}: {failed} of {len(units)} probes FAILED; rerun the target to retry them "
            "(the answered ones are kept)")
    return Path(out)


def figure1a(results: pd.DataFrame, agents: Sequence[str], networks: Sequence[str]):
    """Plot adjacency F1 and direction accuracy per network, names vs indices, one column per agent.

    Without an LLM agent, a figure that says so.  Returns (fig, numbers).
    """
    plt = pyplot()

    if not agents:
        fig, ax = plt.subplots(figsize=(6.5, 1.6))
        ax.axis("off")
        ax.text(0.5, 0.5, "Figure 1a (leakage probe) not computed: no LLM agent is configured\n"
                          "(config leakage.agents is empty). It needs an LLM: see docs/agents.md.",
                ha="center", va="center", fontsize=10)
        return fig, pd.DataFrame(columns=["agent", "network", "condition", "metric", "mean", "min", "max", "n"])
    metrics = (("f1", "adjacency F1"), ("direction_accuracy", "direction accuracy"))
    fig, axes = plt.subplots(2, len(agents), figsize=(0.55 * len(networks) * len(agents) + 2.5, 5.2),
                             squeeze=False, sharey=True)
    colors = {"names": "#dd8452", "indices": "#9e9e9e"}
    rows = []
    x = np.arange(len(networks))
    for c, agent in enumerate(agents):
        sub = results[results.agent == agent]
        for r, (metric, label) in enumerate(metrics):
            ax = axes[r, c]
            for k, cond in enumerate(CONDITIONS):
                stats = []
                for net in networks:
                    v = sub[(sub.network == net) & (sub.condition == cond)][metric].dropna().to_numpy(float)
                    st = (v.mean(), v.min(), v.max()) if len(v) else (np.nan, np.nan, np.nan)
                    stats.append(st)
                    rows.append(dict(agent=agent, network=net, condition=cond, metric=metric, mean=st[0], min=st[1],
                                     max=st[2], n=len(v)))
                est = np.array([s[0] for s in stats])
                err = np.array([[s[0] - s[1] for s in stats], [s[2] - s[0] for s in stats]])
                ax.bar(x + (k - 0.5) * 0.4, est, 0.4, yerr=np.nan_to_num(err), capsize=2, color=colors[cond],
                       label={"names": "variable names", "indices": "names replaced by X1..Xd"}[cond])
            ax.set_xticks(x, networks, rotation=30, ha="right")
            ax.set_ylim(0, 1.05)
            ax.spines[["top", "right"]].set_visible(False)
            if c == 0:
                ax.set_ylabel(f"{label}\n(mean, range over repeats)")
            if r == 0:
                ax.set_title(agent)
    axes[0, 0].legend(frameon=False, loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig, pd.DataFrame(rows)


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of ``leakage``: the probed agents are LLM agents; the networks are known ones."""
    from heuresis.causal.networks import NETWORKS

    msgs: list[str] = []
    leak = config["leakage"]
    msgs += agent_errors(config, "leakage.agents", leak["agents"], MODEL_KINDS, "the leakage probe asks an LLM (kind llm)")
    for n in leak["networks"]:
        if n not in NETWORKS:
            msgs.append(f"config key leakage.networks: unknown network {n!r}; known: {list(NETWORKS)}")
    return msgs


# --- job planning -----------------------------------------------------------------------------------
def leakage_job_runtime(config: Mapping, agent: str) -> int:
    """Minutes of a leakage job (one network): two conditions x ``leakage.repeats`` requests, each at most ``timeout_s``."""
    n = len(CONDITIONS) * int(config["leakage"]["repeats"])
    return job_minutes(n * (request_seconds(config["agents"][agent]) or 0.0))
