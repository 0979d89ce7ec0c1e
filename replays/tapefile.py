"""Reading and writing tapes on disk, in two forms with one content hash.

``.tape`` is the fast form: a zip of raw little-endian ``.npy`` columns plus ``meta.json``,
loaded with a few array reads and ``allow_pickle=False`` so a tape can never execute code.
``.tape.jsonl.gz`` (or ``.tape.jsonl``) is the readable form: a JSON header line, then one
line per market series, greppable and diffable. See ``replays/FORMAT.md``.
"""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.tape import FORMAT_NAME, FORMAT_VERSION, MarketInfo, Resolution, Tape

COLUMNS = (("offsets", "<i8"), ("times", "<i8"), ("prices", "<f8"))
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member dates keep the file byte-reproducible


class _Header(msgspec.Struct):
    """The metadata both forms share; ``hash`` and ``points`` are a check, not content."""

    format: str
    version: int
    markets: list[MarketInfo]
    resolutions: list[Resolution]
    hash: str | None = None
    points: int | None = None


class _Series(msgspec.Struct):
    market: str
    t: list[int]
    p: list[Any]


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
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TapeError(f"{source}: bad tape header: {exc}") from None
    if header.format != FORMAT_NAME or header.version != FORMAT_VERSION:
        raise TapeError(
            f"{source}: not an {FORMAT_NAME} v{FORMAT_VERSION} file "
            f"(format={header.format!r}, version={header.version})"
        )
    return header


def _checked(source: str, tape: Tape, header: _Header, verify_hash: bool) -> Tape:
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


def _read_columnar(path: Path, verify_hash: bool) -> Tape:
    source = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            header = _decode_header(source, zf.read("meta.json"))
            arrays = []
            for name, dtype in COLUMNS:
                with zf.open(f"{name}.npy") as fp:
                    arr = np.lib.format.read_array(fp, allow_pickle=False)
                if arr.ndim != 1 or arr.dtype != np.dtype(dtype):
                    raise TapeError(f"{source}: corrupt tape: {name} is {arr.dtype}{arr.shape}")
                arrays.append(arr)
    except TapeError:
        raise
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, ValueError, zlib.error) as exc:
        raise TapeError(f"{source}: corrupt columnar tape: {exc}") from None
    offsets, times, prices = arrays
    tape = Tape(header.markets, offsets, times, prices, {r.market: r for r in header.resolutions},
                source=source)  # fmt: skip
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


def _read_jsonl(path: Path, verify_hash: bool) -> Tape:
    source = str(path)
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TapeError(f"{source}: corrupt or truncated gzip: {exc}") from None
    lines = data.splitlines()
    if not lines or not lines[0].strip():
        raise TapeError(f"{source}: empty tape file")
    header = _decode_header(source, lines[0])
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            row = msgspec.json.decode(line, type=_Series)
            prices = np.asarray(row.p, dtype=np.float64)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as exc:
            raise TapeError(f"{source}: line {number}: bad series: {exc}") from None
        if row.market in series:
            raise TapeError(f"{source}: market {row.market}: two series lines")
        series[row.market] = (np.asarray(row.t, dtype=np.int64), prices)
    tape = Tape.from_series(header.markets, series, header.resolutions, source=source)
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
    """Write ``tape``; the extension picks the form, the bytes are reproducible."""
    path = Path(path)
    kind = tape_kind(path)
    if kind == "columnar":
        _write_columnar(tape, path)
    else:
        _write_jsonl(tape, path, compress=kind == "jsonl.gz")


def load_tape(path: str | Path, *, verify_hash: bool = False) -> Tape:
    """Read and validate a tape, detecting its form from the first bytes, never running code.

    ``verify_hash`` also recomputes the content hash and compares it with the one the file
    records (``arena tapes validate`` does; plain loads skip it to stay fast).
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise TapeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if magic.startswith(b"PK"):
        return _read_columnar(path, verify_hash)
    if magic.startswith((b"\x1f\x8b", b"{")):
        return _read_jsonl(path, verify_hash)
    if not magic:
        raise TapeError(f"{path}: empty tape file")
    raise TapeError(f"{path}: not a tape (neither a .tape zip nor JSON lines)")
