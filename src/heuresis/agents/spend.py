"""Spend limits of LLM agents: per episode, and per run through a ledger every job shares.

A request is sent only once its worst case fits: the prompt's tokens as litellm counts them
(:data:`PROMPT_MARGIN` on top, for the provider's own counting) plus the request's output cap,
at the agent's prices (the config's ``prices``, else litellm's map).  An agent with a spend limit
and no known price cannot be bounded, and fails at its first request, naming the agent.

* **Per episode** (``max_episode_usd``, ``max_episode_tokens`` in the agent's entry): a request
  whose worst case would take the episode past the limit is not sent; the episode ends there,
  ``ok``, with the termination ``spend_limit`` and the exhausted limit ``cost`` or ``tokens``,
  scored on its working graph (no last turn: it would be one more request).
* **Per run** (``max_run_usd``): every request of the agent, in every job, reserves its worst
  case in :class:`SpendLedger` (a JSON state file under a file lock, on the results' file system,
  shared by a cluster's nodes) and settles it at the actual cost once answered.  A request the
  remaining budget cannot cover is not sent: :class:`SpendLimitReached` stops the job and the
  workflow, naming what was spent.  A request killed in flight, or one whose cost is unknown (a
  timeout the provider may bill), stays counted at its reserved worst case.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

from heuresis.agents.base import FatalAgentError
from heuresis.artifacts.paths import SPEND

__all__ = ["PROMPT_MARGIN", "SPEND_DIR", "SpendLedger", "SpendLimitReached", "request_bound"]

#: Where the workflow's jobs keep the run's spend ledgers (one per agent with ``max_run_usd``).
SPEND_DIR = SPEND

#: Factor on litellm's prompt-token count in a request's worst case (providers count their own
#: way: chat templates, tool schemas).
PROMPT_MARGIN = 1.25
#: Tokens added to every prompt's worst case (the tools' schemas and the template's framing).
PROMPT_EXTRA_TOKENS = 500


class SpendLimitReached(FatalAgentError):
    """The run-level budget of an agent cannot cover its next request."""


def request_bound(n_prompt: int, max_out: int, prices: Mapping[str, float]) -> tuple[int, float]:
    """Worst case of one request: (tokens, USD) for ``n_prompt`` counted prompt tokens and output cap ``max_out``.

    ``prices``: ``input_per_token`` and ``output_per_token`` in USD.
    """
    tokens_in = int(n_prompt * PROMPT_MARGIN) + PROMPT_EXTRA_TOKENS
    return tokens_in + int(max_out), tokens_in * float(prices["input_per_token"]) + int(max_out) * float(
        prices["output_per_token"])


class SpendLedger:
    """The run-level spend of one agent: ``<folder>/<agent>.json`` (state) and ``.jsonl`` (every event).

    Parameters
    ----------
    folder : path
        Where the ledger lives (``results/spend``: shared by every job of the run).
    agent : str
        The agent's name.
    limit_usd : float
        The run's budget for the agent.
    """

    def __init__(self, folder: str | Path, agent: str, limit_usd: float) -> None:
        self.folder = Path(folder)
        self.agent, self.limit = agent, float(limit_usd)
        self.state_path = self.folder / f"{agent}.json"
        self.events_path = self.folder / f"{agent}.jsonl"
        self._lock_path = self.folder / f"{agent}.lock"

    @contextmanager
    def _locked(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self._read()
                yield state
                tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(state), encoding="utf-8")
                os.replace(tmp, self.state_path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            state = {}
        return {"spent": float(state.get("spent", 0.0)), "reserved": dict(state.get("reserved", {}))}

    def _event(self, **event) -> None:
        with open(self.events_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"t": time.time(), "pid": os.getpid(), **event}) + "\n")

    def totals(self) -> dict:
        """Spent (settled), reserved (in flight or unknown) and the limit, in USD."""
        s = self._read()
        return {"spent": s["spent"], "reserved": float(sum(s["reserved"].values())), "limit": self.limit}

    def reserve(self, amount: float, what: str = "") -> str:
        """Reserve ``amount`` USD for one request; :class:`SpendLimitReached` when it does not fit."""
        with self._locked() as state:
            held = state["spent"] + sum(state["reserved"].values())
            if held + amount > self.limit:
                raise SpendLimitReached(
                    f"agent {self.agent!r}: the run's spend limit (max_run_usd = {self.limit:.4f} USD) cannot cover the "
                    f"next request (worst case {amount:.4f} USD): spent {state['spent']:.4f} USD, "
                    f"{held - state['spent']:.4f} USD reserved by requests in flight or of unknown cost "
                    f"(ledger {self.state_path}). Raise agents.{self.agent}.max_run_usd to go on: "
                    "nothing already paid is sent again")
            token = secrets.token_hex(8)
            state["reserved"][token] = float(amount)
            self._event(event="reserve", token=token, usd=amount, what=what)
        return token

    def settle(self, token: str, actual: float | None) -> None:
        """Replace a reservation by the request's actual cost (None: unknown, the reservation stays)."""
        if actual is None:
            self._event(event="unknown", token=token)
            return
        with self._locked() as state:
            state["reserved"].pop(token, None)
            state["spent"] += float(actual)
            self._event(event="settle", token=token, usd=actual)
