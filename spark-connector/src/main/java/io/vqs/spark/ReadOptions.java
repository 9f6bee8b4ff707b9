package io.vqs.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The read options of format("vqs"), checked once on the driver with the
 * messages of vqs/spark/options.py (the Python source), so both readers fail a
 * bad query the same way. Offsets specs: "earliest", "latest" or JSON
 * {"topic": {"p": offset}} with -2 = earliest and -1 = latest, as in Kafka.
 * Immutable and serializable: executors get a copy with their partitions.
 */
final class ReadOptions implements Serializable {
    static final long EARLIEST = -2, LATEST = -1;
    static final String[] NAMES = {"path", "url", "topic", "topics", "startingOffsets", "endingOffsets",
        "startingTimestamp", "endingTimestamp", "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss",
        "includeHeaders", "maxBytesPerRead", "timeoutMs", "token", "reader", "vectors"};

    String path, url, token;
    List<String> topics;
    Object starting, ending; // "earliest" | "latest" | Map<String, Map<Integer, Long>>
    Long startingTimestamp, endingTimestamp;
    Long maxOffsetsPerTrigger;
    Integer minPartitions;
    boolean failOnDataLoss = true, includeHeaders;
    boolean arrowVectors; // option 'vectors': "direct" (LogVectors, the default) or "arrow" (ArrowVectors)
    int maxBytesPerRead = 4 << 20;
    int timeoutMs = 30_000;

    /** The write options (the Python source's, options.py WRITE_OPTIONS): refused on a read, naming them. */
    static final String[] WRITE_NAMES = {"path", "url", "topic", "topicPartitions", "lockTimeoutMs", "timeoutMs",
        "token", "reader"};
    /** Options Spark passes by itself (a streaming sink's), accepted and ignored (options.py SPARK_OPTIONS). */
    private static final java.util.Set<String> SPARK_OPTIONS = java.util.Set.of("checkpointlocation", "queryname");
    /** Options of Spark's Kafka source with no name here, and VQS's way instead (options.py KAFKA_OPTIONS). */
    private static final Map<String, String[]> KAFKA_OPTIONS = Map.of(
        "subscribe", new String[] {"subscribe", "'topic', or 'topics' (comma-separated)"},
        "subscribepattern", new String[] {"subscribePattern", "'topics' (a list of names; there are no patterns)"},
        "assign", new String[] {"assign", "'topic'/'topics' (a read takes every partition; a filter on column "
            + "'partition' narrows it)"},
        "startingoffsetsbytimestamp", new String[] {"startingOffsetsByTimestamp", "'startingTimestamp' (one timestamp, "
            + "every partition)"},
        "endingoffsetsbytimestamp", new String[] {"endingOffsetsByTimestamp", "'endingTimestamp' (one timestamp, every partition)"},
        "maxrecordspertrigger", new String[] {"maxRecordsPerTrigger", "'maxOffsetsPerTrigger'"},
        "kafkaconsumer.polltimeoutms", new String[] {"kafkaConsumer.pollTimeoutMs", "'timeoutMs'"});

    /**
     * Refuse an option a read does not take, naming it, with options.py's messages: a write
     * option, maxOffsetsPerTrigger on a batch read (streaming FALSE; null: not known yet), a
     * Kafka option (with VQS's equivalent), a misspelling (with a suggestion: difflib's
     * get_close_matches(cutoff=0.8), a SequenceMatcher ratio >= 0.8). Only what Spark passes
     * by itself (SPARK_OPTIONS) is let through.
     */
    static void checkUnknown(Map<String, String> o, Boolean streaming) {
        for (String key : o.keySet()) {
            String k = key.toLowerCase(Locale.ROOT);
            if (SPARK_OPTIONS.contains(k)) continue;
            String known = null;
            for (String n : NAMES) if (n.toLowerCase(Locale.ROOT).equals(k)) known = n;
            if (known != null) {
                if (Boolean.FALSE.equals(streaming) && known.equals("maxOffsetsPerTrigger"))
                    throw new ConfigError("option 'maxOffsetsPerTrigger' is for streaming reads only; a batch read reads "
                        + "every record between its starting and ending offsets");
                continue;
            }
            for (String n : WRITE_NAMES)
                if (n.toLowerCase(Locale.ROOT).equals(k))
                    throw new ConfigError("option '" + n + "' is for writes only; a read does not take it");
            String msg = "unknown read option '" + key + "'";
            String[] kafka = KAFKA_OPTIONS.get(k);
            if (kafka != null) throw new ConfigError(msg + ": Kafka's '" + kafka[0] + "' is " + kafka[1] + " here");
            if (k.startsWith("kafka."))
                throw new ConfigError(msg + ": the Kafka client's settings do not apply; VQS takes 'url' (a server, "
                    + "with 'token') or 'path'");
            String best = null;
            double bestRatio = 0.8;
            for (String n : NAMES) {
                double r = ratio(n.toLowerCase(Locale.ROOT), k);
                if (r >= bestRatio && (best == null || r > bestRatio
                        || (r == bestRatio && n.compareToIgnoreCase(best) > 0))) { // difflib: the larger name on a tie
                    best = n;
                    bestRatio = r;
                }
            }
            if (best != null) throw new ConfigError(msg + ": did you mean '" + best + "'?");
            throw new ConfigError(msg + "; the read options are " + String.join(", ", NAMES));
        }
    }

    /** difflib.SequenceMatcher(None, a, b).ratio(): 2 * matched / (len(a) + len(b)). */
    static double ratio(String a, String b) {
        int total = a.length() + b.length();
        return total == 0 ? 1.0 : 2.0 * matched(a, 0, a.length(), b, 0, b.length()) / total;
    }

    /** Characters in the recursive longest common blocks of a[alo:ahi] and b[blo:bhi] (Ratcliff/Obershelp). */
    private static int matched(String a, int alo, int ahi, String b, int blo, int bhi) {
        int bi = alo, bj = blo, size = 0;
        for (int i = alo; i < ahi; i++)
            for (int j = blo; j < bhi; j++) {
                int k = 0;
                while (i + k < ahi && j + k < bhi && a.charAt(i + k) == b.charAt(j + k)) k++;
                if (k > size) {
                    bi = i;
                    bj = j;
                    size = k;
                }
            }
        if (size == 0) return 0;
        return size + matched(a, alo, bi, b, blo, bj) + matched(a, bi + size, ahi, b, bj + size, bhi);
    }

    private static String get(Map<String, String> o, String name) {
        String v = o.get(name.toLowerCase(Locale.ROOT));
        if (v == null) v = o.get(name);
        return v == null ? null : v.strip();
    }

    private static boolean bool(Map<String, String> o, String name, boolean dflt) {
        String v = get(o, name);
        if (v == null || v.isEmpty()) return dflt;
        String lv = v.toLowerCase(Locale.ROOT);
        if (lv.equals("true") || lv.equals("1") || lv.equals("yes")) return true;
        if (lv.equals("false") || lv.equals("0") || lv.equals("no")) return false;
        throw new ConfigError("option '" + name + "' must be true or false, got '" + v + "'");
    }

    private static Long integer(Map<String, String> o, String name, long min) {
        String v = get(o, name);
        if (v == null || v.isEmpty()) return null;
        long n;
        try {
            n = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new ConfigError("option '" + name + "' must be an integer, got '" + v + "'");
        }
        if (n < min) throw new ConfigError("option '" + name + "' must be >= " + min + ", got " + n);
        return n;
    }

    private static String topicName(String name, String option) {
        if (name.isEmpty() || name.length() > 200 || !name.matches("[A-Za-z0-9._-]+") || name.equals(".") || name.equals(".."))
            throw new ConfigError("option '" + option + "': invalid topic name '" + name
                + "': use 1-200 characters of letters, digits, '.', '_' and '-'");
        return name;
    }

    static Object offsetsSpec(String value, String option, List<String> topics, String dflt) {
        if (value == null || value.isEmpty()) return dflt;
        String lv = value.toLowerCase(Locale.ROOT);
        if (lv.equals("earliest") || lv.equals("latest")) return lv;
        JsonNode spec;
        try {
            spec = new ObjectMapper().readTree(value);
        } catch (Exception e) {
            spec = null;
        }
        if (spec == null)
            throw new ConfigError("option '" + option + "' must be 'earliest', 'latest' or JSON like {\"topic\": {\"0\": 42}}, got '" + value + "'");
        if (!spec.isObject() || spec.isEmpty())
            throw new ConfigError("option '" + option + "' JSON must be a non-empty object of topics, got '" + value + "'");
        Map<String, Map<Integer, Long>> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> t = it.next();
            if (!topics.contains(t.getKey()))
                throw new ConfigError("option '" + option + "' names topic '" + t.getKey()
                    + "', which is not among the topics read (" + String.join(", ", topics) + ")");
            if (!t.getValue().isObject())
                throw new ConfigError("option '" + option + "': the value for topic '" + t.getKey() + "' must be an object of partitions");
            Map<Integer, Long> pm = new LinkedHashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> pit = t.getValue().fields(); pit.hasNext(); ) {
                Map.Entry<String, JsonNode> p = pit.next();
                int pi;
                try {
                    pi = Integer.parseInt(p.getKey().strip());
                } catch (NumberFormatException e) {
                    throw new ConfigError("option '" + option + "': partition '" + p.getKey() + "' of topic '" + t.getKey() + "' is not an integer");
                }
                if (pi < 0) throw new ConfigError("option '" + option + "': partition '" + p.getKey() + "' of topic '" + t.getKey() + "' is negative");
                JsonNode off = p.getValue();
                if (!off.isIntegralNumber() || off.asLong() < EARLIEST)
                    throw new ConfigError("option '" + option + "': offset " + off + " for " + t.getKey() + "/" + p.getKey()
                        + " must be an offset >= 0, -2 (earliest) or -1 (latest)");
                pm.put(pi, off.asLong());
            }
            out.put(t.getKey(), pm);
        }
        return out;
    }

    private static boolean anyIs(Object spec, long v) {
        if (!(spec instanceof Map)) return false;
        for (Object pm : ((Map<?, ?>) spec).values())
            for (Object o : ((Map<?, ?>) pm).values()) if ((Long) o == v) return true;
        return false;
    }

    /** Check and parse; streaming null = the schema, before Spark says which kind of read. */
    static ReadOptions parse(Map<String, String> o, Boolean streaming) {
        checkUnknown(o, streaming);
        ReadOptions r = new ReadOptions();
        r.path = get(o, "path");
        r.url = get(o, "url");
        if (r.path != null && r.path.isEmpty()) r.path = null;
        if (r.url != null && r.url.isEmpty()) r.url = null;
        if (r.path != null && r.url != null)
            throw new ConfigError("options 'path' and 'url' are exclusive: give a data directory or a server URL");
        if (r.path == null && r.url == null)
            throw new ConfigError("option 'path' (a VQS data directory) or 'url' (a VQS server, http://host:port) is required");
        if (r.url != null && !(r.url.startsWith("http://") || r.url.startsWith("https://")))
            throw new ConfigError("option 'url' must start with http:// or https://, got '" + r.url + "'");
        String topic = get(o, "topic"), topics = get(o, "topics");
        if (topic != null && topic.isEmpty()) topic = null;
        if (topics != null && topics.isEmpty()) topics = null;
        if (topic != null && topics != null)
            throw new ConfigError("options 'topic' and 'topics' are exclusive: use 'topics' for several topics");
        List<String> names = new ArrayList<>();
        if (topic != null) names.add(topicName(topic, "topic"));
        else if (topics != null) {
            for (String t : topics.split(",")) {
                t = t.strip();
                if (!t.isEmpty() && !names.contains(topicName(t, "topics"))) names.add(t);
            }
            if (names.isEmpty()) throw new ConfigError("option 'topics' lists no topic");
        } else throw new ConfigError("option 'topic' (or 'topics', comma-separated) is required to read");
        r.topics = names;
        boolean st = Boolean.TRUE.equals(streaming);
        r.starting = offsetsSpec(get(o, "startingOffsets"), "startingOffsets", names, st ? "latest" : "earliest");
        String endingRaw = get(o, "endingOffsets");
        if (st && endingRaw != null && !endingRaw.isEmpty())
            throw new ConfigError("option 'endingOffsets' is for batch reads only; a stream has no end");
        r.ending = offsetsSpec(endingRaw, "endingOffsets", names, "latest");
        if (Boolean.FALSE.equals(streaming)) {
            if ("latest".equals(r.starting) || anyIs(r.starting, LATEST))
                throw new ConfigError("option 'startingOffsets' cannot be 'latest' (-1) for a batch read");
            if ("earliest".equals(r.ending) || anyIs(r.ending, EARLIEST))
                throw new ConfigError("option 'endingOffsets' cannot be 'earliest' (-2) for a batch read");
        }
        r.startingTimestamp = integer(o, "startingTimestamp", 0);
        r.endingTimestamp = integer(o, "endingTimestamp", 0);
        if (st && r.endingTimestamp != null)
            throw new ConfigError("option 'endingTimestamp' is for batch reads only; a stream has no end");
        if (r.startingTimestamp != null && r.endingTimestamp != null && r.endingTimestamp < r.startingTimestamp)
            throw new ConfigError("option 'endingTimestamp' (" + r.endingTimestamp + ") is before 'startingTimestamp' (" + r.startingTimestamp + ")");
        r.maxOffsetsPerTrigger = integer(o, "maxOffsetsPerTrigger", 1);
        Long mp = integer(o, "minPartitions", 1);
        r.minPartitions = mp == null ? null : (int) Math.min(mp, 1 << 20);
        r.failOnDataLoss = bool(o, "failOnDataLoss", true);
        r.includeHeaders = bool(o, "includeHeaders", false);
        String vec = get(o, "vectors");
        if (vec != null && !vec.isEmpty()) {
            String lv = vec.toLowerCase(Locale.ROOT);
            if (!lv.equals("direct") && !lv.equals("arrow"))
                throw new ConfigError("option 'vectors' must be 'direct' or 'arrow', got '" + vec + "'");
            r.arrowVectors = lv.equals("arrow");
        }
        Long mb = integer(o, "maxBytesPerRead", 1);
        if (mb != null) r.maxBytesPerRead = (int) Math.min(mb, 1 << 30);
        Long to = integer(o, "timeoutMs", 1);
        if (to != null) r.timeoutMs = (int) Math.min(to, Integer.MAX_VALUE);
        r.token = get(o, "token");
        if (r.token != null && r.token.isEmpty()) r.token = null;
        return r;
    }

    /**
     * A JSON offsets spec may leave partitions out (they take the default) but
     * must not name one the topic does not have: a typo would otherwise read
     * every partition from the default, silently.
     */
    static void checkPartitions(Object spec, String option, String topic, int partitions) {
        if (!(spec instanceof Map)) return;
        Map<?, ?> pm = (Map<?, ?>) ((Map<?, ?>) spec).get(topic);
        if (pm == null) return;
        for (Object p : pm.keySet())
            if ((Integer) p >= partitions)
                throw new ConfigError("option '" + option + "' names partition " + p + " of topic '" + topic
                    + "', which has " + partitions + " partition" + (partitions == 1 ? "" : "s")
                    + " (0-" + (partitions - 1) + ")");
    }

    String topicOption() { return topics.size() > 1 ? "topics" : "topic"; }

    void dataLoss(String message) {
        if (failOnDataLoss)
            throw new DataLossError(message + ". Some data may have been lost (deleted by retention). "
                + "Set option failOnDataLoss to false to skip it.");
    }
}
