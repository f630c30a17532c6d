"""Parquet schemas of every artifact, written once and used by writer and reader alike.

Each artifact kind is a :class:`ArtifactSchema` with a name, a pyarrow schema and a one-line
description per column (rendered into docs/artifacts.md).  Artifacts are written and read
against these schemas by :func:`heuresis.artifacts.io.write_table` (atomically, the schema's name and
version stamped into the Parquet key/value metadata under :data:`SCHEMA_KEY` and
:data:`VERSION_KEY`) and :func:`heuresis.artifacts.io.read_table` (which checks both and the columns, and
refuses a truncated or foreign file with an error naming the path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from heuresis.causal.games.rubric import CAUSAL, RUBRIC, RUBRIC_MAX, column_description

__all__ = [
    "CALLS",
    "DELETION",
    "EPISODES",
    "EPISODE_SCORES",
    "FORECAST",
    "GAME_CALLS",
    "GAME_JUDGEMENTS",
    "GAME_JUDGEMENT_REQUESTS",
    "GAME_PLAYS",
    "GAME_PLAY_REQUESTS",
    "GAME_REFERENCES",
    "HEADROOM_SCORES",
    "HEADROOM_SELECTION",
    "INSTANCE_INDEX",
    "LEAKAGE",
    "PILOT",
    "REFERENCES",
    "REPAIR_FEATURES",
    "REQUESTS",
    "REQUEST_COLUMNS",
    "SATURATION",
    "SCHEMA_KEY",
    "TRUTH_GRAPHS",
    "TRUTH_NODES",
    "VERIFICATION_CHECKS",
    "VERSION_KEY",
    "ArtifactSchema",
    "data_schema",
]

SCHEMA_KEY = b"heuresis.schema"            # Parquet key/value metadata: the artifact's schema name
VERSION_KEY = b"heuresis.schema_version"   # Parquet key/value metadata: that schema's version


@dataclass(frozen=True)
class ArtifactSchema:
    """One artifact kind: its name, version, Arrow schema and a one-line description per column.

    Parameters
    ----------
    name : str
        Stamped into every file of the kind and checked on reading.
    version : int
        Raised when the columns change; a file of another version is refused on reading.
    schema : pyarrow.Schema
        The columns and their types.
    doc : mapping
        Column name to its description; must name exactly the schema's columns.
    """

    name: str
    version: int
    schema: pa.Schema
    doc: Mapping[str, str]

    def __post_init__(self) -> None:
        missing = set(self.schema.names) ^ set(self.doc)
        if missing:
            raise ValueError(f"schema {self.name!r}: columns and docs differ on {sorted(missing)}")


def _schema(name: str, version: int, cols: list[tuple[str, pa.DataType, str]]) -> ArtifactSchema:
    return ArtifactSchema(name, version, pa.schema([pa.field(c, t, nullable=True) for c, t, _ in cols]),
                          {c: doc for c, _, doc in cols})


def data_schema(d: int) -> ArtifactSchema:
    """Agent-visible data of one instance: columns X1..Xd, standardized, float64."""
    return _schema("instance_data", 1, [(f"X{k + 1}", pa.float64(), "standardized observation")
                                        for k in range(d)])


INSTANCE_INDEX = _schema("instance_index", 1, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("instance_id", pa.string(), "family/split/index, unique over the benchmark"),
    ("path", pa.string(), "data file, relative to the index file's folder"),
    ("n", pa.int32(), "rows"),
    ("d", pa.int32(), "columns"),
    ("data_sha256", pa.string(), "SHA-256 of the data file's bytes"),
])

TRUTH_GRAPHS = _schema("truth_graphs", 2, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("instance_id", pa.string(), "family/split/index"),
    ("seed_entropy", pa.string(), "numpy SeedSequence entropy, in decimal (the global seed; a sealed test split: "
                                  "this instance's own one-way derivation of the sealed seed, which rebuilds no other)"),
    ("seed_spawn_key", pa.list_(pa.uint64()), "SeedSequence spawn key (family key, split key, index)"),
    ("prior", pa.string(), "random-graph prior drawn (er or ba)"),
    ("d", pa.int32(), "nodes"),
    ("n", pa.int32(), "rows"),
    ("n_edges", pa.int32(), "edges of the true DAG"),
    ("dag", pa.list_(pa.int8()), "true DAG over X1..Xd, row-major d*d, 1 at [i, j] for Xi -> Xj"),
    ("cpdag", pa.list_(pa.int8()), "true CPDAG mark matrix, row-major (both marks = undirected)"),
    ("causal_order", pa.list_(pa.string()), "the causal order the DAG was drawn over"),
    ("var_sortability_raw", pa.float64(), "var-sortability before standardization"),
    ("var_sortability", pa.float64(), "var-sortability of the stored (standardized) data"),
    ("r2_sortability", pa.float64(), "R^2-sortability of the stored data (Reisach et al. 2023)"),
    ("data_sha256", pa.string(), "SHA-256 of the agent-visible data file"),
])

TRUTH_NODES = _schema("truth_nodes", 1, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("node", pa.string(), "column name X1..Xd"),
    ("causal_rank", pa.int32(), "position in the causal order"),
    ("kind", pa.string(), "mechanism kind, or 'root'"),
    ("parents", pa.list_(pa.string()), "parent columns"),
    ("noise_scale", pa.float64(), "sigma (null for input-dependent noise kinds)"),
    ("standardize_output", pa.bool_(), "whether the map output was standardized before noise"),
    ("params", pa.string(), "JSON of every drawn mechanism parameter"),
])

DELETION = pa.struct([
    pa.field("x", pa.string()), pa.field("y", pa.string()), pa.field("sepset", pa.list_(pa.string())),
    pa.field("test", pa.string()), pa.field("pvalue", pa.float64()), pa.field("level", pa.int32()),
    pa.field("grade", pa.string()),
])

REFERENCES = _schema("references", 2, [
    ("algorithm", pa.string(), "menu algorithm or baseline name"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("instance_id", pa.string(), "family/split/index"),
    ("status", pa.string(), "ok, or failed (then the graph is empty and error says why)"),
    ("error", pa.string(), "error message of a failed run"),
    ("graph", pa.list_(pa.int8()), "output mark matrix over X1..Xd, row-major"),
    ("edges", pa.string(), "output edges as 'Xi -> Xj' / 'Xi -- Xj', '; '-separated"),
    ("runtime_s", pa.float64(), "wall time of the run in seconds"),
    ("n_tests", pa.int32(), "CI tests run (0 for score-based and functional methods)"),
    ("f1", pa.float64(), "adjacency F1 against the true skeleton"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.int32(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("n_edges", pa.int32(), "edges in the output"),
    ("details", pa.string(), "JSON of algorithm parameters and method-specific output"),
    ("deletions", pa.list_(DELETION), "PC variants: the deletion log (its hidden wrong label comes from the truth)"),
])

HEADROOM_SELECTION = _schema("headroom_selection", 2, [
    ("scope", pa.string(), "a family (BCA_f) or 'all' (BCA_g)"),
    ("algorithm", pa.string(), "menu algorithm"),
    ("dev_f1", pa.float64(), "mean adjacency F1 over the scope's dev instances (a failed run counts as the "
                             "empty graph's F1: heuresis.stages.headroom.BCA_FAILURE_RULE)"),
    ("dev_n", pa.int64(), "dev instances in the mean"),
    ("dev_n_failed", pa.int64(), "dev instances on which the algorithm failed (crashed), among dev_n"),
    ("chosen", pa.bool_(), "the scope's best chosen algorithm"),
])

HEADROOM_SCORES = _schema("headroom_scores", 2, [
    ("family", pa.string(), "mechanism family"),
    ("instance", pa.int64(), "test instance index"),
    ("method", pa.string(), "menu algorithm, baseline, bca_g, bca_f, oracle, empty, complete or random_restoration"),
    ("algorithm", pa.string(), "algorithm behind the method (bca_*: the chosen one; oracle: pc_kci)"),
    ("failed", pa.bool_(), "the run behind the method crashed on the instance (oracle, random_restoration: "
                           "pc_kci's); scored as the empty graph"),
    ("f1", pa.float64(), "adjacency F1 (random_restoration: mean over draws)"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.float64(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("n_deletions", pa.float64(), "PC-KCI deletions on the instance (pc_kci, oracle, random_restoration rows)"),
    ("n_wrong_deletions", pa.float64(), "PC-KCI wrong deletions (same rows)"),
    ("routed_to_kci", pa.float64(), "router rows: 1 if its screen routed the instance to PC-KCI, else 0; null otherwise"),
])

VERIFICATION_CHECKS = _schema("verification_checks", 1, [
    ("check", pa.string(), "check name (heuresis.stages.verification.CHECKS), one row per check"),
    ("title", pa.string(), "what is checked (Table 5's first column)"),
    ("reference", pa.string(), "the independent truth it is checked against"),
    ("scale", pa.string(), "scale name (verification.scale in the config)"),
    ("scale_description", pa.string(), "the sizes actually run at that scale"),
    ("n_cases", pa.int64(), "cases compared (queries, DAGs, instances, tests, runs)"),
    ("disagreements", pa.int64(), "cases that disagree with the reference beyond the tolerance"),
    ("passed", pa.bool_(), "whether the check passed"),
    ("required", pa.bool_(), "listed in verification.required (checks.parquet; null in a per-check record)"),
    ("tolerance", pa.string(), "what counts as agreement"),
    ("finding", pa.string(), "one-line summary of what was found"),
    ("n_examples", pa.int64(), "example files written (at most verification.max_examples)"),
    ("examples_dir", pa.string(), "folder of the example JSON files"),
    ("runtime_s", pa.float64(), "wall time of the check in seconds"),
    ("details", pa.string(), "JSON of check-specific numbers"),
])


EPISODES = _schema("episodes", 6, [
    ("episode_id", pa.string(), "agent/condition_id/family/split/index"),
    ("agent", pa.string(), "agent name (config agents)"),
    ("agent_kind", pa.string(), "agent kind: shortcut, merge, evidence, llm, ..."),
    ("model", pa.string(), "model string (LLM agents; null offline)"),
    ("provider", pa.string(), "provider (LLM agents; null offline)"),
    ("privileged", pa.bool_(), "the agent was given the unmasking map (offline agents only)"),
    ("toolbox", pa.string(), "full or minimal"),
    ("guided", pa.bool_(), "started from PC-KCI's output with its deletion log"),
    ("prompt_level", pa.int32(), "prompt level 0-3"),
    ("target", pa.string(), "stated target: none, cpdag or dag"),
    ("budget", pa.string(), "budget setting name (config episodes.budgets)"),
    ("last_turn", pa.string(), "last-turn setting: none, once or retry"),
    ("repeat", pa.int32(), "repeat index"),
    ("condition_id", pa.string(), "stable condition name used in paths"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index"),
    ("instance_id", pa.string(), "family/split/index"),
    ("seed", pa.int64(), "episode seed (algorithm masking, subsamples)"),
    ("algorithm_map", pa.string(), "JSON masked name -> menu algorithm of this episode"),
    ("status", pa.string(), "ok, or failed (the agent crashed; error says why)"),
    ("error", pa.string(), "error of a failed episode"),
    ("finished", pa.bool_(), "the agent submitted (else scored on its working graph)"),
    ("termination", pa.string(), "submitted, submitted_last_turn, submitted_retry, unsubmitted, context_overflow "
                                 "or failed"),
    ("exhausted", pa.string(), "the budget that ran out (test_units, turns, output_tokens, algorithm_calls, "
                               "wall_time), context (the model's context window) or empty"),
    ("graph", pa.list_(pa.int8()), "scored graph (submitted, else working) mark matrix, row-major"),
    ("edges", pa.string(), "scored graph as 'Xi -> Xj' / 'Xi -- Xj', '; '-separated"),
    ("f1", pa.float64(), "adjacency F1 against the true skeleton"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.int32(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("n_edges", pa.int32(), "edges in the scored graph"),
    ("pc_kci_f1", pa.float64(), "F1 of PC-KCI's output on the instance (references)"),
    ("turns", pa.int32(), "assistant replies, last turn included"),
    ("turns_limit", pa.int32(), "turn budget"),
    ("n_calls", pa.int32(), "tool calls (and text submissions)"),
    ("n_errors", pa.int32(), "calls answered with an error"),
    ("test_units_used", pa.int32(), "test units spent"),
    ("test_units_limit", pa.int32(), "test budget (factor x PC-KCI's test count)"),
    ("algorithm_calls_used", pa.int32(), "algorithm calls spent"),
    ("algorithm_calls_limit", pa.int32(), "algorithm-call budget"),
    ("wall_s", pa.float64(), "wall time of the episode in seconds (everything included)"),
    ("working_s", pa.float64(), "the agent's working time, the clock of the wall-time budget: wall time less "
                                "failed attempts, backoff and waits for the provider"),
    ("tokens_in", pa.int64(), "prompt tokens over all replies"),
    ("tokens_out", pa.int64(), "completion tokens over all replies"),
    ("cost", pa.float64(), "cost in USD over all replies; null when some reply's model has no known price"),
    ("abandoned_cost", pa.float64(), "USD paid by earlier runs of the episode for answers its conversation then left "
                                     "(requests table, abandoned); 0 when none, null when one had no known price"),
    ("empty_length_replies", pa.int32(), "replies cut at the output cap with neither text nor a tool call "
                                         "(all reasoning; finish_reason empty_length)"),
    ("retries", pa.int32(), "model-call retries over the episode (rate limits, timeouts, 5xx)"),
    ("warnings", pa.string(), "warnings of the agent (e.g. a model without a known price)"),
    ("code_isolation", pa.string(), "isolation of the code tool in this episode: bwrap, none (best_effort "
                                    "without bubblewrap: not isolated) or off (code tool not offered)"),
    ("integrity_events", pa.int32(), "integrity events of the episode: refused or suspicious actions of the agent "
                                     "(heuresis.harness.integrity)"),
    ("integrity_counts", pa.string(), "JSON category -> events (refused_tool, malformed_call, over_budget, "
                                      "sandbox_refusal, probe, network_refused, repeated_refusal)"),
    ("transcript", pa.string(), "path of the JSON transcript"),
])

CALLS = _schema("calls", 2, [
    ("episode_id", pa.string(), "episode of the call"),
    ("agent", pa.string(), "agent name"),
    ("condition_id", pa.string(), "condition"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index"),
    ("turn", pa.int32(), "turn of the reply that made the call (1-based)"),
    ("index", pa.int32(), "position of the call within its reply"),
    ("call_id", pa.string(), "tool-call id of the reply ('' for a text submission)"),
    ("tool", pa.string(), "tool name, or '(text)' for an edge list written as text"),
    ("arguments", pa.string(), "arguments as sent (JSON string)"),
    ("result", pa.string(), "the text returned to the agent (budgets line included)"),
    ("ok", pa.bool_(), "False when the call was answered with an error"),
    ("error", pa.string(), "error message of a rejected call"),
    ("test_units", pa.int32(), "test units charged"),
    ("wall_s", pa.float64(), "wall time of the call in seconds"),
    ("tokens_in", pa.int64(), "prompt tokens of the reply (on the reply's first call only, 0 on the others)"),
    ("tokens_out", pa.int64(), "completion tokens of the reply (first call only)"),
    ("last_turn", pa.bool_(), "made in the last turn"),
    ("details", pa.string(), "JSON not shown to the agent: unmasked algorithm, p-values, sandbox limits"),
    ("integrity", pa.list_(pa.string()), "integrity event categories of the call (heuresis.harness.integrity); "
                                         "empty for most calls"),
])

EPISODE_SCORES = _schema("episode_scores", 4, [
    ("episode_id", pa.string(), "agent/condition_id/family/split/index"),
    ("agent", pa.string(), "agent name (config agents)"),
    ("agent_kind", pa.string(), "agent kind"),
    ("model", pa.string(), "model string (LLM agents; null offline)"),
    ("provider", pa.string(), "provider (LLM agents; null offline)"),
    ("toolbox", pa.string(), "full or minimal"),
    ("guided", pa.bool_(), "started from PC-KCI's output with its deletion log"),
    ("prompt_level", pa.int32(), "prompt level 0-3"),
    ("target", pa.string(), "stated target: none, cpdag or dag"),
    ("budget", pa.string(), "budget setting name"),
    ("last_turn", pa.string(), "last-turn setting: none, once or retry"),
    ("repeat", pa.int32(), "repeat index"),
    ("condition_id", pa.string(), "condition name used in paths"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index"),
    ("code_isolation", pa.string(), "isolation of the code tool: bwrap, none (not isolated) or off (not offered)"),
    ("status", pa.string(), "ok or failed"),
    ("finished", pa.bool_(), "the agent submitted (else scored on its working graph)"),
    ("termination", pa.string(), "submitted, submitted_last_turn, submitted_retry, unsubmitted, context_overflow "
                                 "or failed"),
    ("wall_reached", pa.bool_(), "a budget ran out (the episode reached the wall)"),
    ("rescued", pa.bool_(), "reached the wall and submitted in the last turn (or its retry)"),
    ("unsubmitted", pa.bool_(), "ended without a submission, unsubmitted or context_overflow (scored on the "
                                "working graph)"),
    ("tokens_out", pa.int64(), "completion tokens over all replies"),
    ("cost", pa.float64(), "USD over all replies (null: some price unknown)"),
    ("empty_length_replies", pa.int32(), "replies cut at the output cap with neither text nor a tool call"),
    ("turns", pa.int32(), "assistant replies, last turn included"),
    ("tokens_in", pa.int64(), "prompt tokens over all replies"),
    ("integrity_events", pa.int32(), "refused or suspicious actions of the agent (heuresis.harness.integrity)"),
    ("integrity_counts", pa.string(), "JSON category -> integrity events"),
    ("f1", pa.float64(), "adjacency F1 of the scored graph (recomputed with metrics.score_graph)"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.int32(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("pc_kci_f1", pa.float64(), "F1 of PC-KCI's reference output on the instance"),
    ("pc_kci_nshd", pa.float64(), "nSHD of PC-KCI's reference output"),
    ("bca_g_f1", pa.float64(), "F1 of BCA_g on the instance (headroom; null off the test split)"),
    ("bca_f_f1", pa.float64(), "F1 of BCA_f on the instance (headroom; null off the test split)"),
    ("delta_s", pa.float64(), "gain f1 - bca_g_f1 (Δ^s, docs/design.md §1)"),
    ("delta_r", pa.float64(), "residual gain f1 - bca_f_f1 (Δ^r, docs/design.md §1)"),
    ("episode_pc", pa.string(), "source of the in-episode PC-KCI output: start (guided), call (first pc_kci "
                                "call), or empty (never seen)"),
    ("episode_pc_f1", pa.float64(), "F1 of the in-episode PC-KCI output (null when never seen)"),
    ("episode_pc_nshd", pa.float64(), "nSHD of the in-episode PC-KCI output"),
    ("first_pc_variant", pa.string(), "first PC-variant output the agent saw: pc_kci (guided start or call), "
                                      "pc_fisherz, or empty"),
    ("shd_to_first_pc", pa.float64(), "pairs whose relation differs between the scored graph and that output"),
    ("shortcut", pa.bool_(), "shd_to_first_pc <= 1 (false when no PC-variant output was seen)"),
    ("returns_pc_output", pa.bool_(), "the scored graph equals PC-KCI's reference output"),
    ("n_deleted", pa.int32(), "pairs in PC-KCI's deletion log"),
    ("n_wrong_deleted", pa.int32(), "of them wrongly deleted (adjacent in the true DAG)"),
    ("recovered", pa.int32(), "wrongly deleted pairs the scored graph contains as edges"),
    ("harmful", pa.int32(), "rightly deleted pairs the scored graph contains as edges"),
    ("pc_edges_dropped", pa.int32(), "edges of PC-KCI's output absent from the scored graph"),
    ("reoriented", pa.int32(), "pairs adjacent in both with a different relation"),
    ("recovered_unsupported", pa.int32(), "recovered pairs no algorithm the agent called proposes"),
    ("algorithms", pa.list_(pa.string()), "distinct menu algorithms the agent ran (unmasked), in call order"),
    ("n_algorithms", pa.int32(), "number of distinct algorithms run"),
    ("tool_counts", pa.string(), "JSON tool -> calls (run_algorithm split by unmasked algorithm)"),
    ("merge_f1", pa.list_(pa.float64()), "F1 of PC-KCI + pairs joined by >= k other called algorithms, k = 1..K"),
    ("f1_by_turn", pa.list_(pa.float64()), "F1 of the working graph after each turn 0..T (the last: the scored graph)"),
    ("tokens_by_turn", pa.list_(pa.int64()), "prompt + completion tokens spent by the end of each turn 0..T"),
    ("usd_by_turn", pa.list_(pa.float64()), "dollars spent by the end of each turn 0..T (null: some price unknown)"),
])



#: The columns of one model request, shared by every requests table (episodes, game plays, judgements).
REQUEST_COLUMNS = [
    ("index", pa.int32(), "request number within the run (0-based)"),
    ("turn", pa.int32(), "turn the request answered"),
    ("model", pa.string(), "model string (null for offline agents)"),
    ("provider", pa.string(), "litellm provider (null for offline agents)"),
    ("served_model", pa.string(), "the model the provider says answered (e.g. a dated snapshot of an alias)"),
    ("response_id", pa.string(), "the provider's id of the response"),
    ("tokens_in", pa.int64(), "prompt tokens the provider reported (null: no usage reported)"),
    ("tokens_out", pa.int64(), "completion tokens the provider reported (null: no usage reported)"),
    ("cached_tokens", pa.int64(), "prompt tokens read from the provider's cache (null: not reported)"),
    ("cache_write_tokens", pa.int64(), "prompt tokens written to the provider's cache, billed above input (null: not reported)"),
    ("caching", pa.string(), "prompt caching: explicit (prefix marked), automatic (the provider's own), off, none"),
    ("reasoning_tokens", pa.int64(), "completion tokens spent on reasoning (null: not reported)"),
    ("cost", pa.float64(), "cost in USD from the response (cached and reasoning tokens priced); null when unknown"),
    ("price_source", pa.string(), "litellm (bundled map), config, unknown, no usage, offline or 'no reply'"),
    ("latency_s", pa.float64(), "latency of the successful attempt in seconds"),
    ("wall_s", pa.float64(), "wall time of the request, retries and backoff included"),
    ("charged_s", pa.float64(), "seconds charged to the agent's working time (the successful attempt)"),
    ("started", pa.string(), "UTC time the request was first sent (ISO 8601)"),
    ("ended", pa.string(), "UTC time its answer or final failure arrived (ISO 8601)"),
    ("attempts", pa.int32(), "attempts made (failed ones included)"),
    ("replayed", pa.bool_(), "answered from the run's request log (paid by an earlier attempt of the job)"),
    ("abandoned", pa.bool_(), "paid by an earlier run of the episode whose conversation then went another way: "
                              "part of the bill, not of this episode's conversation (turn -1)"),
    ("retries", pa.int32(), "failed attempts before the answer (or before giving up)"),
    ("retry_log", pa.string(), "JSON list: per failed attempt the error, HTTP status, latency, Retry-After and backoff"),
    ("finish_reason", pa.string(), "provider's finish reason"),
    ("notes", pa.string(), "JSON list of recoveries: tool calls read from text, repaired arguments"),
    ("warnings", pa.string(), "JSON list of warnings (e.g. no known price)"),
    ("error", pa.string(), "the error of a request that failed for good ('' otherwise; keys scrubbed)"),
]

REQUESTS = _schema("requests", 3, [
    ("episode_id", pa.string(), "episode of the request"),
    ("agent", pa.string(), "agent name"),
    ("condition_id", pa.string(), "condition"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index"),
    *REQUEST_COLUMNS,
])

PILOT = _schema("pilot", 1, [
    ("agent", pa.string(), "LLM agent"),
    ("condition_id", pa.string(), "condition of the pilot episode"),
    ("budget", pa.string(), "its budget setting (the forecast's stratum)"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index"),
    ("grids", pa.list_(pa.string()), "the active grids that plan the episode"),
    ("status", pa.string(), "ok or failed (a failed one is not in the forecast's mean)"),
    ("termination", pa.string(), "how the episode ended"),
    ("turns", pa.int32(), "turns played"),
    ("requests", pa.int32(), "model requests answered (abandoned branches of earlier runs not counted)"),
    ("tokens_in", pa.int64(), "prompt tokens over its requests (null: some not reported)"),
    ("tokens_out", pa.int64(), "completion tokens over its requests"),
    ("cached_tokens", pa.int64(), "prompt tokens read from the provider's cache"),
    ("cache_write_tokens", pa.int64(), "prompt tokens written to the provider's cache"),
    ("reasoning_tokens", pa.int64(), "completion tokens spent on reasoning"),
    ("cost", pa.float64(), "USD paid for the episode, abandoned branches included (null: a price unknown)"),
])

FORECAST = _schema("forecast", 1, [
    ("agent", pa.string(), "LLM agent"),
    ("part", pa.string(), "a grid of episodes.run, total (its episodes, each once), or a part not piloted "
                          "(games_agentic, games_prompting, judgements, leakage: ceiling only)"),
    ("episodes", pa.int32(), "planned LLM episodes"),
    ("pilot_episodes", pa.int32(), "pilot episodes among them"),
    ("pilot_failed", pa.int32(), "pilot episodes that failed (not in the mean)"),
    ("mean_turns", pa.float64(), "mean turns of the pilot episodes"),
    ("mean_requests", pa.float64(), "mean requests per pilot episode"),
    ("mean_tokens_in", pa.float64(), "mean prompt tokens per pilot episode"),
    ("mean_tokens_out", pa.float64(), "mean completion tokens per pilot episode"),
    ("mean_cached_tokens", pa.float64(), "mean cached prompt tokens per pilot episode"),
    ("mean_reasoning_tokens", pa.float64(), "mean reasoning tokens per pilot episode"),
    ("forecast_usd", pa.float64(), "planned episodes of each budget setting x its pilot mean, summed"),
    ("low_usd", pa.float64(), "lower end of the bootstrap interval"),
    ("high_usd", pa.float64(), "upper end of the bootstrap interval"),
    ("level", pa.float64(), "the interval's level"),
    ("pilot_paid_usd", pa.float64(), "what the pilot's episodes cost (the full run replays them)"),
    ("remaining_usd", pa.float64(), "forecast minus what the pilot paid"),
    ("ceiling_usd", pa.float64(), "the upper bound of check-config (every request at the full context window)"),
    ("max_run_usd", pa.float64(), "the agent's cap over the run"),
])

GAME_PLAY_REQUESTS = _schema("game_play_requests", 3, [
    ("play_id", pa.string(), "play of the request"),
    ("agent", pa.string(), "agent name"),
    ("mode", pa.string(), "agentic or prompting"),
    ("scenario", pa.string(), "scenario name"),
    ("repeat", pa.int32(), "play number"),
    *REQUEST_COLUMNS,
])

GAME_JUDGEMENT_REQUESTS = _schema("game_judgement_requests", 3, [
    ("judge", pa.string(), "judge (an LLM agent's name)"),
    ("protocol", pa.string(), "the view judged: committed or as_published"),
    ("play_id", pa.string(), "play judged"),
    ("agent", pa.string(), "agent whose play was judged"),
    ("mode", pa.string(), "tools or prompt"),
    ("scenario", pa.string(), "scenario name"),
    ("repeat", pa.int32(), "play number"),
    *REQUEST_COLUMNS,
])

LEAKAGE = _schema("leakage", 1, [
    ("agent", pa.string(), "LLM agent name (config agents)"),
    ("model", pa.string(), "model string"),
    ("provider", pa.string(), "litellm provider"),
    ("network", pa.string(), "public network (heuresis.causal.networks)"),
    ("condition", pa.string(), "names (the network's variable names) or indices (X1..Xd, random assignment)"),
    ("repeat", pa.int32(), "repeat index"),
    ("seed", pa.int64(), "seed of the label assignment and the presentation order"),
    ("d", pa.int32(), "variables"),
    ("n_true_edges", pa.int32(), "edges of the true DAG"),
    ("labels", pa.string(), "the labels as listed in the prompt, '; '-separated"),
    ("status", pa.string(), "ok, unparsed (no edge list: scored as the empty graph) or failed (request failed)"),
    ("error", pa.string(), "parse or request error"),
    ("reply", pa.string(), "the model's answer"),
    ("f1", pa.float64(), "adjacency F1 against the true skeleton"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("n_edges", pa.int32(), "edges in the answer"),
    ("n_directed_judged", pa.int32(), "directed answer edges on true adjacencies"),
    ("direction_accuracy", pa.float64(), "share of those oriented as in the true DAG (NaN when none)"),
    ("tokens_in", pa.int64(), "prompt tokens"),
    ("tokens_out", pa.int64(), "completion tokens"),
    ("cost", pa.float64(), "cost in USD; null when the model has no known price"),
    ("latency_s", pa.float64(), "latency of the request"),
    ("retries", pa.int32(), "retries of the request"),
])
SATURATION = _schema("saturation", 1, [
    ("network", pa.string(), "public network (heuresis.causal.networks.NETWORKS)"),
    ("dataset", pa.int32(), "dataset index within the network"),
    ("d", pa.int32(), "variables"),
    ("n", pa.int32(), "rows"),
    ("n_arcs", pa.int32(), "arcs of the network"),
    ("method", pa.string(), "menu algorithm, or oracle (PC-KCI plus its wrongly deleted pairs)"),
    ("algorithm", pa.string(), "algorithm run (oracle: pc_kci)"),
    ("status", pa.string(), "ok, or failed (empty graph; error says why)"),
    ("error", pa.string(), "error message of a failed run"),
    ("f1", pa.float64(), "adjacency F1 against the network's skeleton"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.int32(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("n_edges", pa.int32(), "edges in the output"),
    ("runtime_s", pa.float64(), "wall time of the run in seconds (oracle: PC-KCI's)"),
    ("n_tests", pa.int32(), "CI tests run"),
    ("n_deletions", pa.int32(), "PC deletions (PC variants and oracle; null otherwise)"),
    ("n_wrong_deletions", pa.int32(), "PC deletions of true edges (same rows)"),
    ("graph", pa.list_(pa.int8()), "output mark matrix over X1..Xd, row-major"),
    ("dag", pa.list_(pa.int8()), "true DAG over X1..Xd (anonymized), row-major"),
    ("permutation", pa.list_(pa.int32()), "column X{k+1} is the network's variable permutation[k] (declaration order)"),
    ("seed_entropy", pa.uint64(), "SeedSequence entropy (saturation.seed)"),
    ("seed_spawn_key", pa.list_(pa.uint64()), "SeedSequence spawn key (key('saturation'), key(network), dataset)"),
])


REPAIR_FEATURES = _schema("repair_features", 1, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index"),
    ("is_pair", pa.bool_(), "False: the instance has no PC-KCI deletion (one placeholder row, no signals)"),
    ("x", pa.string(), "deleted pair, first column"),
    ("y", pa.string(), "deleted pair, second column"),
    ("sepset", pa.list_(pa.string()), "deleting set (first separating set found)"),
    ("level", pa.int32(), "PC level of the deletion"),
    ("grade", pa.string(), "strength grade of the deleting test"),
    ("wrong", pa.bool_(), "hidden label: the pair is adjacent in the true DAG"),
    ("pc_tp", pa.int32(), "PC-KCI true-positive adjacencies on the instance"),
    ("pc_fp", pa.int32(), "PC-KCI false-positive adjacencies on the instance"),
    ("pc_fn", pa.int32(), "PC-KCI missed true adjacencies on the instance"),
    ("log_pvalue", pa.float64(), "signal (log): p-value of the deleting test"),
    ("log_set_size", pa.float64(), "signal (log): size of the deleting set"),
    ("log_common_neighbours", pa.float64(), "signal (log): common neighbours of x and y in PC-KCI's output"),
    ("log_stale_set", pa.float64(), "signal (log): deleting-set members adjacent to neither x nor y in the output"),
    ("min_alt_pvalue", pa.float64(), "signal (tests): minimum KCI p over the alternative conditioning sets"),
    ("max_alt_pvalue", pa.float64(), "signal (tests): maximum KCI p over the alternative conditioning sets"),
    ("fisherz_pvalue", pa.float64(), "signal (tests): Fisher-z p at the deleting set"),
    ("stability", pa.float64(), "signal (tests): share of row subsamples where KCI at the deleting set rejects"),
    ("residual_dcor", pa.float64(), "signal (data): distance correlation of x, y after OLS on the deleting set"),
    ("n_alternatives", pa.int32(), "alternative conditioning sets tested"),
    ("n_new_tests", pa.int32(), "KCI tests computed for the pair's signals (cache misses)"),
])



# --- games track (docs/games.md; heuresis.stages.games.workflow) ------------------------------------
GAME_REFERENCES = _schema("game_references", 6, [
    ("scenario", pa.string(), "scenario name (config/games/NAME.yaml; NAME@testK: a test variant of NAME)"),
    ("split", pa.string(), "dev (a public scenario file) or test (a variant drawn from the test seed)"),
    ("variant_of", pa.string(), "the public scenario a test variant is drawn from (null: none)"),
    ("perturbed", pa.string(), "JSON {dotted key: drawn value} of a test variant ({} for a public scenario)"),
    ("variant_attempt", pa.int64(), "the accepted draw of a test variant (earlier draws had no trap; -1: none)"),
    ("family", pa.string(), "scenario family: antenna, zone or weather"),
    ("variant", pa.string(), "variant: base, high_def, local_optima, ..."),
    ("bias", pa.string(), "the distortion of the observations (selection, confounding, measurement)"),
    ("selection_bias", pa.bool_(), "only returned drones are shown per drone"),
    ("optimum_design", pa.string(), "JSON design maximising Stage-2 survival on the CRN draws (exact: over the lattice)"),
    ("optimum_search", pa.float64(), "its survival on the search's common-random-number draws (exact: its exact survival)"),
    ("optimum_se", pa.float64(), "binomial standard error of optimum_search (0 when exact)"),
    ("optimum_method", pa.string(), "enumerated (the whole design lattice), searched (multi-start local search) or "
                                    "exact (CausalGame: the exact maximum over the lattice, heuresis.causal.games.exact)"),
    ("lattice_size", pa.int64(), "valid designs in the lattice (caps, DEF budget, equipment; exact: DEF steps of "
                                 "lattice_step, flight profiles too)"),
    ("runner_up", pa.float64(), "best competitor on the CRN draws: the enumeration's second best, or the best "
                                "of sample_size uniform lattice designs; exact: the best lattice design with another "
                                "DEF vector"),
    ("better_share_ub", pa.float64(), "95% upper bound on the lattice share beating the optimum on the CRN "
                                      "draws (0 when enumerated or exact)"),
    ("sample_size", pa.int64(), "uniform lattice designs compared with a searched optimum (0 when enumerated or exact)"),
    ("optimum", pa.float64(), "its mean survival over fresh Stage-2 fleets"),
    ("optimum_lo", pa.float64(), "95% interval over fleets, low"),
    ("optimum_hi", pa.float64(), "95% interval over fleets, high"),
    ("trap_design", pa.string(), "JSON trap design (the correlational reading); null: the scenario has no trap"),
    ("trap_pattern", pa.string(), "JSON trap predicate: conditions {of, at_least | at_most}, all must hold; null: no trap"),
    ("trap", pa.float64(), "trap survival on the same fresh fleets"),
    ("trap_lo", pa.float64(), "95% interval, low"),
    ("trap_hi", pa.float64(), "95% interval, high"),
    ("standard_design", pa.string(), "JSON off-the-shelf design"),
    ("standard", pa.float64(), "standard survival on the same fresh fleets"),
    ("standard_lo", pa.float64(), "95% interval, low"),
    ("standard_hi", pa.float64(), "95% interval, high"),
    ("trap_margin", pa.float64(), "standard minus trap survival, paired on the same fleets"),
    ("trap_margin_lo", pa.float64(), "95% interval over fleets, low (above 0 or the references fail)"),
    ("trap_margin_hi", pa.float64(), "95% interval over fleets, high"),
    ("threshold", pa.float64(), "win threshold under threshold_rule"),
    ("threshold_rule", pa.string(), "fixed (the scenario's threshold) or margin (optimum - threshold_margin)"),
    ("threshold_margin", pa.float64(), "the scenario's margin (used by the margin rule)"),
    ("search_drones", pa.int64(), "drones of the CRN draws (0 when exact)"),
    ("designs_evaluated", pa.int64(), "designs evaluated on the CRN draws (exact: designs valued, the rest of the "
                                      "lattice dominated by them)"),
    ("verify_fleets", pa.int64(), "fresh fleets of the verification"),
    ("fleet_size", pa.int64(), "drones per fleet (Stage-2 size)"),
    ("seed", pa.int64(), "scenario seed"),
    ("intended_mechanism", pa.string(), "what a correct report names (scenario file)"),
    ("control", pa.string(), "the control scenario paired with this one in games_bias_control (null: none)"),
    ("ablation_of", pa.string(), "the scenario this one ablates (NAME of NAME~DISCLOSURE, games_ablations; null: none)"),
    ("strategies", pa.string(), "JSON list: each strategy a CausalGame scenario file names (design, published "
                                "range, exact survival, survival on the verification fleets, inside, divergence); "
                                "[] otherwise"),
    ("optimum_exact", pa.float64(), "exact Stage-2 survival of the optimum over the lattice of DEF steps of "
                                    "lattice_step (CausalGame; null otherwise; integer_optimum: the integer lattice's)"),
    ("trap_exact", pa.float64(), "exact Stage-2 survival of the trap design (CausalGame; null otherwise)"),
    ("standard_exact", pa.float64(), "exact Stage-2 survival of the standard design (CausalGame; null otherwise)"),
    ("lattice_step", pa.int64(), "DEF step of the lattice the exact optimum maximises over (CausalGame; null otherwise)"),
    ("integer_optimum", pa.float64(), "exact Stage-2 survival of the best design over the full integer lattice (every "
                                      "integer DEF within the caps and budget; CausalGame; null otherwise)"),
    ("integer_design", pa.string(), "JSON the best design over the full integer lattice (CausalGame; null otherwise)"),
    ("integer_bound", pa.float64(), "rigorous upper bound on the Stage-2 survival of every design of the integer "
                                    "lattice (equal to integer_optimum when integer_exact; CausalGame; null otherwise)"),
    ("integer_exact", pa.bool_(), "integer_optimum is the exact optimum over the integer lattice (the branch and "
                                  "bound closed; CausalGame; null otherwise)"),
    ("integer_lattice_size", pa.int64(), "designs of the full integer lattice (CausalGame; null otherwise)"),
    ("runtime_s", pa.float64(), "wall time of the search and verification in seconds"),
])

GAME_PLAYS = _schema("game_plays", 3, [
    ("play_id", pa.string(), "agent/mode/scenario/r<repeat>"),
    ("agent", pa.string(), "agent name (config agents)"),
    ("agent_kind", pa.string(), "agent kind: game_random, game_greedy, game_bandit, game_trap_follower, llm"),
    ("model", pa.string(), "model string (LLM agents; null offline)"),
    ("mode", pa.string(), "agentic (game and analysis tools) or prompting (a conversation in text, one action "
                          "per turn)"),
    ("task_variant", pa.string(), "the task the agent was given: standard (no mechanism fact) or hints (games."
                                  "task_variant: the ablation that states which parts are critical and that DEF "
                                  "costs agility)"),
    ("code_isolation", pa.string(), "isolation of the code tool in this play: bwrap, none (best_effort without "
                                    "bubblewrap) or off (not offered; always off in the prompting mode)"),
    ("scenario", pa.string(), "scenario name"),
    ("family", pa.string(), "scenario family"),
    ("variant", pa.string(), "scenario variant"),
    ("bias", pa.string(), "the scenario's distortion"),
    ("repeat", pa.int32(), "play index r"),
    ("seed", pa.int64(), "play seed (games.seed, scenario, r): the same for every agent"),
    ("status", pa.string(), "ok, or failed (the agent or the harness crashed; error says why)"),
    ("error", pa.string(), "error of a failed play, or why an agent could not go on (context_overflow)"),
    ("termination", pa.string(), "submitted (with the report), unsubmitted (turn limit), context_overflow or "
                                 "failed"),
    ("submitted", pa.bool_(), "a final design was submitted (else survival 0, not won)"),
    ("design", pa.string(), "JSON submitted design (null when unsubmitted)"),
    ("survival", pa.float64(), "Stage-2 survival rate (0 when unsubmitted)"),
    ("threshold", pa.float64(), "win threshold (references)"),
    ("won", pa.bool_(), "survival >= threshold"),
    ("optimum", pa.float64(), "the optimum over the agent's action space: the exact optimum over the integer "
                              "lattice (references' integer_optimum; the lattice's optimum where it was not "
                              "computed)"),
    ("gap", pa.float64(), "optimum - survival"),
    ("deployments", pa.int32(), "Stage-1 deployments flown"),
    ("drones_used", pa.int32(), "Stage-1 drones flown"),
    ("designs_deployed", pa.string(), "JSON list of the deployed designs, in order (the configuration path)"),
    ("deployment_counts", pa.string(), "JSON list of [drones flown, drones returned] per deployment, in order"),
    ("distinct_designs", pa.int32(), "distinct designs deployed"),
    ("best_observed_design", pa.string(), "JSON of the deployed design with the best observed survival rate"),
    ("best_observed_rate", pa.float64(), "its observed survival rate"),
    ("submitted_is_best_observed", pa.bool_(), "the submitted design is the best observed one (null unsubmitted)"),
    ("lock_in_component", pa.string(), "component holding the largest share of DEF over the deployed designs"),
    ("lock_in_share", pa.float64(), "that share"),
    ("drift_from_best", pa.float64(), "L1 distance (DEF points, equipment 1) of the submission from the best "
                                      "observed design"),
    ("report", pa.string(), "the agent's report, committed with or before the submission (protocol committed)"),
    ("debrief", pa.string(), "its answer to CausalGame's debrief after the outcome (protocol as_published; '' "
                             "when not asked)"),
    ("debrief_status", pa.string(), "'' (not asked: protocol off, unsubmitted, not an LLM agent), ok, "
                                    "context_overflow or failed"),
    ("turns", pa.int32(), "assistant replies (prompting mode: answers, retries included)"),
    ("n_calls", pa.int32(), "tool calls (prompting mode: answers)"),
    ("n_errors", pa.int32(), "calls answered with an error"),
    ("tokens_in", pa.int64(), "prompt tokens over all replies"),
    ("tokens_out", pa.int64(), "completion tokens over all replies"),
    ("cost", pa.float64(), "cost in USD; null when some reply's model has no known price"),
    ("retries", pa.int32(), "model-call retries over the play"),
    ("warnings", pa.string(), "JSON list of the agent's warnings"),
    ("wall_s", pa.float64(), "wall time of the play in seconds"),
    ("transcript", pa.string(), "path of the JSON transcript"),
])

GAME_CALLS = _schema("game_calls", 2, [
    ("play_id", pa.string(), "play of the call"),
    ("agent", pa.string(), "agent name"),
    ("mode", pa.string(), "agentic or prompting"),
    ("scenario", pa.string(), "scenario name"),
    ("repeat", pa.int32(), "play index"),
    ("turn", pa.int32(), "reply (prompting mode: answer) that made the call, 1-based"),
    ("index", pa.int32(), "position of the call within its reply"),
    ("call_id", pa.string(), "tool-call id ('' for a prompting-mode answer)"),
    ("tool", pa.string(), "tool name (prompting mode: the answer's action, or 'answer' when unreadable)"),
    ("arguments", pa.string(), "arguments as sent (prompting mode: the parsed answer, JSON)"),
    ("result", pa.string(), "what the game answered"),
    ("ok", pa.bool_(), "False when refused or unreadable"),
    ("error", pa.string(), "error message"),
    ("stage", pa.string(), "game stage after the call: stage1, or done (submitted with the report)"),
    ("wall_s", pa.float64(), "wall time of the call"),
    ("details", pa.string(), "JSON not shown to the agent (per-drone survival of a deployment)"),
])

_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

GAME_JUDGEMENTS = _schema("game_judgements", 3, [
    ("judge", pa.string(), "judge name (config agents, kind llm)"),
    ("protocol", pa.string(), "the view judged: committed (the report before the outcome) or as_published "
                              "(the debrief after it)"),
    ("model", pa.string(), "the judge's model string"),
    ("play_id", pa.string(), "play judged"),
    ("agent", pa.string(), "agent of the play"),
    ("mode", pa.string(), "mode of the play"),
    ("scenario", pa.string(), "scenario"),
    ("family", pa.string(), "scenario family"),
    ("repeat", pa.int32(), "play index"),
    ("status", pa.string(), "ok, no_report (scored 0 without asking), unparsed (a criterion missing or out of "
                            "range, or an unknown failure mode: scores null), failed, or play_failed (the play "
                            "itself failed: not judged; scores null)"),
    ("error", pa.string(), "parse or request error"),
    *((c.column, pa.float64(), column_description(c)) for c in RUBRIC),
    *((f"{c.column}_reason", pa.string(), f"the judge's one-line reason for {c.code}") for c in RUBRIC),
    ("cr", pa.float64(), f"causal reasoning {' + '.join(c.code for c in RUBRIC if c.column in CAUSAL)}, "
                         f"0-{sum(c.max for c in RUBRIC if c.column in CAUSAL)}"),
    ("total", pa.float64(), f"sum of the {_WORDS[len(RUBRIC)]} criteria, 0-{RUBRIC_MAX}"),
    ("failure_mode", pa.string(), "the judge's failure-mode label (heuresis.stages.games.judge.FAILURE_MODES), "
                                  "no_report without a report"),
    ("answer", pa.string(), "the judge's raw answer"),
    ("tokens_in", pa.int64(), "prompt tokens"),
    ("tokens_out", pa.int64(), "completion tokens"),
    ("cost", pa.float64(), "cost in USD; null when the model has no known price"),
    ("latency_s", pa.float64(), "latency of the request"),
])
