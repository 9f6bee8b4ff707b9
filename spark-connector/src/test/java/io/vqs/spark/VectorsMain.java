package io.vqs.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;

/**
 * Reads the golden format vectors (tests/format_vectors/, docs/FORMAT.md) with the
 * connector's own {@link PartitionLog} and {@link RecordBatch}, no Spark, and prints
 * what it found as one JSON object {vector directory name: result} on stdout, in the
 * shape of the vectors' expected JSON (tests/format_vectors/make_vectors.py):
 * start_offset, end_offset, records, unreadable (offsets whose read failed, with the
 * messages in "errors"), missing (offsets in the bounds neither returned nor failed), and
 * count (COUNT(*) as the connector answers it from offsets and batch headers, no body read).
 *
 * <p>Usage: {@code java -cp <classes>:<spark jars>/* io.vqs.spark.VectorsMain DIR...}
 */
public final class VectorsMain {
    static final int INLINE_MAX = 256;
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        ObjectNode out = JSON.createObjectNode();
        for (String a : args) {
            Path dir = Path.of(a);
            out.set(dir.getFileName().toString(), read(dir));
        }
        System.out.println(JSON.writeValueAsString(out));
    }

    static ObjectNode read(Path dir) throws Exception {
        ObjectNode res = JSON.createObjectNode();
        ArrayNode records = res.putArray("records");
        List<Long> unreadable = new ArrayList<>();
        List<Long> returned = new ArrayList<>();
        ArrayNode errors = JSON.createArrayNode();
        try (PartitionLog log = new PartitionLog(dir)) {
            res.put("start_offset", log.startOffset);
            res.put("end_offset", log.endOffset);
            res.put("count", log.count(log.startOffset, log.endOffset));
            long o = log.startOffset;
            while (o < log.endOffset) {
                PartitionLog.Cursor c = log.cursor(o);
                try {
                    RecordBatch b;
                    while ((b = c.next(1 << 16)) != null) {
                        for (int i = 0; i < b.count; i++) {
                            long off = b.baseOffset + i;
                            if (off < o || off >= log.endOffset) continue;
                            records.add(record(b, i));
                            returned.add(off);
                            o = off + 1;
                        }
                    }
                    break;
                } catch (CorruptBatchException e) {
                    unreadable.add(o);
                    errors.add(e.getMessage());
                    o++;
                }
            }
            ArrayNode u = res.putArray("unreadable");
            unreadable.forEach(u::add);
            ArrayNode m = res.putArray("missing");
            for (long x = log.startOffset; x < log.endOffset; x++)
                if (!unreadable.contains(x) && !returned.contains(x)) m.add(x);
        }
        res.set("errors", errors);
        return res;
    }

    static byte[] slice(RecordBatch b, int data, int from, int to) {
        byte[] v = new byte[to - from];
        b.body.get(data + from, v);
        return v;
    }

    static ObjectNode record(RecordBatch b, int i) throws Exception {
        ObjectNode r = JSON.createObjectNode();
        r.put("offset", b.baseOffset + i);
        r.put("timestamp", b.timestamp(i));
        if (b.hasKey(i)) r.put("key", Base64.getEncoder().encodeToString(slice(b, b.keyData, b.keyOffset(i), b.keyOffset(i + 1))));
        else r.putNull("key");
        byte[] v = slice(b, b.valueData, b.valueOffset(i), b.valueOffset(i + 1));
        if (!b.hasValue(i)) r.putNull("value");
        else if (v.length <= INLINE_MAX) r.put("value", Base64.getEncoder().encodeToString(v));
        else {
            r.put("value_len", v.length);
            r.put("value_sha256", HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(v)));
        }
        List<String> names = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        b.headers(i, names, values);
        ArrayNode h = r.putArray("headers");
        for (int k = 0; k < names.size(); k++) {
            ArrayNode pair = h.addArray();
            pair.add(names.get(k));
            if (values.get(k) == null) pair.addNull();
            else pair.add(Base64.getEncoder().encodeToString(values.get(k)));
        }
        return r;
    }
}
