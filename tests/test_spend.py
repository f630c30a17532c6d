"""The run's spend ledger holds without file locks: concurrent processes never pass the cap, a damaged
journal stops the job instead of reading as empty, a journal cut by a kill loses nothing paid."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from heuresis.agents.spend import LedgerError, SpendLedger, SpendLimitReached


def _reserver(folder: str, limit: float, n: int, amount: float, queue) -> None:
    """Reserve and settle ``n`` requests of ``amount`` with every file lock broken (NFS nolock, ENOLCK)."""
    import errno
    import fcntl

    def broken(*_args, **_kw):
        raise OSError(errno.ENOLCK, "No locks available")

    fcntl.flock = fcntl.lockf = broken   # nothing may depend on a lock
    ledger = SpendLedger(folder, "agent", limit)
    accepted = 0
    for _ in range(n):
        try:
            token = ledger.reserve(amount)
        except SpendLimitReached:
            break
        accepted += 1
        ledger.settle(token, amount)
    queue.put(accepted)


def _race(folder, limit: float, processes: int = 4, n: int = 100, amount: float = 0.01) -> int:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_reserver, args=(str(folder), limit, n, amount, queue)) for _ in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    return sum(queue.get(timeout=5) for _ in procs)


@pytest.mark.parametrize("limit", [4.0, 2.5])
def test_four_processes_without_locks_never_pass_the_cap(tmp_path, limit):
    """4 processes x 100 reservations of $0.01: every accepted one is counted, and together they stay
    within the cap (the bound where writes are visible to a later open, as on a local disk or NFS)."""
    accepted = _race(tmp_path, limit)
    totals = SpendLedger(tmp_path, "agent", limit).totals()
    assert totals["spent"] == pytest.approx(accepted * 0.01, abs=1e-9) and totals["reserved"] == 0
    assert totals["spent"] <= limit + 1e-9
    if limit == 4.0:
        assert accepted == 400                                   # room for all: none refused
    else:
        assert 240 <= accepted <= 250                            # stopped at the cap, not far below it


def test_a_request_in_flight_or_of_unknown_cost_stays_reserved(tmp_path):
    ledger = SpendLedger(tmp_path, "a", 1.0)
    t1 = ledger.reserve(0.4)
    ledger.reserve(0.3)                     # killed in flight: never settled
    ledger.settle(t1, None)                 # a timeout the provider may bill: unknown
    with pytest.raises(SpendLimitReached, match=r"spent 0\.0000 USD, 0\.7000 USD reserved"):
        SpendLedger(tmp_path, "a", 1.0).reserve(0.4)


def test_a_damaged_journal_stops_the_job(tmp_path):
    ledger = SpendLedger(tmp_path, "a", 10.0)
    ledger.settle(ledger.reserve(1.0), 0.5)
    journal = next((tmp_path / "a").glob("*.jsonl"))
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join([lines[0], '{"event": "settle", "tok', lines[1]]) + "\n")   # damage inside
    with pytest.raises(LedgerError, match="damaged"):
        SpendLedger(tmp_path, "a", 10.0).totals()


def test_a_journal_cut_by_a_kill_counts_what_was_written(tmp_path):
    """A cut last line is a write a kill stopped: the reservation before it stays counted, nothing resets."""
    ledger = SpendLedger(tmp_path, "a", 10.0)
    ledger.settle(ledger.reserve(1.0), 0.5)
    ledger.reserve(2.0)
    journal = next((tmp_path / "a").glob("*.jsonl"))
    with open(journal, "a") as fh:
        fh.write(json.dumps({"event": "settle", "token": "x", "usd": 1.0})[:20])
    assert SpendLedger(tmp_path, "a", 10.0).totals() == {"spent": 0.5, "reserved": 2.0, "limit": 10.0}


def test_a_ledger_that_cannot_be_written_stops_the_job(tmp_path):
    """No room to write (here: the folder is a file): the job stops naming the ledger, it never goes on unrecorded."""
    (tmp_path / "a").write_text("not a folder")
    with pytest.raises(LedgerError, match="cannot be"):
        SpendLedger(tmp_path, "a", 1.0).reserve(0.1)


# --- the tokens-per-minute window ----------------------------------------------------------------------
def test_token_window_keeps_every_minute_within_the_limit(tmp_path):
    """Three jobs' windows (each its own journals) on one provider share a 10,000-token limit on a simulated
    clock: checked directly over the requests sent, no 60-second span holds more than the limit, each
    request waited only while the window was full, and a released attempt frees its tokens."""
    from heuresis.agents.spend import RATE_WINDOW_S, RateWindow

    class Clock:
        t = 1_000_000.0

    clock = Clock()

    def sleep(s):
        clock.t += s

    windows = [RateWindow(tmp_path, "openai", 10_000, sleep=sleep, clock=lambda: clock.t) for _ in range(3)]
    sent = []            # (time sent, tokens counted: the answer's actual tokens)
    for i in range(60):
        w = windows[i % 3]
        slot = w.acquire(3_000)
        if i % 10 == 9:                    # a refused attempt: nothing processed, its room is freed
            w.settle(slot, 0)
            continue
        sent.append((clock.t, 2_500))
        w.settle(slot, 2_500)
        clock.t += 1.0                     # the request's latency
    assert len(sent) == 54
    for t, _ in sent:
        assert sum(n for u, n in sent if t - RATE_WINDOW_S < u <= t) <= 10_000
    span = sent[-1][0] - sent[0][0]
    assert span >= (54 * 2_500 / 10_000 - 1) * RATE_WINDOW_S      # the limit, not the latency, set the pace
    assert sum(w.waited_s for w in windows) > 0
    with pytest.raises(Exception, match="above its tokens_per_minute limit"):
        windows[0].acquire(20_000)
