"""Topic-name regular expressions of consumer-protocol subscriptions, matched in linear time.

Kafka matches a member's ``SubscribedTopicRegex`` with RE2/J (linear time, no
backtracking) against whole topic names. Python's ``re`` backtracks: a
client's pattern such as ``(a*)*b`` could hold a thread for ever. So patterns
are compiled here to a Thompson NFA and run as a Pike VM: time is at most the
name's length times the program's size, and the program is bounded
(``MAX_PROGRAM`` instructions, patterns of at most ``MAX_PATTERN`` characters).

The syntax is RE2's common core: literals and escapes (``\\.``, ``\\d \\w \\s``
and their negations, ``\\t \\n \\r``), ``.``, classes ``[a-z_\\d]`` and ``[^...]``,
groups ``(...)``, ``(?:...)`` and ``(?P<name>...)``, alternation, ``* + ?``
and ``{m} {m,} {m,n}`` (lazy forms match the same names), ``^`` and ``$``.
Anything else (backreferences, lookaround, flags, word boundaries) is
``RegexError``; Kafka answers INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

from ...errors import VQSError

MAX_PATTERN = 1000
MAX_PROGRAM = 10_000
_DIGIT = frozenset("0123456789")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(" \t\n\r\f\v")


class RegexError(VQSError):
    """A pattern that is not valid, or not in the supported syntax (module doc)."""


class _Parser:
    def __init__(self, text: str):
        self.s, self.i = text, 0

    def peek(self) -> str | None:
        return self.s[self.i] if self.i < len(self.s) else None

    def take(self) -> str:
        if self.i >= len(self.s):
            raise RegexError("the pattern ends too early")
        c = self.s[self.i]
        self.i += 1
        return c

    def alt(self):
        branches = [self.cat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.cat())
        return ("alt", branches) if len(branches) > 1 else branches[0]

    def cat(self):
        items = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.repeat())
        return ("cat", items)

    def repeat(self):
        node = self.atom()
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                node = ("rep", node, 0 if c != "+" else 1, None if c != "?" else 1)
            elif c == "{" and self._counted():
                lo, hi = self._bounds()
                node = ("rep", node, lo, hi)
            else:
                return node
            if self.peek() == "?":  # lazy: the same names match
                self.i += 1

    def _counted(self) -> bool:
        j = self.s.find("}", self.i)
        body = self.s[self.i + 1:j] if j > 0 else ""
        return bool(body) and all(ch.isdigit() or ch == "," for ch in body) and body[0] != ","

    def _bounds(self) -> tuple[int, int | None]:
        j = self.s.index("}", self.i)
        body, self.i = self.s[self.i + 1:j], j + 1
        lo_s, comma, hi_s = body.partition(",")
        lo = int(lo_s)
        hi = lo if not comma else (int(hi_s) if hi_s else None)
        if (hi is not None and hi < lo) or lo > 1000 or (hi or 0) > 1000:
            raise RegexError(f"bad repetition {{{body}}}")
        return lo, hi

    def atom(self):
        c = self.take()
        if c == "(":
            if self.peek() == "?":
                self.i += 1
                if self.s.startswith(":", self.i):
                    self.i += 1
                elif self.s.startswith("P<", self.i) or self.s.startswith("<", self.i):
                    end = self.s.find(">", self.i)
                    if end < 0:
                        raise RegexError("unterminated group name")
                    self.i = end + 1
                else:
                    raise RegexError("lookaround and flags are not supported")
            node = self.alt()
            if self.take() != ")":
                raise RegexError("missing )")
            return node
        if c == ")":
            raise RegexError("unbalanced )")
        if c in "*+?":
            raise RegexError(f"nothing to repeat before {c!r}")
        if c == "[":
            return ("set", *self._class())
        if c == ".":
            return ("set", frozenset("\n"), True)
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == "\\":
            return ("set", *self._escape())
        return ("set", frozenset(c), False)

    def _escape(self) -> tuple[frozenset, bool]:
        c = self.take()
        for ch, chars in (("d", _DIGIT), ("w", _WORD), ("s", _SPACE)):
            if c == ch:
                return chars, False
            if c == ch.upper():
                return chars, True
        if c in "tnrfv":
            return frozenset({"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}[c]), False
        if c.isalnum():
            raise RegexError(f"escape \\{c} is not supported")
        return frozenset(c), False

    def _class(self) -> tuple[frozenset, bool]:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        chars: set = set()
        first = True
        while True:
            c = self.take()
            if c == "]" and not first:
                return frozenset(chars), negated
            first = False
            if c == "\\":
                esc, neg = self._escape()
                if neg:
                    raise RegexError("a negated class escape inside [...] is not supported")
                chars |= esc
                continue
            if c == "[" and self.peek() == ":":
                raise RegexError("POSIX classes are not supported")
            if self.peek() == "-" and self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                hi = self.take()
                if hi == "\\":
                    hi = self.take()
                if ord(hi) < ord(c) or ord(hi) - ord(c) > 0x10000:
                    raise RegexError(f"bad range {c}-{hi}")
                chars.update(chr(x) for x in range(ord(c), ord(hi) + 1))
            else:
                chars.add(c)


class TopicRegex:
    """A compiled pattern; ``fullmatch(name)`` in time linear in ``len(name)``."""

    __slots__ = ("pattern", "_prog")

    def __init__(self, pattern: str):
        if len(pattern) > MAX_PATTERN:
            raise RegexError(f"pattern of {len(pattern)} characters (at most {MAX_PATTERN})")
        p = _Parser(pattern)
        tree = p.alt()
        if p.i != len(pattern):
            raise RegexError(f"unexpected {pattern[p.i]!r} at {p.i}")
        self.pattern = pattern
        self._prog: list = []
        self._emit(tree)
        self._prog.append(("match",))

    def _add(self, ins) -> int:
        if len(self._prog) >= MAX_PROGRAM:
            raise RegexError(f"the pattern compiles to more than {MAX_PROGRAM} steps")
        self._prog.append(ins)
        return len(self._prog) - 1

    def _emit(self, node) -> None:
        kind = node[0]
        if kind == "cat":
            for n in node[1]:
                self._emit(n)
        elif kind == "alt":
            jumps = []
            for n in node[1][:-1]:
                split = self._add(None)
                self._emit(n)
                jumps.append(self._add(None))
                self._prog[split] = ("split", split + 1, len(self._prog))
            self._emit(node[1][-1])
            for j in jumps:
                self._prog[j] = ("jmp", len(self._prog))
        elif kind == "rep":
            _, sub, lo, hi = node
            for _ in range(lo):
                self._emit(sub)
            if hi is None:
                split = self._add(None)
                self._emit(sub)
                self._add(("jmp", split))
                self._prog[split] = ("split", split + 1, len(self._prog))
            else:
                splits = []
                for _ in range(hi - lo):
                    splits.append(self._add(None))
                    self._emit(sub)
                for s in splits:
                    self._prog[s] = ("split", s + 1, len(self._prog))
        else:  # set, bol, eol
            self._add(node)

    def fullmatch(self, name: str) -> bool:
        prog, n = self._prog, len(name)

        def closure(pcs, pos: int) -> set:
            out, stack, seen = set(), list(pcs), set()
            while stack:
                pc = stack.pop()
                if pc in seen:
                    continue
                seen.add(pc)
                ins = prog[pc]
                op = ins[0]
                if op == "jmp":
                    stack.append(ins[1])
                elif op == "split":
                    stack += (ins[1], ins[2])
                elif op == "bol":
                    if pos == 0:
                        stack.append(pc + 1)
                elif op == "eol":
                    if pos == n:
                        stack.append(pc + 1)
                else:
                    out.add(pc)
            return out

        current = closure([0], 0)
        for pos, ch in enumerate(name):
            nxt = [pc + 1 for pc in current if prog[pc][0] == "set" and ((ch in prog[pc][1]) != prog[pc][2])]
            if not nxt:
                return False
            current = closure(nxt, pos + 1)
        return any(prog[pc][0] == "match" for pc in current)
