"""The kill tests' switch: the process SIGKILLs itself at the ``kill_at``-th call of the
named ``vqs.disk.fs`` functions (counted together), just before that call runs. Child
processes import it (the tests directory on their path) before the code under test runs."""

from __future__ import annotations

import os
import signal


def kill_at_call(kill_at: int, names) -> list:
    """Wrap ``vqs.disk.fs``'s ``names``; 0: count, never kill. Returns the count
    (a one-element list, updated as calls are made)."""
    from vqs.disk import fs

    calls = [0]

    def counted(real):
        def f(*a, **k):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        return f

    for name in names:
        setattr(fs, name, counted(getattr(fs, name)))
    return calls
