"""``arena bench books``: what order books as data cost, against issue 23's targets.

* as-of lookups per CPU-second (target: at least a million): the latest snapshot at or before
  an instant for random (token, instant) pairs of the embedded sample, asked one at a time
  (``Books.asof``), all at once (``asof_many``) and walked forward (``BookWalk``);
* importing the bundled ``books_btc15m`` (target: under 2 s), in this process and as the one
  ``arena tapes import books`` command in a fresh one;
* memory while replaying, which must grow with the tokens touched, not the snapshots: a large
  synthetic ``.books`` opened in a fresh process, its resident memory read after opening and
  after looking up books of a few tokens, beside the file's size;
* the same columns as an uncompressed Arrow IPC file (where pyarrow is installed): its size and
  the time to open it against the ``.books`` file's, the measurement behind the format's choice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from replays.bookfile import load_books, save_books
from replays.books import Books
from replays.samples import sample_books_paths
from replays.validate_books import BookToken, Columns

SHARED_BOOKS = Path(__file__).resolve().parents[3] / "shared/data/polymarket/books_btc15m"
"""The bundled data set next to the checkout (``../shared`` of the repository)."""

_MEMORY_PROBE = """
import json, pathlib, sys, time
import numpy as np
from replays.bookfile import load_books

def rss_mb():
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return float("nan")

path, touched, lookups = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = rss_mb()
t0 = time.perf_counter()
books = load_books(path)
open_s = time.perf_counter() - t0
opened = rss_mb()
rng = np.random.default_rng(1)
first, last = books.span(0)
depth = 0.0
for k in range(touched):
    for t in rng.integers(first, last, lookups).tolist():
        snap = books.book_at(k, t)
        depth += float(snap.ask_sz.sum()) if snap is not None else 0.0
print(json.dumps({"base_rss_mb": base, "open_seconds": open_s, "opened_rss_mb": opened,
                  "touched_rss_mb": rss_mb(), "checked_tokens": books.checked}))
"""


def _cpu(work: Any) -> float:
    began = time.process_time()
    work()
    return time.process_time() - began


def lookup_rates(books: Books, lookups: int, seed: int = 0) -> dict[str, float]:
    """Random (token, instant) pairs within each token's span, answered three ways."""
    rng = np.random.default_rng(seed)
    n = len(books.tokens)
    ks = rng.integers(0, n, lookups)
    spans = np.array([books.span(k) or (0, 0) for k in range(n)], dtype=np.int64)
    ts = rng.integers(spans[ks, 0] - 1_000, spans[ks, 1] + 1_000)
    books.check()  # checking is opening's cost, not a lookup's
    pairs = list(zip(ks.tolist(), ts.tolist(), strict=True))
    asof = books.asof
    scalar = _cpu(lambda: [asof(k, t) for k, t in pairs])
    batch = _cpu(lambda: books.asof_many(ks, ts))
    snaps = pairs[: max(1, lookups // 10)]
    book_at = books.book_at
    snapshot = _cpu(lambda: [book_at(k, t) for k, t in snaps])
    # a replay's walk: every token at instants one second apart over the whole sample
    first, last = books.span() or (0, 0)
    instants = range(first, last + 1, 1_000)
    walk = books.walk(np.arange(n))
    walked = _cpu(lambda: [walk.advance(t) for t in instants])
    answers = len(instants) * n
    return {
        "lookups": lookups,
        "asof_per_cpu_s": round(lookups / scalar),
        "asof_many_per_cpu_s": round(lookups / batch),
        "book_at_per_cpu_s": round(len(snaps) / snapshot),
        "walk_token_instants": answers,
        "walk_per_cpu_s": round(answers / walked),
    }


def import_times(data: Path) -> dict[str, Any]:
    """The bundled data set imported in this process (read, check, write books and tape), and
    by the command in a fresh process (Python, numpy and pyarrow started included)."""
    if not (data / "books.parquet").exists():
        return {"import_note": f"{data}: no books.parquet; import not measured"}
    from replays.importers.books import import_resolvedkit
    from replays.tapefile import save_tape

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        began = time.perf_counter()
        result = import_resolvedkit(data)
        save_books(result.books, out / "btc.books")
        assert result.tape is not None
        save_tape(result.tape, out / "btc.tape")
        in_process = time.perf_counter() - began
        outputs = ["--out", str(out / "c.books"), "--tape", str(out / "c.tape"), "--json"]
        command = [sys.executable, "-c", "from arena.cli import main; main()"]
        command += ["tapes", "import", "books", str(data)]
        began = time.perf_counter()
        subprocess.run([*command, *outputs], check=True, capture_output=True)
        fresh = time.perf_counter() - began
    return {
        "import_rows": result.rows,
        "import_seconds": round(in_process, 3),
        "import_command_seconds": round(fresh, 3),
    }


def synthetic_books(tokens: int, snapshots: int, levels: int, seed: int = 0) -> Books:
    """``tokens`` books of ``snapshots`` one-second snapshots with ``levels`` cent levels a
    side around a random-walk mid; built straight into columns (checked lazily)."""
    rng = np.random.default_rng(seed)
    n = tokens * snapshots
    steps = rng.integers(-1, 2, (tokens, snapshots))
    mids = np.clip(50 + np.cumsum(steps, axis=1), 25, 75).reshape(-1)  # cents
    depth = np.arange(1, levels + 1)
    bid_px = ((mids[:, None] - depth) / 100).reshape(-1)
    ask_px = ((mids[:, None] + depth) / 100).reshape(-1)
    start = 1_790_000_000_000
    ts = (start + np.arange(snapshots) * 1_000)[None, :] + np.arange(tokens)[:, None]
    offsets = np.arange(tokens + 1, dtype=np.int64) * snapshots
    level_offsets = np.arange(n + 1, dtype=np.int64) * levels
    columns = Columns(
        offsets, ts.reshape(-1), np.full(n, 0.01),
        level_offsets, bid_px, rng.uniform(1, 1000, n * levels).round(2),
        level_offsets, ask_px, rng.uniform(1, 1000, n * levels).round(2),
    )  # fmt: skip
    names = [BookToken(token=f"syn-{k:05d}", market=f"m{k // 2:05d}",
                       outcome=("Yes", "No")[k % 2]) for k in range(tokens)]  # fmt: skip
    return Books(names, columns, source="<synthetic>", lazy=True)


def memory_figures(tokens: int, snapshots: int, levels: int, touched: int) -> dict[str, Any]:
    """Resident memory of a fresh process that opens a large stored ``.books`` and looks up
    books of ``touched`` tokens, beside the file's size."""
    books = synthetic_books(tokens, snapshots, levels)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.books"
        save_books(books, path)
        file_mb = path.stat().st_size / 2**20
        arrow = _arrow_figures(books, Path(tmp), path)
        del books
        out = subprocess.run(
            [sys.executable, "-c", _MEMORY_PROBE, str(path), str(touched), "2000"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    probe = json.loads(out.stdout)
    return {
        "memory_tokens": tokens,
        "memory_snapshots": tokens * snapshots,
        "memory_levels": tokens * snapshots * 2 * levels,
        "file_mb": round(file_mb, 1),
        "open_ms": round(probe["open_seconds"] * 1000, 2),
        "rss_before_open_mb": round(probe["base_rss_mb"], 1),
        "rss_after_open_mb": round(probe["opened_rss_mb"], 1),
        "tokens_touched": touched,
        "rss_after_lookups_mb": round(probe["touched_rss_mb"], 1),
        "touched_tokens_mb": round(file_mb * touched / tokens, 1),
        **arrow,
    }


def _arrow_figures(books: Books, folder: Path, books_path: Path) -> dict[str, Any]:
    """The columns as uncompressed Arrow IPC (one file a column: the columns have different
    lengths, and a record batch's may not): their size, and opening them memory-mapped with
    zero-copy numpy views against opening the ``.books`` file (both warm in the page cache)."""
    try:
        import pyarrow as pa
        import pyarrow.ipc as ipc
    except ImportError:
        return {"arrow_note": "pyarrow not installed: Arrow IPC not measured"}
    names = Columns._fields
    total = 0
    for name, column in zip(names, books.columns, strict=True):
        array = pa.array(np.asarray(column))
        path = folder / f"{name}.arrow"
        schema = pa.schema([(name, array.type)])
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, schema) as out:
            out.write(pa.record_batch([array], names=[name]))
        total += path.stat().st_size
    began = time.perf_counter()
    views = [
        ipc.open_file(pa.memory_map(str(folder / f"{name}.arrow"))).get_batch(0).column(0)
        .to_numpy(zero_copy_only=True)
        for name in names
    ]  # fmt: skip
    arrow_open = time.perf_counter() - began
    began = time.perf_counter()
    load_books(books_path)
    books_open = time.perf_counter() - began
    return {
        "arrow_ipc_mb": round(total / 2**20, 1),
        "arrow_ipc_open_ms": round(arrow_open * 1000, 2),
        "books_open_ms": round(books_open * 1000, 2),
        "arrow_columns_mapped": len(views),
    }


def bench_books(
    lookups: int = 1_000_000,
    data: Path = SHARED_BOOKS,
    tokens: int = 50,
    snapshots: int = 10_000,
    levels: int = 10,
    touched: int = 2,
) -> dict[str, Any]:
    """Every figure of ``arena bench books`` (the module's docstring says what each is)."""
    books = load_books(sample_books_paths()[1])
    figures: dict[str, Any] = {
        "sample_tokens": len(books.tokens),
        "sample_snapshots": books.n_snapshots,
        **lookup_rates(books, lookups),
        **import_times(data),
        **memory_figures(tokens, snapshots, levels, touched),
    }
    return figures
