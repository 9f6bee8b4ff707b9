"""The log cleaner's worker process: a pass's reading and writing (work.py)
done in a process of its own, so that its CPU never holds the interpreter lock of
the process that owns the log (a server's listeners, appends and reads).

``Worker`` (the owner's side) starts a Python running ``main`` here for
one pass over one log and asks it, over its stdin and stdout (pickled tuples,
one answer per request): ``open`` (the directory, the sealed segments' bases and
sizes, the quarantine gaps), ``map``, then ``write`` for each group; each answer
is ``(True, result)`` or ``(False, exception)``. The owner keeps the planning,
the space taken, and every step that changes what the log is: the commit rename
and the swap, under the log's lock (storage's ``replace_sealed``).

Crash reasoning. The worker reads only sealed segments' files, which nothing
writes again, and writes only ``{first}.cleaned``, which no open log reads: a
worker killed at any point leaves the log as it was, and its ``.cleaned`` file
is deleted by the owner (``Worker`` raises CleanerWorkerError, the pass ends)
or by the next open (storage's ``finish_swaps``). The worker holds the log's
directory lock (the descriptor is inherited: the same lock, until the owner
releases it) and is killed when the thread that started it ends
(PR_SET_PDEATHSIG where Linux has it): a worker outliving a crashed owner can
neither race a new owner's pass for the same ``.cleaned`` name nor leave one
after its open. It ignores SIGINT: a terminal's Ctrl-C is the owner's to act on
(it closes the worker's input, or dies and takes the worker with it).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys

from ..disk import fs
from ..errors import CleanerWorkerError
from ..storage import Segment, dir_lock_fd, open_sealed
from .work import CleanWork

#: the worker's CPU priority below its owner's (``os.nice``): where both want a core, the
#: owner's appends and reads go first and the pass takes what is left. Not SCHED_IDLE: on a
#: machine whose cores are busy, a worker that runs only on an idle core makes no progress
#: at all, and the compacted logs grow for as long as the load lasts.
WORKER_NICE = 10
#: how long ``close`` waits for the worker to exit on its own before killing it
EXIT_WAIT_S = 10.0
#: how often an owner waiting for an answer asks its pass's ``stop``
STOP_POLL_S = 0.2
PR_SET_PDEATHSIG = 1
#: the worker's entry: argv is (owner's pid, the directory holding this ``vqs``), put first on
#: its path so that it runs this code whatever its working directory holds
_MAIN = ("import sys; sys.path.insert(0, sys.argv[2]); from vqs.cleaner.worker import main; "
         "sys.exit(main(sys.argv[1:]))")


def _vqs_root() -> str:
    """The directory holding this ``vqs`` package (the worker imports the same code)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Worker:
    """A worker process for one pass over ``log`` (``segs``: its sealed segments, in
    order); the same calls as work.CleanWork. Close it when the pass ends."""

    def __init__(self, log, segs: list[Segment], io_max_bytes_per_s: float | None = None, stop=None):
        self.path = log.path
        self._stop = stop  # true: the pass is to end now (the worker is killed, not waited for)
        fd = dir_lock_fd(log)
        fds = (fd,) if fd is not None else ()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, str(os.getpid()), _vqs_root()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=fds)
        try:
            gaps = dict(segs[0].gaps) if segs else {}
            self._call("open", self.path, [(s.base_offset, s.size) for s in segs], gaps, io_max_bytes_per_s)
        except BaseException:
            self.close()
            raise

    def map(self, first_dirty: int, max_map_bytes: int, producers_covered: int = 0) -> int:
        return self._call("map", first_dirty, max_map_bytes, producers_covered)

    def write(self, group: list[int], codec: int, clean_point: int, horizon: int) -> tuple[int, int]:
        return self._call("write", group, codec, clean_point, horizon)

    def _call(self, *request):
        proc = self.proc
        try:
            pickle.dump(request, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.flush()
            while self._stop is not None and not select.select([proc.stdout], [], [], STOP_POLL_S)[0]:
                if self._stop():  # a worker killed at any point leaves the log as it was
                    proc.kill()
                    raise CleanerWorkerError(f"the log cleaner's pass over {self.path} was stopped")
            ok, value = pickle.load(proc.stdout)  # (the wait releases the interpreter lock)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):
            self.close()
            raise CleanerWorkerError(
                f"the log cleaner's worker process for {self.path} ended (exit status {proc.returncode})"
            ) from None
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """End the worker: it exits at the end of its input; killed if it has not after EXIT_WAIT_S."""
        proc = self.proc
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _portable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling (OSError with its errno, most VQSErrors), else a
    CleanerWorkerError with its message."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return CleanerWorkerError(f"{type(e).__name__}: {e}")


def _die_with_parent() -> None:
    lib = fs.libc()
    if lib:
        try:
            lib.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (AttributeError, TypeError):
            pass


def _serve(requests, answers) -> None:
    work = None
    while True:
        try:
            op, *args = pickle.load(requests)
        except EOFError:
            return
        try:
            if op == "open":
                directory, specs, gaps, io_max_bytes_per_s = args
                segs = [open_sealed(directory, base, size, gaps) for base, size in specs]
                work = CleanWork(directory, segs, io_max_bytes_per_s)
                answer = (True, None)
            elif op == "map":
                answer = (True, work.map(*args))
            elif op == "write":
                answer = (True, work.write(*args))
            else:
                answer = (False, CleanerWorkerError(f"unknown request {op!r}"))
        except Exception as e:
            answer = (False, _portable(e))
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


def main(argv: list[str]) -> int:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (a terminal's Ctrl-C is the owner's to act on)
    if os.getppid() != int(argv[0]):
        return 1  # the owner is already gone
    os.nice(WORKER_NICE)
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, not into the answers
    _serve(requests, answers)
    return 0
