"""The keys a story plans: each shape is what its name says, and the hostile ones are exactly
what the reference server's own key parser refuses."""

from __future__ import annotations

from typing import Literal

import pytest

from harness import KeySpec
from harness._target import encode_key
from harness.explore import KeyPlan
from harness.explore._keys import KeyMaker, hostile_kinds
from reference_server._keys import InvalidKey, parse_key

SF = KeySpec(syntax="sf-string", max_length=255)


def made(maker: KeyMaker, **plan: str) -> str:
    key, _ = maker.make(KeyPlan.model_validate(plan))
    return key


def test_a_longest_key_has_exactly_the_allowed_length() -> None:
    maker = KeyMaker(KeySpec(max_length=40))
    assert len(made(maker, name="k1", shape="longest", text="z")) == 40


def test_a_case_twin_differs_from_its_key_only_in_letter_case() -> None:
    maker = KeyMaker(SF)
    first = made(maker, name="k1", shape="plain", text="Ab")
    twin = made(maker, name="k2", shape="case-twin", of="k1")
    assert twin != first and twin.lower() == first.lower()


def test_a_sibling_shares_all_but_its_last_character_with_a_longest_key() -> None:
    maker = KeyMaker(SF)
    longest = made(maker, name="k1", shape="longest", text="0")
    sibling = made(maker, name="k2", shape="sibling", of="k1")
    assert len(sibling) == len(longest) == SF.max_length
    assert sibling[:-1] == longest[:-1] and sibling[-1] != longest[-1]


def test_an_existing_key_is_the_same_string_and_two_examples_never_share_one() -> None:
    one, other = KeyMaker(SF), KeyMaker(SF)
    first = made(one, name="k1", shape="plain")
    assert made(one, name="k1") == first
    assert made(other, name="k1", shape="plain") != first


@pytest.mark.parametrize("syntax", ["sf-string", "token"])
def test_well_formed_keys_are_accepted_and_hostile_ones_refused_by_the_reference(
        syntax: Literal["sf-string", "token"]) -> None:
    spec = KeySpec(syntax=syntax, max_length=255)
    maker = KeyMaker(spec)
    made(maker, name="k1", shape="plain", text='"\\' if syntax == "sf-string" else "x")
    for plan in (KeyPlan(name="k2", shape="longest", text="~"),
                 KeyPlan(name="k3", shape="case-twin", of="k1"),
                 KeyPlan(name="k4", shape="sibling", of="k2")):
        key, header = maker.make(plan)
        assert header is None
        assert parse_key([encode_key(key, syntax).encode()]) == key
    for number, kind in enumerate(hostile_kinds(spec), start=5):
        _, header = maker.make(KeyPlan(name=f"k{number}", shape="hostile", kind=kind))
        assert header is not None
        with pytest.raises(InvalidKey):
            parse_key([header.encode("utf-8")])


def test_a_plan_missing_what_its_shape_needs_is_refused() -> None:
    with pytest.raises(ValueError, match="needs `of`"):
        KeyPlan(name="k2", shape="case-twin")
    with pytest.raises(ValueError, match="needs `kind`"):
        KeyPlan(name="k2", shape="hostile")


def test_a_tail_or_a_fill_never_makes_another_plans_key() -> None:
    """Explore once sent k1 with the tail "0" as k10's key, so a fresh k10 hit k1's stored
    answer (a false P10 on the correct reference server, seed 888224414)."""
    maker = KeyMaker(SF)
    keys = [made(maker, name="k1", shape="plain", text="0"),
            made(maker, name="k2", shape="longest", text="0"),
            made(maker, name="k10", shape="plain"),
            made(maker, name="k20", shape="longest", text="0"),
            made(maker, name="k100", shape="plain", text="")]
    assert len(set(keys)) == len(keys)
