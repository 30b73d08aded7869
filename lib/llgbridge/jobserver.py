"""Make's jobserver: the job slots `make -jN` shares with the commands it runs.

A recipe marked `+` is handed Make's slots (`--jobserver-auth=R,W`, a pipe, in Make 4.3;
`--jobserver-auth=fifo:PATH` in Make 4.4) through MAKEFLAGS. A command that runs more than one
process at a time takes one slot per extra process and gives it back when that process ends, so
`make -j2 report` runs two workers beside whatever else Make runs, and a plain `make` runs one.
"""

from __future__ import annotations

import os


class Jobserver:
    """The slots beyond the one this command holds: taken without blocking, always given back.

    The pipe is reopened through /proc with O_NONBLOCK, a file description of its own, so Make's
    own blocking reads are untouched.
    """

    def __init__(self, makeflags: str) -> None:
        self.rfd = self.wfd = -1
        self.held: list[bytes] = []
        auth = next(
            (w.split("=", 1)[1] for w in makeflags.split() if w.startswith(("--jobserver-auth=", "--jobserver-fds="))),
            "",
        )
        try:
            if auth.startswith("fifo:"):
                self.rfd = os.open(auth[5:], os.O_RDONLY | os.O_NONBLOCK)
                self.wfd = os.open(auth[5:], os.O_WRONLY)
            elif "," in auth:
                r, w = (int(x) for x in auth.split(",", 1))
                os.fstat(r), os.fstat(w)  # closed when the recipe is not marked `+`: then no extra slot
                self.rfd = os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK)
                self.wfd = w
        except (OSError, ValueError):
            self.rfd = self.wfd = -1

    @property
    def usable(self) -> bool:
        return self.rfd >= 0

    def take(self) -> bool:
        if self.rfd < 0:
            return False
        try:
            got = os.read(self.rfd, 1)
        except BlockingIOError:
            return False
        if not got:
            return False
        self.held.append(got)
        return True

    def give(self) -> None:
        if self.held:
            os.write(self.wfd, self.held.pop())

    def close(self) -> None:
        while self.held:
            self.give()
        if self.rfd >= 0:
            os.close(self.rfd)
            self.rfd = -1


def make_flags() -> tuple[bool, int | None, str]:
    """(dry run, `-jN` or None, MAKEFLAGS) from the environment Make gives a recipe."""
    flags = os.environ.get("MAKEFLAGS", "")
    words = flags.split()
    # -n, -q and -t run a `+` recipe all the same: the pool then only says what it would run
    dry = bool(words) and not words[0].startswith("-") and any(c in words[0] for c in "nqt")
    jobs: int | None = None
    for w in words:
        if w.startswith("-j"):
            jobs = int(w[2:]) if w[2:].isdigit() else (os.cpu_count() or 1)
    return dry, jobs, flags
