package io.vqs.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The columns of format("vqs") (vqs/spark/schema.py source_schema): key binary,
 * value binary, topic string, partition int, offset bigint, timestamp timestamp,
 * and with includeHeaders, headers array&lt;struct&lt;key string, value binary&gt;&gt;.
 * A user schema must name a subset of them with the same types (nullability may
 * be looser), with the Python source's messages.
 */
final class SourceSchema {
    private SourceSchema() {}

    static final StructType HEADER = new StructType()
        .add("key", DataTypes.StringType).add("value", DataTypes.BinaryType);

    static StructType of(boolean includeHeaders) {
        StructType s = new StructType()
            .add("key", DataTypes.BinaryType)
            .add("value", DataTypes.BinaryType)
            .add("topic", DataTypes.StringType)
            .add("partition", DataTypes.IntegerType)
            .add("offset", DataTypes.LongType)
            .add("timestamp", DataTypes.TimestampType);
        return includeHeaders ? s.add("headers", DataTypes.createArrayType(HEADER)) : s;
    }

    private static boolean fits(DataType user, DataType src) {
        if (src instanceof StructType) {
            if (!(user instanceof StructType)) return false;
            StructField[] u = ((StructType) user).fields(), s = ((StructType) src).fields();
            if (u.length != s.length) return false;
            for (int i = 0; i < u.length; i++)
                if (!u[i].name().equals(s[i].name()) || !(u[i].nullable() || !s[i].nullable()) || !fits(u[i].dataType(), s[i].dataType()))
                    return false;
            return true;
        }
        if (src instanceof ArrayType) {
            return user instanceof ArrayType
                && (((ArrayType) user).containsNull() || !((ArrayType) src).containsNull())
                && fits(((ArrayType) user).elementType(), ((ArrayType) src).elementType());
        }
        if (src instanceof MapType) return user.equals(src);
        return user.equals(src);
    }

    /** Check a user schema against the source's columns (schema.projected_columns). */
    static void check(StructType schema, boolean includeHeaders) {
        StructType src = of(includeHeaders);
        if (schema == null || schema.equals(src)) return;
        String listing = java.util.Arrays.stream(src.fields())
            .map(f -> f.name() + " " + f.dataType().simpleString()).collect(Collectors.joining(", "));
        if (schema.fields().length == 0)
            throw new ConfigError("schema: a vqs read needs at least one column; the source's columns: " + listing);
        Set<String> seen = new HashSet<>();
        List<String> names = new ArrayList<>(List.of(src.fieldNames()));
        for (StructField f : schema.fields()) {
            int i = names.indexOf(f.name());
            if (i < 0) {
                String hint = "";
                if (f.name().equals("headers")) hint = " (set option 'includeHeaders' to true for the headers column)";
                else for (String n : names) if (n.equalsIgnoreCase(f.name()))
                    hint = " (did you mean '" + n + "'? column names are case-sensitive here)";
                throw new ConfigError("schema: column '" + f.name() + "' is not a column of the vqs source" + hint
                    + "; the source's columns: " + listing);
            }
            if (!seen.add(f.name()))
                throw new ConfigError("schema: column '" + f.name() + "' is named twice; the source's columns: " + listing);
            StructField s = src.fields()[i];
            if (!((f.nullable() || !s.nullable()) && fits(f.dataType(), s.dataType()))) {
                String want = s.dataType().simpleString();
                String problem = f.dataType().simpleString().equals(want)
                    ? "must be " + want + ", nullable as the source's column is (drop NOT NULL)"
                    : "must be " + want + ", not " + f.dataType().simpleString();
                throw new ConfigError("schema: column '" + f.name() + "' " + problem + "; the source's columns: " + listing);
            }
        }
    }
}
