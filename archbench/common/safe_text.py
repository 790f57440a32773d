"""What a value may look like before it is written into a generated script or configuration file.

archbench writes an sbatch script, slurm.conf, each node's sshd_config, blocks of ~/.ssh/config
and /etc/hosts, and hostfiles. Their formats read one directive per line, and most read one word
per value with quoting rules of their own. A value from the user (a spec's path, a cluster's name)
that holds a newline would start a new directive or shell command; one that holds a blank, a
quote or a `$` would split or change the word. Such values are refused, with one line naming the
value and what it may hold, before anything is written: refusing is simpler to trust than
escaping for five different readers.

A file name made from input data (a trace's step, a file's stem) is built from `file_token`: a
value from a file chooses neither the folder (`/`, `..`) nor an odd name (a blank, a quote, a
leading `-` or `.`).
"""

from __future__ import annotations

import re

from archbench.common.errors import UsageError

# C0 and C1 control characters (newline, carriage return, tab, escape, NEL) and the Unicode line
# and paragraph separators, which some readers also take as the end of a line.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A word every generated format reads as one word without quoting: no blank, quote, backslash,
# `$`, backtick, `#`, `%` (sbatch expands it in file names), `;`, `&`, `|`, `<`, `>`, `*`, `?`.
PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:@+,=-]+")
# What a file name made from data keeps; every other run of characters becomes one `_`.
_NOT_TOKEN = re.compile(r"[^A-Za-z0-9_.+-]+")
MAX_TOKEN_CHARS = 100


def one_line(value: str, what: str) -> str:
    """`value` when it holds no line break or other control character; UsageError otherwise."""
    found = _CONTROL.search(value)
    if found:
        raise UsageError(
            f"{what} {value!r} holds a control character ({found.group()!r}); "
            "it would break the line it is written on"
        )
    return value


def plain_word(value: str, what: str) -> str:
    """`value` when it is one plain word (letters, digits and `_ . / : @ + , = -`); UsageError
    otherwise."""
    one_line(value, what)
    if not PLAIN_WORD.fullmatch(value):
        odd = sorted({char for char in value if not PLAIN_WORD.fullmatch(char)})
        shown = " ".join(repr(char) for char in odd) or "nothing"
        raise UsageError(
            f"{what} {value!r} holds {shown}: it is written into a generated file as one plain "
            "word (letters, digits and _ . / : @ + , = -)"
        )
    return value


def shown(text: str) -> str:
    """`text` with every control character written as an escape (`\\n`): a message that quotes a
    user's value stays on one line."""
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def file_token(value: object, fallback: str = "x") -> str:
    """`value` as a piece of a file name: letters, digits and `_ . + -` only (other runs of
    characters become `_`), not starting with `.` or `-`, at most MAX_TOKEN_CHARS; `fallback`
    when nothing is left. `x/../../tmp/E` becomes `x_.._.._tmp_E`: one name, in its folder."""
    token = _NOT_TOKEN.sub("_", str(value))[:MAX_TOKEN_CHARS].lstrip(".-")
    return token or fallback
