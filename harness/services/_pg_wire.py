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
fault can keep the whole acknowledgement from the target; only a ``COPY ... FROM STDIN``'s
"send the data" (``CopyInResponse``, ``CopyBothResponse``) goes at once, since the server
waits for the client then.  A statement writes when its
``CommandComplete`` tag says so (``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``, ``COPY ...
FROM``) or its text does (a ``WITH`` query that inserts answers ``SELECT n``), unless its tag
says it changed no row (``INSERT 0 0``, ``UPDATE 0``: an ``ON CONFLICT DO NOTHING`` that found
the key).  An
``SSLRequest`` or ``GSSENCRequest`` is answered ``N`` by the proxy itself, so the link stays
in plain text.  What it cannot see: writes inside functions a ``SELECT`` calls, and a savepoint
rolled back after its writes (the commit still counts as one write).

Every store round trip of a ``--postgres`` run goes through this reader, so its hot path reads
only what decides a write (the type byte and length of each message, the few messages above) at
their offsets in the chunk that came, and builds the bytes a key is looked for in only when a
watch asks (``Committed.blob``).
"""

from __future__ import annotations

import functools
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

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
#: CopyInResponse and CopyBothResponse: the server waits for the client's data.
_COPY_WAITS = frozenset(b"GW")
#: Tags whose first word says the statement changed rows.
_WRITE_TAGS = frozenset({b"INSERT", b"UPDATE", b"DELETE", b"MERGE"})
_NOISE = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(\$[A-Za-z_]*\$).*?\1", re.S)
_VERBS = re.compile(r"\b(?:(FOR\s+(?:NO\s+KEY\s+)?UPDATE)|(DO\s+UPDATE)|"
                    r"(INSERT|UPDATE|DELETE|MERGE|TRUNCATE))\b", re.I)
_NOT_DML = frozenset({"CREATE", "ALTER", "DROP", "GRANT", "REVOKE", "COMMENT", "SET", "SHOW",
                      "EXPLAIN", "PREPARE", "DEALLOCATE", "LISTEN", "NOTIFY", "VACUUM",
                      "ANALYZE", "LOCK", "DECLARE", "FETCH", "CLOSE", "DISCARD", "RESET"})


class Statement(NamedTuple):
    """One statement as the client sent it: what it writes, and the bytes a key may be in (its
    text, then its bound parameters), joined only when a watch looks (``Committed.blob``)."""

    kinds: tuple[str, ...]
    ends: str | None  # "commit" or "rollback" for a statement that ends a transaction
    parts: tuple[bytes, ...]


class _Prepared(NamedTuple):
    """A parsed statement, classified once however often it runs."""

    kinds: tuple[str, ...]
    ends: str | None
    text: bytes


_UNNAMED = _Prepared((), None, b"")


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


@dataclass(frozen=True)
class Committed:
    """A transaction the store acknowledged as committed, with the statements that wrote: the
    bytes a key may be in, joined by NULs the first time a watch asks."""

    kinds: tuple[str, ...]
    how: str  # "COMMIT" (explicit) or "autocommit"
    parts: tuple[bytes, ...]

    @functools.cached_property
    def blob(self) -> bytes:
        return b"\0".join(self.parts)

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


class _Partial:
    """The start of a message whose rest has not come yet, kept as the pieces it came in and
    joined once the whole message is there: joined to every chunk as it came, a large message
    (a big row, a long COPY) cost time quadratic in its number of chunks."""

    def __init__(self) -> None:
        self._pieces: list[bytes] = []
        self._size = 0
        self._wanted = 0  # the bytes the message needs in all (5 until its length is known)

    def then(self, data: bytes) -> bytes | None:
        """The kept bytes followed by ``data``; None while the message is still short (then
        ``data`` is kept too)."""
        if not self._pieces:
            return data
        self._pieces.append(data)
        self._size += len(data)
        if self._size < self._wanted:
            return None
        joined = b"".join(self._pieces)
        self.keep(b"")
        return joined

    def keep(self, start: bytes) -> None:
        """Keep ``start``, a message's first bytes (nothing, when empty)."""
        self._pieces = [start] if start else []
        self._size = len(start)
        self._wanted = 1 + _LENGTH.unpack_from(start, 1)[0] if len(start) >= 5 else 5


class PgConnection:
    """One connection's two byte streams, read in step; what to forward and what to answer."""

    def __init__(self) -> None:
        self._startup = True
        self._startup_bytes = bytearray()  # before the startup packet ends
        self._client = _Partial()
        self._server = _Partial()
        self._prepared: dict[bytes, _Prepared] = {}
        self._portals: dict[bytes, tuple[_Prepared, bytes]] = {}
        self._open = _Batch()
        self._pending: deque[_Batch] = deque()
        self._uncommitted: list[Statement] = []
        self._in_transaction = False
        self._held = bytearray()  # a held answer's bytes from the chunks before this one
        #: Why this connection's bytes could not be read as protocol v3 (then they pass as-is).
        self.unreadable: str | None = None

    @property
    def relays_client_bytes(self) -> bool:
        """Do the client's bytes now pass exactly as they came (past the startup packet)?
        Then the proxy may send them on before reading them."""
        return not self._startup or self.unreadable is not None

    # ---- the client's side --------------------------------------------------------------

    def from_client(self, data: bytes) -> tuple[bytes, bytes]:
        """``(bytes to forward to the server, bytes to answer the client with)``.  Past the
        startup packet the client's bytes pass exactly as they came; only the messages that say
        what runs are read."""
        if self.unreadable is not None:
            return data, b""
        if self._startup:
            return self._startup_packets(data)
        buffer = self._client.then(data)
        if buffer is None:
            return data, b""
        position, end = 0, len(buffer)
        unpack, read = _LENGTH.unpack_from, _READ_FROM_CLIENT
        while end - position >= 5:
            (length,) = unpack(buffer, position + 1)
            if length < 4:
                self.unreadable = f"a message {buffer[position:position + 1]!r} of length {length}"
                break
            stop = position + 1 + length
            if stop > end:
                break
            kind = buffer[position]
            if kind in read:
                self._client_message(kind, buffer, position + 5, stop)
            position = stop
        self._client.keep(buffer[position:] if self.unreadable is None else b"")
        return data, b""

    def _startup_packets(self, data: bytes) -> tuple[bytes, bytes]:
        """The untyped packets before protocol 3.0 starts: encryption requests are answered
        here, the startup message is passed on."""
        waiting = self._startup_bytes
        waiting += data
        forward, answer = bytearray(), bytearray()
        while self._startup and len(waiting) >= 8:
            length, code = struct.unpack_from("!ii", waiting)
            if length < 8:
                return self._give_up("a startup packet shorter than 8 bytes", forward)
            if len(waiting) < length:
                break
            packet = bytes(waiting[:length])
            del waiting[:length]
            if code in (SSL_REQUEST, GSS_REQUEST):
                answer += b"N"  # no encryption: the link stays readable
                continue
            forward += packet
            if code == CANCEL_REQUEST:
                return self._give_up("a cancel request", forward)  # one packet, then closed
            if code != PROTOCOL_3:
                return self._give_up(f"startup code {code} is not protocol 3.0", forward)
            self._startup = False
        if not self._startup and waiting:  # typed messages right behind the startup
            rest = bytes(waiting)
            waiting.clear()
            forward += self.from_client(rest)[0]
        return bytes(forward), bytes(answer)

    def _give_up(self, why: str, forward: bytearray) -> tuple[bytes, bytes]:
        self.unreadable = why
        return bytes(forward + self._startup_bytes), b""

    def _client_message(self, kind: int, buffer: bytes, start: int, stop: int) -> None:
        """The message whose body is ``buffer[start:stop]``, read in place."""
        if kind == _EXECUTE:
            portal = buffer[start:_nul(buffer, start, stop)]
            prepared, bound = self._portals.get(portal, (_UNNAMED, b""))
            self._open.statements.append(
                Statement(prepared.kinds, prepared.ends, (prepared.text, bound)))
        elif kind == _BIND:
            name_start = _nul(buffer, start, stop) + 1
            name = buffer[name_start:_nul(buffer, name_start, stop)]
            self._portals[buffer[start:name_start - 1]] = (
                self._prepared.get(name, _UNNAMED), buffer[start:stop])
        elif kind == _SYNC:
            self._open.held = self._open.may_commit() or self._in_transaction
            self._pending.append(self._open)
            self._open = _Batch()
        elif kind == _PARSE:
            text_start = _nul(buffer, start, stop) + 1
            text = buffer[text_start:_nul(buffer, text_start, stop)]
            self._prepared[buffer[start:text_start - 1]] = _Prepared(
                *classify(text.decode("utf-8", "replace")), text)
        elif kind == _QUERY:
            sql = _cstring(buffer[start:stop])
            batch = _Batch([_statement(s) for s in split_statements(sql)] or [_statement("")])
            batch.held = batch.may_commit() or self._in_transaction
            self._pending.append(batch)

    # ---- the server's side --------------------------------------------------------------

    def from_server(self, data: bytes) -> list[Segment]:
        """The server's bytes cut where a write's acknowledgement ends, in order: whole
        messages only (a message's tail still to come waits for it).

        A batch's answer is held (``_Batch.held``) from its first message to its
        ``ReadyForQuery``; the bytes before it pass in one segment, and a held answer is one
        segment too, however many chunks it came in."""
        if self.unreadable is not None:
            return [Segment(data)]
        buffer = self._server.then(data)
        if buffer is None:
            return []
        segments: list[Segment] = []
        # start: the first byte not yet handed on (nor kept in _held); the bytes from start on
        # belong to ``batch``'s answer when it is held.
        position, start, end = 0, 0, len(buffer)
        unpack, read = _LENGTH.unpack_from, _READ_FROM_SERVER
        batch = self._pending[0] if self._pending else self._open
        while end - position >= 5:
            (length,) = unpack(buffer, position + 1)
            if length < 4:
                self.unreadable = f"a server message of length {length}"
                segments.append(Segment(bytes(self._held) + buffer[start:]))
                self._held.clear()
                return segments
            stop = position + 1 + length
            if stop > end:
                break
            kind = buffer[position]
            if kind in read:
                self._server_message(kind, buffer, position + 5, stop, batch)
            position = stop
            if kind in _COPY_WAITS and batch.held:  # the server waits for the client's
                # data: what is held so far must go, or neither side moves again
                segments.append(Segment(bytes(self._held) + buffer[start:stop]))
                self._held.clear()
                start = stop
                continue
            if kind != _READY:
                continue
            if batch.held:  # the batch's whole answer, up to its ReadyForQuery
                answer = buffer[start:stop]
                if self._held:
                    answer = bytes(self._held) + answer
                    self._held.clear()
                segments.append(Segment(answer, batch.committed))
                start = stop
            elif batch.committed is not None:  # a write its text did not show: seen late
                segments.append(Segment(buffer[start:stop], batch.committed))
                start = stop
            batch = self._pending[0] if self._pending else self._open
            if batch.held and start < stop:  # what passes before the held answer begins
                segments.append(Segment(buffer[start:stop]))
                start = stop
        if start < position:
            if batch.held:
                self._held += buffer[start:position]
            else:
                segments.append(Segment(buffer[start:position]))
        self._server.keep(buffer[position:])
        return segments

    def _server_message(self, kind: int, buffer: bytes, start: int, stop: int,
                        batch: _Batch) -> None:
        """The message whose body is ``buffer[start:stop]``, read in place."""
        if kind in _COMPLETIONS:
            statement = (batch.statements[batch.answered]
                         if batch.answered < len(batch.statements) else None)
            batch.answered += 1
            words = buffer[start:_nul(buffer, start, stop)].split() if kind == _COMPLETE else []
            tag = words[0].upper() if words else b""
            kinds = statement.kinds if statement else ()
            if tag in _WRITE_TAGS:
                if words[-1] == b"0":
                    kinds = ()  # INSERT 0 0, UPDATE 0: it changed no row
                elif not kinds:
                    kinds = (tag.decode(),)
            if kinds:
                self._uncommitted.append(Statement(kinds, None, statement.parts if statement
                                                   else (b"",)))
            if tag == b"COMMIT":
                batch.committed = self._commit("COMMIT")
            if tag == b"ROLLBACK" and (statement is None or statement.ends == "rollback"
                                       or statement.ends == "commit"):
                self._uncommitted.clear()
        elif kind == _ERROR:
            batch.failed = True
        elif kind == _READY:
            if self._pending and batch is self._pending[0]:
                self._pending.popleft()
            status = buffer[start:start + 1]
            self._in_transaction = status in (b"T", b"E")
            if status == b"I":
                if batch.failed:
                    self._uncommitted.clear()
                elif self._uncommitted:
                    batch.committed = self._commit("autocommit")

    def _commit(self, how: str) -> Committed | None:
        if not self._uncommitted:
            return None
        if len(self._uncommitted) == 1:  # the common case: one statement, one transaction
            (statement,) = self._uncommitted
            kinds, parts = statement.kinds, statement.parts
        else:
            kinds = tuple(dict.fromkeys(k for s in self._uncommitted for k in s.kinds))
            parts = tuple(part for s in self._uncommitted for part in s.parts)
        self._uncommitted = []
        return Committed(kinds, how, parts)


def _statement(sql: str) -> Statement:
    kinds, ends = classify(sql)
    return Statement(kinds, ends, (sql.encode(),))


def _nul(buffer: bytes, start: int, stop: int) -> int:
    """Where the C string at ``start`` ends (``stop`` when the message ends first)."""
    end = buffer.find(b"\0", start, stop)
    return stop if end < 0 else end


def _cstring(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")
