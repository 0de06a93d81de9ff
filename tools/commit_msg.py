"""Check a commit message: a subject of at most 72 characters, then a blank line, then the body.

Run by the ``commit-msg`` hook of ``.pre-commit-config.yaml`` (``pre-commit install`` installs
it, with the ``pre-commit`` hook) on the file git wrote the message to; also by hand:
``python tools/commit_msg.py FILE``. Lines git strips (``#`` comments, the scissors line and
what follows it) are left out first. Exit status 0 when the message follows the convention of
CONTRIBUTING.md, 1 with one line per problem on stderr, 2 on a usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72
SCISSORS = "# ------------------------ >8 ------------------------"


def problems(message: str) -> list[str]:
    """What breaks the convention in ``message`` (empty when nothing does)."""
    lines = message.split(SCISSORS)[0].splitlines()
    lines = [line.rstrip() for line in lines if not line.startswith("#")]
    while lines and not lines[0]:
        lines.pop(0)
    if not lines:
        return ["the message is empty: write a subject that says what changed"]
    found = []
    subject = lines[0]
    if len(subject) > MAX_SUBJECT:
        found.append(
            f"the subject has {len(subject)} characters, more than {MAX_SUBJECT}: say what "
            "changed in a few words, and move the why and the measurements to the body"
        )
    if len(lines) > 1 and lines[1]:
        found.append("the second line must be blank: it separates the subject from the body")
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python tools/commit_msg.py COMMIT_MESSAGE_FILE", file=sys.stderr)
        return 2
    found = problems(Path(args[0]).read_text(encoding="utf-8"))
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
