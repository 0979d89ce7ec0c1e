"""docs/agents-and-plugins.md, "Write your first strategy": run its commands as written, so
the walkthrough cannot drift from the code.

The commands are read from that page between the walkthrough markers and run with the installed
``arena`` script in a fresh directory. ``pip install -e`` is not run (no network, no change to the
venv); it is stood in for by what it leaves behind that arena looks at: the plugin directory on
the path and a ``dist-info`` with the entry points declared in the generated pyproject.toml.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/agents-and-plugins.md"
ARENA = Path(sys.executable).parent / "arena"
SECTION = re.compile(r"<!-- walkthrough:start -->(.*?)<!-- walkthrough:end -->", re.S)
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def walkthrough() -> str:
    found = SECTION.search((ROOT / PAGE).read_text(encoding="utf-8"))
    assert found, f"{PAGE} lost its walkthrough markers"
    return found.group(1)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(walkthrough()) if lang == language]


def commands() -> list[list[str]]:
    """Every command line of the walkthrough's bash blocks, split as the shell would."""
    lines = "\n".join(blocks("bash")).replace("\\\n", " ").splitlines()
    return [argv for line in lines if (argv := shlex.split(line, comments=True))]


def fake_install(plugin: Path, site: Path) -> None:
    """What ``pip install -e plugin`` leaves that arena reads: a dist-info with entry points."""
    project = tomllib.loads((plugin / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = site / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    meta = f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    (info / "METADATA").write_text(meta)
    group, entry_points = next(iter(project["entry-points"].items()))
    lines = [f"[{group}]", *(f"{k} = {v}" for k, v in entry_points.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))


def run(argv: list[str], cwd: Path, path: list[Path]) -> subprocess.CompletedProcess[str]:
    # The checkout comes first on the path so the script runs this code, whatever state the
    # venv's (editable) install of arena is in.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [ROOT, *path])), "COLUMNS": "200"}
    return subprocess.run(
        [str(ARENA), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # every walkthrough command as a process, a pip install stood in for
def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    argvs = commands()
    assert [a[:2] for a in argvs] == [
        ["arena", "strategy"],
        ["arena", "backtest"],
        ["pip", "install"],
        ["arena", "backtest"],
        ["arena", "backtest"],
    ], "the walkthrough's commands changed: update this test with it"
    path: list[Path] = []
    for argv in argvs:
        if argv[0] == "pip":
            plugin = tmp_path / argv[-1]
            fake_install(plugin, tmp_path / "site")
            path = [tmp_path / "site", plugin]
            continue
        done = run(argv, tmp_path, path)
        assert done.returncode == 0, f"{shlex.join(argv)} failed:\n{done.stderr}{done.stdout}"

    # Step 2 shows the generated decide() itself, not a paraphrase of it.
    [shown] = blocks("python")
    source = (tmp_path / "cheapskate" / "cheapskate" / "strategy.py").read_text()
    assert textwrap.indent(shown, "    ") in source

    # Step 4 quotes numbers: they must be the ones the backtest of step 3 produced.
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    text = walkthrough().replace("−", "-")
    mean = results["summary"]["strategy"]
    paired = results["paired"]["favourite"]
    for value in (
        mean["return_mean"],
        mean["return_ci_low"],
        mean["return_ci_high"],
        paired["mean"],
        paired["ci_low"],
        paired["ci_high"],
    ):
        assert f"{value:.2f}" in text, f"the walkthrough's step 4 should quote {value:.2f}"
    assert (tmp_path / "report" / "index.html").is_file()
