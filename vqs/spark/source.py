"""The ``vqs`` data source: Spark's entry point to the readers and writers.

Spark creates it from the options on the driver (and pickles it to the
workers). Options are parsed at planning, so a bad one fails ``load()``,
``start()`` or ``save()`` with a message naming it.

A read with a user-specified schema (``.schema("value binary")``) gets that
schema in ``reader()``/``streamReader()``: a projection of the source's
columns, checked there (Spark calls no Python at ``load()`` when the user
gives the schema, so a bad one fails when the query is planned: the first
action of a batch read, the start of a stream).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from ..errors import ConfigError
from .options import parse_read_options, parse_write_options
from .pyworker import settle
from .schema import projected_columns, source_schema


class VQSDataSource(DataSource):
    """Format ``vqs``: topics of a VQS data directory (``path``) or server (``url``)."""

    @classmethod
    def name(cls) -> str:
        return "vqs"

    def schema(self):
        settle()  # these methods run in Spark's pooled Python workers (see pyworker)
        opts = parse_read_options(self.options, streaming=None)
        return source_schema(opts.include_headers)

    def reader(self, schema):
        settle()
        from .reader import VQSBatchReader

        opts = parse_read_options(self.options, streaming=False)
        _python_reader_wanted(opts)
        return VQSBatchReader(opts, projected_columns(schema, opts.include_headers))

    def streamReader(self, schema):
        settle()
        from .stream_reader import RefusedStreamReader, VQSStreamReader

        try:
            opts = parse_read_options(self.options, streaming=True)
            _python_reader_wanted(opts)
            return VQSStreamReader(opts, projected_columns(schema, opts.include_headers))
        except Exception as e:
            # PySpark's stream runner loses an error raised here (its cleanup then meets no
            # reader: UnboundLocalError); the reader's first call reports it instead.
            return RefusedStreamReader(e)

    def _write_options(self, schema, overwrite: bool):
        settle()
        from .writer import check_topic_takes_rows, check_write_schema, prepare_path_write

        if overwrite:
            raise ConfigError("save mode 'overwrite' is not supported: a topic is append-only; use mode('append')")
        opts = parse_write_options(self.options)
        check_write_schema(schema, opts)
        if opts.url:
            from .remote import prepare_url_write

            config = prepare_url_write(opts)
        else:
            config = prepare_path_write(opts)
        check_topic_takes_rows(schema, opts, config)
        return opts

    def writer(self, schema, overwrite: bool):
        from .writer import VQSBatchWriter

        return VQSBatchWriter(self._write_options(schema, overwrite))

    def streamWriter(self, schema, overwrite: bool):
        opts = self._write_options(schema, overwrite)
        if opts.url:
            from .remote import UrlStreamWriter

            return UrlStreamWriter(opts)
        from .writer import VQSStreamWriter

        return VQSStreamWriter(opts)


class VQSPythonDataSource(VQSDataSource):
    """The Python source under the name ``vqs_python``: registered so while the
    JVM reader owns ``vqs`` (vqs/spark/jvm.py), which hands it writes and
    ``reader=python`` reads."""

    @classmethod
    def name(cls) -> str:
        return "vqs_python"


def _python_reader_wanted(opts) -> None:
    if opts.reader == "jvm":
        raise ConfigError(
            "option 'reader' is 'jvm' but this session has not loaded the JVM reader: create the session "
            "with vqs.spark.session() (it puts vqs.spark.jar_path() on spark.jars), or drop the option"
        )
