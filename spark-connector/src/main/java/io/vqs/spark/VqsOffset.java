package io.vqs.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.streaming.Offset;

/** {"topic": {"partition": next offset}}: the offsets JSON of both readers (stream_reader.py). */
final class VqsOffset extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();
    final Map<String, Map<String, Long>> offsets;

    VqsOffset(Map<String, Map<String, Long>> offsets) { this.offsets = offsets; }

    static VqsOffset parse(String json) {
        try {
            return new VqsOffset(JSON.readValue(json, new TypeReference<LinkedHashMap<String, Map<String, Long>>>() {}));
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not a vqs offset: " + json, e);
        }
    }

    @Override
    public String json() {
        Map<String, Map<String, Long>> sorted = new TreeMap<>();
        for (var t : offsets.entrySet()) {
            Map<String, Long> parts = new TreeMap<>((a, b) -> Integer.compare(Integer.parseInt(a), Integer.parseInt(b)));
            parts.putAll(t.getValue());
            sorted.put(t.getKey(), parts);
        }
        try {
            return JSON.writeValueAsString(sorted);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
