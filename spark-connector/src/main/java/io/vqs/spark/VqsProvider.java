package io.vqs.spark;

import java.util.EnumSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * format("vqs") when the jar is on the classpath: reads run in the JVM
 * (columnar, pruned), writes go to the Python source (its exactly-once sink),
 * which vqs.spark.register() registers as "vqs_python" when this class is
 * loaded (so exactly one source claims "vqs" and Spark's resolution of the
 * short name is never ambiguous). Option "reader" (or the session conf
 * spark.vqs.reader) = "python" sends reads to the Python source as well.
 */
public final class VqsProvider implements TableProvider, DataSourceRegister {
    /** The name the Python source is registered under while this provider claims "vqs". */
    public static final String PYTHON_NAME = "vqs_python";
    static final String READER_CONF = "spark.vqs.reader";

    @Override
    public String shortName() { return "vqs"; }

    static boolean pythonReads(Map<String, String> options) {
        String v = null;
        for (var e : options.entrySet()) if (e.getKey().equalsIgnoreCase("reader")) v = e.getValue();
        if (v == null || v.isBlank()) {
            try {
                v = org.apache.spark.sql.SparkSession.active().conf().get(READER_CONF, "jvm");
            } catch (RuntimeException e) {
                v = "jvm";
            }
        }
        v = v.strip().toLowerCase(Locale.ROOT);
        if (v.equals("python")) return true;
        if (v.equals("jvm") || v.equals("auto")) return false;
        throw new ConfigError("option 'reader' must be 'jvm' or 'python', got '" + v + "'");
    }

    static PythonDataSourceV2 python() {
        PythonDataSourceV2 p = new PythonDataSourceV2();
        p.setShortName(PYTHON_NAME);
        return p;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        if (pythonReads(options)) {
            ReadOptions.parse(options, null); // the same checks and messages, raised here as ConfigError (see newScanBuilder)
            return python().inferSchema(options);
        }
        ReadOptions o = ReadOptions.parse(options, null);
        return SourceSchema.of(o.includeHeaders);
    }

    @Override
    public boolean supportsExternalMetadata() { return true; }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new VqsTable(schema, partitioning, properties);
    }

    static final class VqsTable implements SupportsRead, SupportsWrite {
        private final StructType schema;
        private final Transform[] partitioning;
        private final Map<String, String> properties;
        private Table python;

        VqsTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
            this.schema = schema;
            this.partitioning = partitioning;
            this.properties = properties;
        }

        private Table pythonTable() {
            if (python == null) python = python().getTable(schema, partitioning, properties);
            return python;
        }

        @Override
        public String name() { return "vqs"; }

        @Override
        public StructType schema() { return schema; }

        @Override
        public Set<TableCapability> capabilities() {
            Set<TableCapability> caps = EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ,
                TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE);
            try { // the Python source's own (e.g. TRUNCATE: it refuses overwrite itself, with its message)
                caps.addAll(pythonTable().capabilities());
            } catch (RuntimeException e) {
                // not registered in this session: reads only through the JVM; writes fail when asked for
            }
            return caps;
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            if (pythonReads(options)) {
                // The Python source checks the options too, but Spark reports an error raised in a
                // Python worker as "[PYTHON_DATA_SOURCE_ERROR] Failed to ...: Traceback": parsed here
                // first, a bad option fails with a first line that names it (ConfigError).
                // So are a missing topic, a bad path and an unreachable server (checkTopics).
                checkTopics(ReadOptions.parse(options, null));
                return ((SupportsRead) pythonTable()).newScanBuilder(options);
            }
            ReadOptions o = ReadOptions.parse(options, null);
            SourceSchema.check(schema, o.includeHeaders);
            checkTopics(o);
            return new VqsScan.Builder(options, schema);
        }

        /** A missing topic (or data dir, or server) fails the query here, before any task starts. */
        private static void checkTopics(ReadOptions o) {
            try (Source src = Source.of(o)) {
                for (String t : o.topics) src.partitionCount(t, o.topicOption());
            }
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            return ((SupportsWrite) pythonTable()).newWriteBuilder(info);
        }
    }
}
