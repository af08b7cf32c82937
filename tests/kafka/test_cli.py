"""The consume-kafka command: a bad flag is a usage error (exit 2) naming the option and its fix,
before anything connects; the worker's options are ``consume``'s, checked the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reference_server.consumer.kafka_cli import consume_kafka


@pytest.mark.parametrize(("flags", "says"), [
    (["--bootstrap", "127.0.0.1"], "not HOST:PORT"),
    (["--bootstrap", "10.1.2.3:9092"], "--allow-remote"),
    (["--topic", "a topic"], "1 to 249 of the characters"),
    (["--group", " "], "name a consumer group"),
    (["--dead-letter-topic", "t"], "must differ from --topic"),
    (["--session-timeout", "100ms"], "from 500ms to 1h"),
    (["--max-poll-interval", "1s"], "at least --session-timeout"),
    (["--flaw", "nope"], "choose one of: auto-commit-before-work"),
    (["--flaw", "dedup-in-memory", "--flaw", "dedup-separate-txn"], "--flaw"),
    (["--lease", "soon"], "not a duration"),
    (["--dedup-header", "Ключ"], "name an ASCII header"),
    (["--max-attempts", "0"], "--max-attempts"),
    (["--store", "sqlite://relative.db"], "absolute path"),
])
def test_a_bad_flag_is_a_usage_error_that_names_the_fix(
    flags: list[str], says: str, tmp_path: Path,
) -> None:
    given = {"--bootstrap": "127.0.0.1:9092", "--topic": "t", "--group": "g",
             "--store": f"sqlite:///{tmp_path / 'store.sqlite3'}"}
    args = [part for flag, value in given.items() if flag not in flags[::2]
            for part in (flag, value)] + flags
    result = CliRunner().invoke(consume_kafka, args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output
