"""Redis's RESP2 and RESP3, read as far as finding which reply acknowledges a write.

The proxy needs each value's exact byte span (to hold an acknowledgement back) and only the
top-level type of a reply; hiredis's ``Reader`` and redis-py's parsers hand back parsed values
read from their own buffers and sockets, not spans, so the framing is read here: a type byte
and a line, a length for bulk values, a count for aggregates (an attribute ``|`` prefixes the
value it annotates; a push ``>`` answers no command).

Commands are matched to replies in order, pipelines included.  A *write* is a write command
(``SET``, ``SETNX``, ``HSET``, ``DEL``, ... :data:`WRITE_COMMANDS`) answered with anything but
an error or a reply saying it changed nothing (a null: ``SET ... NX`` that found the key; 0 from
``SETNX``, ``DEL``, ``EXPIRE`` and their kind), a script (``EVAL``, ``EVALSHA``, ``FCALL``,
which may write: the proxy cannot tell) answered without an error, or an ``EXEC`` answered
with an array (not a null: a ``WATCH`` that aborted it) whose ``MULTI`` queued at least one
write; commands queued inside ``MULTI`` are acknowledged only by ``EXEC``.  A connection that
subscribes, monitors or turns replies off is no longer followed (its replies stop matching its
commands one to one).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from harness.services._pg_wire import Committed, Segment

__all__ = ["WRITE_COMMANDS", "RespConnection", "value_end"]

#: Redis's write commands (its ``@write`` category), the common ones and RedisJSON's.
_WRITES = """
SET SETNX SETEX PSETEX GETSET GETDEL GETEX MSET MSETNX APPEND INCR INCRBY INCRBYFLOAT DECR
DECRBY SETRANGE DEL UNLINK EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST RENAME RENAMENX COPY MOVE
RESTORE HSET HSETNX HMSET HDEL HINCRBY HINCRBYFLOAT LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LSET
LREM LTRIM LINSERT LMOVE RPOPLPUSH BLPOP BRPOP BLMOVE BRPOPLPUSH LMPOP BLMPOP SADD SREM SPOP
SMOVE SINTERSTORE SUNIONSTORE SDIFFSTORE ZADD ZREM ZINCRBY ZPOPMIN ZPOPMAX BZPOPMIN BZPOPMAX
ZMPOP BZMPOP ZREMRANGEBYSCORE ZREMRANGEBYRANK ZREMRANGEBYLEX ZUNIONSTORE ZINTERSTORE ZDIFFSTORE
ZRANGESTORE XADD XDEL XTRIM XACK XCLAIM XAUTOCLAIM XGROUP XSETID PFADD PFMERGE GEOADD SETBIT
BITOP BITFIELD SORT FLUSHDB FLUSHALL SWAPDB JSON.SET JSON.DEL JSON.MERGE
"""
WRITE_COMMANDS = frozenset(_WRITES.split())
SCRIPTS = frozenset({"EVAL", "EVALSHA", "FCALL"})
#: Write commands whose integer reply 0 says they changed nothing (a SETNX that found the key,
#: a DEL of nothing); a null reply says so for every command (SET ... NX that did not set).
_ZEROS = """
SETNX HSETNX MSETNX RENAMENX DEL UNLINK EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST HDEL SREM ZREM
LREM COPY MOVE SMOVE
"""
_ZERO_IS_NOTHING = frozenset(_ZEROS.split())
#: Commands after which replies no longer answer commands one to one.
_UNFOLLOWED = frozenset({"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC", "PSYNC"})
_LINE = frozenset(b"+-:_,#(")
_BULK = frozenset(b"$!=")
_AGGREGATE = {ord("*"): 1, ord("~"): 1, ord(">"): 1, ord("%"): 2, ord("|"): 2}


class ProtocolError(Exception):
    """Bytes that are not RESP."""


def value_end(buffer: bytes | bytearray, start: int = 0) -> int | None:
    """Where the RESP value beginning at ``start`` ends, or None while it is incomplete.
    Iterative: a deeply nested reply cannot exhaust the stack."""
    position, owed = start, 1
    while owed:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        kind = buffer[position]
        if kind in _LINE:
            position, owed = line_end + 2, owed - 1
        elif kind in _BULK:
            length = _number(buffer, position + 1, line_end)
            position = line_end + 2 + (length + 2 if length >= 0 else 0)
            if position > len(buffer):
                return None
            owed -= 1
        elif kind in _AGGREGATE:
            count = _number(buffer, position + 1, line_end)
            position = line_end + 2
            # An attribute annotates the value after it, which is still owed.
            owed += max(count, 0) * _AGGREGATE[kind] - (kind != ord("|"))
        else:
            raise ProtocolError(f"a value starting with {bytes([kind])!r}")
    return position


def _number(buffer: bytes | bytearray, start: int, end: int) -> int:
    try:
        return int(buffer[start:end])
    except ValueError:
        raise ProtocolError(f"a length {bytes(buffer[start:end])!r}") from None


def command_words(value: bytes) -> list[bytes]:
    """The words of a command sent as an array of bulk strings."""
    words, position = [], value.index(b"\r\n") + 2
    while position < len(value):
        line_end = value.index(b"\r\n", position)
        length = int(value[position + 1:line_end])
        words.append(value[line_end + 2:line_end + 2 + length])
        position = line_end + 4 + length
    return words


@dataclass
class _Command:
    name: str
    blob: bytes
    queued: list[_Command] | None = None  # an EXEC's transaction
    in_multi: bool = False  # sent inside MULTI: its reply is only QUEUED

    def writes(self) -> list[str]:
        if self.queued is not None:
            return [c.name for c in self.queued if c.name in WRITE_COMMANDS or c.name in SCRIPTS]
        return [self.name] if self.name in WRITE_COMMANDS or self.name in SCRIPTS else []


class RespConnection:
    """One connection's two byte streams, read in step; what to forward and what to answer."""

    def __init__(self) -> None:
        self._client = bytearray()
        self._server = bytearray()
        self._waiting: deque[_Command] = deque()
        self._multi: list[_Command] | None = None
        #: Why this connection's bytes are no longer read (then they pass as they are).
        self.unreadable: str | None = None
        self.unfollowed: str | None = None

    #: RESP asks nothing of the proxy: the client's bytes always pass as they came.
    relays_client_bytes = True

    def from_client(self, data: bytes) -> tuple[bytes, bytes]:
        """``(bytes to forward to the server, bytes to answer the client with)``: RESP asks
        nothing of the proxy, so the answer is always empty."""
        if self.unreadable or self.unfollowed:
            return data, b""
        self._client += data
        try:
            while self._client:
                if self._client[0] == ord("*"):
                    end = value_end(self._client)
                    if end is None:
                        break
                    words = command_words(bytes(self._client[:end]))
                elif chr(self._client[0]).isalpha():  # an inline command, as telnet sends it
                    end = self._client.find(b"\n")
                    if end < 0:
                        break
                    end += 1
                    words = bytes(self._client[:end]).split()
                else:
                    raise ProtocolError(f"a command starting with {bytes(self._client[:1])!r}")
                del self._client[:end]
                if words:
                    self._command(words)
        except (ProtocolError, ValueError) as exc:
            self.unreadable = f"the client sent what is not RESP ({exc})"
            self._client.clear()
        return data, b""

    def _command(self, words: list[bytes]) -> None:
        name = words[0].decode("latin-1").upper()
        command = _Command(name, b"\0".join(words))
        if name in _UNFOLLOWED or (name == "CLIENT" and len(words) > 2
                                   and words[1].upper() == b"REPLY"):
            self.unfollowed = f"{name} ends the one-to-one match of commands and replies"
            return
        if name == "MULTI":
            self._multi = []
        elif name == "EXEC" and self._multi is not None:
            command.queued, self._multi = self._multi, None
        elif name == "DISCARD":
            self._multi = None
        elif self._multi is not None:
            command.in_multi = True
            self._multi.append(command)
        self._waiting.append(command)

    def from_server(self, data: bytes) -> list[Segment]:
        """The server's bytes cut after each reply that acknowledges a write, in order."""
        if self.unreadable or self.unfollowed:
            return [Segment(data)]
        self._server += data
        segments: list[Segment] = []
        start = 0
        try:
            while start < len(self._server):
                end = value_end(self._server, start)
                if end is None:
                    break
                committed = self._reply(self._server, start)
                if committed is not None:
                    if start:
                        segments.append(Segment(bytes(self._server[:start])))
                    segments.append(Segment(bytes(self._server[start:end]), committed))
                    del self._server[:end]
                    start = 0
                else:
                    start = end
        except ProtocolError as exc:
            self.unreadable = f"the server sent what is not RESP ({exc})"
            start = len(self._server)
        if start:
            segments.append(Segment(bytes(self._server[:start])))
            del self._server[:start]
        return segments

    def _reply(self, buffer: bytearray, start: int) -> Committed | None:
        while buffer[start] == ord("|"):  # an attribute: judge the value it annotates
            start = _after_attribute(buffer, start)
        kind = buffer[start]
        if kind == ord(">") or not self._waiting:
            return None  # a push, or a reply to nothing the proxy saw
        command = self._waiting.popleft()
        if kind in (ord("-"), ord("!")) or command.in_multi:
            return None  # refused, or only queued: EXEC will say
        if command.queued is not None and (kind != ord("*") or buffer[start + 1] == ord("-")):
            return None  # an EXEC aborted by WATCH (a null) or refused
        writes = command.writes()
        if not writes or _changed_nothing(command.name, buffer, start, kind):
            return None
        how = "EXEC" if command.queued is not None else (
            "script" if command.name in SCRIPTS else "command")
        parts = tuple(c.blob for c in command.queued) if command.queued else (command.blob,)
        return Committed(tuple(dict.fromkeys(writes)), how, parts)


def _changed_nothing(name: str, buffer: bytearray, start: int, kind: int) -> bool:
    """Does the reply say the command left the store as it was?"""
    if kind == ord("_") or (kind in (ord("$"), ord("*")) and buffer[start + 1] == ord("-")):
        return True
    return kind == ord(":") and name in _ZERO_IS_NOTHING and buffer[start + 1:start + 2] == b"0"


def _after_attribute(buffer: bytearray, start: int) -> int:
    """Where the value an attribute annotates begins (the whole value is in ``buffer``)."""
    line_end = buffer.index(b"\r\n", start)
    position = line_end + 2
    for _ in range(2 * _number(buffer, start + 1, line_end)):
        end = value_end(buffer, position)
        assert end is not None
        position = end
    return position
