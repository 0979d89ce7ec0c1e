"""Polymarket's top-level categories for a market's raw Gamma label.

A tape keeps each market's category as Gamma gave it: one tag among many, chosen by whoever
listed the market, so one kind of race shows up as "republican party", "pennsylvania",
"us elections" and "senates". Reports group by the small set Polymarket itself uses (its fee
categories, changelog 2026-03-30, the same names as ``ledger.fees.CATEGORIES``) and keep the raw
label as detail. The mapping is applied when a report reads the log, never written into it, so
no cohort id or digest depends on this table.

``top_category`` is a pure function of the label: the label's words (lower case, split on
anything not a letter or a digit) are looked up in ``KEYWORDS``, the first category (in the
table's order) one of whose words or phrases appears winning; a label naming none is ``Other``,
and a market with no label ``Other`` too.
"""

from __future__ import annotations

import re
from functools import cache

TABLE = {
    "Sports": "sports, nfl, nba, mlb, nhl, wnba, ncaa, soccer, football, basketball, baseball, "
    "hockey, tennis, golf, ufc, boxing, mma, f1, formula 1, olympics, cricket, premier league, "
    "champions league, world cup, super bowl, esports, chess",
    "Crypto": "crypto, cryptocurrency, bitcoin, btc, ethereum, eth, solana, xrp, dogecoin, "
    "memecoin, memecoins, defi, nft, nfts, airdrop, stablecoin",
    "Politics": "politics, political, election, elections, senate, senates, governor, "
    "governors, president, presidential, party, democrat, democrats, democratic, republican, "
    "republicans, gop, congress, house, mayor, primary, primaries, vote, swing states, trump, "
    "biden, harris, cabinet, supreme court, parliament, prime minister, "
    # a US state's name alone is how Gamma tags a state's election races
    "alabama, alaska, arizona, arkansas, california, colorado, connecticut, delaware, florida, "
    "georgia, hawaii, idaho, illinois, indiana, iowa, kansas, kentucky, louisiana, maine, "
    "maryland, massachusetts, michigan, minnesota, mississippi, missouri, montana, nebraska, "
    "nevada, new hampshire, new jersey, new mexico, new york, north carolina, north dakota, "
    "ohio, oklahoma, oregon, pennsylvania, rhode island, south carolina, south dakota, "
    "tennessee, texas, utah, vermont, virginia, washington, west virginia, wisconsin, wyoming",
    "Geopolitics": "geopolitics, war, ukraine, russia, israel, gaza, iran, china, taiwan, "
    "middle east, nato, ceasefire, world",
    "Finance": "finance, business, stocks, stock, equities, nasdaq, s p 500, earnings, ipo, "
    "ipos, commodities, gold, oil",
    "Economics": "economics, economy, inflation, cpi, gdp, fed, interest rates, jobs, "
    "unemployment, recession, tariffs",
    "Tech": "tech, technology, ai, openai, apple, google, microsoft, nvidia",
    "Culture": "culture, pop culture, movies, music, celebrities, awards, oscars, grammys, tv, "
    "entertainment, box office",
    "Weather": "weather, climate, science, temperature, hurricane, space",
    "Mentions": "mentions",
}
"""Each category's words and phrases as they appear in Gamma labels (lower case, a phrase's
words one space apart, "S&P 500" as ``s p 500``), in the order they are tried: Sports before
Geopolitics ("world cup" is not world news), Politics before Economics ("trump tariffs" is a
political market)."""

KEYWORDS = {category: tuple(text.split(", ")) for category, text in TABLE.items()}

TOP = (*TABLE, "Other")
"""Polymarket's categories: its fee categories' names (``ledger.fees.CATEGORIES``), capitalised."""


def words(label: str) -> str:
    """The label as lower-case words, one space apart, padded by a space each side."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", label.lower())) + " "


@cache
def top_category(label: str | None) -> str:
    """The category of ``TOP`` a raw Gamma label belongs to ("republican party", "Nevada" and
    "us elections" are Politics; "NBA" Sports); ``Other`` for a label naming none, or none."""
    if not label:
        return "Other"
    text = words(label)
    for category, keys in KEYWORDS.items():
        if any(f" {key} " in text for key in keys):
            return category
    return "Other"
