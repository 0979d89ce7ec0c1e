"""``arena strategy new``: scaffold a strategy plugin package that works before it is edited.

The files are rendered from ``arena/templates/strategy`` (shipped as package data), so what a
newcomer gets is a plain directory of ordinary files to read, and a template change is a text
edit rather than a code change. The package is a real plugin from the first minute: its test
backtests it on the embedded sample tape, and its ``pyproject.toml`` declares the entry point
that lets ``arena backtest NAME`` find it once installed.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import os
import re
from dataclasses import dataclass
from pathlib import Path

import click
from rich.markup import escape

from arena.console import make_console
from strategies.loader import BUILTINS
from strategies.plugins import plugin_packages

NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
TEMPLATE_SUFFIX = ".tmpl"
# Found next to this module rather than through importlib.resources: an editable install made
# before ``arena/__init__.py`` existed imports ``arena`` as a namespace package, which
# ``files()`` cannot read on Python 3.11; a plain path works for editable and wheel installs.
TEMPLATE_ROOT = Path(__file__).resolve().parent.parent / "templates" / "strategy"
# Names the generated strategy.py imports: a class named like one of them would shadow it.
API_NAMES = frozenset({"Bet", "Decision", "Strategy", "View"})


@dataclass(frozen=True)
class PluginNames:
    """The three spellings of one plugin: entry point / distribution, import package, class."""

    name: str
    package: str
    class_name: str

    @classmethod
    def from_name(cls, name: str) -> PluginNames:
        """``long-shot`` -> (``long-shot``, ``long_shot``, ``LongShot``), or a ValueError."""
        if not NAME_PATTERN.fullmatch(name):
            raise ValueError(
                f"strategy name {name!r} must be lower-case letters and digits, starting with a "
                "letter, words joined by - or _ (e.g. cheapskate, long-shot)"
            )
        package = name.replace("-", "_")
        class_name = "".join(word.capitalize() for word in re.split(r"[-_]", name))
        if name in BUILTINS:
            raise ValueError(f"{name!r} is a built-in strategy; pick another name")
        if keyword.iskeyword(package) or package == "tests" or class_name in API_NAMES:
            raise ValueError(f"{name!r} would clash with Python or arena names; pick another name")
        return cls(name=name, package=package, class_name=class_name)

    def render(self, text: str) -> str:
        for key, value in (
            ("name", self.name),
            ("package", self.package),
            ("class_name", self.class_name),
        ):
            text = text.replace("{{" + key + "}}", value)
        return text


def shadowed_module(package: str, target: Path) -> str | None:
    """Where an importable module of the same name lives (numpy, json, …), unless it is the
    plugin itself being regenerated: a plugin package must not hide a module arena needs."""
    spec = importlib.util.find_spec(package)
    if spec is None or package in plugin_packages():  # an installed plugin, not arena's
        return None
    places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
    inside = target.resolve()
    if any(Path(p).resolve().is_relative_to(inside) for p in places if p):
        return None
    return places[0] if places and places[0] else package


def template_files(root: Path = TEMPLATE_ROOT) -> list[Path]:
    """Every template file, relative to ``root``, sorted so generation is deterministic."""
    return sorted(p.relative_to(root) for p in root.rglob(f"*{TEMPLATE_SUFFIX}") if p.is_file())


def write_plugin(names: PluginNames, target: Path) -> list[Path]:
    """Render every template into ``target``; returns the files written."""
    written = []
    for relative in template_files():
        path = target / names.render(str(relative)).removesuffix(TEMPLATE_SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (TEMPLATE_ROOT / relative).read_text(encoding="utf-8")
        path.write_text(names.render(text), encoding="utf-8")
        written.append(path)
    return written


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        relative = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return str(path.resolve())
    return f"./{relative}" if str(relative) != "." else "."


@click.group()
def strategy() -> None:
    """Work with strategy plugins.

    \b
    Example:
      arena strategy new cheapskate
    """


@strategy.command()
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the package (default: ./NAME).",
)
@click.option(
    "--force", is_flag=True, help="Write into an existing directory, replacing its files."
)
@click.option("--json", "as_json", is_flag=True, help="Print what was created as JSON.")
def new(name: str, directory: Path | None, force: bool, as_json: bool) -> None:
    """Create a strategy plugin package NAME to edit, test, backtest and install.

    It holds a working example strategy (buy the cheap side of binary markets), a test that
    backtests it on the embedded sample tape, and a pyproject.toml that registers NAME in the
    arena.strategies entry-point group.

    \b
    Examples:
      arena strategy new cheapskate
      arena strategy new long-shot --dir plugins/long-shot
    """
    try:
        names = PluginNames.from_name(name)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    target = directory or Path(name)
    if target.exists() and not target.is_dir():
        raise click.ClickException(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise click.ClickException(
            f"{target} already exists and is not empty; use --force to write into it"
        )
    clash = shadowed_module(names.package, target)
    if clash is not None:
        raise click.ClickException(
            f"a package named {names.package!r} would shadow the module at {clash}; "
            "pick another name"
        )
    try:
        written = write_plugin(names, target)
    except OSError as exc:
        raise click.ClickException(f"cannot write {target}: {exc.strerror or exc}") from None
    strategy_file = target / names.package / "strategy.py"
    file_spec = f"{_shown(strategy_file)}:{names.class_name}"
    if as_json:
        click.echo(
            json.dumps(
                {
                    "dir": str(target),
                    "name": names.name,
                    "package": names.package,
                    "class": names.class_name,
                    "entry_point": f"{names.name} = {names.package}.strategy:{names.class_name}",
                    "spec": file_spec,
                    "files": [os.fspath(p.relative_to(target)) for p in written],
                },
                indent=2,
            )
        )
        return
    # Paths are the user's (--dir): escaped, so a "[" in one is not read as rich markup.
    where, edit, spec = (escape(x) for x in (_shown(target), _shown(strategy_file), file_spec))
    console = make_console()
    console.print(f"[bold green]created[/] {where}/ with strategy [bold]{names.name}[/]")
    for path in written:
        console.print(f"  {escape(str(path.relative_to(target)))}", highlight=False)
    console.print(
        f"""
next:
  edit      {edit}
  test      pytest {where}
  backtest  arena backtest {spec} --against hold,favourite
  install   pip install -e {where}   [dim]# then: arena backtest {names.name}[/]""",
        highlight=False,
        soft_wrap=True,  # commands stay on one line, ready to copy
    )
