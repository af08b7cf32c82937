"""Which keys the service accepts (how long, which characters), found by sending fresh keys.

Read from which ones get a 2xx and which a 4xx.

Lengths are searched from the key the service already took up to ``LONGEST`` and then halved
down to the limit; characters are tried all at once and, when that is refused, one by one.  The
result is written as the target file's ``max_length`` and ``pattern`` only where the file's
rules disagree with what was seen, since those rules decide which keys the harness sends as
hostile ones.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass, field

from harness.http.drafting._probe_session import ProbeSession

__all__ = ["LONGEST", "KeyRules", "disagreements", "probe_keys", "proposed_pattern"]

#: The longest key tried: beyond a few KiB a server's header limit answers, not its key rules.
LONGEST = 4096
_STEPS = (64, 128, 255, 256, 1024, LONGEST)
_MAX_BISECTIONS = 10
_NON_ASCII = "é"
_PUNCTUATION = string.punctuation


@dataclass
class KeyRules:
    """What the probe saw: each key tried and whether it was accepted (None: neither a 2xx nor
    a 4xx, so it says nothing)."""

    lengths: dict[int, bool | None] = field(default_factory=dict)
    characters: dict[str, bool | None] = field(default_factory=dict)
    keys: dict[str, bool | None] = field(default_factory=dict)
    refusals: Counter[int] = field(default_factory=Counter)

    def limit(self) -> tuple[int | None, int | None]:
        """The longest length seen accepted below the shortest seen refused, and that refused
        one (None: no refusal up to ``LONGEST``)."""
        refused = [n for n, ok in self.lengths.items() if ok is False]
        shortest = min(refused) if refused else None
        accepted = [n for n, ok in self.lengths.items()
                    if ok and (shortest is None or n < shortest)]
        return (max(accepted) if accepted else None), shortest

    @property
    def accepted_characters(self) -> set[str]:
        return {c for c, ok in self.characters.items() if ok}


def _try(session: ProbeSession, rules: KeyRules, key: str, label: str) -> bool | None:
    answer = session.send(key, session.body(), label=label)
    status = answer.status
    accepted: bool | None = None
    if status is not None and 200 <= status < 300:
        accepted = True
    elif status is not None and 400 <= status < 500:
        accepted = False
        rules.refusals[status] += 1
    rules.keys[key] = accepted
    return accepted


def _length(session: ProbeSession, rules: KeyRules, length: int) -> bool | None:
    if length not in rules.lengths:
        rules.lengths[length] = _try(session, rules, session.key(length=length),
                                     f"probe: key of {length} characters")
    return rules.lengths[length]


def _lengths(session: ProbeSession, rules: KeyRules, declared: int) -> None:
    base = len(session.key())
    rules.lengths[base] = True  # the first request's key is of this length, and was accepted
    if (declared and declared >= base and _length(session, rules, declared)
            and _length(session, rules, declared + 1) is False):
        return  # the declared limit, confirmed on both sides
    low, high = base, None
    for step in _STEPS:
        if step <= low:
            continue
        accepted = _length(session, rules, step)
        if accepted is None:
            return
        if not accepted:
            high = step
            break
        low = step
    if high is None:
        return
    for _ in range(_MAX_BISECTIONS):
        if high - low <= 1:
            break
        middle = (low + high) // 2
        accepted = _length(session, rules, middle)
        if accepted is None:
            return
        low, high = (middle, high) if accepted else (low, middle)


def _characters(session: ProbeSession, rules: KeyRules) -> None:
    every = _try(session, rules, session.key(_PUNCTUATION), "probe: every punctuation mark")
    if every is None:
        return
    if every:
        rules.characters.update(dict.fromkeys(_PUNCTUATION, True))
    else:
        for character in _PUNCTUATION:
            rules.characters[character] = _try(session, rules, session.key(character),
                                               f"probe: key with {character!r}")
    for character, label in ((" ", "a space"), (_NON_ASCII, "a non-ASCII letter")):
        rules.characters[character] = _try(session, rules, session.key(character),
                                           f"probe: key with {label}")


def probe_keys(session: ProbeSession) -> KeyRules:
    """Send the probe's key-rule requests; every one is a fresh key with a valid body."""
    rules = KeyRules()
    _lengths(session, rules, session.target.key.max_length)
    _characters(session, rules)
    return rules


def proposed_pattern(rules: KeyRules) -> str:
    """A pattern for the characters seen accepted (letters and digits always, since the
    probe's own keys are made of them); a space only inside a key, as HTTP trims the ends."""
    accepted = rules.accepted_characters
    printable = set(_PUNCTUATION) <= accepted
    if printable:
        visible = r"\x21-\x7e"
    else:
        marks = "".join(re.escape(c) if c in "\\]^-[" else c
                        for c in _PUNCTUATION if c in accepted)
        visible = "A-Za-z0-9" + marks
    if _NON_ASCII in accepted:
        visible += r"\x80-\U0010ffff"
    if " " in accepted:
        return f"[{visible}]([{visible} ]*[{visible}])?"
    return f"[{visible}]+"


def disagreements(rules: KeyRules, pattern: str | None, max_length: int) -> list[str]:
    """The keys on which the file's rules and the service disagree, in words."""
    found = []
    for key, accepted in rules.keys.items():
        if accepted is None:
            continue
        by_length = not max_length or len(key) <= max_length
        by_pattern = pattern is None or re.fullmatch(pattern, key) is not None
        if by_length and by_pattern and not accepted:
            found.append(f"refused {_shown(key)}, which the file's rules accept")
        elif accepted and not (by_length and by_pattern):
            found.append(f"accepted {_shown(key)}, which the file's rules refuse")
    return found


def _shown(key: str) -> str:
    if len(key) > 40:
        return f"a key of {len(key)} characters"
    return repr(key)
