"""A target file's problems come in one pass: a table at fault does not hide the rules over the
whole file (``url`` or ``[start]``, ``[clock]`` or ``[hooks.clock]``), which pydantic checks
only once every table is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import TargetFileError, load_target


def problems(tmp_path: Path, text: str) -> list[tuple[str, str, str]]:
    path = tmp_path / "target.toml"
    path.write_text(text)
    with pytest.raises(TargetFileError) as caught:
        load_target(path)
    return caught.value.problems


def test_a_bad_table_and_a_missing_place_to_run_are_reported_together(tmp_path: Path) -> None:
    found = problems(tmp_path, 'name = "x"\n[effects]\nkind = "http"\nquery = { key = "{key}" }\n')
    assert [field for field, _, _ in found] == ["effects.http.url", ""]
    assert "exactly one of `url`" in found[1][1]


def test_every_whole_file_rule_the_valid_tables_break_is_reported(tmp_path: Path) -> None:
    found = problems(tmp_path, """
name = "x"
url = "http://127.0.0.1:9000"
[clock]
kind = "faketime"
[hooks]
clock = { path = "/clock" }
[key]
syntax = "base64"
[effects]
kind = "http"
url = "/effects"
query = { key = "{key}" }
""")
    messages = [message for _, message, _ in found]
    assert [field for field, _, _ in found] == ["key.syntax", ""]
    assert "give a [start] table" in messages[1]


def test_a_rule_over_a_table_at_fault_stays_quiet(tmp_path: Path) -> None:
    """A [start] whose command lacks {port} is at fault: no "give url or [start]" beside it."""
    found = problems(tmp_path, 'name = "x"\n[start]\ncommand = ["serve"]\n[effects]\n'
                               'kind = "http"\nurl = "/e"\nquery = { key = "{key}" }\n')
    assert [field for field, _, _ in found] == ["start"]


def test_a_consumer_file_gets_every_problem_too(tmp_path: Path) -> None:
    found = problems(tmp_path, """
kind = "consumer"
name = "c"
[start]
command = ["worker", "--broker", "{amqp_url}"]
ready = "tcp"
[message]
dedup = "sideways"
[effects]
kind = "http"
url = "/effects"
query = { key = "{key}" }
""")
    fields = [field for field, _, _ in found]
    assert "message.dedup" in fields and "start" in fields


MINIMAL = ('name = "x"\nurl = "http://127.0.0.1:9000"\n[effects]\nkind = "http"\nurl = "/e"\n'
           'query = { key = "{key}" }\n')


@pytest.mark.parametrize(("table", "field"), [
    ('[endpoint]\nmethod = "PUTT"\npath = "/charges"\nbody = { amount = "{amount}" }\n',
     "endpoint.method"),
    ('[hooks]\ncleanup = { method = "POTS", path = "/cleanup" }\n', "hooks.cleanup.method"),
    ('[hooks]\nclock = { method = "GETT", path = "/clock" }\n', "hooks.clock.method"),
])
def test_an_unknown_http_method_is_refused(tmp_path: Path, table: str, field: str) -> None:
    """``method = "PUTT"`` was accepted, and every request then went out as PUTT (issue 38,
    item 12)."""
    found = problems(tmp_path, MINIMAL + table)
    assert [f for f, _, _ in found] == [field]
    assert "'POST'" in found[0][1] and "'PUT'" in found[0][1]
    assert "use one of the allowed values" in found[0][2]


def test_a_method_in_lower_case_is_the_method(tmp_path: Path) -> None:
    path = tmp_path / "target.toml"
    path.write_text(MINIMAL + '[endpoint]\nmethod = "put"\npath = "/c"\n'
                              'body = { amount = "{amount}" }\n')
    assert load_target(path).endpoint.method == "PUT"


def test_a_file_without_an_endpoint_says_what_run_sends_instead(tmp_path: Path) -> None:
    """No [endpoint] means the default POST /charges; that is no longer silent: the run's
    banner says so, and what to write (issue 38, item 12)."""
    import io

    from rich.console import Console

    from harness._outcomes import RunStarted
    from harness.reports import ConsoleReport

    path = tmp_path / "target.toml"
    path.write_text(MINIMAL)
    target = load_target(path)
    assert not target.declares_endpoint
    out = io.StringIO()
    ConsoleReport(Console(file=out, width=200)).handle(RunStarted(target, ("key-reuse",), 1, None))
    said = " ".join(out.getvalue().split())
    assert "no [endpoint]" in said and "POST /charges" in said, said
    path.write_text(MINIMAL + '[endpoint]\npath = "/charges"\nbody = { amount = "{amount}" }\n')
    out = io.StringIO()
    ConsoleReport(Console(file=out, width=200)).handle(
        RunStarted(load_target(path), ("key-reuse",), 1, None))
    assert "no [endpoint]" not in out.getvalue()
