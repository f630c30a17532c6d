"""The transcript records: an episode's and a game play's JSON transcript, typed, versioned, one writer and one reader.

An episode (:func:`heuresis.harness.episode.run_episode`) and a game play
(:func:`heuresis.stages.games.play.run_play`) each produce one record, :class:`EpisodeTranscript`
or :class:`PlayTranscript`; the stages write it with :meth:`~EpisodeTranscript.write` (atomic, JSON),
and the viewer and every other reader read it with :func:`read_episode_transcript` or
:func:`read_play_transcript`, which check the file against its layout's JSON Schema and return the
record.  Each file carries its layout's version in ``transcript_version``:

* episode transcripts: version :data:`EPISODE_TRANSCRIPT_VERSION`; a file without a version (an
  older layout this reader does not know) or of another version is refused with a message;
* game play transcripts: version :data:`PLAY_TRANSCRIPT_VERSION`; a file without a version
  (written before plays were versioned, the same fields) is read as version 0.

Anything that cannot be shown (a missing, empty, truncated or non-JSON file, a missing field)
raises :class:`TranscriptProblem` naming the file and what is wrong, which the viewer shows in
place of the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import jsonschema

from heuresis.artifacts.io import atomic_write_text

__all__ = [
    "EPISODE_TRANSCRIPT_SCHEMA",
    "EPISODE_TRANSCRIPT_VERSION",
    "PLAY_TRANSCRIPT_SCHEMA",
    "PLAY_TRANSCRIPT_VERSION",
    "EpisodeTranscript",
    "PlayTranscript",
    "TranscriptProblem",
    "read_episode_transcript",
    "read_play_transcript",
]

#: Layout version of an episode transcript (``transcript_version``).
EPISODE_TRANSCRIPT_VERSION = 1
#: Layout version of a game play transcript; a file without ``transcript_version`` is version 0 (same fields).
PLAY_TRANSCRIPT_VERSION = 1

_STR_OR_NULL = {"type": ["string", "null"]}
_ERROR = {"type": ["object", "string", "null"]}   # a failure: its error and traceback
_MESSAGE = {"type": "object", "required": ["role"], "properties": {
    "role": {"type": "string"}, "content": {"type": ["string", "null", "array"]},
    "tool_calls": {"type": ["array", "null"], "items": {"type": "object"}},
    "tool_call_id": _STR_OR_NULL, "meta": {"type": "object"}}}
_CALL = {"type": "object", "required": ["turn", "index", "call_id", "tool", "arguments", "result", "ok"],
         "properties": {"turn": {"type": "integer"}, "index": {"type": "integer"}, "call_id": {"type": "string"},
                        "tool": {"type": "string"}, "arguments": {"type": "string"}, "result": {"type": "string"},
                        "ok": {"type": "boolean"}, "error": _STR_OR_NULL, "details": _STR_OR_NULL}}

#: The JSON Schema of an episode transcript of version :data:`EPISODE_TRANSCRIPT_VERSION`.
EPISODE_TRANSCRIPT_SCHEMA = {
    "type": "object",
    "required": ["transcript_version", "episode", "condition", "budgets", "algorithm_map", "messages", "calls",
                 "requests"],
    "properties": {
        "transcript_version": {"const": EPISODE_TRANSCRIPT_VERSION},
        "episode": {"type": "object", "required": ["episode_id"]},
        "condition": {"type": "object"},
        "budgets": {"type": "object", "required": ["limits", "used"],
                    "properties": {"limits": {"type": "object"}, "used": {"type": "object"}}},
        "agent_origin": {"type": ["object", "null"]},
        "algorithm_map": {"type": "object", "additionalProperties": {"type": "string"}},
        "algorithm_map_given_to_agent": {"type": "boolean"},
        "start_graph": {"type": "string"},
        "deletion_log_shown": {"type": ["array", "null"], "items": {"type": "object"}},
        "tools": {"type": "array"},
        "messages": {"type": "array", "items": _MESSAGE},
        "calls": {"type": "array", "items": _CALL},
        "error": _ERROR,
        "agent_record": {"type": ["object", "null"]},
        "requests": {"type": "array", "items": {"type": "object"}},
        "secrets": {"type": ["object", "null"]},
    },
}

#: The JSON Schema of a game play transcript (version 0 or :data:`PLAY_TRANSCRIPT_VERSION`).
PLAY_TRANSCRIPT_SCHEMA = {
    "type": "object", "required": ["play"],
    "properties": {"transcript_version": {"enum": [0, PLAY_TRANSCRIPT_VERSION]},
                   "play": {"type": "object", "required": ["play_id"]},
                   "agent_origin": {"type": ["object", "null"]},
                   "scenario": {"type": ["object", "null"]},
                   "prompts": {"type": ["object", "null"]},
                   "tools": {"type": "array"},
                   "messages": {"type": "array", "items": _MESSAGE},
                   "agent_record": {"type": ["object", "null"]},
                   "requests": {"type": "array", "items": {"type": "object"}},
                   "calls": {"type": "array", "items": {"type": "object"}},
                   "error": _ERROR},
}


class TranscriptProblem(Exception):
    """A transcript that cannot be read: missing, damaged, of another layout version; the message says which."""


class _Record:
    """What both records share: the JSON object (fields in declaration order, unset optional ones left out) and the write."""

    #: fields written only when set (None): the rest are always written
    _OPTIONAL: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record as the file's JSON object: ``transcript_version`` first, then the fields in order."""
        out: dict[str, Any] = {"transcript_version": self.version}   # type: ignore[attr-defined]
        for f in fields(self):   # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in ("version", "path") or (f.name in self._OPTIONAL and value is None):
                continue
            out[f.name] = value
        return out

    def write(self, path: str | Path) -> Path:
        """Write the record to ``path`` atomically (indented JSON; values JSON cannot hold written as text)."""
        return atomic_write_text(path, json.dumps(self.to_json(), indent=1, default=str))


@dataclass
class EpisodeTranscript(_Record):
    """One episode's transcript: what the agent saw and did, request by request (layout version 1).

    ``episode`` is the episode's row of the ``episodes`` table; ``calls`` are its tool calls with the
    result the agent saw; ``requests`` one record per model request (tokens, cost, latency, retries,
    replayed); ``messages`` the conversation; ``error`` the agent's failure, if any.
    """

    episode: dict
    condition: dict
    budgets: dict
    agent_origin: dict | None
    algorithm_map: dict[str, str]
    algorithm_map_given_to_agent: bool
    start_graph: str
    deletion_log_shown: list[dict] | None
    tools: list[dict]
    messages: list[dict]
    calls: list[dict]
    error: str | dict | None = None
    agent_record: dict | None = None
    requests: list[dict] = field(default_factory=list)
    secrets: dict | None = None
    version: int = EPISODE_TRANSCRIPT_VERSION
    path: Path | None = None          # the file it was read from (None: not read)

    _OPTIONAL = ("error", "agent_record", "secrets")


@dataclass
class PlayTranscript(_Record):
    """One game play's transcript (layout version 1; version 0 files lack ``transcript_version``).

    ``play`` is the play's row of ``game_plays``; a play that failed in the harness has only
    ``play`` and ``error``.  ``requests`` are the prompting mode's answers turn by turn.
    """

    play: dict
    agent_origin: dict | None = None
    scenario: dict | None = None
    prompts: dict | None = None
    tools: list[dict] | None = None
    messages: list[dict] = field(default_factory=list)
    agent_record: dict | None = None
    requests: list[dict] | None = None
    calls: list[dict] = field(default_factory=list)
    error: str | dict | None = None
    version: int = PLAY_TRANSCRIPT_VERSION
    path: Path | None = None

    _OPTIONAL = ("agent_origin", "scenario", "prompts", "tools", "agent_record", "requests", "error")

    @classmethod
    def failed(cls, play: dict, error: str) -> PlayTranscript:
        """The transcript of a play the harness failed to run: its row and the traceback."""
        return cls(play, error=error)


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
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptProblem(f"{what} {path} is not valid JSON (truncated or damaged): {exc.msg} at line "
                                f"{exc.lineno}, column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise TranscriptProblem(f"{what} {path} is damaged: a JSON {type(data).__name__}, not an object")
    return data


def _check(data: object, schema: Mapping, path: Path, what: str) -> None:
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "the top level"
        raise TranscriptProblem(f"{what} {path} is damaged: at {where}: {err.message}")


def _record(cls, data: Mapping, path: Path):
    """The record ``cls`` from a checked JSON object (keys it does not know are kept out, as a newer writer's extras)."""
    known = {f.name for f in fields(cls)} - {"version", "path"}
    return cls(**{k: v for k, v in data.items() if k in known}, version=int(data.get("transcript_version", 0)),
               path=path)


def read_episode_transcript(path: str | Path) -> EpisodeTranscript:
    """Read an episode transcript of layout version :data:`EPISODE_TRANSCRIPT_VERSION`.

    Raises
    ------
    TranscriptProblem
        The file is missing, empty, not JSON, of an older layout (no ``transcript_version``),
        of another version, or lacks a field; the message names the file and the problem.
    """
    path = Path(path)
    data = _load_json(path, "transcript")
    assert isinstance(data, dict)
    version = data.get("transcript_version")
    if version is None:
        raise TranscriptProblem(f"transcript {path} has no transcript_version: it was written by an older heuresis "
                                f"whose layout this view does not read (it reads version "
                                f"{EPISODE_TRANSCRIPT_VERSION}); rerun the episode to see its conversation")
    if version != EPISODE_TRANSCRIPT_VERSION:
        raise TranscriptProblem(f"transcript {path} is of layout version {version!r}; this view reads version "
                                f"{EPISODE_TRANSCRIPT_VERSION} (use the heuresis release that wrote it)")
    _check(data, EPISODE_TRANSCRIPT_SCHEMA, path, "transcript")
    data.setdefault("agent_origin", None)
    data.setdefault("algorithm_map_given_to_agent", False)
    data.setdefault("start_graph", "complete")
    data.setdefault("deletion_log_shown", None)
    data.setdefault("tools", [])
    return _record(EpisodeTranscript, data, path)


def read_play_transcript(path: str | Path) -> PlayTranscript:
    """Read a game play transcript (version 0 or :data:`PLAY_TRANSCRIPT_VERSION`).

    Raises :class:`TranscriptProblem` as :func:`read_episode_transcript` does.
    """
    path = Path(path)
    data = _load_json(path, "play transcript")
    _check(data, PLAY_TRANSCRIPT_SCHEMA, path, "play transcript")
    assert isinstance(data, dict)
    return _record(PlayTranscript, data, path)
