"""Issue 37: what makes two failures distinct (``harness/explore/_distinct.py``), and the ledger
that keeps an exploration's failures apart."""

from __future__ import annotations

from harness.explore._distinct import Kind, kinds_of, label
from harness.explore._failure import Failure
from harness.explore._steps import StepRecord
from harness.explore._story_session import Ledger
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding


def _finding(prop: str, key: str | None, mechanism: str) -> Finding:
    return Finding(prop, key, f"{prop} broke", (0,), mechanism=mechanism)


def _failure(*findings: Finding, steps: int = 1, new: frozenset[Kind] = frozenset()
             ) -> Failure[object]:
    records = tuple(StepRecord(n, "request", "", None) for n in range(1, steps + 1))
    return Failure(records, (), CheckResult({}, list(findings), []), ("P1",), None, None, 1,
                   new=new)


def test_a_keys_cause_names_its_kind_whatever_it_ended_in() -> None:
    """The other tenant's answer (P8) that left a key with nothing charged (P2) is a P8 key; a
    commit split in two that ran a crashed request again (P9) and charged twice (P1) a P9 one."""
    leaked = [_finding("P2", "b/k1", "answered-not-charged"),
              _finding("P8", "b/k1", "keys-not-scoped-per-tenant")]
    rerun = [_finding("P1", "a/k2", "rerun-after-crash"),
             _finding("P9", "a/k2", "charged-again-after-incident")]
    assert kinds_of(leaked) == {Kind("P8", "keys-not-scoped-per-tenant")}
    assert kinds_of(rerun) == {Kind("P9", "charged-again-after-incident")}
    assert kinds_of([*leaked, *rerun]) == {Kind("P8", "keys-not-scoped-per-tenant"),
                                           Kind("P9", "charged-again-after-incident")}


def test_a_rerun_after_a_crash_is_crash_safetys_mechanism_even_before_p9_is_judged() -> None:
    """A story that fails at a step shows P1 alone (P9 waits for the clients to settle); it is
    the same flaw as the settled story's P9 (split-commit was reported as both before)."""
    at_a_step = kinds_of([_finding("P1", "a/k1", "rerun-after-crash")])
    settled = kinds_of([_finding("P1", "a/k4", "rerun-after-crash"),
                        _finding("P9", "a/k4", "charged-again-after-incident")])
    assert at_a_step == settled == {Kind("P9", "charged-again-after-incident")}


def test_a_duplicate_is_told_by_how_it_ran_twice_not_by_the_lost_outcome_beside_it() -> None:
    """Two flaws that both charge twice and both answer two charge ids (P2) stay two kinds:
    copies that ran at once, and a late original committing after a takeover."""
    race = kinds_of([_finding("P1", "k1", "concurrent-copies"),
                     _finding("P2", "k1", "answers-name-two-charges")])
    zombie = kinds_of([_finding("P1", "k2", "late-original-after-takeover"),
                       _finding("P2", "k2", "answers-name-two-charges")])
    assert race != zombie and not race & zombie


def test_findings_about_no_key_are_kinds_of_their_own_and_keys_or_timings_do_not_matter() -> None:
    one = kinds_of([_finding("P11", None, "expired-keys-kept"),
                    _finding("P4", "a/k1", "reuse-replayed:body")])
    other = kinds_of([_finding("P4", "a/k7", "reuse-replayed:body"),
                      _finding("P11", None, "expired-keys-kept")])
    assert one == other == {Kind("P11", "expired-keys-kept"),
                            Kind("P4", "reuse-replayed:body")}
    assert label(one) == "P4 reuse-replayed:body, P11 expired-keys-kept"


def test_a_cause_seen_only_with_a_moved_clock_still_names_its_key() -> None:
    """A key whose firm finding is a lost outcome and whose P8 was seen only with a moved clock
    is a P8 key: not a failure of its own once P8 is kept (a 14-step variant of no-tenant-scope
    was reported beside its 2-step story before)."""
    firm = [_finding("P2", "b/k6", "answered-not-charged")]
    doubted = [_finding("P8", "b/k6", "keys-not-scoped-per-tenant"),
               _finding("P1", "a/k9", "late-original-after-takeover")]
    assert kinds_of(firm, doubted) == {Kind("P8", "keys-not-scoped-per-tenant")}
    ledger = Ledger()
    ledger.keep(_failure(_finding("P8", "b/k1", "keys-not-scoped-per-tenant"),
                         new=frozenset({Kind("P8", "keys-not-scoped-per-tenant")})))
    assert not ledger.new_kinds(firm, doubted)
    assert ledger.new_kinds(firm) == {Kind("P2", "answered-not-charged")}


def test_the_ledger_keeps_one_failure_per_kind_and_the_shortest_set_aside() -> None:
    kind = Kind("P5", "answer-made-up-while-running")
    made_up = _finding("P5", "k1", kind.mechanism)
    ledger = Ledger()
    ledger.set_aside(_failure(made_up, steps=5, new=frozenset({kind})))
    ledger.set_aside(_failure(made_up, steps=2, new=frozenset({kind})))
    aside = ledger.next_aside()
    assert aside is not None and aside.operations == 2 and ledger.next_aside() is None
    assert ledger.keep(aside)
    assert not ledger.keep(_failure(made_up, steps=1, new=frozenset({kind})))  # kept already
    ledger.set_aside(_failure(made_up, steps=1, new=frozenset({kind})))
    assert ledger.next_aside() is None  # its kind was kept meanwhile
