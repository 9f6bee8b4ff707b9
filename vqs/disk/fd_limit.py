"""The process's open-file limit (``RLIMIT_NOFILE``): raised to the hard limit once per
process, as servers do at start-up, and named in ``TooManyOpenFiles`` when still hit.

Invariant: the soft limit is only ever raised here, never lowered.
"""

from __future__ import annotations

import errno
import logging
import resource

from ..errors import TooManyOpenFiles

logger = logging.getLogger("vqs.disk")

FD_EXHAUSTED = (errno.EMFILE, errno.ENFILE)
#: where "the hard limit" stops when it is unlimited or huge (fs.nr_open)
RAISE_CEILING = 1 << 20

_raised = False
raised_from: int | None = None


def limit_raised_from() -> int | None:
    """The soft limit before start-up raised it (None: not raised)."""
    return raised_from


def open_file_limits() -> tuple[int, int]:
    """(soft, hard) ``RLIMIT_NOFILE`` of this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return (RAISE_CEILING if soft == inf else soft), (RAISE_CEILING if hard == inf else hard)


def raise_open_file_limit(target: int | None = None, *, quiet: bool = False) -> int:
    """Raise the soft limit to ``target`` (default, once per process: the hard limit, at most
    ``RAISE_CEILING``); returns the soft limit now. Logged at INFO unless ``quiet``."""
    global _raised, raised_from
    soft, hard = open_file_limits()
    if target is None:
        if _raised:
            return soft
        _raised = True
        target = hard
    target = min(target, hard, RAISE_CEILING)
    if target <= soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    except (ValueError, OSError) as e:
        logger.warning("could not raise the open-file soft limit (RLIMIT_NOFILE) from %d to %d: %s",
                       soft, target, e)
        return soft
    raised_from = soft if raised_from is None else raised_from
    if not quiet:
        logger.info("raised the open-file soft limit (RLIMIT_NOFILE) from %d to %d (hard limit %d)",
                    soft, target, hard)
    return target


def too_many_open_files(path: str, err: OSError, *, held: int, cap: int) -> TooManyOpenFiles:
    """The error for ``err`` (EMFILE/ENFILE) opening ``path``, ``held`` files open in the cache."""
    soft, hard = open_file_limits()
    if err.errno == errno.ENFILE:
        what = "the system-wide open-file limit (fs.file-max) is reached"
        fix = "raise fs.file-max (sysctl) or close other processes' files"
    else:
        what = f"this process reached its open-file limit (RLIMIT_NOFILE: soft {soft}, hard {hard})"
        fix = (f"raise the limit (ulimit -n, LimitNOFILE= in a systemd unit) or lower "
               f"max_open_files (now {cap}; VQS_MAX_OPEN_FILES, vqs serve --max-open-files, "
               f"vqs.set_max_open_files)")
    return TooManyOpenFiles(
        f"opening {path} failed: {what}, with {held} segment files open in VQS's file cache; {fix}",
        path=path, soft_limit=soft, hard_limit=hard, max_open_files=cap,
    )
