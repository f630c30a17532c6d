"""The transcript record types and their readers: an episode's and a game play's JSON transcript.

An episode transcript (written by :func:`heuresis.harness.episode.run_episode`) carries its layout's
version in ``transcript_version``; :func:`read_episode_transcript` reads the version it knows
(:data:`~heuresis.harness.episode.TRANSCRIPT_VERSION`) and checks the file against that layout's JSON
Schema. Anything else, a file that is missing, truncated, not JSON, of an older layout (no
version) or another version, or missing a field, raises :class:`TranscriptProblem` with a message
that names the file and what is wrong with it, which the pages show in place of the conversation.

A game play transcript (:mod:`heuresis.stages.games.workflow`) carries no version; its reader checks the
fields the play page shows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from heuresis.harness.episode import TRANSCRIPT_VERSION

__all__ = ["EpisodeTranscript", "PlayTranscript", "TranscriptProblem", "read_episode_transcript",
           "read_play_transcript"]

_STR_OR_NULL = {"type": ["string", "null"]}
_MESSAGE = {"type": "object", "required": ["role"], "properties": {
    "role": {"type": "string"}, "content": {"type": ["string", "null", "array"]},
    "tool_calls": {"type": ["array", "null"], "items": {"type": "object"}},
    "tool_call_id": _STR_OR_NULL, "meta": {"type": "object"}}}
_CALL = {"type": "object", "required": ["turn", "index", "call_id", "tool", "arguments", "result", "ok"],
         "properties": {"turn": {"type": "integer"}, "index": {"type": "integer"}, "call_id": {"type": "string"},
                        "tool": {"type": "string"}, "arguments": {"type": "string"}, "result": {"type": "string"},
                        "ok": {"type": "boolean"}, "error": _STR_OR_NULL, "details": _STR_OR_NULL}}

#: The JSON Schema of an episode transcript of version :data:`TRANSCRIPT_VERSION` (the fields the pages read).
EPISODE_TRANSCRIPT_SCHEMA = {
    "type": "object",
    "required": ["transcript_version", "episode", "condition", "budgets", "algorithm_map", "messages", "calls",
                 "requests"],
    "properties": {
        "transcript_version": {"const": TRANSCRIPT_VERSION},
        "episode": {"type": "object", "required": ["episode_id"]},
        "condition": {"type": "object"},
        "budgets": {"type": "object", "required": ["limits", "used"],
                    "properties": {"limits": {"type": "object"}, "used": {"type": "object"}}},
        "algorithm_map": {"type": "object", "additionalProperties": {"type": "string"}},
        "algorithm_map_given_to_agent": {"type": "boolean"},
        "start_graph": {"type": "string"},
        "deletion_log_shown": {"type": ["array", "null"], "items": {"type": "object"}},
        "tools": {"type": "array"},
        "messages": {"type": "array", "items": _MESSAGE},
        "calls": {"type": "array", "items": _CALL},
        "requests": {"type": "array", "items": {"type": "object"}},
        "error": {"type": ["object", "string", "null"]},   # the agent's failure: its error and traceback
    },
}

_PLAY_TRANSCRIPT_SCHEMA = {
    "type": "object", "required": ["play"],
    "properties": {"play": {"type": "object", "required": ["play_id"]},
                   "messages": {"type": "array", "items": _MESSAGE},
                   "calls": {"type": "array", "items": {"type": "object"}},
                   "error": {"type": ["object", "string", "null"]}},
}


class TranscriptProblem(Exception):
    """A transcript that cannot be shown: missing, damaged, of another layout version; the message says which."""


@dataclass(frozen=True)
class EpisodeTranscript:
    """An episode transcript of the current layout (``data`` is the file's JSON object, checked)."""

    path: Path
    data: Mapping

    @property
    def algorithm_map(self) -> dict[str, str]:
        """Masked algorithm name -> menu algorithm of this episode."""
        return dict(self.data["algorithm_map"])

    @property
    def messages(self) -> list[dict]:
        """The conversation, in order: system, user, then assistant replies and tool results."""
        return list(self.data["messages"])

    @property
    def calls(self) -> list[dict]:
        """Every tool call (and text submission) with its arguments and the result the agent saw."""
        return list(self.data["calls"])

    @property
    def requests(self) -> list[dict]:
        """One record per model request: model, tokens, cost, latency, retries, replayed."""
        return list(self.data["requests"])


@dataclass(frozen=True)
class PlayTranscript:
    """A game play transcript (``data`` is the file's JSON object, checked)."""

    path: Path
    data: Mapping

    @property
    def messages(self) -> list[dict]:
        """The conversation (either mode), or nothing (a failed play)."""
        return list(self.data.get("messages") or [])

    @property
    def calls(self) -> list[dict]:
        """The game calls: deployments, history, analysis, report and submission."""
        return list(self.data.get("calls") or [])


def _load_json(path: Path, what: str) -> object:
    if not path.is_file():
        raise TranscriptProblem(f"{what} {path} does not exist (not written, or moved)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptProblem(f"{what} {path} cannot be read: {exc}") from exc
    if not text.strip():
        raise TranscriptProblem(f"{what} {path} is empty (truncated or damaged)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptProblem(f"{what} {path} is not valid JSON (truncated or damaged): {exc.msg} at line "
                                f"{exc.lineno}, column {exc.colno}") from exc


def _check(data: object, schema: Mapping, path: Path, what: str) -> None:
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "the top level"
        raise TranscriptProblem(f"{what} {path} is damaged: at {where}: {err.message}")


def read_episode_transcript(path: str | Path) -> EpisodeTranscript:
    """Read an episode transcript of layout version :data:`TRANSCRIPT_VERSION`.

    Raises
    ------
    TranscriptProblem
        The file is missing, empty, not JSON, of an older layout (no ``transcript_version``),
        of another version, or lacks a field the pages read; the message names the file and the problem.
    """
    path = Path(path)
    data = _load_json(path, "transcript")
    if not isinstance(data, dict):
        raise TranscriptProblem(f"transcript {path} is damaged: a JSON {type(data).__name__}, not an object")
    version = data.get("transcript_version")
    if version is None:
        raise TranscriptProblem(f"transcript {path} has no transcript_version: it was written by an older heuresis "
                                f"whose layout this view does not read (it reads version {TRANSCRIPT_VERSION}); "
                                "rerun the episode to see its conversation")
    if version != TRANSCRIPT_VERSION:
        raise TranscriptProblem(f"transcript {path} is of layout version {version!r}; this view reads version "
                                f"{TRANSCRIPT_VERSION} (use the heuresis release that wrote it)")
    _check(data, EPISODE_TRANSCRIPT_SCHEMA, path, "transcript")
    return EpisodeTranscript(path, data)


def read_play_transcript(path: str | Path) -> PlayTranscript:
    """Read a game play transcript; raises :class:`TranscriptProblem` as :func:`read_episode_transcript` does."""
    path = Path(path)
    data = _load_json(path, "play transcript")
    _check(data, _PLAY_TRANSCRIPT_SCHEMA, path, "play transcript")
    return PlayTranscript(path, data)  # type: ignore[arg-type]
