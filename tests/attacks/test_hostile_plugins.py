"""Hostile plugins, as a stranger would submit them: a file spec whose code attacks at import,
in its constructor, in ``setup`` or in ``decide``. Under ``--isolate`` every one is contained:
the run goes on, the attack is the agent's recorded HOLD with its reason, the honest agent beside
it logs the events it logs alone, and nothing of the future (the tape, the log) is read. In
process, the attacks made in ``setup`` and ``decide`` through Python are contained the same way;
what needs ``--isolate`` (import and constructor, ``ctypes``, reads of files) is named in
docs/agents-and-plugins.md.
"""

from __future__ import annotations

import socket
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

import arena.boundary.isolated
from arena.boundary import oslimits
from arena.boundary.oslimits import plan
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import AnyEvent, CohortClosed, CohortOpened, DecisionMade
from ledger.store import EventStore
from ledger.stream import MemorySink
from replays.samples import sample_path
from tests.arena.boundary.test_boundary import honest_tape, of_agent
from tests.conftest import Arena

LIMIT = 1.0
"""The decision time limit of these runs (and, patched, the worker's build limit)."""

FILES = plan().landlock >= 1
"""Whether this kernel confines a worker's reads and writes (Landlock)."""
TCP = plan().landlock >= 4
"""Whether it confines TCP (Landlock ABI 4+)."""

PLUGIN = """
import ctypes, os, signal, socket, sys, time
from strategies.api import Decision, Strategy

FIRST = [True]


class Unprintable(Exception):
    def __str__(self):
        while True:
            pass


def attack():
{attack}


def once():
    if FIRST[0]:
        FIRST[0] = False
        return attack()


{at_import}

class Hostile(Strategy):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        {at_init}

    def setup(self, context):
        {at_setup}

    def decide(self, view):
        said = {at_decide}
        return Decision.hold(str(said or "held"))
"""

WHEN = ("import", "init", "setup", "decide")


def plugin_source(attack: str, when: str) -> str:
    """The plugin file: ``attack`` run at ``when`` (at ``decide``, at its first decision)."""
    call = {w: ("once()" if w == "decide" else "attack()") if w == when else "None" for w in WHEN}
    return PLUGIN.format(
        attack=textwrap.indent(textwrap.dedent(attack).strip(), "    "),
        at_import=call["import"],
        at_init=call["init"],
        at_setup=call["setup"],
        at_decide=call["decide"],
    )


@dataclass(frozen=True)
class Attack:
    name: str
    code: str
    in_process: bool = True
    """Whether an in-process run survives it (else it is a case for ``--isolate`` only)."""
    fails: bool = True
    """Whether the plugin's own code fails (a patch succeeds, where it runs, and changes
    nothing another agent does)."""


PROCESS_ATTACKS = [
    Attack("os._exit", "os._exit(0)"),
    Attack("while True", "while True:\n    pass"),
    Attack("raises", "raise RuntimeError('boom')"),
    Attack("unprintable exception", "raise Unprintable()"),
    Attack(
        "SIGALRM blocked",
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\nwhile True:\n    pass",
    ),
    Attack("os.killpg of its group", "os.killpg(os.getpgid(0), signal.SIGKILL)"),
    Attack(
        "killpg of its group through ctypes",
        "ctypes.CDLL(None).killpg(os.getpgid(0), 9)",
        in_process=False,
    ),
    Attack(
        "patches the broker",
        "from ledger.rules import Broker\nBroker.execute = lambda *a, **k: None",
        in_process=False,
        fails=False,
    ),
    Attack(
        "patches another agent's module",
        "from strategies.builtin import price_side\n"
        "price_side.Favourite.decide = lambda self, view: Decision.hold('patched')",
        in_process=False,
        fails=False,
    ),
]


@pytest.fixture(autouse=True)
def _quick_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's limit on importing and building its plugin is the decision limit here,
    not a minute: an import that never ends is then a one-second case."""
    monkeypatch.setattr(arena.boundary.isolated, "SETUP_SECONDS", LIMIT)


def run(tmp_path: Path, source: str | None, *, isolate: bool) -> list[AnyEvent]:
    """``fav=favourite`` beside ``bad`` (the plugin file ``source`` in a folder of its own),
    replayed in memory; without ``source``, ``fav`` alone."""
    tape = honest_tape()
    agents = {"fav": "favourite"}
    if source is not None:
        folder = tmp_path / "plugin"
        folder.mkdir(exist_ok=True)
        (folder / "hostile.py").write_text(source)
        agents["bad"] = f"{folder / 'hostile.py'}:Hostile"
    config = CohortConfig(
        start=datetime.fromtimestamp(tape.span()[0], UTC),
        agents=agents,
        universe=6,
        decision_cadence="daily",
        mark_cadence="daily",
    )
    options = RunOptions(decision_timeout=LIMIT, isolate=isolate)
    runner = CohortRunner(tape, RunSettings(cohort=config, options=options))
    sink = MemorySink()
    runner.run(sink)
    events = sink.read(runner.cohort)
    assert isinstance(events[-1], CohortClosed)  # the run went on to its end
    return events


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> list[AnyEvent]:
    return of_agent(run(tmp_path_factory.mktemp("alone"), None, isolate=False), "fav")


def made(events: list[AnyEvent], agent: str = "bad") -> list[DecisionMade]:
    return [e for e in events if isinstance(e, DecisionMade) and e.agent == agent]


def contained(events: list[AnyEvent], alone: list[AnyEvent], when: str, attack: Attack) -> None:
    """The honest agent's events are its events alone; the hostile agent's decisions each a
    HOLD. An attack that fails before the first decision sits the agent out with its reason;
    one that fails in ``decide`` is that decision's error."""
    assert of_agent(events, "fav") == alone
    decisions = made(events)
    assert decisions and all(d.action == "HOLD" for d in decisions)
    if not attack.fails:
        assert {(d.reasoning, d.error) for d in decisions} == {("held", None)}
    elif when != "decide":
        (sat_out,) = decisions
        assert sat_out.error is not None
        assert sat_out.error.startswith("sat out the cohort: setup failed: ")
    else:
        assert decisions[0].error  # the first decision is the attacked one, with its reason


@pytest.mark.slow  # a worker per agent per case, and a one-second limit struck in most
@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("attack", PROCESS_ATTACKS, ids=lambda a: a.name)
def test_under_isolate_every_process_attack_is_contained(
    tmp_path: Path, alone: list[AnyEvent], attack: Attack, when: str
) -> None:
    events = run(tmp_path, plugin_source(attack.code, when), isolate=True)
    contained(events, alone, when, attack)
    opened = events[0]
    assert isinstance(opened, CohortOpened)
    assert opened.settings["isolation"] == plan().summary()


@pytest.mark.slow  # one replay per case, a one-second limit struck in most
@pytest.mark.parametrize(
    "attack", [a for a in PROCESS_ATTACKS if a.in_process], ids=lambda a: a.name
)
@pytest.mark.parametrize("when", ["setup", "decide"])
def test_in_process_the_python_attacks_in_setup_and_decide_are_contained(
    tmp_path: Path, alone: list[AnyEvent], attack: Attack, when: str
) -> None:
    events = run(tmp_path, plugin_source(attack.code, when), isolate=False)
    contained(events, alone, when, attack)


def test_in_process_a_failing_import_or_constructor_is_one_line_before_the_run(
    tmp_path: Path,
) -> None:
    from strategies.api import StrategyError

    for when in ("import", "init"):
        with pytest.raises(StrategyError, match="RuntimeError: boom"):
            run(tmp_path, plugin_source("raise RuntimeError('boom')", when), isolate=False)


# -- reads, writes and the network ----------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on 127.0.0.1 that records what each connection sends."""
    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(1024))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], got
    server.close()
    thread.join(5)


def reads(path: Path, when: str = "decide") -> str:
    """Code that reads ``path`` and says what it got: its reasoning at a decision, else the
    error its setup fails with."""
    said = "return said" if when == "decide" else "raise RuntimeError(said)"
    return f"""
try:
    with open({str(path)!r}, "rb") as f:
        said = "read " + str(len(f.read()))
except OSError as exc:
    said = "refused: " + type(exc).__name__
{said}
"""


def first_reasoning(events: list[AnyEvent]) -> str:
    return made(events)[0].reasoning


@pytest.mark.slow  # a worker per case
@pytest.mark.parametrize("when", WHEN)
def test_under_isolate_a_plugin_cannot_read_the_tape_shipped_in_the_package(
    tmp_path: Path, alone: list[AnyEvent], when: str
) -> None:
    tape = sample_path()
    assert tape.stat().st_size > 0
    events = run(tmp_path, plugin_source(reads(tape, when), when), isolate=True)
    assert of_agent(events, "fav") == alone
    said = first_reasoning(events) if when == "decide" else made(events)[0].error or ""
    if FILES:
        assert "refused: PermissionError" in said
        assert "read " not in said
    else:
        assert "read " in said
        assert "no Landlock" in str(events[0])


@pytest.mark.slow  # a worker
def test_under_isolate_a_plugin_cannot_read_the_log(tmp_path: Path, alone: list[AnyEvent]) -> None:
    log = tmp_path / "log" / "run.db"
    log.parent.mkdir()
    log.write_bytes(b"SQLite format 3\x00" + bytes(4096))
    events = run(tmp_path, plugin_source(reads(log), "decide"), isolate=True)
    assert of_agent(events, "fav") == alone
    assert first_reasoning(events) == ("refused: PermissionError" if FILES else "read 4112")


@pytest.mark.slow  # a worker
def test_under_isolate_a_plugin_writes_its_scratch_folder_only(
    tmp_path: Path, alone: list[AnyEvent]
) -> None:
    outside = tmp_path / "outside.txt"
    code = f"""
import tempfile
with tempfile.NamedTemporaryFile(delete=False) as scratch:
    scratch.write(b"mine")
try:
    open({str(outside)!r}, "w").write("escaped")
    return "wrote outside"
except OSError as exc:
    return "scratch ok; outside refused: " + type(exc).__name__
"""
    events = run(tmp_path, plugin_source(code, "decide"), isolate=True)
    assert of_agent(events, "fav") == alone
    if FILES:
        assert first_reasoning(events) == "scratch ok; outside refused: PermissionError"
        assert not outside.exists()
    else:
        assert first_reasoning(events) == "wrote outside"


@pytest.mark.slow  # a worker and a server
def test_under_isolate_a_plugin_cannot_open_a_socket(
    tmp_path: Path, alone: list[AnyEvent], listener: tuple[int, list[bytes]]
) -> None:
    port, got = listener
    code = f"""
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:
        s.sendall(b"the future, please")
    return "sent"
except OSError as exc:
    return "refused: " + type(exc).__name__
"""
    events = run(tmp_path, plugin_source(code, "decide"), isolate=True)
    assert of_agent(events, "fav") == alone
    if TCP:
        assert first_reasoning(events) == "refused: PermissionError"
        assert got == []
    else:
        assert first_reasoning(events) == "sent"


@pytest.mark.slow  # the spec is loaded in a worker of its own before the run
@pytest.mark.parametrize(
    ("attack", "why"),
    [
        ("os._exit(0)", "SandboxError: a strategy may not call os._exit during a replay"),
        ("raise RuntimeError('boom')", "RuntimeError: boom"),
    ],
)
def test_under_isolate_the_cli_loads_a_spec_in_a_worker_and_refuses_it_in_one_line(
    arena: Arena, tmp_path: Path, hand_tape_file: Path, attack: str, why: str
) -> None:
    plugin = tmp_path / "plugin" / "hostile.py"
    plugin.parent.mkdir()
    plugin.write_text(plugin_source(attack, "import"))
    result = arena("replay", "--tape", hand_tape_file, "--start", "2024-01-07", "--isolate",
                   "--agent", f"bad={plugin}:Hostile", "--agent", "f=favourite",
                   "--db", tmp_path / "run.db")  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: {plugin}: {why}"


KEPT = "memory 4 GiB, files 256 MiB, no core; own session, dies with the run"


@pytest.mark.slow  # isolated agents' workers
@pytest.mark.parametrize(
    ("filtered", "line"),
    [
        (
            True,
            "no Landlock: reads and writes not confined; TCP not confined (no Landlock ABI 4); "
            "seccomp: sockets TCP and unix stream pairs only (no UDP, raw, netlink, packet or "
            "other unix), no TCP Fast Open, io_uring, ptrace, bpf, namespaces, mounts or "
            f"keyrings; signals not confined; {KEPT}",
        ),
        (
            False,
            "no OS sandbox (no Landlock, no seccomp filter): reads, writes, network and signals "
            f"are not confined; {KEPT}",
        ),
    ],
    ids=["seccomp only", "neither"],
)
def test_without_landlock_isolate_says_in_one_line_what_it_does_not_enforce(
    arena: Arena,
    tmp_path: Path,
    hand_tape_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    filtered: bool,
    line: str,
) -> None:
    if filtered and oslimits.seccomp_arch() is None:
        pytest.skip("no seccomp filter for this machine")
    monkeypatch.setattr(oslimits, "landlock_abi", lambda: 0)  # a kernel without Landlock
    if not filtered:  # nor a seccomp filter (another architecture)
        monkeypatch.setattr(oslimits, "seccomp_arch", lambda: None)
    db = tmp_path / "run.db"
    result = arena("replay", "--tape", hand_tape_file, "--start", "2024-01-07", "--isolate",
                   "--agent", "f=favourite", "--db", db, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == f"--isolate on this machine: {line}"
    with EventStore.open(db, readonly=True) as store:
        (opened,) = [e for e in store.read() if isinstance(e, CohortOpened)]
    assert opened.settings["isolation"] == line


@pytest.mark.parametrize(
    ("attack", "why"),
    [
        ("os._exit(0)", "SandboxError: a strategy may not call os._exit during a replay"),
        ("raise RuntimeError('boom')", "RuntimeError: boom"),
        ("while True:\n    pass", "DecisionTimeout: decision took longer than 1 s"),
    ],
)
@pytest.mark.parametrize("when", ["import", "init"])
def test_in_process_the_cli_loads_a_spec_under_the_sandbox_and_refuses_it_in_one_line(
    arena: Arena,
    tmp_path: Path,
    hand_tape_file: Path,
    attack: str,
    why: str,
    when: str,
) -> None:
    plugin = tmp_path / "plugin" / "hostile.py"
    plugin.parent.mkdir()
    plugin.write_text(plugin_source(attack, when))
    result = arena("replay", "--tape", hand_tape_file, "--start", "2024-01-07",
                   "--agent", f"bad={plugin}:Hostile", "--agent", "f=favourite",
                   "--db", tmp_path / "run.db")  # fmt: skip
    assert result.exit_code == 1
    where = f"{plugin}:Hostile" if when == "init" else f"{plugin}"
    assert result.stderr.strip() == f"Error: {where}: {why}"
    assert not (tmp_path / "run.db").exists()
