"""``Trace`` and ``DecisionMade`` name the same model bookkeeping: the runner copies a trace's
fields into the decision by name, so the two lists must not drift apart."""

from __future__ import annotations

import dataclasses
import typing

import msgspec

from ledger.events import DecisionMade
from strategies.api import TRANSCRIPT_FIELDS, Trace


def test_a_traces_logged_fields_are_the_decisions_own_with_the_same_defaults() -> None:
    logged = [f for f in dataclasses.fields(Trace) if f.name not in TRANSCRIPT_FIELDS]
    names = [f.name for f in logged]
    declared = DecisionMade.__struct_fields__  # the decision's own, then the event's (kw-only)
    after_sells = list(declared[declared.index("sells") + 1 :])
    assert after_sells == [*names, "cohort", "ts"]
    made = {f.name: f for f in msgspec.structs.fields(DecisionMade)}
    hints = typing.get_type_hints(Trace)
    for field in logged:
        assert made[field.name].default == field.default, field.name
        assert made[field.name].type == hints[field.name], field.name
