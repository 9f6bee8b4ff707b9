"""Opening a stored queue as the type its configuration names.

``open_queue`` reads ``queue.json``/``queue.meta`` (config_files.py) and builds a
``FifoQueue`` or a ``StandardQueue``: the receive strategy is chosen once,
here, so no hot path asks which type it serves. It lives apart from core.py
because both queue types subclass ``Queue``: core must not import them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .config_files import read_files
from .core import Queue
from .fifo import FifoQueue
from .standard import StandardQueue


def open_queue(path: str, name: str, *, clock: Callable[[], float] = time.time,
               resolver: Callable[[str], Queue | None] | None = None,
               lister: Callable[[], list] | None = None) -> Queue:
    """Open the queue stored in ``path``: a FifoQueue or a StandardQueue, as its
    configuration says. ``resolver`` finds other queues by name (the dead-letter
    queue, redrive targets), ``lister`` lists the open ones."""
    stored = read_files(path)
    kind = FifoQueue if stored.config.fifo else StandardQueue
    return kind(path, name, stored, clock=clock, resolver=resolver, lister=lister)
