"""What a failed model call means: the errors an LLM agent raises, which failures are fatal, retried or an overflow."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from heuresis.config.settings import Retries
from heuresis.harness.protocol import (
    EpisodeEnd,
    FatalAgentError,
    Usage,
)


class LLMCallError(RuntimeError):
    """A model call that failed for good; ``usage`` records what was tried and spent."""

    def __init__(self, message: str, usage: Usage) -> None:
        super().__init__(message)
        self.usage = usage


class ProviderFatalError(LLMCallError, FatalAgentError):
    """A provider's answer that no later request of the agent can get past; never retried.

    An invalid key, an exhausted quota or credit, an unknown model: the job stops naming it.
    """


class SpendExhausted(EpisodeEnd):
    """The episode's spend limit (``max_episode_usd`` / ``max_episode_tokens``) cannot cover the next request."""

    reason = "spend_limit"

    def __init__(self, message: str, limit: str, usage: Usage | None = None) -> None:
        super().__init__(message, usage)
        self.limit = limit


def retry_after(exc: Exception) -> float | None:
    """The seconds of a ``Retry-After`` header on a failed call's HTTP response (None: not sent)."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(exc, "headers", None) or {}
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except AttributeError:
        return None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):   # an HTTP date: not worth parsing, the backoff applies
        return None


_QUOTA_TEXT = re.compile(r"insufficient_quota|exceeded your current quota|credit balance is too low|"
                         r"billing|payment required", re.IGNORECASE)


def fatal_reason(exc: Exception) -> str | None:
    """Why a failed call can never succeed for this agent, or None.

    ``invalid_key``, ``permission_denied``, ``quota_exhausted``, ``unknown_model``; None for a call
    worth retrying or an episode's own error.

    A 429 is a rate limit, retried, unless it says the quota or credit is gone (OpenAI's
    ``insufficient_quota``): then retrying only bills the wait.
    """
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    body = getattr(exc, "body", None)
    codes = {str(body.get(k)) for k in ("code", "type")} if isinstance(body, dict) else set()
    if status == 401 or name == "AuthenticationError":
        return "invalid_key"
    if status == 402 or name == "PaymentRequiredError" or "insufficient_quota" in codes \
            or _QUOTA_TEXT.search(str(exc)):
        return "quota_exhausted"
    if status == 403 or name == "PermissionDeniedError":
        return "permission_denied"
    if status == 404 or name == "NotFoundError":
        return "unknown_model"
    return None


#: What servers say when a prompt exceeds the context, where litellm does not map it (llama.cpp's
#: ``llama-server``: "the request exceeds the available context size"; llama-cpp-python, vLLM:
#: "maximum context length"; others: "context window").
_OVERFLOW_TEXT = re.compile(r"context (size|length|window)|exceed_context_size", re.IGNORECASE)


def context_overflow(exc: Exception, litellm) -> bool:
    """Whether a failed call was refused because the prompt does not fit the model's context."""
    if isinstance(exc, getattr(litellm, "ContextWindowExceededError", ())):
        return True
    return getattr(exc, "status_code", None) == 400 and bool(_OVERFLOW_TEXT.search(str(exc)))


#: litellm's exception names of the failures worth retrying (rate limits, timeouts, connection errors, 5xx).
RETRYABLE_NAMES = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError",
                    "ServiceUnavailableError", "BadGatewayError")


@dataclass(frozen=True)
class Decision:
    """What to do after a failed attempt: ``retry`` after ``wait_s``, or stop.

    Stopping is ``fatal`` (``reason``: why no request of the agent can succeed), ``overflow`` (the
    prompt exceeds the context) or ``give_up`` (``reason``: not retryable, or out of retries).
    """

    action: str
    wait_s: float = 0.0
    reason: str = ""


def decide(exc: Exception, attempt: int, retries: Retries, litellm, rng: random.Random | None = None) -> Decision:
    """The retry policy: what to do after attempt ``attempt`` (0-based) failed with ``exc``.

    A fatal answer (:func:`fatal_reason`) is never retried; a rate limit, timeout, connection error or
    server error (5xx) is retried after :meth:`Retries.wait` while retries are left; at the last
    attempt, or for any other error, the call stops: as a context overflow when the prompt did not fit
    (:func:`context_overflow`), else given up.
    """
    fatal = fatal_reason(exc)
    if fatal is not None:
        return Decision("fatal", reason=fatal)
    retryable = tuple(getattr(litellm, n) for n in RETRYABLE_NAMES if hasattr(litellm, n))
    status = getattr(exc, "status_code", None)
    transient = isinstance(exc, retryable) or (isinstance(status, int) and status >= 500)
    if transient and attempt < retries.max_retries:
        return Decision("retry", retries.wait(attempt, retry_after(exc), rng))
    if context_overflow(exc, litellm):
        return Decision("overflow")
    return Decision("give_up", reason="not retryable" if attempt < retries.max_retries else f"after {attempt} retries")


class CredentialsError(RuntimeError):
    """A configured model's credential variable is not set."""
