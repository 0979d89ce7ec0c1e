"""Raw Gamma labels grouped into Polymarket's categories (``replays.categories``), at read time."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.fees import CATEGORIES
from replays.categories import TOP, top_category


def test_the_set_is_polymarkets_fee_categories() -> None:
    assert sorted(c.lower() for c in TOP) == sorted(CATEGORIES)


@pytest.mark.parametrize(
    ("label", "category"),
    [
        # the election sample's labels: one kind of race, many spellings, all Politics
        ("republican party", "Politics"), ("pennsylvania", "Politics"),
        ("us elections", "Politics"), ("senates", "Politics"), ("Governor Races", "Politics"),
        ("State Presidential Election", "Politics"), ("Nevada", "Politics"),
        ("elections 2024", "Politics"), ("North Carolina", "Politics"),
        ("NBA", "Sports"), ("FIFA World Cup", "Sports"), ("Bitcoin", "Crypto"),
        ("S&P 500", "Finance"), ("Fed Interest Rates", "Economics"), ("Trump tariffs", "Politics"),
        ("Russia x Ukraine", "Geopolitics"), ("OpenAI", "Tech"), ("Oscars", "Culture"),
        ("Hurricane season", "Weather"), ("Mentions", "Mentions"),
        # words, not substrings: "ai" is not in "Taiwan" (Geopolitics), "eth" not in "Bethesda"
        ("Taiwan", "Geopolitics"), ("Bethesda", "Other"),
        ("", "Other"), (None, "Other"), ("— something new —", "Other"),
    ],
)  # fmt: skip
def test_labels_by_hand(label: str | None, category: str) -> None:
    assert top_category(label) == category


@given(st.one_of(st.none(), st.text(max_size=60)))
def test_every_label_lands_in_the_set(label: str | None) -> None:
    assert top_category(label) in TOP


@given(st.text(string.printable, max_size=60))
def test_case_does_not_matter(label: str) -> None:
    assert top_category(label.upper()) == top_category(label.lower())
