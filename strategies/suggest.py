""" "Did you mean …?": the nearest known name to a mistyped one, for one-line errors.

``favorite`` for ``favourite``, ``stak`` for ``stake``, ``extremised`` for ``extremized``:
a newcomer's first error is usually a spelling, and a list of every name does not say which
one was meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word`` (difflib's ratio of at least 0.6), or None."""
    found = difflib.get_close_matches(word, list(known), n=1)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``" (did you mean favourite?)"`` when a known name is close to ``word``, else ``""``."""
    match = nearest(word, known)
    return f" (did you mean {match}?)" if match is not None and match != word else ""
