"""A Faust (faust-streaming, aiokafka underneath) application with a table
(run in its own environment by test_stream_processors.py): counts records per
key in a table backed by a compacted changelog topic, and writes each key's
running count to an output topic. It writes ``ready`` on stdout once the worker
has recovered its table and resumed its input (an ``app.task``: Faust starts
those after table recovery).

    python faust_app.py BROKER APP_ID DATA_DIR INPUT OUTPUT
"""
import json
import os
import socket
import sys

import faust


def main() -> None:
    broker, app_id, data_dir, input_topic, output_topic = sys.argv[1:6]
    app = faust.App(app_id, broker=f"kafka://{broker}", store="memory://", datadir=data_dir,
                    topic_partitions=2, topic_replication_factor=1, web_enabled=False,
                    consumer_auto_offset_reset="earliest")
    src = app.topic(input_topic, key_type=str, value_type=bytes, key_serializer="raw", value_serializer="raw")
    out = app.topic(output_topic, key_type=str, value_type=bytes, key_serializer="raw", value_serializer="raw")
    counts = app.Table("counts", default=int, partitions=2)

    @app.agent(src)
    async def count(stream):
        async for key, value in stream.items():
            key = key.decode() if isinstance(key, bytes) else key
            counts[key] += 1
            await out.send(key=key.encode(), value=json.dumps({"key": key, "n": counts[key],
                                                                "seq": json.loads(value)["seq"]}).encode())

    @app.task
    async def ready():
        os.write(1, b"ready\n")  # the worker's stdout itself: Faust turns print() into log lines

    # the worker starts its web server whatever web_enabled says: on loopback, on a free port
    # (its default, 0.0.0.0:6066, is Spark's standalone REST port too)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sys.argv = [sys.argv[0], "worker", "--loglevel", os.environ.get("FAUST_LOGLEVEL", "warn"),
                "--web-bind", "127.0.0.1", "--web-host", "127.0.0.1", "--web-port", str(port)]
    app.main()


if __name__ == "__main__":
    main()
