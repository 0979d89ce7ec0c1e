"""Reading and writing tapes on disk, in two forms with one content hash.

``.tape`` is the fast form: a zip of raw little-endian ``.npy`` columns plus ``meta.json``,
loaded with a few array reads and ``allow_pickle=False`` so a tape can never execute code.
``.tape.jsonl.gz`` (or ``.tape.jsonl``) is the readable form: a JSON header line, then one
line per market series, greppable and diffable. See ``replays/FORMAT.md``.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import struct
import zipfile
import zlib
from pathlib import Path

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution
from replays.tape import FORMAT_NAME, FORMAT_VERSION, Tape
from replays.untrusted import Budget, content_lines, read_file, read_member, read_npy
from replays.validate import INSTANT_RANGE, Instant, check_markets, resolutions_by_market

COLUMNS = (("offsets", "<i8"), ("times", "<i8"), ("prices", "<f8"))
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member dates keep the file byte-reproducible
# What zipfile raises on damaged archives: a missing member is a KeyError, a damaged record a
# ValueError or struct.error, an unknown compression method or version NotImplementedError,
# a set encryption flag RuntimeError.
_ZIP_ERRORS = (
    zipfile.BadZipFile, KeyError, OSError, EOFError, ValueError, zlib.error, struct.error,
    NotImplementedError, RuntimeError, OverflowError,
)  # fmt: skip


class _Header(msgspec.Struct):
    """The metadata both forms share; ``hash`` and ``points`` are a check, not content."""

    format: str
    version: int
    markets: list[MarketInfo]
    resolutions: list[Resolution]
    hash: str | None = None
    points: int | None = None


class _Series(msgspec.Struct):
    """A series line. Typed decoding is what refuses ``true`` or ``"0.5"`` as a price (numpy
    read them as 1.0 and 0.5) and 2**70 as an instant (an OverflowError in numpy); whether
    ``p`` has the shape its market needs is checked once the market is known."""

    market: str
    t: list[Instant]
    p: list[float | list[float]]


class _Named(msgspec.Struct):
    """Just a series line's market, to name it when the whole line does not decode."""

    market: str


_SERIES = msgspec.json.Decoder(_Series)
_NAMED = msgspec.json.Decoder(_Named)
# RecursionError: JSON nested deeper than the interpreter's recursion limit (msgspec's guard)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)


def _header(tape: Tape) -> _Header:
    return _Header(
        format=FORMAT_NAME,
        version=FORMAT_VERSION,
        markets=list(tape.markets),
        resolutions=[tape.resolutions[k] for k in sorted(tape.resolutions)],
        hash=tape.hash,
        points=tape.n_points,
    )


def _decode_header(source: str, raw: bytes) -> _Header:
    try:
        header = msgspec.json.decode(raw, type=_Header)
    except _DECODE_ERRORS as exc:
        raise TapeError(f"{source}: bad tape header: {exc}") from None
    if header.format != FORMAT_NAME or header.version != FORMAT_VERSION:
        raise TapeError(
            f"{source}: not an {FORMAT_NAME} v{FORMAT_VERSION} file "
            f"(format={header.format!r}, version={header.version})"
        )
    check_markets(source, header.markets)  # before any series is shaped by them
    return header


def _checked(source: str, tape: Tape, header: _Header, verify_hash: bool) -> Tape:
    """The checks a file's ``hash`` and ``points`` fields are for (``arena tapes validate``)."""
    if verify_hash and header.points is not None and header.points != tape.n_points:
        raise TapeError(f"{source}: the file says {header.points} points, "
                        f"its series hold {tape.n_points}")  # fmt: skip
    if verify_hash and header.hash is not None and header.hash != tape.hash:
        raise TapeError(f"{source}: content hash mismatch: file says {header.hash[:12]}…, "
                        f"content is {tape.hash[:12]}…")  # fmt: skip
    return tape


# -- columnar ---------------------------------------------------------------------------------


def _write_columnar(tape: Tape, path: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr(zipfile.ZipInfo("meta.json", _ZIP_EPOCH), msgspec.json.encode(_header(tape)))
        for (name, dtype), arr in zip(COLUMNS, tape.columns, strict=True):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr, dtype=dtype))
            info = zipfile.ZipInfo(f"{name}.npy", _ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def _read_columnar(path: Path, verify_hash: bool, budget: Budget) -> Tape:
    source = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            header = _decode_header(source, read_member(zf, "meta.json", budget))
            offsets, times, prices = (
                read_npy(zf, f"{name}.npy", dtype, budget) for name, dtype in COLUMNS
            )
    except TapeError:
        raise
    except _ZIP_ERRORS as exc:
        raise TapeError(f"{source}: corrupt columnar tape: {exc}") from None
    resolutions = resolutions_by_market(source, header.resolutions)
    tape = Tape(header.markets, offsets, times, prices, resolutions, source=source)
    return _checked(source, tape, header, verify_hash)


# -- readable JSON lines ----------------------------------------------------------------------


def _write_jsonl(tape: Tape, path: Path, compress: bool) -> None:
    lines = [msgspec.json.encode(_header(tape))]
    for m, market in enumerate(tape.markets):
        stored = tape.yes(m) if market.is_binary else tape.values(m)
        row = _Series(market=market.id, t=tape.times(m).tolist(), p=stored.tolist())
        lines.append(msgspec.json.encode(row))
    data = b"\n".join(lines) + b"\n"
    if compress:
        with (
            open(path, "wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        ):
            gz.write(data)
    else:
        path.write_bytes(data)


def _bad_line(source: str, number: int, line: bytes, exc: Exception) -> TapeError:
    """One line naming the line, its market when that much decodes, and what is wrong."""
    where = f"{source}: line {number}"
    with contextlib.suppress(*_DECODE_ERRORS):
        where += f": market {_NAMED.decode(line).market}"
    text = str(exc)
    if "`$.t" in text:
        problem = f"instants must be whole unix seconds in {INSTANT_RANGE}"
    elif "`$.p" in text:
        problem = "prices must be numbers"
    else:
        problem = "bad series"
    return TapeError(f"{where}: {problem} ({text})")


def _series_arrays(where: str, row: _Series, market: MarketInfo) -> tuple[np.ndarray, np.ndarray]:
    """One line's instants and prices as arrays of the shape its market stores."""
    k = len(market.outcomes)
    expected = (len(row.p),) if market.is_binary else (len(row.p), k)
    try:
        prices = np.asarray(row.p, dtype=np.float64) if row.p else np.empty(expected)
    except ValueError:  # a list among numbers, or rows of different lengths
        prices = None
    if prices is None or prices.shape != expected:
        shape = (
            "YES prices" if market.is_binary else f"one list of {k} outcomes' prices per instant"
        )
        raise TapeError(f"{where}: prices must be {shape}")
    return np.asarray(row.t, dtype=np.int64), prices


def _read_jsonl(path: Path, verify_hash: bool, budget: Budget) -> Tape:
    source = str(path)
    data = read_file(path, budget)
    first = data.find(b"\n")
    head = data if first < 0 else data[:first]
    if not head.strip():
        raise TapeError(f"{source}: empty tape file")
    header = _decode_header(source, head)
    markets = {m.id: m for m in header.markets}
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for number, line in content_lines(data, len(head)):
        try:
            row = _SERIES.decode(line)
        except _DECODE_ERRORS as exc:
            raise _bad_line(source, number, line, exc) from None
        where = f"{source}: line {number}: market {row.market}"
        if row.market in series:
            raise TapeError(f"{where}: a second series line")
        market = markets.get(row.market)
        if market is None:
            raise TapeError(f"{where}: points for a market not in the tape")
        series[row.market] = _series_arrays(where, row, market)
    resolutions = resolutions_by_market(source, header.resolutions)
    tape = Tape.from_series(header.markets, series, resolutions, source=source)
    return _checked(source, tape, header, verify_hash)


# -- public -----------------------------------------------------------------------------------


def tape_kind(path: Path) -> str:
    """``"columnar"``, ``"jsonl.gz"`` or ``"jsonl"`` from the file name (what ``save`` writes)."""
    name = path.name
    if name.endswith(".jsonl.gz"):
        return "jsonl.gz"
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith(".tape"):
        return "columnar"
    raise TapeError(f"{path}: unknown tape extension (use .tape, .tape.jsonl.gz or .tape.jsonl)")


def save_tape(tape: Tape, path: str | Path) -> None:
    """Write ``tape``; the extension picks the form, the bytes are reproducible.

    Written beside ``path`` and moved into place, so a write that fails (a folder that is not
    there or not writable, a full disk) leaves no half tape, only a one-line TapeError."""
    path = Path(path)
    kind = tape_kind(path)
    partial = path.with_name(f".{path.name}.partial")
    try:
        if kind == "columnar":
            _write_columnar(tape, partial)
        else:
            _write_jsonl(tape, partial, compress=kind == "jsonl.gz")
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise TapeError(f"{path}: cannot write: {exc.strerror or exc}") from None


def load_tape(path: str | Path, *, verify_hash: bool = False, max_bytes: int | None = None) -> Tape:
    """Read and validate a tape, detecting its form from the first bytes, never running code.

    ``verify_hash`` also recomputes the content hash and compares it with the one the file
    records (``arena tapes validate`` does; plain loads skip it to stay fast). ``max_bytes``
    caps what the file may decompress to (default ``ARENA_TAPE_MAX_BYTES``, else 2 GiB).
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise TapeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if magic.startswith(b"PK"):
        return _read_columnar(path, verify_hash, Budget(str(path), max_bytes))
    if magic.startswith((b"\x1f\x8b", b"{")):
        return _read_jsonl(path, verify_hash, Budget(str(path), max_bytes))
    if not magic:
        raise TapeError(f"{path}: empty tape file")
    raise TapeError(f"{path}: not a tape (neither a .tape zip nor JSON lines)")
