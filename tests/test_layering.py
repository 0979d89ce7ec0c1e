"""The layering as code: the import contracts of ``[tool.importlinter]`` in pyproject.toml hold.

``lint-imports`` runs in a child process: in this one it would insert the working directory into
``sys.path`` and reconfigure logging (``logging.config.dictConfig``, which disables every logger
already made). It runs through its click command, not ``python -m importlinter.cli``: that
module has no ``__main__`` block, so it would exit 0 having checked nothing. ``--no-cache``: the
graph takes a fraction of a second, and the cache directory would land in the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the configuration in ``cwd`` (its pyproject.toml)."""
    # wide and plain, so that no message is wrapped or coloured apart
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_project_keeps_its_import_contracts() -> None:
    done = lint_imports(ROOT)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"lint-imports failed (exit {done.returncode}):\n{output}"
    # every contract of pyproject.toml was checked, and there are contracts to check
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    assert len(contracts) >= 4
    assert f"Contracts: {len(contracts)} kept, 0 broken." in output, output


def write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_an_upward_import_breaks_the_contracts(tmp_path: Path) -> None:
    """The same shape of configuration on a tiny tree that breaks it: a lower wing importing a
    higher one (inside a function, as a lazy import would), two siblings on one line importing
    each other, and a package importing one it is forbidden."""
    write(
        tmp_path / "pyproject.toml",
        """\
        [tool.importlinter]
        root_packages = ["layprobe_base", "layprobe_app"]

        [[tool.importlinter.contracts]]
        id = "base-alone"
        name = "base imports no other package"
        type = "forbidden"
        source_modules = ["layprobe_base"]
        forbidden_modules = ["layprobe_app"]

        [[tool.importlinter.contracts]]
        id = "app-wings"
        name = "app's wings import only downward"
        type = "layers"
        containers = ["layprobe_app"]
        layers = ["cli", "left | right", "low"]
        """,
    )
    write(tmp_path / "layprobe_base" / "__init__.py", "import layprobe_app.low\n")
    app = tmp_path / "layprobe_app"
    write(app / "__init__.py")
    write(app / "cli.py", "from layprobe_app import left, low\n")
    write(app / "left.py", "from layprobe_app.right import RIGHT\n")
    write(app / "right.py", "RIGHT = 1\n")
    write(
        app / "low.py",
        """\
        def late():
            from layprobe_app.cli import main

            return main
        """,
    )

    done = lint_imports(tmp_path)
    output = done.stdout + done.stderr

    assert done.returncode == 1, output
    assert "Contracts: 0 kept, 2 broken." in output, output
    assert "layprobe_app.low is not allowed to import layprobe_app.cli" in output, output
    assert "- layprobe_app.low -> layprobe_app.cli (l.2)" in output, output
    assert "layprobe_app.left is not allowed to import layprobe_app.right" in output, output
    assert "layprobe_base is not allowed to import layprobe_app" in output, output
