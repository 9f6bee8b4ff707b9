"""asyncio.Queue's shutdown (Python 3.13) for 3.11 and 3.12: ``QueueShutDown``
and a queue base class whose put, get, their nowait forms and ``shutdown``
are CPython 3.13.0's (Lib/asyncio/queues.py, PSF License Version 2). On 3.13+
both are asyncio's own, so AsyncHybridQueue behaves the same on every
supported Python.
"""

from __future__ import annotations

import asyncio

__all__ = ["QueueShutDown", "_ShutdownBackport", "_wait_for_room"]


async def _wait_for_room(q) -> None:
    """asyncio.Queue.put's wait for room as Python 3.13 has it (copied from CPython 3.13.0
    Lib/asyncio/queues.py, PSF License Version 2): QueueShutDown once shut down."""
    while q.full():
        if q._is_shutdown:
            raise QueueShutDown
        putter = q._get_loop().create_future()
        q._putters.append(putter)
        try:
            await putter
        except:  # (asyncio's own: cancellation included)
            putter.cancel()
            try:
                q._putters.remove(putter)
            except ValueError:
                pass
            if not q.full() and not putter.cancelled():
                q._wakeup_next(q._putters)
            raise


if hasattr(asyncio, "QueueShutDown"):  # Python 3.13+
    QueueShutDown = asyncio.QueueShutDown
    _ShutdownBackport: type = asyncio.Queue
else:

    class QueueShutDown(Exception):  # type: ignore[no-redef]
        """Raised when putting on to or getting from a shut-down asyncio queue:
        a backport of Python 3.13's ``asyncio.QueueShutDown`` for 3.11 and 3.12
        (on 3.13+ ``vqs.QueueShutDown`` *is* ``asyncio.QueueShutDown``). Like
        ``vqs.ShutDown`` it is not a VQSError: it has to be the stdlib's own
        class where the stdlib has one."""

    class _ShutdownBackport(asyncio.Queue):  # type: ignore[no-redef]
        """Python 3.13's ``asyncio.Queue`` shutdown for 3.11/3.12: its put, get,
        their nowait forms, ``shutdown`` and ``_format``, copied from
        CPython 3.13.0 Lib/asyncio/queues.py (PSF License Version 2)."""

        _is_shutdown = False

        def _format(self):
            result = super()._format()
            if self._is_shutdown:
                result += ' shutdown'
            return result

        async def put(self, item):
            await _wait_for_room(self)
            return self.put_nowait(item)

        def put_nowait(self, item):
            if self._is_shutdown:
                raise QueueShutDown
            return super().put_nowait(item)

        async def get(self):
            while self.empty():
                if self._is_shutdown and self.empty():
                    raise QueueShutDown
                getter = self._get_loop().create_future()
                self._getters.append(getter)
                try:
                    await getter
                except:  # (asyncio's own: cancellation included)
                    getter.cancel()
                    try:
                        self._getters.remove(getter)
                    except ValueError:
                        pass
                    if not self.empty() and not getter.cancelled():
                        self._wakeup_next(self._getters)
                    raise
            return self.get_nowait()

        def get_nowait(self):
            if self.empty() and self._is_shutdown:
                raise QueueShutDown
            return super().get_nowait()

        def shutdown(self, immediate=False):
            self._is_shutdown = True
            if immediate:
                while not self.empty():
                    self._get()
                    if self._unfinished_tasks > 0:
                        self._unfinished_tasks -= 1
                if self._unfinished_tasks == 0:
                    self._finished.set()
            while self._getters:
                getter = self._getters.popleft()
                if not getter.done():
                    getter.set_result(None)
            while self._putters:
                putter = self._putters.popleft()
                if not putter.done():
                    putter.set_result(None)
