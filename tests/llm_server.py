"""A scripted LLM server on 127.0.0.1 for tests: speaks the OpenAI chat-completions API
(``POST .../chat/completions``) and the Anthropic messages API (``POST .../messages``).

Each request is answered by the next step of a script; a step is one of

* ``{"tool_calls": [(name, arguments), ...], "content": str | None, "usage": (in, out)}`` —
  an assistant reply (``arguments`` a dict, or a str sent verbatim, e.g. malformed JSON);
* ``{"status": 429 | 500 | 503, "error": "..."}`` — an HTTP error;
* ``{"sleep": seconds, ...}`` — delay before answering (timeouts).

Every request (path, headers, JSON body) is kept in ``server.requests`` and every reply the
server sent (usage included) in ``server.replies``, so a test compares what the harness
recorded with what was sent.  Nothing here leaves the loopback interface.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedLLMServer:
    def __init__(self, script: list[dict], model: str = "scripted-model") -> None:
        self.script = list(script)
        self.model = model
        self.requests: list[dict] = []
        self.replies: list[dict] = []
        self._lock = threading.Lock()
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
                step = server._next({"path": self.path, "headers": dict(self.headers), "body": body})
                if step.get("sleep"):
                    time.sleep(step["sleep"])
                if "status" in step:
                    payload = {"error": {"message": step.get("error", "scripted error"), "type": "scripted"}}
                    return self._send(step["status"], payload)
                anthropic = self.path.rstrip("/").endswith("/messages")
                reply = _anthropic_reply(step, server.model) if anthropic else _openai_reply(step, server.model)
                with server._lock:
                    server.replies.append({"path": self.path, "step": step, "reply": reply})
                self._send(200, reply)

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):   # the client timed out and left
                    pass

        return Handler


_ids = itertools.count()   # tool-call ids unique over the server's life, as providers make them


def _arguments(args) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _openai_reply(step: dict, model: str) -> dict:
    n_in, n_out = step.get("usage", (100, 20))
    calls = [{"id": f"call_{next(_ids)}", "type": "function",
              "function": {"name": name, "arguments": _arguments(args)}}
             for k, (name, args) in enumerate(step.get("tool_calls", []))]
    message = {"role": "assistant", "content": step.get("content")}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}


def _anthropic_reply(step: dict, model: str) -> dict:
    n_in, n_out = step.get("usage", (100, 20))
    content = []
    if step.get("content"):
        content.append({"type": "text", "text": step["content"]})
    for _k, (name, args) in enumerate(step.get("tool_calls", [])):
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": name,
                        "input": args if isinstance(args, dict) else {}})
    return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if step.get("tool_calls") else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": n_in, "output_tokens": n_out}}
