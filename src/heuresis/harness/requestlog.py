"""The request log of one agent run (an episode, a game play): every attempt, append-only.

Each attempt the agent makes of a model request is one JSON line, flushed and synced to disk
before the harness goes on (a line a kill cut short is never joined to the next one: a record
always starts on a fresh line, so only the cut attempt is lost, and it is redone): the request's key (a digest of what was asked,
:func:`request_key`), whether it was answered, the provider's raw response, the reply as the
harness read it, its usage (tokens, cost, times) and, for a failed attempt, the scrubbed error.
Nothing is ever rewritten: the usage of failed attempts and of earlier, killed or failed runs
of the same episode stays in the log.

A rerun of the episode (after a crash, a kill, a failed request) opens the same log: a request
identical to one already answered is answered from the log (:meth:`RequestLog.replay`, in the
order they were first answered; marked ``replayed``, never sent again), so a conversation is
paid once up to the point where it diverges, and continues live from there.  Identity ignores
how a request is sent (timeouts, retries, the address a server got at run time through
``api_base_env``; a configured ``api_base`` counts, it may be another model) and the clock of the budgets
line (:func:`heuresis.harness.budgets.normalize_clock`), which differs between two runs of the
same conversation.

Answers of an earlier run that the rerun never asks for again (its conversation went another
way: a reply that differs, a tool result that changed) were paid all the same:
:meth:`RequestLog.abandoned` returns them, so the bill counts them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heuresis.artifacts.privacy import make_folder
from heuresis.harness.budgets import normalize_clock

__all__ = ["REQUEST_KEYS", "RequestLog", "request_key"]

#: What a request asks, as far as its answer can depend on it: the parts of the request that
#: make its identity (everything else — timeout, retries, api_base, key — is how it is sent).
REQUEST_KEYS = ("model", "api_base", "messages", "tools", "tool_choice", "max_tokens", "temperature",
                "reasoning_effort", "thinking", "extra")

#: Version of a log line's format.
VERSION = 1


def request_key(request: Mapping[str, Any]) -> str:
    """Digest of a request's identity: :data:`REQUEST_KEYS` only, the budgets line's clock normalized."""
    what = {k: request.get(k) for k in REQUEST_KEYS}
    text = normalize_clock(json.dumps(what, sort_keys=True, default=str))
    return hashlib.sha256(text.encode()).hexdigest()


class RequestLog:
    """The append-only request log at ``path`` (JSON lines; a torn last line is ignored).

    Parameters
    ----------
    path : path
        The log's file; created on the first :meth:`append`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.entries: list[dict] = []
        self._answers: dict[str, deque] = defaultdict(deque)
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue   # a line torn by a kill: the attempt is redone
                if isinstance(entry, dict):
                    self.entries.append(entry)
                    if entry.get("status") == "ok" and not entry.get("replayed"):
                        self._answers[str(entry.get("key"))].append(entry)
        self.prior = len(self.entries)

    def replay(self, key: str) -> dict | None:
        """The next earlier answer to the request ``key`` (each answer used once), or None."""
        queue = self._answers.get(key)
        return queue.popleft() if queue else None

    def append(self, entry: Mapping[str, Any]) -> None:
        """Write one attempt (flushed and synced before returning)."""
        rec = {"v": VERSION, **entry}
        self.entries.append(rec)
        make_folder(self.path.parent)
        line = json.dumps(rec, default=str) + "\n"
        with open(self.path, "a+b") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:   # a last line a kill cut short: the record starts on a fresh line
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    line = "\n" + line
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def abandoned(self) -> list[dict]:
        """Answers of earlier runs this run has not replayed: paid for, then left by a conversation that diverged.

        Call it once the run is over (before, the answers still to come are among them).
        """
        return [entry for queue in self._answers.values() for entry in queue]

    def spent(self) -> dict:
        """Attempts and what they cost over the whole log (every run of the episode)."""
        sent = [e for e in self.entries if not e.get("replayed")]
        costs = [e.get("usage", {}).get("cost") for e in sent]
        return {"attempts": len(sent), "failed": sum(e.get("status") != "ok" for e in sent),
                "cost": None if any(c is None for c in costs) else float(sum(costs))}
