"""Bad options fail at planning, with a message naming the option."""

from __future__ import annotations

import pytest
from spark_helpers import make_topic

from vqs.errors import ConfigError
from vqs.spark.options import parse_read_options, parse_write_options
from vqs.spark.stream_reader import rate_limit

BASE = {"path": "/data", "topic": "t"}


@pytest.mark.parametrize(
    "opts, streaming, needle",
    [
        ({"topic": "t"}, False, "option 'path'"),
        ({"path": "/d", "url": "http://h:1", "topic": "t"}, False, "'path' and 'url'"),
        ({"url": "ftp://h", "topic": "t"}, False, "option 'url'"),
        ({"path": "/d"}, False, "option 'topic'"),
        ({"path": "/d", "topic": "a", "topics": "b"}, False, "'topic' and 'topics'"),
        ({**BASE, "topic": "../etc"}, False, "option 'topic'"),
        ({**BASE, "startingOffsets": "first"}, False, "option 'startingOffsets'"),
        ({**BASE, "startingOffsets": '{"t": {"0": "x"}}'}, False, "option 'startingOffsets'"),
        ({**BASE, "startingOffsets": '{"u": {"0": 1}}'}, False, "option 'startingOffsets' names topic 'u'"),
        ({**BASE, "startingOffsets": "latest"}, False, "option 'startingOffsets' cannot be 'latest'"),
        ({**BASE, "endingOffsets": "earliest"}, False, "option 'endingOffsets' cannot be 'earliest'"),
        ({**BASE, "endingOffsets": "latest"}, True, "option 'endingOffsets' is for batch"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "option 'maxOffsetsPerTrigger' must be >= 1"),
        ({**BASE, "maxOffsetsPerTrigger": "lots"}, True, "option 'maxOffsetsPerTrigger' must be an integer"),
        ({**BASE, "minPartitions": "-3"}, False, "option 'minPartitions'"),
        ({**BASE, "failOnDataLoss": "maybe"}, False, "option 'failOnDataLoss'"),
        ({**BASE, "includeHeaders": "yes please"}, False, "option 'includeHeaders'"),
        ({**BASE, "startingTimestamp": "yesterday"}, False, "option 'startingTimestamp'"),
        ({**BASE, "startingTimestamp": "10", "endingTimestamp": "5"}, False, "option 'endingTimestamp'"),
        ({**BASE, "startingoffset": "earliest"}, False, "did you mean 'startingOffsets'"),
        ({**BASE, "vectors": "columnar"}, False, "option 'vectors' must be 'direct' or 'arrow', got 'columnar'"),
    ],
)
def test_bad_read_options(opts, streaming, needle):
    lower = {k.lower(): v for k, v in opts.items()}  # Spark lower-cases option names
    with pytest.raises(ConfigError) as e:
        parse_read_options(lower, streaming=streaming)
    assert needle in str(e.value)


def test_good_read_options():
    o = parse_read_options({"path": "/d", "topics": "a, b,a", "startingoffsets": '{"a": {"0": 5, "1": -2}}',
                            "maxoffsetspertrigger": "100", "checkpointlocation": "/x"}, streaming=True)
    assert o.topics == ("a", "b") and o.starting == {"a": {0: 5, 1: -2}} and o.max_offsets_per_trigger == 100
    assert o.fail_on_data_loss and not o.include_headers
    assert parse_read_options({"path": "/d", "topic": "a"}, streaming=True).starting == "latest"
    assert parse_read_options({"path": "/d", "topic": "a"}, streaming=False).starting == "earliest"
    assert parse_write_options({"path": "/d"}).topic is None


def test_rate_limit_is_proportional_and_exact():
    start = {"t": {"0": 0, "1": 10, "2": 5}}
    latest = {"t": {"0": 100, "1": 60, "2": 5}}
    assert rate_limit(start, latest, 1000) == latest
    end = rate_limit(start, latest, 30)
    assert end == {"t": {"0": 20, "1": 20, "2": 5}}
    end = rate_limit(start, latest, 1)
    assert sum(end["t"][p] - start["t"][p] for p in "012") == 1
    # a partition new since start is read from 0
    assert rate_limit({"t": {}}, {"t": {"0": 3}}, 2) == {"t": {"0": 2}}


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
@pytest.mark.parametrize(
    "opts, needle",
    [
        ({"topic": "missing"}, "option 'topic': topic 'missing' does not exist"),
        ({"topic": "t", "startingOffsets": "[1]"}, "option 'startingOffsets'"),
        ({"topic": "t", "startingOffsets": '{"t": {"0": 999}}'}, "option 'startingOffsets': offset 999"),
        ({"topic": "t", "minPartitions": "0"}, "option 'minPartitions'"),
        # a partition the topic lacks is refused, not silently read from the default
        ({"topic": "t", "startingOffsets": '{"t": {"3": 0}}'},
         "option 'startingOffsets' names partition 3 of topic 't', which has 1 partition (0-0)"),
        ({"topic": "t", "endingOffsets": '{"t": {"0": 1, "1": 1}}'},
         "option 'endingOffsets' names partition 1 of topic 't', which has 1 partition (0-0)"),
        # an inverted range is refused (as Spark's Kafka source does), not read as empty
        ({"topic": "t", "startingOffsets": '{"t": {"0": 1}}', "endingOffsets": '{"t": {"0": 0}}'},
         "option 'endingOffsets': end offset 0 of t/0 is before its starting offset 1"),
        # both readers refuse a misspelled option (the JVM reader checks for both)
        ({"topic": "t", "startingOffset": "earliest"}, "did you mean 'startingOffsets'?"),
        ({"topic": "t", "maxBytesPerRaed": "10"}, "did you mean 'maxBytesPerRead'?"),
    ],
)
def test_bad_options_fail_at_planning(spark, tmp_path, opts, needle):
    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=1, records={0: [(b"x", None, None, 1)]})
    r = spark.read.format("vqs").option("path", path)
    for k, v in opts.items():
        r = r.option(k, v)
    with pytest.raises(Exception) as e:
        r.load().collect()
    assert needle in str(e.value)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
@pytest.mark.parametrize(
    "opts, needles",
    [
        ({"startingOffsets": "bogus"}, ["option 'startingOffsets' must be", "got 'bogus'"]),
        ({"vectors": "bogus"}, ["option 'vectors' must be 'direct' or 'arrow', got 'bogus'"]),
        ({"path": ""}, ["option 'path' (a VQS data directory) or 'url'", "is required"]),
        ({"failOnDataLoss": "perhaps"}, ["option 'failOnDataLoss' must be true or false, got 'perhaps'"]),
        ({"includeHeader": "true"}, ["unknown read option 'includeheader': did you mean 'includeHeaders'?"]),
        # what needs the data: checked by the JVM provider for both readers too
        ({"topic": "missing"}, ["option 'topic': topic 'missing' does not exist in"]),
        ({"path": "/nonexistent/vqs-data"}, ["option 'path': '/nonexistent/vqs-data' is not a directory"]),
        ({"path": "", "url": "http://127.0.0.1:9", "timeoutMs": "2000"},
         ["option 'url': cannot reach a VQS server at http://127.0.0.1:9"]),
    ],
)
def test_a_bad_option_is_named_on_the_first_line_of_the_error(spark, tmp_path, opts, needles):
    """Not "An error occurred while calling o44.load" (a Py4JJavaError) nor
    "[PYTHON_DATA_SOURCE_ERROR] ... Traceback": the JVM provider checks the
    options for both readers and raises an IllegalArgumentException, which
    PySpark raises as its own, with the message first."""
    from pyspark.errors import IllegalArgumentException

    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=1, records={0: [(b"x", None, None, 1)]})
    r = spark.read.format("vqs").option("path", path).option("topic", "t")
    for k, v in opts.items():
        r = r.option(k, v)
    with pytest.raises(IllegalArgumentException) as e:
        r.load().collect()
    line = str(e.value).splitlines()[0]
    assert line.startswith(needles[0]) and all(n in line for n in needles), line


UNKNOWN = [
    # Kafka's options: VQS's equivalent named
    ("startingOffsetsByTimestamp", '{"t": {"0": 4102444800000}}',
     "unknown read option 'startingoffsetsbytimestamp': Kafka's 'startingOffsetsByTimestamp' is "
     "'startingTimestamp' (one timestamp, every partition) here"),
    ("subscribePattern", "t.*", "Kafka's 'subscribePattern' is 'topics' (a list of names; there are no patterns)"),
    ("assign", '{"t": [0]}', "unknown read option 'assign': Kafka's 'assign' is 'topic'/'topics'"),
    ("kafka.bootstrap.servers", "h:9092",
     "unknown read option 'kafka.bootstrap.servers': the Kafka client's settings do not apply; "
     "VQS takes 'url' (a server, with 'token') or 'path'"),
    ("maxRecordsPerTrigger", "10", "Kafka's 'maxRecordsPerTrigger' is 'maxOffsetsPerTrigger' here"),
    # an option of the other context
    ("topicPartitions", "3", "option 'topicPartitions' is for writes only; a read does not take it"),
    # nothing like ours: the options are listed
    ("someToolsOwnSetting", "1", "unknown read option 'sometoolsownsetting'; the read options are path, url,"),
]


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
@pytest.mark.parametrize("name, value, needle", UNKNOWN)
def test_an_unknown_option_is_refused_naming_it(spark, tmp_path, name, value, needle):
    """Batch and streaming reads refuse an option they do not take (it was ignored unless close
    to one of ours: Kafka's startingOffsetsByTimestamp read every record)."""
    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=1, records={0: [(b"x", None, None, 1)]})
    with pytest.raises(Exception) as e:
        spark.read.format("vqs").option("path", path).option("topic", "t").option(name, value).load().collect()
    assert needle in str(e.value).splitlines()[0]
    with pytest.raises(Exception) as e:
        (spark.readStream.format("vqs").option("path", path).option("topic", "t").option(name, value).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")).start().awaitTermination(60))
    assert needle in str(e.value)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_max_offsets_per_trigger_is_for_streams(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=1, records={0: [(b"x", None, None, 1)]})
    r = spark.read.format("vqs").option("path", path).option("topic", "t").option("maxOffsetsPerTrigger", "5")
    with pytest.raises(Exception) as e:
        r.load().collect()
    assert "option 'maxOffsetsPerTrigger' is for streaming reads only" in str(e.value)


@pytest.mark.parametrize("name, needle", [
    ("startingOffsets", "option 'startingOffsets' is for reads only; a write does not take it"),
    ("kafka.bootstrap.servers", "unknown write option 'kafka.bootstrap.servers': the Kafka client's settings"),
    ("topicPartiton", "unknown write option 'topicpartiton': did you mean 'topicPartitions'?"),
    ("someToolsOwnSetting", "unknown write option 'sometoolsownsetting'; the write options are path, url,"),
])
def test_a_write_refuses_an_option_it_does_not_take(spark, tmp_path, name, needle):
    path = tmp_path / "data"
    make_topic(str(path), "t", partitions=1)
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception) as e:
        df.write.format("vqs").mode("append").option("path", str(path)).option("topic", "t").option(name, "1").save()
    assert needle in str(e.value)
    q = (spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
         .writeStream.format("vqs").option("path", str(path)).option("topic", "t").option(name, "1")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True))
    with pytest.raises(Exception) as e:
        q.start().awaitTermination(60)
    assert needle in str(e.value)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_options_spark_passes_are_taken(spark, tmp_path):
    """What Spark passes by itself is not refused: the path of load(path) and save(path), a
    streaming sink's checkpointLocation and queryName (found by a source that records its options)."""
    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=1, records={0: [(b"x", None, None, 1)]})
    assert spark.read.format("vqs").option("topic", "t").load(path).count() == 1
    spark.read.format("vqs").option("topic", "t").load(path).write.format("vqs").mode("append") \
        .option("topic", "t2").save(path)
    q = (spark.readStream.format("vqs").option("path", path).option("topic", "t").option("startingOffsets", "earliest")
         .load().writeStream.format("vqs").option("path", path).option("topic", "t3").queryName("vqs_copy")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    assert [spark.read.format("vqs").option("path", path).option("topic", t).load().count() for t in ("t2", "t3")] == [1, 1]


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_a_stream_refuses_starting_offsets_naming_a_missing_partition(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=2, records={0: [(b"x", None, None, 1)]})
    q = (spark.readStream.format("vqs").option("path", path).option("topic", "t")
         .option("startingOffsets", '{"t": {"0": 0, "2": 0}}').load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")).start())
    with pytest.raises(Exception) as e:
        q.awaitTermination(60)
    assert "option 'startingOffsets' names partition 2 of topic 't', which has 2 partitions (0-1)" in str(e.value)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_bad_stream_option_fails_at_start(spark, tmp_path):
    """The Python reader's error is vqs's own, not PySpark's UnboundLocalError (its stream
    runner lost an error raised by streamReader())."""
    path = str(tmp_path / "data")
    make_topic(path, "t", partitions=1)
    q = (spark.readStream.format("vqs").option("path", path).option("topic", "t")
         .option("endingOffsets", "latest").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")).start())
    # The stream reader is made when the query starts, before any micro-batch runs.
    with pytest.raises(Exception) as e:
        q.awaitTermination(60)
    assert "option 'endingOffsets' is for batch reads only; a stream has no end" in str(e.value)
    assert "UnboundLocalError" not in str(e.value)
    assert q.lastProgress is None


def test_register_points_local_workers_at_this_python(spark, monkeypatch):
    """A session built without PYSPARK_PYTHON would start its workers with the
    `python3` on PATH (which may lack vqs: a virtualenv not activated); register()
    makes a local session's workers run this interpreter."""
    import sys

    import vqs.spark

    sc = spark.sparkContext
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(sc, "pythonExec", "python3")
    vqs.spark.register(spark)
    assert sc.pythonExec == sys.executable
    # an explicit choice is left alone (checked without registering: a registration
    # keeps the interpreter it was made with, and the session is shared)
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/python3")
    monkeypatch.setattr(sc, "pythonExec", "/opt/other/python3")
    vqs.spark._local_workers_use_this_python(spark)
    assert sc.pythonExec == "/opt/other/python3"
