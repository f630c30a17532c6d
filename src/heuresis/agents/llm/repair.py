"""Recovering what the provider sent: tool calls left in the text, malformed JSON arguments, the history as sent back."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from heuresis.harness.protocol import (
    UNREADABLE_TOOL,
)

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
# llama.cpp's chatml-function-calling format: a call is "functions.NAME:" then its JSON arguments
_PREFIXED = re.compile(r"^\s*(?:message:\s*)?functions\.([A-Za-z_][\w-]*):\s*(.*?)\s*$", re.S)
_FENCE = re.compile(r"^\s*```(?:json|python)?\s*(.*?)\s*```\s*$", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _strip_fence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text.strip()


def repair_arguments(raw: Any) -> tuple[str | None, str]:
    """Arguments as a JSON object string, repaired when unambiguous; ``(None, why)`` if not.

    Returns ``(json_string, note)``; the note is empty when nothing had to be repaired.
    """
    if isinstance(raw, Mapping):
        return json.dumps(dict(raw)), ""
    text = "" if raw is None else str(raw)
    if not text.strip():
        return "{}", ""
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return text, ""
    except json.JSONDecodeError:
        obj = None
    attempts = (
        ("code fence removed", lambda t: json.loads(_strip_fence(t))),
        ("double-encoded JSON decoded", lambda t: json.loads(json.loads(t))),
        ("trailing comma removed", lambda t: json.loads(_TRAILING_COMMA.sub(r"\1", _strip_fence(t)))),
        ("Python literal read as JSON", lambda t: ast.literal_eval(_strip_fence(t))),
    )
    for note, fix in attempts:
        try:
            obj = fix(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            try:
                return json.dumps(obj), f"arguments repaired ({note})"
            except (TypeError, ValueError):
                continue
    return None, "arguments are not a JSON object and no unambiguous repair exists"


def _call_from_object(obj: Any, tool_names: set[str]) -> tuple[str, str, str] | None:
    """(name, arguments JSON, note) from ``{"name": .., "arguments"|"parameters": ..}``, else None."""
    if not isinstance(obj, dict) or obj.get("name") not in tool_names:
        return None
    if set(obj) - {"name", "arguments", "parameters"}:
        return None
    args, note = repair_arguments(obj.get("arguments", obj.get("parameters", {})))
    return (obj["name"], args, note) if args is not None else None


def recover_tool_calls(content: str | None, tool_names: Iterable[str]) -> tuple[list[tuple[str, str]], str, list[str]]:
    """Tool calls written into a reply's text: ``(calls, remaining_text, notes)``.

    ``<tool_call>{json}</tool_call>`` blocks (Hermes/Qwen style) each become a call; a block that
    cannot be read unambiguously becomes an :data:`UNREADABLE_TOOL` call so the harness answers it
    with an error.  A reply that is ``functions.NAME:`` followed by JSON arguments (or nothing) for an
    offered tool — llama.cpp's function-calling format, left in the text when its grammar let the
    model start a "message" — is that call.  Without tags, a reply that is exactly one
    ``{"name", "arguments"}`` object of an offered tool is a call.  Anything else is left as text.
    """
    text = content or ""
    names = set(tool_names)
    blocks = _TAG.findall(text)
    prefixed = _PREFIXED.match(text) if not blocks else None
    if prefixed and prefixed.group(1) in names:
        name, raw = prefixed.group(1), prefixed.group(2)
        args, note = repair_arguments(raw)
        if args is None:
            return ([(UNREADABLE_TOOL, json.dumps({"text": text[:500], "problem": f"arguments of {name}: {note}"}))],
                    "", [f"unreadable 'functions.{name}:' call in the reply text: {note}"])
        what = "with its arguments" if raw.strip() else "without arguments (sent as {})"
        return [(name, args)], "", [f"tool call recovered from the reply text ('functions.{name}:' {what})"] \
            + [note] * bool(note)
    if not blocks:
        try:
            call = _call_from_object(json.loads(_strip_fence(text)), names) if text.strip() else None
        except json.JSONDecodeError:
            call = None
        if call is None:
            return [], text, []
        return [call[:2]], "", ["tool call recovered from the reply text (bare JSON object)"] + [call[2]] * bool(call[2])
    calls, notes = [], []
    for block in blocks:
        try:
            obj = json.loads(_strip_fence(block))
        except json.JSONDecodeError:
            fixed, _ = repair_arguments(block)
            obj = json.loads(fixed) if fixed is not None else None
        call = _call_from_object(obj, names)
        if call is None:
            why = ("not a JSON object with an offered tool's name and its arguments"
                   if obj is not None else "not valid JSON")
            calls.append((UNREADABLE_TOOL, json.dumps({"text": block[:500], "problem": why})))
            notes.append(f"unreadable <tool_call> block in the reply text: {why}")
        else:
            calls.append(call[:2])
            notes.append("tool call recovered from a <tool_call> block in the reply text")
            if call[2]:
                notes.append(call[2])
    return calls, _TAG.sub("", text).strip(), notes


def outgoing_messages(messages: list[dict], plain_history: bool = False) -> list[dict]:
    """Return the history as sent to the provider, every tool call's arguments a JSON object string.

    A malformed argument string, already answered with an error, goes out as ``{}`` (the record
    keeps it).

    ``plain_history``: each tool result goes out as a user message naming the call, and an
    assistant message without text as ``content: ""`` (litellm drops a ``None`` content), for a
    server whose chat template drops the ``tool`` role and needs every message's text (llama.cpp's
    ``chatml-function-calling``).
    """
    out = []
    names: dict[str, str] = {}
    for m in messages:
        m = dict(m)
        if plain_history and m.get("role") == "tool":
            name = names.get(str(m.get("tool_call_id", "")), "tool")
            out.append({"role": "user", "content": f"Result of your call {name} "
                                                   f"(id {m.get('tool_call_id', '')}):\n{m.get('content') or ''}"})
            continue
        for tc in m.get("tool_calls") or []:
            names[str(tc.get("id", ""))] = str((tc.get("function") or {}).get("name", "tool"))
        if plain_history and m.get("content") is None:
            m["content"] = ""
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                fixed, _ = repair_arguments(fn.get("arguments"))
                fn["arguments"] = fixed if fixed is not None else "{}"
                calls.append({**tc, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out
