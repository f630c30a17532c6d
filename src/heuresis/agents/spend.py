"""Spend limits of LLM agents: per episode, and per run through a ledger every job shares.

A request is sent only once its worst case fits: the prompt's tokens as litellm counts them
(:data:`PROMPT_MARGIN` on top, for the provider's own counting) plus the request's output cap,
at the agent's prices (the config's ``prices``, else litellm's map).  An agent with a spend limit
and no known price cannot be bounded: the config check refuses it at workflow start.

* **Per episode** (``max_episode_usd``, ``max_episode_tokens`` in the agent's entry): a request
  whose worst case would take the episode past the limit is not sent; the episode ends there,
  ``ok``, with the termination ``spend_limit`` and the exhausted limit ``cost`` or ``tokens``,
  scored on its working graph (no last turn: it would be one more request).
* **Per run** (``max_run_usd``): every request of the agent, in every job, reserves its worst
  case in :class:`SpendLedger` and settles it at the actual cost once answered.  A request the
  remaining budget cannot cover is not sent: :class:`SpendLimitReached` stops the job and the
  workflow, naming what was spent.  A request killed in flight, or one whose cost is unknown (a
  timeout the provider may bill), stays counted at its reserved worst case.

The ledger needs no file lock, so it holds on a shared file system whose cross-node locks do
not work (NFS mounted ``nolock``, Lustre ``localflock``).  Each process appends to a journal of
its own (``<folder>/<agent>/<host>-<pid>-<random>.jsonl``, created with ``O_EXCL``, one writer),
one whole line per event written by a single ``write`` and synced before the request is sent;
the ledger's state is the sum over every journal.  A reservation is *written first, then
checked*: a process appends its reservation, reads every journal, and withdraws it (then tries
again after a random pause, at most :data:`RESERVE_TRIES` times) when the total passes the
limit.  The last of any set of accepted reservations to be checked saw every other one, so
where a write is visible to a later open (close-to-open consistency: a local disk, NFS,
Lustre) the accepted reservations never add up to more than the limit; a file system that
showed other nodes' writes late could overshoot by at most one worst-case request per process
writing at once.  A line that is not the last of its journal and does not parse is damage: the
ledger refuses to go on (:class:`LedgerError`), it never reads as empty.  A journal's last line
without its newline is a write a kill cut short: a reservation is synced before its request is
sent, so a cut reservation was never sent, and a cut settlement leaves its reservation counted
at the worst case.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from heuresis.artifacts.paths import SPEND
from heuresis.artifacts.privacy import make_folder
from heuresis.harness.protocol import FatalAgentError

__all__ = ["PROMPT_MARGIN", "RATES", "RATE_WINDOW_S", "RESERVE_TRIES", "SPEND_DIR", "STOPPED", "LedgerError",
           "RateWindow", "RunStopped", "SpendLedger", "SpendLimitReached", "clear_stop", "read_stop", "request_bound", "stop_run"]

#: Where the workflow's jobs keep the run's spend ledgers (one folder per agent with ``max_run_usd``)
#: and the stop records of agents whose run was stopped by a fatal error.
SPEND_DIR = SPEND

#: Factor on litellm's prompt-token count in a request's worst case (providers count their own
#: way: chat templates, tool schemas).
PROMPT_MARGIN = 1.25

#: The spend folder's subfolders that are not an agent's ledger: the token windows and the stop records.
RATES, STOPPED = "rates", "stopped"
#: Tokens added to every prompt's worst case (the tools' schemas and the template's framing).
PROMPT_EXTRA_TOKENS = 500
#: Rounding allowed when sums of reservations are compared with the cap (a billionth of a dollar).
EPSILON_USD = 1e-9
#: How often a reservation that met a concurrent one past the limit is tried again.
RESERVE_TRIES = 8


class SpendLimitReached(FatalAgentError):
    """The run-level budget of an agent cannot cover its next request."""


class LedgerError(FatalAgentError):
    """The run's ledger cannot be read or written: the job stops (it never reads as empty)."""


class RunStopped(FatalAgentError):
    """An earlier job of the run stopped on a fatal error of this agent: no request is sent."""


def request_bound(n_prompt: int, max_out: int, prices: Mapping[str, float]) -> tuple[int, float]:
    """Worst case of one request: (tokens, USD) for ``n_prompt`` counted prompt tokens and output cap ``max_out``.

    ``prices``: ``input_per_token`` and ``output_per_token`` in USD (a cache write, priced above
    plain input, at ``cache_write_per_token`` when given).
    """
    tokens_in = int(n_prompt * PROMPT_MARGIN) + PROMPT_EXTRA_TOKENS
    p_in = max(float(prices["input_per_token"]), float(prices.get("cache_write_per_token") or 0.0))
    return tokens_in + int(max_out), tokens_in * p_in + int(max_out) * float(prices["output_per_token"])


def _write_line(fd: int, record: Mapping) -> None:
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    if os.write(fd, data) != len(data):   # a regular file takes a whole write or raises
        raise OSError(f"short write of {len(data)} bytes")
    os.fsync(fd)


class _Journals:
    """Append-only journals of one shared record, one per process, under ``folder`` (see the module docstring).

    ``append`` writes one synced line to this process's own journal; ``new_events`` reads what every
    journal gained since the last call, a damaged middle line raising :class:`LedgerError` naming ``what``.
    """

    def __init__(self, folder: Path, what: str) -> None:
        self.folder, self.what = folder, what
        self._fd: int | None = None
        self._fd_pid: int | None = None
        self._offsets: dict[str, int] = {}

    def append(self, **event) -> None:
        try:
            if self._fd is None or self._fd_pid != os.getpid():
                make_folder(self.folder)
                name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
                self._fd = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                self._fd_pid = os.getpid()
            _write_line(self._fd, {"t": round(time.time(), 3), **event})
        except OSError as exc:
            raise LedgerError(f"{self.what} cannot be written ({self.folder}): {exc}. The job stops: a request "
                              "that is not recorded is not sent") from exc

    def new_events(self) -> list[dict]:
        try:
            names = sorted(p.name for p in self.folder.glob("*.jsonl")) if self.folder.is_dir() else []
        except OSError as exc:
            raise LedgerError(f"{self.what} cannot be read ({self.folder}): {exc}") from exc
        out = []
        for name in names:
            offset, path = self._offsets.get(name, 0), self.folder / name
            try:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
            except OSError as exc:
                raise LedgerError(f"{self.what}: a journal cannot be read ({path}): {exc}") from exc
            complete = chunk[:chunk.rfind(b"\n") + 1]   # a last line without its newline: cut short, or not yet whole
            for k, line in enumerate(complete.splitlines()):
                try:
                    event = json.loads(line)
                    if not isinstance(event, dict) or "event" not in event or "token" not in event:
                        raise ValueError("not an event")
                except ValueError as exc:
                    raise LedgerError(
                        f"{self.what} is damaged: {path}, byte {offset}, line {k + 1} after it does not read "
                        f"({exc}). The job stops rather than count less than was used; repair or remove that "
                        "journal (`heuresis spend` shows the totals)") from exc
                out.append(event)
            self._offsets[name] = offset + len(complete)
        return out


class SpendLedger:
    """The run-level spend of one agent: every process's journal under ``<folder>/<agent>/``.

    Parameters
    ----------
    folder : path
        Where the run's ledgers live (``results/spend``: shared by every job of the run).
    agent : str
        The agent's name.
    limit_usd : float
        The run's budget for the agent.
    """

    def __init__(self, folder: str | Path, agent: str, limit_usd: float) -> None:
        self.folder = Path(folder)
        self.agent, self.limit = agent, float(limit_usd)
        self.journals = self.folder / agent
        self._log = _Journals(self.journals, f"agent {agent!r}: the run's spend ledger")
        self._held: dict[str, float] = {}      # reservation token -> USD, in flight or of unknown cost
        self._settled: dict[str, float] = {}   # reservation token -> USD paid

    # --- the journals -------------------------------------------------------------------------
    def _append(self, **event) -> None:
        self._log.append(**event)

    def _scan(self) -> tuple[float, float]:
        """(settled USD, reserved USD) over every journal, reading only what is new since the last scan."""
        for event in self._log.new_events():
            kind, token = event["event"], str(event["token"])
            try:
                if kind == "reserve":
                    self._held[token] = float(event["usd"])
                elif kind == "settle":
                    self._settled[token] = float(event["usd"])
                    self._held.pop(token, None)
                elif kind == "release":
                    self._held.pop(token, None)
                elif kind != "unknown":
                    raise ValueError(f"unknown event {kind!r}")
            except (ValueError, KeyError, TypeError) as exc:
                raise LedgerError(f"agent {self.agent!r}: the run's spend ledger is damaged ({self.journals}): an "
                                  f"event does not read ({exc}); repair or remove that journal") from exc
        return sum(self._settled.values()), sum(self._held.values())

    # --- what jobs call -----------------------------------------------------------------------
    def totals(self) -> dict:
        """Spent (settled), reserved (in flight or unknown) and the limit, in USD."""
        spent, reserved = self._scan()
        return {"spent": spent, "reserved": reserved, "limit": self.limit}

    def reserve(self, amount: float, what: str = "") -> str:
        """Reserve ``amount`` USD for one request; :class:`SpendLimitReached` when it does not fit."""
        amount = float(amount)
        rng = random.Random(secrets.randbits(64))
        for _ in range(RESERVE_TRIES):
            spent, reserved = self._scan()
            if spent + reserved + amount > self.limit + EPSILON_USD:
                break
            token = secrets.token_hex(8)
            self._append(event="reserve", token=token, usd=amount, what=what)
            spent, reserved = self._scan()
            if spent + reserved <= self.limit + EPSILON_USD:
                return token
            self._append(event="release", token=token)   # a concurrent reservation took the room: withdraw
            time.sleep(rng.uniform(0.01, 0.2))
        spent, reserved = self._scan()
        raise SpendLimitReached(
            f"agent {self.agent!r}: the run's spend limit (max_run_usd = {self.limit:.4f} USD) cannot cover the "
            f"next request (worst case {amount:.4f} USD): spent {spent:.4f} USD, {reserved:.4f} USD reserved by "
            f"requests in flight or of unknown cost (ledger {self.journals}). Raise agents.{self.agent}.max_run_usd "
            "to go on: nothing already paid is sent again")

    def settle(self, token: str, actual: float | None) -> None:
        """Replace a reservation by the request's actual cost (None: unknown, the reservation stays)."""
        if actual is None:
            self._append(event="unknown", token=token)
        else:
            self._append(event="settle", token=token, usd=float(actual))


# --- tokens per minute ---------------------------------------------------------------------------
#: The window a tokens-per-minute limit counts over, in seconds.
RATE_WINDOW_S = 60.0


class RateWindow:
    """A provider's tokens-per-minute limit, shared by every job of the run like the ledger.

    Before each live request an agent reserves the request's worst-case tokens (prompt and output
    cap) in journals under ``<folder>/rates/<provider>/<minute>/``, written first and then checked
    like a spend reservation; when the reservations of the last :data:`RATE_WINDOW_S` seconds,
    every agent and job of that provider included, would pass the limit, it withdraws and waits
    until the oldest leaves the window.  The answer's actual tokens replace the reservation; a
    refused attempt (no tokens processed) releases it; a timed-out one stays at its worst case.
    Each minute has a folder of its own, so a job reads only the last two minutes' journals.
    The wait happens before the request is sent: it is not the agent's working time.
    """

    def __init__(self, folder: str | Path, provider: str, tokens_per_minute: int,
                 sleep=time.sleep, clock=time.time) -> None:
        self.folder = Path(folder) / RATES / provider
        self.provider, self.limit = provider, int(tokens_per_minute)
        self._sleep, self._clock = sleep, clock
        self._buckets: dict[int, _Journals] = {}
        self._tokens: dict[str, tuple[float, int]] = {}   # token -> (reserved at, tokens)
        self.waited_s = 0.0

    def _journals(self, bucket: int) -> _Journals:
        if bucket not in self._buckets:
            self._buckets[bucket] = _Journals(self.folder / str(bucket),
                                              f"provider {self.provider!r}: the run's token window")
        return self._buckets[bucket]

    def _used(self, now: float) -> tuple[int, float]:
        """(tokens reserved or used within the window, when the oldest of them leaves it)."""
        bucket = int(now // RATE_WINDOW_S)
        for b in (bucket - 1, bucket):
            for event in self._journals(b).new_events():
                token = str(event["token"])
                try:
                    if event["event"] == "reserve":
                        self._tokens[token] = (float(event["at"]), int(event["tokens"]))
                    elif event["event"] == "settle" and token in self._tokens:
                        self._tokens[token] = (self._tokens[token][0], int(event["tokens"]))
                    elif event["event"] == "release":
                        self._tokens.pop(token, None)
                except (KeyError, TypeError, ValueError) as exc:
                    raise LedgerError(f"provider {self.provider!r}: the run's token window is damaged "
                                      f"({self.folder / str(b)}): an event does not read ({exc})") from exc
        for b in [b for b in self._buckets if b < bucket - 1]:
            del self._buckets[b]
        live = {k: v for k, v in self._tokens.items() if v[0] > now - RATE_WINDOW_S}
        self._tokens = live
        oldest = min((t for t, _ in live.values()), default=now)
        return sum(n for _, n in live.values()), oldest + RATE_WINDOW_S

    def acquire(self, tokens: int) -> tuple[int, str]:
        """Reserve ``tokens`` within the window, waiting as long as needed; returns the reservation."""
        tokens = int(tokens)
        if tokens > self.limit:
            raise FatalAgentError(f"provider {self.provider!r}: one request's worst case ({tokens:,} tokens) is above "
                                  f"its tokens_per_minute limit ({self.limit:,}); raise the limit or lower max_tokens")
        rng = random.Random(secrets.randbits(64))
        while True:
            now = self._clock()
            used, frees = self._used(now)
            if used + tokens <= self.limit:
                token, bucket = secrets.token_hex(8), int(now // RATE_WINDOW_S)
                self._journals(bucket).append(event="reserve", token=token, tokens=tokens, at=now)
                self._tokens[token] = (now, tokens)
                used, frees = self._used(self._clock())
                if used <= self.limit:
                    return bucket, token
                self._journals(bucket).append(event="release", token=token)   # a concurrent one took the room
                self._tokens.pop(token, None)
            wait = max(0.05, frees - self._clock()) + rng.uniform(0.0, 0.5)
            self.waited_s += wait
            self._sleep(wait)

    def settle(self, reservation: tuple[int, str], tokens: int | None) -> None:
        """The request's actual tokens (None: unknown, the worst case stays; 0: nothing processed)."""
        bucket, token = reservation
        if tokens == 0:
            self._journals(bucket).append(event="release", token=token)
        elif tokens is not None:
            self._journals(bucket).append(event="settle", token=token, tokens=int(tokens))


# --- stopping the run -------------------------------------------------------------------------------

def _stop_path(folder: str | Path, agent: str) -> Path:
    return Path(folder) / STOPPED / f"{agent}.json"


def stop_run(folder: str | Path, agent: str, reason: str) -> None:
    """Record that ``agent``'s run stopped on a fatal error: later jobs of it send nothing.

    A cluster profile that resubmits a failed job, or a job queued before the failure, then stops
    at once instead of paying for requests that would fail the same way.  ``heuresis spend
    --resume AGENT`` removes the record once the cause is fixed.
    """
    path = _stop_path(folder, agent)
    try:
        make_folder(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"agent": agent, "reason": reason, "t": time.time(),
                                   "host": socket.gethostname(), "pid": os.getpid()}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:   # the job stops anyway; the record only spares later jobs their first request
        pass


def read_stop(folder: str | Path, agent: str) -> str | None:
    """The reason ``agent``'s run was stopped, or None (a damaged record still stops it)."""
    path = _stop_path(folder, agent)
    if not path.exists():
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"(unreadable stop record {path})"


def clear_stop(folder: str | Path, agent: str) -> bool:
    """Remove ``agent``'s stop record; True when there was one."""
    path = _stop_path(folder, agent)
    if path.exists():
        path.unlink()
        return True
    return False
