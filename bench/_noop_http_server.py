"""The floor of a Python HTTP server: answers every request with ``200 {}``
and does nothing else (uvloop when installed, as ``vqs serve`` uses).

    python bench/_noop_http_server.py PORT

bench/server_bench.py measures the same client against it: no Python server
can answer one-message requests faster than this one on the same machine.
"""

from __future__ import annotations

import asyncio
import sys

ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
MAX_HEAD = 64 * 1024


class NoopHTTP(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self.transport.close()
                return
            length = 0
            for line in self.buf[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length:]
            self.transport.write(ANSWER)


def main() -> None:
    try:
        import uvloop
        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    loop.run_until_complete(loop.create_server(NoopHTTP, "127.0.0.1", int(sys.argv[1])))
    loop.run_forever()


if __name__ == "__main__":
    main()
