"""``probe`` never writes over a promise the file makes, and learns only what it saw one factor
at a time: a service that omits Retry-After where the file promises it is a likely bug (kept,
so ``run`` reports it); a 422 that a refusal's side effect caused is not the query string's; a
retry answered with the replay while the original still ran did meet the original.  Each
against a small real service that breaks that one promise (services/promise_breaker.py)."""

from __future__ import annotations

from pathlib import Path

from harness.targets._loader import load_target
from tests.init_probe.conftest import ROOT, cli, env

__all__ = ["env"]

TARGET = """
name = "promise-breaker"

[start]
command = ["{{python}}", "-m", "tests.init_probe.services.promise_breaker", "--port", "{{port}}",
           "--flaw", "{flaw}"]
cwd = "{root}"
ready_path = "/health"

[endpoint]
method = "POST"
path = "/charges"
body = {{ amount = "{{amount}}", currency = "usd" }}

[tenant]
header = "Authorization"
format = "Bearer {{tenant}}"

[effects]
kind = "http"
url = "/effects"
query = {{ tenant = "{{tenant}}", key = "{{key}}" }}
ids = "ids"

[promises]
{promises}
[hooks]
store_size = {{ path = "/keys", rows = "rows", in_progress = "in_progress" }}
{hooks}
"""
SLOW = 'slow = { header = "X-Test-Delay-Ms", value = "{ms}" }'


def _probe(env: dict[str, str], tmp_path: Path, flaw: str, promises: str,
           hooks: str = SLOW) -> tuple[str, str]:
    path = tmp_path / "target.toml"
    path.write_text(TARGET.format(flaw=flaw, root=ROOT, promises=promises, hooks=hooks))
    done = cli(env, "probe", "--target", str(path), "--seed", "11", "--write")
    assert done.exit_code == 0, done.output
    return done.output, path.read_text()


def test_a_promise_the_service_breaks_is_a_likely_bug_never_written_over(
        env: dict[str, str], tmp_path: Path) -> None:
    said, text = _probe(env, tmp_path, "no-retry-after", "retry_after = true\n")
    assert "retry_after = true" in text and load_target(tmp_path / "target.toml").promises \
        .retry_after is True
    assert "BUG: " in text and "does not keep its own promise" in text
    assert "promises.retry_after" in said and "bug" in said


def test_a_refusal_that_changed_the_key_is_not_taken_for_the_query_string(
        env: dict[str, str], tmp_path: Path) -> None:
    _, text = _probe(env, tmp_path, "refingerprint", "")
    assert load_target(tmp_path / "target.toml").promises.query_in_fingerprint is False, text
    assert "query_in_fingerprint = true" not in text


def test_a_retry_answered_with_the_replay_while_the_original_ran_met_it(
        env: dict[str, str], tmp_path: Path) -> None:
    said, text = _probe(env, tmp_path, "wait", "")  # the slow hook holds the original
    assert "no retry met the original" not in said, said
    assert load_target(tmp_path / "target.toml").promises.in_progress == "wait", text


def test_without_a_slow_hook_a_replay_to_copies_at_once_is_no_promise(
        env: dict[str, str], tmp_path: Path) -> None:
    """Copies sent at once and each answered 2xx show nothing: a copy sent before the first
    answer arrived may have reached the service after the original had finished.  Without a
    way to hold the original, ``in_progress`` is unknown, with the hint (issue 38, item 5)."""
    said, text = _probe(env, tmp_path, "wait", "", hooks="")
    assert "in_progress" not in load_target(tmp_path / "target.toml").promises.model_fields_set, \
        text
    assert "[hooks.slow]" in said and "unknown" in said, said


def test_a_service_with_one_worker_and_no_slow_hook_is_not_said_to_wait(
        env: dict[str, str], tmp_path: Path) -> None:
    """The corpus's one_worker answers 409 for a key in progress, but serves one request at a
    time: copies sent at once are each answered 2xx, the later ones replayed after waiting for
    the worker, not for the original.  probe wrote in_progress = "wait" (issue 38, item 5)."""
    import tomlkit

    from tests.corpus.conftest import corpus_target

    document = tomlkit.parse(Path(corpus_target("one_worker").source).read_text())
    document["start"]["cwd"] = str(ROOT)  # type: ignore[index]
    for field in ("in_progress", "in_progress_status", "retry_after"):
        del document["promises"][field]  # type: ignore[union-attr]
    path = tmp_path / "one_worker.toml"
    path.write_text(tomlkit.dumps(document))
    done = cli(env, "probe", "--target", str(path), "--seed", "11", "--write")
    assert done.exit_code == 0, done.output
    assert load_target(path).promises.in_progress == "conflict", path.read_text()
    assert "in_progress" not in load_target(path).promises.model_fields_set
    assert "[hooks.slow]" in done.output, done.output
