"""cut-after-commit: a charge's writes learned on the wire, then a cut (or a kill) right after
each, with no hook in the server, against the reference server on the real PostgreSQL behind
the real Toxiproxy.  The split-commit flaw is caught; the correct server passes; a proxy that
cannot read the link, or a fault that never struck, is never a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import AfterWrite, Request, Scenario, ScenarioContext
from harness._outcomes import ScenarioOutcome
from harness._runner import RunConfig, run_scenarios
from harness._target import StoreProxy, Target
from harness.diagrams._storyboard import finding_diagram
from harness.reports import ReportDirectory
from harness.services._postgres import PostgresServer
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import load_target
from harness.targets._reference import reference_target
from scenarios import CATALOG, cut_after_commit, default_scenarios

SCENARIO = cut_after_commit.SCENARIO


def test_the_catalog_plays_it_after_store_outage_and_before_the_clock_moves_by_days() -> None:
    assert CATALOG["cut-after-commit"] is SCENARIO
    names = [s.name for s in default_scenarios(load_target("reference"))]
    assert names.index("store-outage") < names.index("cut-after-commit") < names.index(
        "late-retry")
    assert SCENARIO.properties == ("P1", "P2", "P9")


def test_without_a_store_link_it_reads_it_is_not_applicable_and_says_how_to_fix_it() -> None:
    on_sqlite = SCENARIO.not_applicable(reference_target(store=None, flaw=None))
    assert on_sqlite is not None and "add --postgres" in on_sqlite
    started = load_target("tests/corpus/targets/redis_ledger.toml")
    assert SCENARIO.not_applicable(started) is None
    assert started.store_proxy is not None
    plain = started.model_copy(update={"store_proxy": StoreProxy(
        upstream=started.store_proxy.upstream)})
    reason = SCENARIO.not_applicable(plain)
    assert reason is not None and 'protocol = "postgresql" or "redis"' in reason
    bare = started.model_copy(update={"store_proxy": None})
    assert "[store_proxy]" in (SCENARIO.not_applicable(bare) or "")


def _on_postgres(postgres: PostgresServer, name: str, flaw: str | None) -> Target:
    return reference_target(store=postgres.create_database(name), flaw=flaw)


def _play(target: Target, scenario: Scenario, toxiproxy: ToxiproxyServer,
          report_dir: Path | None = None) -> ScenarioOutcome:
    result = run_scenarios(RunConfig(target=target, scenarios=[scenario], seed=11,
                                     toxiproxy=toxiproxy, report_dir=report_dir),
                           [ReportDirectory(report_dir)] if report_dir else [])
    (outcome,) = result.outcomes
    return outcome


def test_split_commit_is_caught_with_no_crash_hook(
        postgres_server: PostgresServer, toxiproxy_server: ToxiproxyServer,
        tmp_path: Path) -> None:
    target = _on_postgres(postgres_server, "cut_split", "split-commit")
    outcome = _play(target, SCENARIO, toxiproxy_server, tmp_path)
    assert outcome.verdict == "fail", outcome.reason
    assert {f.property for f in outcome.findings} & {"P1", "P9"}
    requests = [e for e in outcome.events if e.f == "request" and e.type == "invoke"]
    assert requests and not any(e.headers for e in requests)  # no fault hook was sent
    learned = [e for e in outcome.events if e.f == "store-write" and e.key == requests[0].key]
    assert [e.value["write"] for e in learned] == [1, 2, 3]  # claim, charge, response
    struck = [e for e in outcome.events if e.f in ("fault", "crash") and "after_write" in e.value]
    assert sorted((e.f, e.value["after_write"]) for e in struck) == [
        ("crash", 1), ("crash", 2), ("crash", 3), ("fault", 1), ("fault", 2), ("fault", 3)]
    assert not any(e.f == "store-fault-missed" for e in outcome.events)
    duplicate = next(f for f in outcome.findings if f.property == "P1")
    diagram = finding_diagram(duplicate, outcome.events)
    assert diagram is not None
    assert any(row.kind == "store-write" for row in diagram.rows)  # the store lane's writes
    assert any(box.text.startswith(("cut-after-write", "crash")) for row in diagram.rows
               for box in row.boxes)


def test_the_correct_server_passes(postgres_server: PostgresServer,
                                   toxiproxy_server: ToxiproxyServer) -> None:
    outcome = _play(_on_postgres(postgres_server, "cut_correct", None), SCENARIO,
                    toxiproxy_server)
    assert outcome.verdict == "pass", (outcome.reason, outcome.findings, outcome.notes)
    faults = [e for e in outcome.events if e.f in ("fault", "crash")]
    assert [e.value["after_write"] for e in faults] == [1, 1]  # one write: a cut, then a kill


def test_a_link_the_proxy_cannot_read_is_not_applicable(
        postgres_server: PostgresServer, toxiproxy_server: ToxiproxyServer) -> None:
    target = _on_postgres(postgres_server, "cut_unreadable", None)
    assert target.store_proxy is not None
    misread = target.model_copy(update={"store_proxy": target.store_proxy.model_copy(
        update={"protocol": "redis"})})
    outcome = _play(misread, SCENARIO, toxiproxy_server)
    assert outcome.verdict == "n/a"
    assert outcome.reason is not None and "could not read the link" in outcome.reason


def _past_the_last_write(ctx: ScenarioContext) -> None:
    request: Request = ctx.request(ctx.new_key(), label="past-the-last-write")
    ctx.send_watched(request, plan=AfterWrite(4, "cut"))
    ctx.converge(request)


def test_a_fault_that_never_struck_makes_the_verdict_unknown_never_pass(
        postgres_server: PostgresServer, toxiproxy_server: ToxiproxyServer) -> None:
    never = Scenario(name="never-struck", summary="", story="", properties=("P9",), plan=(),
                     run=_past_the_last_write, needs=frozenset({"store-proxy"}))
    outcome = _play(_on_postgres(postgres_server, "cut_never", None), never, toxiproxy_server)
    assert outcome.verdict == "unknown"
    assert outcome.check is not None
    reason = outcome.check.results["P9"].reason or ""
    assert "never struck" in reason and "1 write(s)" in reason


@pytest.mark.timeout(240)
def test_the_redis_corpus_service_is_judged_on_its_writes(
        toxiproxy_server: ToxiproxyServer) -> None:
    target = load_target("tests/corpus/targets/redis_ledger.toml")
    outcome = _play(target, SCENARIO, toxiproxy_server)
    assert outcome.verdict == "pass", (outcome.reason, outcome.findings)
    kinds = [e.value["kinds"] for e in outcome.events if e.f == "store-write"][:2]
    assert kinds == [["EVALSHA"], ["RPUSH", "HSET"]]  # the claim, then one MULTI/EXEC


def test_a_reproduction_says_which_write_the_cut_followed() -> None:
    from harness._history import History
    from harness.http.reproduction._scripts import _told

    history = History()
    cut = history.record("info", "fault", "nemesis", key="k", value={
        "fault": "cut-after-write", "where": "store", "after_write": 2, "write": 2,
        "kinds": ["INSERT"], "commit": "autocommit"})
    target = load_target("reference")
    line = _told(cut, None, target)
    assert "write 2 (INSERT) committed" in line and "Toxiproxy" not in line
    healed = history.record("info", "heal", "nemesis", key="k", value=dict(cut.value))
    assert _told(healed, None, target).startswith("cut-after-write released")
