"""A Python process that runs documentation snippets for tests/test_docs_snippets.py.

Run as ``python docs_kernel.py LOGFILE`` in the directory the snippets should see
as their working directory. It reads one JSON request per line on stdin,
``{"page": ..., "where": "page:line", "code": ...}``, runs the code in the
namespace of that page (one namespace per page, kept between requests, as a
reader's Python session), and answers one JSON line on stdout: ``{"ok": true}``
or ``{"ok": false, "error": "<traceback>"}``. What the snippets print (and any
child process, e.g. Spark's JVM) goes to LOGFILE. At end of input it closes the
brokers, clients and queues the snippets left open and stops a SparkSession
they started.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    namespaces: dict[str, dict] = {}
    for line in sys.stdin:
        req = json.loads(line)
        ns = namespaces.setdefault(req["page"], {"__name__": "__main__"})
        print(f"----- {req['where']}", flush=True)
        try:
            exec(compile(req["code"], req["where"], "exec"), ns)
            reply = {"ok": True}
        except BaseException:
            reply = {"ok": False, "error": traceback.format_exc()}
        sys.stdout.flush()
        proto.write(json.dumps(reply) + "\n")
    _clean_up(namespaces)


def _clean_up(namespaces: dict) -> None:
    import vqs

    for ns in namespaces.values():
        for v in list(ns.values()):
            if isinstance(v, vqs.Broker | vqs.HybridQueue | vqs.Log) or type(v).__name__ in ("Client", "Consumer"):
                try:
                    v.close()
                except Exception:
                    pass
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()


if __name__ == "__main__":
    main()
