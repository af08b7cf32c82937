"""PostgreSQL's wire protocol v3, read as far as finding where each committed write is acknowledged.

No package on PyPI frames the protocol for a proxy (drivers parse it inside their own socket
loops), and the framing is small: after the untyped startup packet every message is a type
byte and a length.  Client messages are read for their statements (simple ``Query``; extended
``Parse``, ``Bind``, ``Execute``, ``Sync``), server messages for ``CommandComplete`` tags,
errors and ``ReadyForQuery``'s transaction status.

A *write* here is one committed transaction that ran at least one data-modifying statement:
an explicit ``COMMIT`` (or ``END``) after writes, or an implicit transaction (autocommit: a
simple query, or an extended-protocol batch up to its ``Sync``) that ended idle without an
error.  Its acknowledgement is every server message answering the statements of that batch, up
to and including its ``ReadyForQuery``: the proxy holds those back until it has decided, so a
fault can keep the whole acknowledgement from the target.  A statement writes when its
``CommandComplete`` tag says so (``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``, ``COPY ...
FROM``) or its text does (a ``WITH`` query that inserts answers ``SELECT n``), unless its tag
says it changed no row (``INSERT 0 0``, ``UPDATE 0``: an ``ON CONFLICT DO NOTHING`` that found
the key).  An
``SSLRequest`` or ``GSSENCRequest`` is answered ``N`` by the proxy itself, so the link stays
in plain text.  What it cannot see: writes inside functions a ``SELECT`` calls, and a savepoint
rolled back after its writes (the commit still counts as one write).
"""

from __future__ import annotations

import functools
import re
import struct
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Committed", "PgConnection", "Segment", "classify"]

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CANCEL_REQUEST = 80877102
PROTOCOL_3 = 196608
_LENGTH = struct.Struct("!i")
_QUERY, _PARSE, _BIND, _EXECUTE, _SYNC = b"QPBES"
#: The client's messages that say what runs; the rest pass unread.
_READ_FROM_CLIENT = frozenset((_QUERY, _PARSE, _BIND, _EXECUTE, _SYNC))
_COMPLETE, _EMPTY, _SUSPENDED, _ERROR, _READY = b"CIsEZ"
#: A statement's end (complete, empty, suspended at a row limit).
_COMPLETIONS = frozenset((_COMPLETE, _EMPTY, _SUSPENDED))
_READ_FROM_SERVER = frozenset((*_COMPLETIONS, _ERROR, _READY))
#: Tags whose first word says the statement changed rows.
_WRITE_TAGS = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"})
_NOISE = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(\$[A-Za-z_]*\$).*?\1", re.S)
_VERBS = re.compile(r"\b(?:(FOR\s+(?:NO\s+KEY\s+)?UPDATE)|(DO\s+UPDATE)|"
                    r"(INSERT|UPDATE|DELETE|MERGE|TRUNCATE))\b", re.I)
_NOT_DML = frozenset({"CREATE", "ALTER", "DROP", "GRANT", "REVOKE", "COMMENT", "SET", "SHOW",
                      "EXPLAIN", "PREPARE", "DEALLOCATE", "LISTEN", "NOTIFY", "VACUUM",
                      "ANALYZE", "LOCK", "DECLARE", "FETCH", "CLOSE", "DISCARD", "RESET"})


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement as the client sent it: what it writes, and the bytes a key may be in."""

    kinds: tuple[str, ...]
    ends: str | None  # "commit" or "rollback" for a statement that ends a transaction
    blob: bytes


@functools.lru_cache(maxsize=4096)
def classify(sql: str) -> tuple[tuple[str, ...], str | None]:
    """The data-modifying verbs of one statement, in order, and whether it ends a transaction
    (``commit``, ``rollback``).  Literals and comments are stripped first, so a string holding
    ``'DELETE'`` is no write; ``SELECT ... FOR UPDATE`` and ``ON CONFLICT DO UPDATE`` add none;
    DDL is no write (``ON DELETE CASCADE``)."""
    bare = _NOISE.sub(" ", sql)
    first = bare.split(None, 1)[0].upper() if bare.strip() else ""
    if first in ("COMMIT", "END"):
        return (), "commit"
    if first in ("ROLLBACK", "ABORT"):
        return (), None if re.match(r"\s*ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO\b", bare,
                                    re.I) else "rollback"
    if first in _NOT_DML:
        return (), None
    kinds: list[str] = []
    for match in _VERBS.finditer(bare):
        verb = match.group(3)
        if verb and verb.upper() not in kinds:
            kinds.append(verb.upper())
    if first == "COPY" and re.search(r"\bFROM\b", bare, re.I):
        kinds.append("COPY")
    return tuple(kinds), None


def split_statements(sql: str) -> list[str]:
    """A simple query's statements: split at semicolons outside literals and comments."""
    parts, start, position = [], 0, 0
    for match in re.finditer(r";|" + _NOISE.pattern, sql, re.S):
        position = match.start()
        if match.group(0) == ";":
            parts.append(sql[start:position])
            start = match.end()
    parts.append(sql[start:])
    return [p for p in parts if p.strip()]


@dataclass(frozen=True, slots=True)
class Committed:
    """A transaction the store acknowledged as committed, with the statements that wrote."""

    kinds: tuple[str, ...]
    how: str  # "COMMIT" (explicit) or "autocommit"
    blob: bytes

    def mentions(self, text: str) -> bool:
        return bool(text) and text.encode() in self.blob


@dataclass(frozen=True, slots=True)
class Segment:
    """Server bytes in order; ``committed`` when they are the acknowledgement of a write."""

    data: bytes
    committed: Committed | None = None


@dataclass
class _Batch:
    """The statements the server answers up to one ``ReadyForQuery``."""

    statements: list[Statement] = field(default_factory=list)
    answered: int = 0
    failed: bool = False
    held: bool = False
    committed: Committed | None = None

    def may_commit(self) -> bool:
        return any(s.kinds or s.ends == "commit" for s in self.statements)


class PgConnection:
    """One connection's two byte streams, read in step; what to forward and what to answer."""

    def __init__(self) -> None:
        self._startup = True
        self._client = bytearray()
        self._server = b""
        self._prepared: dict[bytes, str] = {}
        self._portals: dict[bytes, tuple[str, bytes]] = {}
        self._open = _Batch()
        self._pending: deque[_Batch] = deque()
        self._uncommitted: list[Statement] = []
        self._in_transaction = False
        self._held = bytearray()
        #: Why this connection's bytes could not be read as protocol v3 (then they pass as-is).
        self.unreadable: str | None = None

    # ---- the client's side --------------------------------------------------------------

    def from_client(self, data: bytes) -> tuple[bytes, bytes]:
        """``(bytes to forward to the server, bytes to answer the client with)``.  Past the
        startup packet the client's bytes pass exactly as they came; only the messages that say
        what runs are read."""
        if self.unreadable is not None:
            return data, b""
        if self._startup:
            return self._startup_packets(data)
        buffer = bytes(self._client) + data if self._client else data
        position, end = 0, len(buffer)
        while end - position >= 5:
            (length,) = _LENGTH.unpack_from(buffer, position + 1)
            if length < 4:
                self.unreadable = f"a message {buffer[position:position + 1]!r} of length {length}"
                break
            stop = position + 1 + length
            if stop > end:
                break
            kind = buffer[position]
            if kind in _READ_FROM_CLIENT:
                self._client_message(kind, buffer[position + 5:stop])
            position = stop
        self._client = bytearray(buffer[position:] if self.unreadable is None else b"")
        return data, b""

    def _startup_packets(self, data: bytes) -> tuple[bytes, bytes]:
        """The untyped packets before protocol 3.0 starts: encryption requests are answered
        here, the startup message is passed on."""
        self._client += data
        forward, answer = bytearray(), bytearray()
        while self._startup and len(self._client) >= 8:
            length, code = struct.unpack_from("!ii", self._client)
            if length < 8:
                return self._give_up("a startup packet shorter than 8 bytes", forward)
            if len(self._client) < length:
                break
            packet = bytes(self._client[:length])
            del self._client[:length]
            if code in (SSL_REQUEST, GSS_REQUEST):
                answer += b"N"  # no encryption: the link stays readable
                continue
            forward += packet
            if code == CANCEL_REQUEST:
                return self._give_up("a cancel request", forward)  # one packet, then closed
            if code != PROTOCOL_3:
                return self._give_up(f"startup code {code} is not protocol 3.0", forward)
            self._startup = False
        if not self._startup and self._client:  # typed messages right behind the startup
            rest, self._client = bytes(self._client), bytearray()
            forward += self.from_client(rest)[0]
        return bytes(forward), bytes(answer)

    def _give_up(self, why: str, forward: bytearray) -> tuple[bytes, bytes]:
        self.unreadable = why
        return bytes(forward + self._client), b""

    def _client_message(self, kind: int, body: bytes) -> None:
        if kind == _QUERY:
            sql = _cstring(body)
            batch = _Batch([_statement(s, s.encode()) for s in split_statements(sql)] or
                           [_statement("", b"")])
            batch.held = batch.may_commit() or self._in_transaction
            self._pending.append(batch)
        elif kind == _PARSE:
            name, rest = body.split(b"\0", 1)
            self._prepared[name] = _cstring(rest)
        elif kind == _BIND:
            portal, rest = body.split(b"\0", 1)
            statement = rest.split(b"\0", 1)[0]
            self._portals[portal] = (self._prepared.get(statement, ""), body)
        elif kind == _EXECUTE:
            sql, bound = self._portals.get(body.split(b"\0", 1)[0], ("", b""))
            self._open.statements.append(_statement(sql, sql.encode() + b"\0" + bound))
        elif kind == _SYNC:
            self._open.held = self._open.may_commit() or self._in_transaction
            self._pending.append(self._open)
            self._open = _Batch()

    # ---- the server's side --------------------------------------------------------------

    def from_server(self, data: bytes) -> list[Segment]:
        """The server's bytes cut where a write's acknowledgement ends, in order: whole
        messages only (a message's tail still to come waits for it)."""
        if self.unreadable is not None:
            return [Segment(data)]
        buffer = self._server + data if self._server else data
        segments: list[Segment] = []
        position, start, end = 0, 0, len(buffer)  # start: the first byte not yet handed on
        while end - position >= 5:
            (length,) = _LENGTH.unpack_from(buffer, position + 1)
            stop = position + 1 + length
            if length < 4:
                self.unreadable = f"a server message of length {length}"
                segments.append(Segment(bytes(self._held) + buffer[start:]))
                self._held.clear()
                self._server = b""
                return segments
            if stop > end:
                break
            kind = buffer[position]
            batch = self._pending[0] if self._pending else self._open
            if batch.held:
                if start < position:
                    segments.append(Segment(buffer[start:position]))
                self._held += buffer[position:stop]
                start = stop
            if kind in _READ_FROM_SERVER:
                self._server_message(kind, buffer[position + 5:stop], batch)
            position = stop
            if kind != _READY:
                continue
            if batch.held:  # the batch's whole answer, up to its ReadyForQuery
                segments.append(Segment(bytes(self._held), batch.committed))
                self._held.clear()
            elif batch.committed is not None:  # a write its text did not show: seen late
                segments.append(Segment(buffer[start:stop], batch.committed))
                start = stop
        if start < position:
            segments.append(Segment(buffer[start:position]))
        self._server = buffer[position:]
        return segments

    def _server_message(self, kind: int, body: bytes, batch: _Batch) -> None:
        if kind in _COMPLETIONS:
            statement = (batch.statements[batch.answered]
                         if batch.answered < len(batch.statements) else None)
            batch.answered += 1
            tag = _cstring(body).split(None, 1)[0].upper() if kind == _COMPLETE and body else ""
            kinds = statement.kinds if statement else ()
            if not kinds and tag in _WRITE_TAGS:
                kinds = (tag,)
            if tag in _WRITE_TAGS and _cstring(body).rsplit(None, 1)[-1] == "0":
                kinds = ()  # INSERT 0 0, UPDATE 0: it changed no row
            if kinds:
                self._uncommitted.append(Statement(kinds, None, statement.blob if statement
                                                   else b""))
            if tag == "COMMIT":
                batch.committed = self._commit("COMMIT")
            if tag == "ROLLBACK" and (statement is None or statement.ends == "rollback"
                                      or statement.ends == "commit"):
                self._uncommitted.clear()
        elif kind == _ERROR:
            batch.failed = True
        elif kind == _READY:
            if self._pending and batch is self._pending[0]:
                self._pending.popleft()
            status = body[:1]
            self._in_transaction = status in (b"T", b"E")
            if status == b"I":
                if batch.failed:
                    self._uncommitted.clear()
                elif self._uncommitted:
                    batch.committed = self._commit("autocommit")

    def _commit(self, how: str) -> Committed | None:
        if not self._uncommitted:
            return None
        kinds: list[str] = []
        for statement in self._uncommitted:
            kinds += [k for k in statement.kinds if k not in kinds]
        blob = b"\0".join(s.blob for s in self._uncommitted)
        self._uncommitted = []
        return Committed(tuple(kinds), how, blob)


def _statement(sql: str, blob: bytes) -> Statement:
    kinds, ends = classify(sql)
    return Statement(kinds, ends, blob)


def _cstring(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")
