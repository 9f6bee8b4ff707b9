"""A stateful Quix Streams application (run in its own environment by
test_stream_processors.py): counts records per key in a state store backed by a
compacted changelog topic, and writes each key's running count to an output
topic.

    python quix_app.py BROKER GROUP STATE_DIR INPUT OUTPUT COUNT
"""
import sys

from quixstreams import Application


def main() -> None:
    broker, group, state_dir, input_topic, output_topic, count = sys.argv[1:7]
    app = Application(broker_address=broker, consumer_group=group, state_dir=state_dir,
                      auto_offset_reset="earliest", commit_every=1, loglevel="WARNING")
    src = app.topic(input_topic, key_deserializer="str", value_deserializer="json")
    out = app.topic(output_topic, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(src)

    def count_key(value, key, timestamp, headers, state):
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"key": key, "n": n, "seq": value["seq"]}

    sdf = sdf.apply(count_key, stateful=True, metadata=True)
    sdf.to_topic(out)
    app.run(sdf, count=int(count), timeout=60, collect=False)


if __name__ == "__main__":
    main()
