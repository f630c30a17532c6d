"""A scripted LLM server on 127.0.0.1 for tests: speaks the OpenAI chat-completions API
(``POST .../chat/completions``) and the Anthropic messages API (``POST .../messages``).

Each request is answered by the next step of a script; a step is one of

* ``{"tool_calls": [(name, arguments), ...], "content": str | None, "usage": (in, out)}`` —
  an assistant reply (``arguments`` a dict, or a str sent verbatim, e.g. malformed JSON);
* ``{"status": 429 | 500 | 503, "error": "..."}`` — an HTTP error;
* ``{"sleep": seconds, ...}`` — delay before answering (timeouts).

An error step may carry ``"headers"`` (e.g. ``{"Retry-After": "3"}``) and ``"code"`` (the error
object's code, e.g. OpenAI's ``insufficient_quota``); a reply step's ``"usage"`` is ``(in, out)`` or
a dict with ``prompt_tokens``, ``completion_tokens`` and optionally ``cached_tokens`` and
``reasoning_tokens`` (reported as OpenAI and Anthropic do), or ``None`` for a reply without a usage
block.  Every reply has its own id (``chatcmpl-<n>``) and names the model ``served_model`` (a dated
snapshot, as providers answer an alias).

Instead of a list, ``script`` may be a callable ``step(request) -> dict`` (:class:`Conversations`:
each episode's conversation answered by its own script, whatever the order requests arrive in, as
parallel jobs send them).

``cache=PromptCache(...)`` makes the server a provider with a prompt cache: a reply's usage is then
counted from the request itself (:class:`PromptCache`), its cache reads and writes reported as the
provider reports them, and ``server.bill`` adds up what the provider would charge.

A step's ``"finish_reason"`` overrides the one the reply would have (``"length"``: cut at the cap).

Every request (path, headers, JSON body) is kept in ``server.requests`` and every reply the
server sent (usage included) in ``server.replies``, so a test compares what the harness
recorded with what was sent; ``server.max_in_flight`` is the most requests it was answering at
once.  A step's ``"overlap": (n, seconds)`` holds its reply until the server has answered ``n``
requests at once at least once, or ``seconds`` have passed (so a test of a concurrency cap sees
the cap reached however the jobs' starts fall, and a cap that serialises them shows as 1).
Nothing here leaves the loopback interface.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedLLMServer:
    def __init__(self, script: list[dict] | Callable[[dict], dict], model: str = "scripted-model",
                 served_model: str | None = None, cache: PromptCache | None = None) -> None:
        self.cache = cache
        self.bill = 0.0
        self.responder = script if callable(script) else None
        self.script = [] if callable(script) else list(script)
        self.model = model
        self.served_model = served_model or model
        self.requests: list[dict] = []
        self.replies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.ids = itertools.count()   # tool-call and reply ids, unique over this server's life as providers make them
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, request: dict) -> dict:
        with self._lock:
            self.requests.append(request)
            if self.responder is not None:
                return self.responder(request)
            if not self.script:
                return {"status": 500, "error": "script exhausted"}
            return self.script.pop(0)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, body: dict) -> None:
                step = server._next({"path": self.path, "headers": dict(self.headers), "body": body,
                                     "t": time.time()})
                if step.get("sleep"):
                    time.sleep(step["sleep"])
                if step.get("overlap"):
                    n, seconds = step["overlap"]
                    end = time.monotonic() + seconds
                    while server.max_in_flight < n and time.monotonic() < end:
                        time.sleep(0.02)
                if "status" in step:
                    payload = {"error": {"message": step.get("error", "scripted error"), "type": "scripted",
                                         "code": step.get("code")}}
                    return self._send(step["status"], payload, step.get("headers") or {})
                anthropic = self.path.rstrip("/").endswith("/messages")
                model = server.served_model
                if server.cache is not None:
                    with server._lock:
                        usage, dollars = server.cache.usage(body, anthropic, step)
                        server.bill += dollars
                    step = {**step, "usage": usage}
                reply = (_anthropic_reply if anthropic else _openai_reply)(step, model, server.ids)
                with server._lock:
                    server.replies.append({"path": self.path, "step": step, "reply": reply, "body": body})
                self._send(200, reply)

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, str(v))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):   # the client timed out and left
                    pass

        return Handler




def _arguments(args) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _usage(step: dict) -> dict | None:
    """The step's usage as a dict of counts (None: the reply has no usage block)."""
    u = step.get("usage", (100, 20))
    if u is None:
        return None
    if not isinstance(u, dict):
        u = {"prompt_tokens": u[0], "completion_tokens": u[1]}
    return {"cached_tokens": 0, "reasoning_tokens": 0, **u}


def _finish(step: dict, calls) -> str:
    return step.get("finish_reason") or ("tool_calls" if calls else "stop")


def _openai_reply(step: dict, model: str, ids: Iterator[int]) -> dict:
    u = _usage(step)
    calls = [{"id": f"call_{next(ids)}", "type": "function",
              "function": {"name": name, "arguments": _arguments(args)}}
             for k, (name, args) in enumerate(step.get("tool_calls", []))]
    message = {"role": "assistant", "content": step.get("content")}
    if calls:
        message["tool_calls"] = calls
    reply = {"id": f"chatcmpl-{next(ids)}", "object": "chat.completion", "created": 0, "model": model,
             "choices": [{"index": 0, "message": message, "finish_reason": _finish(step, calls)}]}
    if u is not None:
        reply["usage"] = {"prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"],
                          "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
                          "prompt_tokens_details": {"cached_tokens": u["cached_tokens"],
                                                    "cache_creation_input_tokens": u.get("cache_write_tokens", 0)},
                          "completion_tokens_details": {"reasoning_tokens": u["reasoning_tokens"]}}
    return reply


def _anthropic_reply(step: dict, model: str, ids: Iterator[int]) -> dict:
    u = _usage(step) or {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    content = []
    if step.get("content"):
        content.append({"type": "text", "text": step["content"]})
    for _k, (name, args) in enumerate(step.get("tool_calls", [])):
        content.append({"type": "tool_use", "id": f"toolu_{next(ids)}", "name": name,
                        "input": args if isinstance(args, dict) else {}})
    # Anthropic counts cache reads apart from input_tokens
    return {"id": f"msg_{next(ids)}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": {"length": "max_tokens"}.get(step.get("finish_reason", ""),
                                                        "tool_use" if step.get("tool_calls") else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": u["prompt_tokens"] - u["cached_tokens"] - u.get("cache_write_tokens", 0),
                      "output_tokens": u["completion_tokens"], "cache_read_input_tokens": u["cached_tokens"],
                      "cache_creation_input_tokens": u.get("cache_write_tokens", 0)}}


class PromptCache:
    """A provider's prompt cache, counted from the requests as a provider counts them.

    A request is a sequence of blocks (tool definitions, system prompt, each message's content
    blocks), each of ``ceil(len(json) / 4)`` tokens.  ``marked=True`` (Anthropic, DashScope):
    a block carrying ``cache_control`` is a breakpoint; the longest breakpoint prefix cached
    before is read, the blocks from there to the last breakpoint are written (billed at
    ``write`` x input), the rest is plain input; every breakpoint prefix is cached from then on.
    ``marked=False`` (OpenAI): the longest prefix of whole messages seen before is read when it
    holds at least ``min_tokens`` tokens, rounded down to a multiple of 128; nothing is written.
    Prices are USD per million tokens; ``bill`` of the server adds up every reply's charge.
    """

    def __init__(self, prices: dict, marked: bool = True, write: float = 1.25, min_tokens: int = 1024) -> None:
        self.prices, self.marked, self.write, self.min_tokens = prices, marked, write, min_tokens
        self.prefixes: set[str] = set()

    @staticmethod
    def _blocks(body: dict, anthropic: bool) -> list[tuple[dict | str, bool]]:
        """(block, marked) in the order the provider reads a request."""
        out: list[tuple[dict | str, bool]] = [(t, "cache_control" in t) for t in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, list):
            out += [(b, "cache_control" in b) for b in system]
        elif system:
            out.append((system, False))
        for m in body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, list):
                out += [({"role": m.get("role"), **b}, "cache_control" in b) for b in content]
            else:
                rest = {k: v for k, v in m.items() if k != "cache_control"}
                out.append((rest, "cache_control" in m))
        return out

    def usage(self, body: dict, anthropic: bool, step: dict) -> tuple[dict, float]:
        blocks = [({k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b, m)
                  for b, m in self._blocks(body, anthropic)]   # a mark is not content
        sizes = [max(1, -(-len(json.dumps(b, sort_keys=True)) // 4)) for b, _ in blocks]
        digests, h = [], hashlib.sha256()
        for b, _ in blocks:
            h.update(json.dumps(b, sort_keys=True).encode())
            digests.append(h.hexdigest())
        total = sum(sizes)
        read = write = 0
        if self.marked:
            marks = [i for i, (_, m) in enumerate(blocks) if m]
            # a hit is looked up at each breakpoint and up to 20 blocks before it (Anthropic's documented lookback)
            hit = max((i for i in range(len(blocks)) if digests[i] in self.prefixes
                       and any(0 <= m - i <= 20 for m in marks)), default=-1)
            read = sum(sizes[:hit + 1])
            last = marks[-1] if marks else -1
            write = sum(sizes[hit + 1:last + 1])
            self.prefixes.update(digests[i] for i in marks)
        else:
            hit = max((i for i in range(len(blocks)) if digests[i] in self.prefixes), default=-1)
            seen = sum(sizes[:hit + 1])
            read = seen // 128 * 128 if seen >= self.min_tokens else 0
            self.prefixes.update(digests)
        u = step.get("usage", (0, 20))
        out = u["completion_tokens"] if isinstance(u, dict) else u[1]
        p = self.prices
        dollars = ((total - read - write) * p["input_per_mtok"] + read * p["cached_input_per_mtok"]
                   + write * p["input_per_mtok"] * self.write + out * p["output_per_mtok"]) / 1e6
        return {"prompt_tokens": total, "completion_tokens": out, "cached_tokens": read,
                "cache_write_tokens": write, "reasoning_tokens": 0}, dollars


#: The budgets line's clock (wall time left, whole seconds), masked: two runs of a conversation differ in it.
CLOCK = (r"wall time \d+/", "wall time ?/")
#: The ids a server gives tool calls, masked: they count the server's replies, so they depend on what else
#: it answered (another episode, a retried attempt), not on the conversation.
CALL_IDS = (r'"(call|toolu)_\d+"', r'"\1_?"')


class Conversations:
    """A responder for :class:`ScriptedLLMServer`: each conversation answered by its own script.

    A conversation is known by its first user message (an episode's prompt names its instance);
    the reply to a request is step k of ``script(first_user_message)``, k the number of assistant
    messages the request carries, so parallel jobs get the same replies in any order.  ``faults``
    is the chance of each scripted fault per attempt, e.g. ``{429: 0.2, 500: 0.05}``, drawn from
    ``seed`` and the request's content and attempt number (an attempt repeated is a new draw,
    the same attempt in another run the same draw; the budgets line's clock is left out of a
    request's identity); a 429 carries ``Retry-After: retry_after``.  ``latency`` is a (low, high)
    range of seconds each failed attempt waits before its error, ``reply_latency`` the seconds each
    reply waits (so that the requests of parallel jobs overlap).  ``schedule`` names faults outright
    instead: ``{(k, attempt): status}`` fails attempt ``attempt`` of every conversation's step ``k``.
    ``counts`` holds the number of attempts per distinct request body, so a test tells a replayed
    request from a resent one.
    """

    def __init__(self, script: Callable[[str], Sequence[dict]], faults: dict | None = None, seed: int = 0,
                 retry_after: float = 0.05, latency: tuple[float, float] = (0.0, 0.0),
                 reply_latency: float = 0.0, schedule: dict[tuple[int, int], int] | None = None) -> None:
        self.script, self.faults, self.seed, self.schedule = script, dict(faults or {}), seed, dict(schedule or {})
        self.retry_after, self.latency, self.reply_latency = retry_after, latency, reply_latency
        self.counts: dict[str, int] = {}
        self.prompts: set[str] = set()   # the first user message of every conversation seen
        self.faulted = 0
        self._lock = threading.Lock()   # the server answers requests in threads

    @staticmethod
    def key(body: dict) -> str:
        """A digest of a request body (its messages and tools), the identity of a request."""
        text = json.dumps([body.get("messages"), body.get("tools")], sort_keys=True, default=str)
        return hashlib.sha256(re.sub(*CALL_IDS, re.sub(*CLOCK, text)).encode()).hexdigest()

    def __call__(self, request: dict) -> dict:
        body = request["body"]
        msgs = body.get("messages") or []
        first = next((m.get("content") for m in msgs if m.get("role") == "user"), "") or ""
        if isinstance(first, list):   # Anthropic content blocks
            first = " ".join(str(b.get("text", "")) for b in first if isinstance(b, dict))
        first = re.sub(*CLOCK, first)   # the budgets line's clock: not part of what the script answers
        k = sum(m.get("role") == "assistant" for m in msgs)
        self.prompts.add(first)
        key = self.key(body)
        with self._lock:
            attempt = self.counts.get(key, 0)
            self.counts[key] = attempt + 1
        rng = random.Random(f"{self.seed}/{key}/{attempt}")
        wait = rng.uniform(*self.latency) if self.latency[1] > 0 else 0.0
        drawn = [status for status, p in sorted(self.faults.items()) if rng.random() < p]
        status = self.schedule.get((k, attempt)) or next(iter(drawn), None)
        if status is not None:
            with self._lock:
                self.faulted += 1
            headers = {"Retry-After": str(self.retry_after)} if status == 429 else {}
            return {"status": status, "error": f"scripted {status}", "headers": headers, "sleep": wait}
        steps = list(self.script(first))
        step = dict(steps[min(k, len(steps) - 1)])
        if self.reply_latency:
            step["sleep"] = self.reply_latency
        return step
