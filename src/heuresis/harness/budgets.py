"""Budgets of an episode (docs/design.md §5.4): one object the loop checks, not scattered ifs.

The wall-time limit is the agent's *working time*: the episode's time less what the agent
could not help spending, waiting for a provider (failed attempts, backoff, waiting for a rate-limit
slot or the spend ledger), which the loop passes to :meth:`Budgets.exclude`.  Both clocks are
recorded (:meth:`Budgets.used`: ``wall_s`` and ``working_s``), so the same agent gets the same
episode under any provider load.

Five limits: *test units* (one per statistical test an agent asks for: a CI test costs 1, a
stability check one per resample), *turns* (assistant replies before the last turn), *output
tokens per turn*, *algorithm calls* and *wall time*.  The test-unit limit is sized in PC's own
cost: ``test_units_factor`` times the number of CI tests PC-KCI ran on the instance (from its
references row).  :meth:`Budgets.line` renders what remains as the one line appended to every
tool result and shown in the prompt.  A budget setting of the config is
:class:`~heuresis.config.settings.BudgetSettings` (importable from here too).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from heuresis.config.settings import BudgetSettings

__all__ = ["EXHAUSTION_KINDS", "BudgetSettings", "Budgets", "normalize_clock"]

#: The working time left as the budgets line shows it (the one part of a conversation that
#: differs between two runs of the same episode).
_CLOCK = re.compile(r"wall time \d+/")


def normalize_clock(text: str) -> str:
    """``text`` with the budgets line's time left replaced by ``?`` (:meth:`Budgets.line`)."""
    return _CLOCK.sub("wall time ?/", text)

#: Names of the limits, as recorded in ``episodes.exhausted``.
EXHAUSTION_KINDS = ("test_units", "turns", "output_tokens", "algorithm_calls", "wall_time")


class Budgets:
    """What an episode may still spend; the loop asks :meth:`exhausted` before every turn."""

    def __init__(self, settings: BudgetSettings, pc_kci_tests: int, clock=time.monotonic) -> None:
        self.settings = settings
        self.test_units = settings.test_units(pc_kci_tests)
        self.turns = int(settings.turns)
        self.output_tokens_per_turn = int(settings.output_tokens_per_turn)
        self.algorithm_calls = int(settings.algorithm_calls)
        self.wall_seconds = float(settings.wall_seconds)
        self._clock = clock
        self._t0 = clock()
        self._excluded = 0.0
        self.used_test_units = 0
        self.used_turns = 0
        self.used_algorithm_calls = 0
        self.max_output_tokens = 0
        self._output_overrun = False

    # --- spending -----------------------------------------------------------------------
    def remaining_test_units(self) -> int:
        """Test units still available."""
        return self.test_units - self.used_test_units

    def check_tests(self, units: int) -> None:
        """Raise :class:`BudgetError` unless ``units`` test units remain (nothing is charged)."""
        if units > self.remaining_test_units():
            raise BudgetError(f"this call needs {units} test unit(s) but only {self.remaining_test_units()} remain")

    def charge_tests(self, units: int) -> None:
        """Spend ``units`` test units; :class:`BudgetError` (nothing charged) when fewer remain."""
        if units > self.remaining_test_units():
            raise BudgetError(f"this call needs {units} test unit(s) but only {self.remaining_test_units()} remain")
        self.used_test_units += units

    def charge_algorithm_call(self) -> None:
        """Spend one algorithm call; :class:`BudgetError` (nothing charged) when none remains."""
        if self.used_algorithm_calls >= self.algorithm_calls:
            raise BudgetError(f"no algorithm calls remain (limit {self.algorithm_calls})")
        self.used_algorithm_calls += 1

    def record_turn(self, output_tokens: int) -> bool:
        """Count one assistant reply; False when it exceeded the output-token limit of a turn."""
        self.used_turns += 1
        self.max_output_tokens = max(self.max_output_tokens, int(output_tokens))
        if output_tokens > self.output_tokens_per_turn:
            self._output_overrun = True
            return False
        return True

    def start(self) -> None:
        """Start the clocks (the loop does, before the first turn: setting the episode up is not working time)."""
        self._t0 = self._clock()
        self._excluded = 0.0

    def exclude(self, seconds: float) -> None:
        """Do not charge ``seconds`` to the working time.

        Negative: charge more than elapsed, as for a reply replayed from the request log, charged
        what it took when it was first answered.
        """
        self._excluded += float(seconds)

    def wall(self) -> float:
        """Seconds since the episode started (everything included)."""
        return self._clock() - self._t0

    def elapsed(self) -> float:
        """The agent's working time so far: :meth:`wall` less what :meth:`exclude` took out."""
        return max(0.0, self.wall() - self._excluded)

    def remaining_wall(self) -> float:
        """Seconds of wall time left (0 when the limit has passed)."""
        return max(0.0, self.wall_seconds - self.elapsed())

    # --- checks -------------------------------------------------------------------------
    def exhausted(self) -> str | None:
        """The first exhausted limit (one of :data:`EXHAUSTION_KINDS`), or None."""
        if self.used_test_units >= self.test_units:
            return "test_units"
        if self.used_turns >= self.turns:
            return "turns"
        if self._output_overrun:
            return "output_tokens"
        if self.used_algorithm_calls >= self.algorithm_calls:
            return "algorithm_calls"
        if self.elapsed() >= self.wall_seconds:
            return "wall_time"
        return None

    def remaining(self) -> dict:
        """What remains of every budget, and its limit (the facts of :meth:`line`)."""
        return {"test_units": self.remaining_test_units(), "test_units_limit": self.test_units,
                "turns": self.turns - self.used_turns, "turns_limit": self.turns,
                "algorithm_calls": self.algorithm_calls - self.used_algorithm_calls,
                "algorithm_calls_limit": self.algorithm_calls, "wall_seconds": self.remaining_wall(),
                "wall_seconds_limit": self.wall_seconds, "output_tokens_per_turn": self.output_tokens_per_turn}

    def line(self, remaining: Mapping | None = None) -> str:
        """One line with what remains of every budget (appended to every tool result).

        ``remaining``: a :meth:`remaining` dict to render (default: the budgets now).
        """
        r = self.remaining() if remaining is None else remaining
        return (f"[budgets left: test units {r['test_units']}/{r['test_units_limit']}; "
                f"turns {r['turns']}/{r['turns_limit']}; "
                f"algorithm calls {r['algorithm_calls']}/{r['algorithm_calls_limit']}; "
                f"wall time {r['wall_seconds']:.0f}/{r['wall_seconds_limit']:.0f} s; "
                f"output tokens per turn {r['output_tokens_per_turn']}]")

    def used(self) -> dict:
        """Return what the episode spent: test units, turns, algorithm calls, wall and working seconds, largest reply."""
        return {"test_units": self.used_test_units, "turns": self.used_turns,
                "algorithm_calls": self.used_algorithm_calls, "wall_s": round(self.wall(), 3),
                "working_s": round(self.elapsed(), 3),
                "max_output_tokens": self.max_output_tokens}

    def limits(self) -> dict:
        """Return the episode's limits, the counterpart of :meth:`used` (test units sized for this instance)."""
        return {"test_units": self.test_units, "turns": self.turns, "algorithm_calls": self.algorithm_calls,
                "wall_seconds": self.wall_seconds, "output_tokens_per_turn": self.output_tokens_per_turn}


class BudgetError(RuntimeError):
    """A call that the remaining budget cannot pay for (answered to the agent as an error)."""
