"""The store proxy that reads the store's protocol (harness/services/_commit_proxy.py), against the
real PostgreSQL and Redis servers: which commits it counts as a request's writes, how it tells one
request's writes from another's, and what each fault at a write does to the client and the
store.  The framing's corner cases are unit tests at the end."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from harness.services._commit_proxy import AfterWrite, CommitProxy, Watch, WriteSeen, _Pair
from harness.services._network import free_port
from harness.services._pg_wire import PgConnection, classify, split_statements
from harness.services._postgres import PostgresServer
from harness.services._resp_wire import RespConnection, value_end
from tests.missing import missing


@dataclass
class Heard:
    """What a watch told its listener, in order."""

    said: list[tuple[str, int]] = field(default_factory=list)

    def wrote(self, watch: Watch, write: WriteSeen) -> None:
        self.said.append(("wrote", write.number))

    def striking(self, watch: Watch, write: WriteSeen) -> None:
        self.said.append(("striking", write.number))

    def released(self, watch: Watch, write: WriteSeen) -> None:
        self.said.append(("released", write.number))


# ---- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_proxy(postgres_server: PostgresServer) -> Iterator[tuple[CommitProxy, str]]:
    """A proxy reading protocol v3 in front of a database of its own, and the DSN through it."""
    info = psycopg.conninfo.conninfo_to_dict(postgres_server.create_database("store_proxy"))
    with CommitProxy(f"{info['host']}:{info['port']}", "postgresql") as proxy:
        dsn = f"postgresql://{info['user']}@{proxy.listen}/{info['dbname']}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS t (k text PRIMARY KEY, v int)")
        yield proxy, dsn


def test_each_committed_transaction_with_a_write_is_one_write(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    proxy, dsn = pg_proxy
    heard = Heard()
    with psycopg.connect(dsn, autocommit=True) as conn, \
            proxy.watching("pg-1", None, heard) as watch:
        conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-1",))           # autocommit
        conn.execute("SELECT * FROM t WHERE k = %s", ("pg-1",)).fetchall()  # a read
        with conn.transaction():                                           # BEGIN ... COMMIT
            conn.execute("UPDATE t SET v = 2 WHERE k = %s", ("pg-1",))
            conn.execute("INSERT INTO t VALUES ('other-b', 1)")
        conn.execute("WITH n AS (INSERT INTO t VALUES ('other-c', 1) RETURNING 1) "
                     "SELECT * FROM n")                                   # tagged SELECT 1
        with pytest.raises(psycopg.errors.UniqueViolation):                # rolled back
            conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-1",))
        with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
            conn.execute("DELETE FROM t WHERE k = 'other-b'")
            conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-1",))      # the COMMIT: ROLLBACK
        conn.execute("INSERT INTO t VALUES ('other-d', 1); DELETE FROM t WHERE k = 'other-d'")
        conn.execute("INSERT INTO t VALUES (%s, 9) ON CONFLICT DO NOTHING", ("pg-1",))  # 0 rows
        proxy.settle(watch)
    assert [(w.kinds, w.how, w.matched) for w in watch.writes] == [
        (("INSERT",), "autocommit", "key"),
        (("UPDATE", "INSERT"), "COMMIT", "key"),
        (("INSERT",), "autocommit", "window"),
        (("INSERT", "DELETE"), "autocommit", "window"),
    ]
    assert heard.said == [("wrote", n) for n in (1, 2, 3, 4)] and not watch.missed


def test_copy_from_stdin_goes_through_and_counts_as_one_write(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    """The server's "send the data" (CopyInResponse) was held back as part of a write's
    acknowledgement while the server waited for that data: COPY hung through the proxy."""
    proxy, dsn = pg_proxy
    with psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=5000") as conn, \
            proxy.watching("pg-copy", None, Heard()) as watch:
        with conn.cursor().copy("COPY t (k, v) FROM STDIN") as copy:
            copy.write_row(("pg-copy", 1))
            copy.write_row(("pg-copy-2", 2))
        proxy.settle(watch)
        rows = conn.execute("SELECT count(*) FROM t WHERE k LIKE 'pg-copy%'").fetchone()
    assert rows == (2,)
    assert [(w.kinds, w.how) for w in watch.writes] == [(("COPY",), "autocommit")]


def test_writes_carrying_another_watched_key_are_that_request_s(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    proxy, dsn = pg_proxy
    with psycopg.connect(dsn, autocommit=True) as conn, \
            proxy.watching("pg-2a", None, Heard()) as first, \
            proxy.watching("pg-2b", None, Heard()) as second:
        conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-2b",))
        conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-2a",))
        conn.execute("INSERT INTO t VALUES ('pg-2-nobody', 1)")  # two watched: nobody's
        proxy.settle(first)
    assert [w.matched for w in first.writes] == ["key"]
    assert [w.matched for w in second.writes] == ["key"]


def test_a_cut_after_a_write_leaves_it_committed_and_the_client_in_the_dark(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    proxy, dsn = pg_proxy
    heard = Heard()
    with psycopg.connect(dsn, autocommit=True) as conn, \
            proxy.watching("pg-3", None, heard, plan=AfterWrite(2, "cut")) as watch:
        conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-3",))
        with pytest.raises(psycopg.OperationalError):
            conn.execute("UPDATE t SET v = 2 WHERE k = %s", ("pg-3",))
        proxy.settle(watch)
    assert watch.struck is not None and watch.struck.number == 2
    assert heard.said == [("wrote", 1), ("wrote", 2), ("striking", 2), ("released", 2)]
    with psycopg.connect(dsn, autocommit=True) as conn:  # a new connection goes through
        assert conn.execute("SELECT v FROM t WHERE k = 'pg-3'").fetchone() == (2,)


def test_a_hold_delays_the_acknowledgement_then_delivers_it(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    proxy, dsn = pg_proxy
    with psycopg.connect(dsn, autocommit=True) as conn, \
            proxy.watching("pg-4", None, Heard(), plan=AfterWrite(1, "hold", 0.6)) as watch:
        started = time.monotonic()
        conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-4",))
        took = time.monotonic() - started
        proxy.settle(watch)
        assert conn.execute("SELECT v FROM t WHERE k = 'pg-4'").fetchone() == (1,)
    assert 0.55 <= took < 5 and watch.released_at is not None


def test_a_fault_planned_past_the_last_write_never_strikes(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    proxy, dsn = pg_proxy
    with psycopg.connect(dsn, autocommit=True) as conn, \
            proxy.watching("pg-5", None, Heard(), plan=AfterWrite(3, "cut")) as watch:
        conn.execute("INSERT INTO t VALUES (%s, 1)", ("pg-5",))
        proxy.settle(watch)
    assert len(watch.writes) == 1 and watch.missed


def test_the_link_stays_plain_text_an_ssl_request_is_answered_no(
        pg_proxy: tuple[CommitProxy, str]) -> None:
    _, dsn = pg_proxy
    with psycopg.connect(dsn + "?sslmode=prefer", autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use is False
    with pytest.raises(psycopg.OperationalError, match="SSL"):
        psycopg.connect(dsn + "?sslmode=require", connect_timeout=5)


def test_bytes_that_are_not_the_protocol_are_passed_on_and_said_unreadable(
        postgres_server: PostgresServer) -> None:
    info = psycopg.conninfo.conninfo_to_dict(postgres_server.dsn)
    with CommitProxy(f"{info['host']}:{info['port']}", "redis") as proxy:
        with psycopg.connect(f"postgresql://{info['user']}@{proxy.listen}/postgres",
                             connect_timeout=5, autocommit=True) as conn:  # still a link
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert proxy.unreadable is not None and "not RESP" in proxy.unreadable


# ---- Redis -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    if shutil.which("redis-server") is None:
        missing("redis-server is not installed: apt-get install -y redis-server", kind="tool")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                               "--save", "", "--appendonly", "no", "--dir",
                               str(tmp_path_factory.mktemp("redis"))],
                              stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield port
    finally:
        server.kill()
        server.wait()


@pytest.fixture()
def redis_proxy(redis_port: int) -> Iterator[CommitProxy]:
    with CommitProxy(f"127.0.0.1:{redis_port}", "redis") as proxy:
        yield proxy


def _client(proxy: CommitProxy, protocol: int = 2) -> redis.Redis:
    host, _, port = proxy.listen.rpartition(":")
    return redis.Redis(host=host, port=int(port), protocol=protocol,
                       retry=Retry(NoBackoff(), 0))


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_writes_transactions_scripts_and_pipelines(redis_proxy: CommitProxy,
                                                         protocol: int) -> None:
    client, key = _client(redis_proxy, protocol), f"rk-{protocol}"
    with redis_proxy.watching(key, None, Heard()) as watch:
        client.set(key, "v")
        client.get(key)                                     # a read
        client.setnx(key, 1)                               # found the key: changed nothing
        client.set(key, "w", nx=True)                      # a null: changed nothing
        client.hset(f"hash-{protocol}", "field", 1)         # no key in it: the window's
        with client.pipeline(transaction=True) as pipe:    # MULTI/EXEC: one write
            pipe.set(key, 2).incr(f"n-{key}").get(key).execute()
        with client.pipeline(transaction=False) as pipe:   # a pipeline: one write each
            pipe.delete(key).get(key).set(key, 3).execute()
        script = client.register_script("return redis.call('SET', KEYS[1], ARGV[1])")
        script(keys=[key], args=[4])                       # NOSCRIPT, SCRIPT LOAD, EVALSHA
        client.eval("return redis.call('GET', KEYS[1])", 1, key)
        with pytest.raises(redis.ResponseError):
            client.incr(f"hash-{protocol}")                 # refused: no write
        redis_proxy.settle(watch)
    assert [(w.kinds, w.how, w.matched) for w in watch.writes] == [
        (("SET",), "command", "key"),
        (("HSET",), "command", "window"),
        (("SET", "INCRBY"), "EXEC", "key"),
        (("DEL",), "command", "key"),
        (("SET",), "command", "key"),
        (("EVALSHA",), "script", "key"),
        (("EVAL",), "script", "key"),
    ]


def test_a_cut_inside_a_pipeline_drops_the_rest_of_the_replies(redis_proxy: CommitProxy) -> None:
    client = _client(redis_proxy)
    with redis_proxy.watching("rk-cut", None, Heard(), plan=AfterWrite(2, "cut")) as watch:
        with pytest.raises(redis.ConnectionError), client.pipeline(transaction=False) as pipe:
            pipe.set("rk-cut", 1).set("rk-cut", 2).set("rk-cut", 3).execute()
        redis_proxy.settle(watch)
    assert watch.struck is not None and watch.struck.number == 2
    # Redis ran the third too (the pipeline reached it whole), but its acknowledgement went
    # with the cut, so the proxy never saw it committed.
    assert len(watch.writes) == 2 and _client(redis_proxy).get("rk-cut") == b"3"


def test_a_watched_exec_aborted_by_watch_is_no_write(redis_proxy: CommitProxy) -> None:
    client, other = _client(redis_proxy), _client(redis_proxy)
    with redis_proxy.watching("rk-w", None, Heard()) as watch:
        with client.pipeline() as pipe:
            pipe.watch("rk-w")
            other.set("rk-w", "meanwhile")
            pipe.multi()
            pipe.set("rk-w", "mine")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        redis_proxy.settle(watch)
    assert [w.kinds for w in watch.writes] == [("SET",)]  # the other client's, not the EXEC


# ---- framing and statements ------------------------------------------------------------------


def test_statements_are_classified_by_what_they_write() -> None:
    assert classify("insert into t values ('x')") == (("INSERT",), None)
    assert classify("SELECT * FROM t WHERE k = 'DELETE' FOR UPDATE") == ((), None)
    assert classify("INSERT INTO t VALUES (1) ON CONFLICT (k) DO UPDATE SET v = 2") == (
        ("INSERT",), None)
    assert classify("WITH a AS (UPDATE t SET v = 1 RETURNING k) DELETE FROM u") == (
        ("UPDATE", "DELETE"), None)
    assert classify("CREATE TABLE u (k text REFERENCES t ON DELETE CASCADE)") == ((), None)
    assert classify("-- INSERT\nSELECT $x$DELETE$x$") == ((), None)
    assert classify("COPY t FROM STDIN") == (("COPY",), None)
    assert classify("commit") == ((), "commit") and classify("END") == ((), "commit")
    assert classify("ROLLBACK") == ((), "rollback")
    assert classify("ROLLBACK TO SAVEPOINT s") == ((), None)
    assert split_statements("INSERT INTO t VALUES (';'); -- ;\nSELECT 1;") == [
        "INSERT INTO t VALUES (';')", " -- ;\nSELECT 1"]


def test_resp_values_are_framed_whole_or_not_at_all() -> None:
    assert value_end(b"+OK\r\n") == 5
    assert value_end(b"$3\r\nab") is None and value_end(b"$-1\r\n") == 5
    assert value_end(b"*2\r\n:1\r\n") is None
    assert value_end(b"%1\r\n+a\r\n*2\r\n:1\r\n_\r\n") == 19
    assert value_end(b"|1\r\n+ttl\r\n:3\r\n+OK\r\n") == 19  # an attribute, then its value
    connection = RespConnection()
    connection.from_client(b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n")
    push, reply = b">2\r\n+message\r\n+x\r\n", b":1\r\n"
    segments = connection.from_server(push + reply[:2])
    assert [s.committed for s in segments] == [None]  # a push answers no command
    (last,) = connection.from_server(reply[2:])
    assert last.data == reply and last.committed is not None and last.committed.kinds == ("DEL",)


def test_a_late_write_of_an_earlier_request_is_not_the_one_watched_now(
        redis_proxy: CommitProxy) -> None:
    client = _client(redis_proxy)
    with redis_proxy.watching("rk-early", None, Heard()) as early:
        client.set("rk-early", 1)
        redis_proxy.settle(early)
    with redis_proxy.watching("rk-now", None, Heard()) as now:
        client.set("rk-early", 2)  # the earlier request's response, stored late
        client.set("nobody", 1)    # no key at all: the window's
        redis_proxy.settle(now)
    assert [(w.kinds, w.matched) for w in now.writes] == [(("SET",), "window")]


def _message(kind: bytes, *fields: bytes) -> bytes:
    body = b"".join(fields)
    return kind + struct.pack("!i", len(body) + 4) + body


def _pg_exchange() -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """A startup, its answer, an extended-protocol INSERT carrying ``key7``, its
    acknowledgement, and a notification after it."""
    startup = struct.pack("!ii", 16, 196608) + b"user\0u\0\0"
    started = _message(b"R", b"\0\0\0\0") + _message(b"S", b"a\0b\0") + _message(b"Z", b"I")
    batch = (_message(b"P", b"s1\0", b"INSERT INTO t VALUES ($1)\0", b"\0\0")
             + _message(b"B", b"\0s1\0", b"\0\0\0\1\0\0\0\4", b"key7", b"\0\0")
             + _message(b"E", b"\0", b"\0\0\0\0") + _message(b"S"))
    ack = (_message(b"1") + _message(b"2") + _message(b"N", b"Snotice\0\0")
           + _message(b"C", b"INSERT 0 1\0") + _message(b"Z", b"I"))
    after = _message(b"A", b"\0\0\0\1", b"channel\0\0")  # a notification: no answer
    return startup, started, batch, ack, after


def _cuts(data: bytes) -> list[list[bytes]]:
    """``data`` cut in two at every point, and cut into single bytes."""
    return [*([data[:i], data[i:]] for i in range(len(data) + 1)),
            [data[i:i + 1] for i in range(len(data))]]


def _connected(startup: bytes, started: bytes) -> PgConnection:
    """A connection past its startup exchange."""
    connection = PgConnection()
    connection.from_client(startup)
    connection.from_server(started)
    return connection


def test_a_write_s_acknowledgement_is_one_segment_however_the_bytes_are_cut() -> None:
    """The reader keeps a message's tail and a held answer across chunks: cut anywhere, the
    server's bytes come out whole and in order, and the write's acknowledgement is one
    segment, found with the key its parameters carried."""
    startup, started, batch, ack, after = _pg_exchange()
    answer = ack + after
    for chunks in _cuts(answer):
        connection = _connected(startup, started)
        connection.from_client(batch)
        segments = [segment for chunk in chunks for segment in connection.from_server(chunk)]
        assert b"".join(s.data for s in segments) == answer
        committed = [s.committed for s in segments if s.committed is not None]
        assert [s.data for s in segments if s.committed is not None] == [ack], chunks
        assert [c.kinds for c in committed] == [("INSERT",)] and committed[0].mentions("key7")


def test_a_statement_s_key_is_read_however_the_client_s_bytes_are_cut() -> None:
    """The client's bytes pass on as they come; the reader keeps a message's start until the
    rest arrives (as pieces, joined once: joined to every chunk, a large message cost time
    quadratic in its chunks), so the key its parameters carry is found all the same."""
    startup, started, batch, ack, _after = _pg_exchange()
    for chunks in _cuts(batch):
        connection = _connected(startup, started)
        assert [connection.from_client(chunk) for chunk in chunks] == [(c, b"") for c in chunks]
        committed = [s.committed for s in connection.from_server(ack) if s.committed is not None]
        assert len(committed) == 1 and committed[0].mentions("key7"), chunks


@dataclass
class _Recorded:
    """Where a connection's bytes went: a transport's ``write``, nothing else."""

    sent: bytearray = field(default_factory=bytearray)

    def write(self, data: bytes) -> None:
        self.sent += data


def test_bytes_sent_ahead_while_no_watch_looked_are_neither_repeated_nor_reordered() -> None:
    """Unwatched, the store's bytes go to the target before they are read; a watch that
    begins or ends in the middle of a message or of an answer leaves the target's stream whole."""
    startup, started, batch, ack, after = _pg_exchange()
    answer = started + ack + after
    for watched_first in (True, False):
        proxy = CommitProxy("127.0.0.1:1", "postgresql")
        target, store = _Recorded(), _Recorded()
        pair = _Pair(proxy, target, PgConnection(), 1)  # type: ignore[arg-type]
        pair.store = store  # type: ignore[assignment]
        pair.from_client(startup)
        for index in range(len(answer)):
            watching = (index % 2 == 0) == watched_first
            proxy._watches[:] = [Watch("elsewhere", None, None, Heard())] if watching else []
            pair.from_store(answer[index:index + 1])
            if index == len(started) - 1:
                pair.from_client(batch)
        assert bytes(target.sent) == answer
        assert bytes(store.sent) == startup + batch
