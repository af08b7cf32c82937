"""From nothing to a first verdict in two commands, against real services: ``init`` drafts a
target file from an OpenAPI document and ``run`` judges the service with it (the clock moved
from outside, so late-retry applies); ``probe --write`` learns the promises of the reference
server and of a corpus service of another shape, and ``run`` passes with them; on a flawed
server ``probe`` writes the bug as a comment, never as a promise, and ``run`` reports it.

Bounds: a few scenarios per run (``--scenario``), each probe about twenty requests, every
subprocess with a timeout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from harness.targets._loader import load_target
from tests.corpus.conftest import corpus_target
from tests.init_probe.conftest import DOCUMENTS, ROOT, cli

REFERENCE = ["--start", "{python} -m reference_server --host 127.0.0.1 --port {port} "
                        "--store sqlite:///{workdir}/ref.sqlite3",
             "--ready-path", "/_admin/health"]


def run(env: dict[str, str], target: Path, report: Path, *scenarios: str) -> tuple[int, Any]:
    chosen = [arg for name in scenarios for arg in ("--scenario", name)]
    done = cli(env, "run", "--target", str(target), *chosen, "--report-dir", str(report),
               "--seed", "5", "--quiet")
    assert done.exit_code in (0, 1), done.output
    return done.exit_code, json.loads((report / "results.json").read_text())


def verdicts(results: Any) -> dict[str, str]:
    return {s["name"]: s["verdict"] for s in results["scenarios"]}


def probe(env: dict[str, str], target: Path, *more: str) -> str:
    done = cli(env, "probe", "--target", str(target), "--seed", "11", *more)
    assert done.exit_code == 0, done.output
    return done.output


@pytest.fixture(scope="module")
def drafted_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference server's target file as ``init`` drafts it from payments-3.0.yaml."""
    output = tmp_path_factory.mktemp("drafted") / "payments.toml"
    done = cli({}, "init", "--openapi", str(DOCUMENTS / "payments-3.0.yaml"), *REFERENCE,
               "-o", str(output))
    assert done.exit_code == 0, done.output
    return output


def _copy(source: Path, tmp_path: Path, flaw: str | None = None) -> Path:
    copy = tmp_path / source.name
    if flaw is None:
        shutil.copy(source, copy)
        return copy
    document = tomlkit.parse(source.read_text())
    document["start"]["command"].extend(["--flaw", flaw])  # type: ignore[index,union-attr]
    copy.write_text(tomlkit.dumps(document))
    return copy


def test_init_then_run_gives_a_first_verdict(env: dict[str, str], faketime_ready: None,
                                            drafted_reference: Path, tmp_path: Path) -> None:
    code, results = run(env, drafted_reference, tmp_path / "report",
                        "timeout-after-commit", "key-reuse", "late-retry")
    assert code == 0, results
    assert verdicts(results) == {"timeout-after-commit": "pass", "key-reuse": "pass",
                                 "late-retry": "pass"}  # the clock moved from outside


def test_init_then_run_on_a_service_with_two_keyed_operations(
        env: dict[str, str], faketime_ready: None, tmp_path: Path) -> None:
    output = tmp_path / "ledger.toml"
    done = cli(env, "init", "--openapi", str(DOCUMENTS / "ledger-3.1.json"), "--start",
               "{python} -m tests.corpus.services.two_routes --port {port}",
               "--ready-path", "/healthz", "-o", str(output))
    assert done.exit_code == 0, done.output
    code, results = run(env, output, tmp_path / "report", "key-reuse", "tenant-collision")
    assert code == 0 and set(verdicts(results).values()) == {"pass"}, results


def test_probe_learns_the_reference_servers_promises(env: dict[str, str], faketime_ready: None,
                                                    drafted_reference: Path,
                                                    tmp_path: Path) -> None:
    target = _copy(drafted_reference, tmp_path)
    before = target.read_text()
    shown = probe(env, target)
    assert target.read_text() == before  # without --write: a diff only
    assert '+replay_header = "Idempotent-Replayed"' in shown and "(probed)" in shown
    assert "each as expected" in shown  # every effect the probe caused was counted
    probe(env, target, "--write")
    after = target.read_text()
    for line in before.splitlines():  # the draft's comments are all still there
        if line.startswith("#"):
            assert line in after
    promises = load_target(target).promises
    assert (promises.replay_header, promises.validation_errors) == (
        "Idempotent-Replayed", "stored")
    assert "; probe: a request without a key got 400" in after  # after the draft's comment
    code, results = run(env, target, tmp_path / "report",
                        "missing-key", "bad-input", "distinct-keys", "key-reuse")
    assert code == 0 and set(verdicts(results).values()) == {"pass"}, results


def test_probe_learns_a_service_of_another_shape(env: dict[str, str], tmp_path: Path) -> None:
    """long_poll: 409 for a reused key, retries wait for the original, the query string in the
    fingerprint, 64-character keys.  Its file is stripped of what probe should find."""
    source = corpus_target("long_poll").source
    document = tomlkit.parse(Path(source).read_text())
    document["start"]["cwd"] = str(ROOT)  # type: ignore[index]
    document["promises"] = {"retention": "24h"}
    for field in ("max_length", "pattern", "invalid_status"):
        del document["key"][field]  # type: ignore[union-attr]
    target = tmp_path / "long_poll.toml"
    target.write_text(tomlkit.dumps(document))
    probe(env, target, "--write")
    text = target.read_text()
    learned = load_target(target)
    assert learned.promises.mismatch_status == 409
    assert "the IETF draft says 422: `run` notes the deviation" in text
    assert learned.promises.in_progress == "wait"
    assert learned.promises.query_in_fingerprint is True
    assert learned.key.max_length == 64 and learned.key.invalid_status == 400
    code, results = run(env, target, tmp_path / "report", "in-flight-retry", "key-reuse",
                        "bad-input")
    assert code == 0 and set(verdicts(results).values()) == {"pass"}, results
    assert "the IETF draft says 422" in json.dumps(results)  # `run` notes the deviation


@pytest.mark.parametrize(("flaw", "comment", "scenario", "prop"), [
    ("no-body-hash", "NOT a promise, the IETF draft wants 422", "key-reuse", "P4"),
    ("key-only", "got 200 where the original got 201", "key-reuse", "P3"),
])
def test_probe_never_turns_a_bug_into_a_promise(env: dict[str, str], faketime_ready: None,
                                               drafted_reference: Path, tmp_path: Path,
                                               flaw: str, comment: str, scenario: str,
                                               prop: str) -> None:
    target = _copy(drafted_reference, tmp_path, flaw)
    probe(env, target, "--write")
    text = target.read_text()
    assert "BUG: " in text and comment in text
    assert load_target(target).promises.mismatch_status == 422  # the draft's, kept
    code, results = run(env, target, tmp_path / "report", scenario)
    found = {f["property"] for s in results["scenarios"] for f in s["findings"]}
    assert code == 1 and prop in found, results


def test_probe_refuses_what_it_cannot_probe(env: dict[str, str], faketime_ready: None,
                                           drafted_reference: Path, tmp_path: Path) -> None:
    done = cli(env, "probe", "--target", str(tmp_path / "absent.toml"))
    assert done.exit_code == 2 and "does not exist" in done.output
    document = tomlkit.parse(drafted_reference.read_text())
    document["endpoint"]["path"] = "/nowhere"  # type: ignore[index]
    target = tmp_path / "wrong.toml"
    target.write_text(tomlkit.dumps(document))
    done = cli(env, "probe", "--target", str(target), "--write")
    assert done.exit_code == 2, done.output
    assert "the probe's first request" in done.output and "404" in done.output
    assert "Traceback" not in done.output
    assert target.read_text() == tomlkit.dumps(document)
