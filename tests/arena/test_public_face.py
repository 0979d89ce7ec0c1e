"""What plugin authors and notebooks import: the top of ``arena`` (and ``strategies.api``), so
moving a module inside the wings never breaks their code; the old paths that generated plugins
used still work for one release, with a warning that names the new one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import arena
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner

TEMPLATE = Path(arena.__file__).parent / "templates" / "strategy" / "tests"


def test_the_public_names_are_the_wings_own() -> None:
    from ledger.projection import Book
    from replays.samples import sample_path
    from replays.tapefile import load_tape

    assert (arena.CohortConfig, arena.CohortRunner) == (CohortConfig, CohortRunner)
    assert (arena.Book, arena.load_tape, arena.sample_path) == (Book, load_tape, sample_path)
    with pytest.raises(AttributeError, match="no attribute 'Cohort'"):
        _ = arena.Cohort  # type: ignore[attr-defined]


def test_import_arena_stays_light() -> None:
    code = "import sys, arena; print('numpy' in sys.modules, 'pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "False"], done.stderr


@pytest.mark.parametrize(("path", "name"), [("cohort", "CohortConfig"), ("runner", "CohortRunner")])
def test_an_old_generated_plugin_still_imports_with_a_warning(path: str, name: str) -> None:
    code = (
        "import warnings; warnings.simplefilter('always');"
        f"from arena.{path} import {name}; import arena; assert {name} is arena.{name}"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"arena.{path} is deprecated: import {name} from arena" in done.stderr


def test_the_template_imports_only_the_public_face() -> None:
    text = next(TEMPLATE.glob("*.tmpl")).read_text()
    imports = [line for line in text.splitlines() if line.startswith(("from ", "import "))]
    project = [line for line in imports if line.split()[1].split(".")[0] in
               {"arena", "ledger", "replays", "strategies"}]  # fmt: skip
    assert project == [
        "from arena import Book, CohortConfig, CohortRunner, load_tape, sample_path",
        "from strategies.api import Strategy",
    ]
