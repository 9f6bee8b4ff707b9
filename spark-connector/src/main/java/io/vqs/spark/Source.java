package io.vqs.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Where a read gets its topics: a data directory (path mode, the layout of
 * vqs/broker/layout.py: DATA/topics/{topic}/topic.json and DATA/topics/{topic}/{p}/,
 * a log directory) or a VQS server (url mode: the JSON offsets route and the
 * binary batch fetch, GET /topics/{t}/messages?stored=1 with Accept: application/vnd.vqs.batch:
 * the whole batches as the server stores them, the first possibly beginning below the
 * offset asked for, each decoded and CRC-checked here by RecordBatch as in path mode;
 * RangeReader skips the records outside its range, as it does for a file's batches).
 * The same interface as vqs/spark/datadir.PathSource and vqs/spark/remote.UrlSource.
 */
abstract class Source implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();

    static Source of(ReadOptions o) {
        return o.path != null ? new PathSource(o.path) : new UrlSource(o.url, o.token, o.timeoutMs);
    }

    abstract int partitionCount(String topic, String option);

    /** {start offset, end offset} of every partition, as of now. */
    abstract long[][] partitionOffsets(String topic);

    /** The first offset whose record timestamp is >= ts, or -1. */
    abstract long offsetForTime(String topic, int partition, long ts);

    /** Verified batches of a partition from offset on (the first may begin below it). */
    abstract Batches batches(String topic, int partition, long offset, int maxBytes);

    /**
     * The same, but a source may step over batches that hold no record with a timestamp
     * in [tsLo, tsHi] (ms) below offset stopAt, without decoding them (path mode: by the
     * time index and batch headers, PartitionLog.Cursor); the caller filters the rest.
     */
    Batches batches(String topic, int partition, long offset, int maxBytes, long tsLo, long tsHi, long stopAt) {
        return batches(topic, partition, offset, maxBytes);
    }

    /** Batches whose bodies the caller will not look at (count()); a source may skip decoding them. */
    Batches headers(String topic, int partition, long offset, int maxBytes) {
        return batches(topic, partition, offset, maxBytes);
    }

    @Override
    public void close() {}

    /** A sequence of batches; startOffset is the partition's log start offset as the source saw it. */
    interface Batches extends AutoCloseable {
        long startOffset();
        RecordBatch next() throws IOException;
        /** The offset read up to (every record below it was returned or skipped), or -1 if unknown. */
        default long reached() { return -1; }
        /** Batches stepped over by the time range without decoding. */
        default long skipped() { return 0; }
        /** Bytes read from files or the server so far. */
        default long bytesRead() { return 0; }
        @Override default void close() {}
    }

    static final class OutOfRange extends RuntimeException {
        final long start;
        OutOfRange(long start) { super("offset out of range"); this.start = start; }
    }

    // ------------------------------------------------------------ path mode
    static final class PathSource extends Source {
        final Path dataDir;

        PathSource(String dir) { this.dataDir = Path.of(dir); }

        Path topicDir(String topic) { return dataDir.resolve("topics").resolve(topic); }

        @Override
        int partitionCount(String topic, String option) {
            if (!Files.isDirectory(dataDir))
                throw new ConfigError("option 'path': '" + dataDir + "' is not a directory (a VQS data directory)");
            Path meta = topicDir(topic).resolve("topic.json");
            JsonNode n;
            try {
                n = JSON.readTree(Files.readAllBytes(meta));
            } catch (java.nio.file.NoSuchFileException e) {
                throw new ConfigError("option '" + option + "': topic '" + topic + "' does not exist in " + dataDir);
            } catch (IOException e) {
                throw new IllegalStateException(meta + " is not valid JSON: " + e.getMessage());
            }
            JsonNode p = n == null ? null : n.get("partitions");
            if (p == null || !p.isInt()) throw new IllegalStateException(meta + " has no partition count");
            return p.asInt();
        }

        PartitionLog log(String topic, int p) {
            return new PartitionLog(topicDir(topic).resolve(Integer.toString(p)));
        }

        @Override
        long[][] partitionOffsets(String topic) {
            int n = partitionCount(topic, "topic");
            long[][] out = new long[n][];
            for (int p = 0; p < n; p++) {
                try (PartitionLog lg = log(topic, p)) {
                    out[p] = new long[] {lg.startOffset, lg.endOffset};
                }
            }
            return out;
        }

        /** Records in [s, e) of a partition, from its offsets (PartitionLog.count). */
        long count(String topic, int partition, long s, long e) {
            try (PartitionLog lg = log(topic, partition)) {
                return lg.count(s, e);
            } catch (IOException ex) {
                throw new UncheckedIOException(ex);
            }
        }

        @Override
        long offsetForTime(String topic, int partition, long ts) {
            try (PartitionLog lg = log(topic, partition)) {
                return lg.offsetForTime(ts);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        Batches batches(String topic, int partition, long offset, int maxBytes) {
            return open(topic, partition, offset, maxBytes, false, Long.MIN_VALUE, Long.MAX_VALUE, Long.MAX_VALUE);
        }

        @Override
        Batches batches(String topic, int partition, long offset, int maxBytes, long tsLo, long tsHi, long stopAt) {
            return open(topic, partition, offset, maxBytes, false, tsLo, tsHi, stopAt);
        }

        @Override
        Batches headers(String topic, int partition, long offset, int maxBytes) {
            return open(topic, partition, offset, maxBytes, true, Long.MIN_VALUE, Long.MAX_VALUE, Long.MAX_VALUE);
        }

        private Batches open(String topic, int partition, long offset, int maxBytes, boolean headersOnly,
                             long tsLo, long tsHi, long stopAt) {
            PartitionLog lg = log(topic, partition);
            if (offset < lg.startOffset) {
                long s = lg.startOffset;
                lg.close();
                throw new OutOfRange(s);
            }
            PartitionLog.Cursor c = headersOnly ? lg.headerCursor(offset) : lg.cursor(offset);
            if (tsLo != Long.MIN_VALUE || tsHi != Long.MAX_VALUE) c.skipOutside(tsLo, tsHi, stopAt);
            return new Batches() {
                public long startOffset() { return lg.startOffset; }
                public RecordBatch next() throws IOException { return c.next(maxBytes); }
                public long reached() { return c.reached(); }
                public long skipped() { return c.skipped; }
                public long bytesRead() { return lg.bytesRead; }
                public void close() { lg.close(); }
            };
        }
    }

    // ------------------------------------------------------------- url mode
    static final class UrlSource extends Source {
        final String url, token;
        final int timeoutMs;

        /** Runs the one request a fetch sends ahead; daemon threads, idle ones end after 60 s. */
        private static final ExecutorService AHEAD = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "vqs-url-ahead");
            t.setDaemon(true);
            return t;
        });

        UrlSource(String url, String token, int timeoutMs) {
            this.url = url.replaceAll("/+$", "");
            this.token = token;
            this.timeoutMs = timeoutMs;
        }

        /** A whole answer: its status, the headers the reader looks at, and its body: body[0, length). */
        static final class Answer {
            final int status;
            final byte[] body;
            final int length;
            private final HttpURLConnection c;

            Answer(int status, byte[] body, int length, HttpURLConnection c) {
                this.status = status;
                this.body = body;
                this.length = length;
                this.c = c;
            }

            int statusCode() { return status; }
            String header(String name, String orElse) {
                String v = c.getHeaderField(name);
                return v == null ? orElse : v;
            }
        }

        /**
         * GET pathAndQuery over HTTP/1.1 with keep-alive (HttpURLConnection: its body is read
         * straight into one array of the answer's Content-Length, which is several times
         * faster for multi-MiB batch answers than java.net.http's 16 KiB buffer chains; the
         * connection goes back to the JVM's keep-alive pool once the body is read whole).
         */
        private Answer get(String pathAndQuery, boolean binary) {
            return get(pathAndQuery, binary, null);
        }

        /**
         * The same, a successful answer's body read into {@code into} when it fits (else into a
         * new array, at least twice its size, that the caller keeps for the next answer): a batch
         * reader reuses its buffers instead of allocating an array of megabytes per answer.
         */
        private Answer get(String pathAndQuery, boolean binary, byte[] into) {
            try {
                HttpURLConnection c = (HttpURLConnection) URI.create(url + pathAndQuery).toURL().openConnection();
                c.setConnectTimeout(timeoutMs);
                c.setReadTimeout(timeoutMs);
                c.setUseCaches(false);
                if (binary) c.setRequestProperty("Accept", "application/vnd.vqs.batch");
                if (token != null) c.setRequestProperty("Authorization", "Bearer " + token);
                int status = c.getResponseCode();
                InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
                if (in == null) return new Answer(status, new byte[0], 0, c);
                try (InputStream i = in) {
                    long n = c.getContentLengthLong();
                    if (n < 0 || n > Integer.MAX_VALUE - 8 || status >= 300) {
                        byte[] all = i.readAllBytes();
                        return new Answer(status, all, all.length, c);
                    }
                    byte[] buf = into != null && into.length >= n ? into
                        : new byte[(int) Math.min(Integer.MAX_VALUE - 8, Math.max(n, into == null ? 0 : 2L * n))];
                    int got = i.readNBytes(buf, 0, (int) n);
                    return new Answer(status, buf, got, c);
                }
            } catch (IOException | IllegalArgumentException e) {
                throw new ConfigError("option 'url': cannot reach a VQS server at " + url + ": " + e);
            }
        }

        /** The answer of a request sent ahead, as get() would have given it. */
        private Answer await(CompletableFuture<Answer> f) {
            try {
                return f.get();
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                if (c instanceof RuntimeException) throw (RuntimeException) c;
                throw new IllegalStateException(c);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }

        private static String enc(String s) { return URLEncoder.encode(s, StandardCharsets.UTF_8); }

        private JsonNode json(Answer r) {
            try {
                return JSON.readTree(r.body, 0, r.length);
            } catch (IOException e) {
                throw new IllegalStateException(url + " answered " + r.statusCode() + " with no JSON");
            }
        }

        private JsonNode ok(Answer r, String what) {
            JsonNode n = json(r);
            if (r.statusCode() >= 300) {
                JsonNode m = n == null ? null : n.findValue("message");
                String said = m == null ? "HTTP " + r.statusCode() : m.asText();
                // the credentials refused (401: none, 403: not this server's), as remote.py's _credentials
                if (r.statusCode() == 401)
                    throw new ConfigError("option 'token': the VQS server at " + url + " requires a bearer token; "
                        + "give it as option 'token' (the server said: " + said + ")");
                if (r.statusCode() == 403)
                    throw new ConfigError("option 'token': the token is not valid for the VQS server at " + url
                        + " (the server said: " + said + ")");
                throw new IllegalStateException(what + ": " + url + " answered " + r.statusCode()
                    + (m == null ? "" : ": " + m.asText()));
            }
            return n;
        }

        @Override
        int partitionCount(String topic, String option) {
            Answer r = get("/topics/" + enc(topic), false);
            if (r.statusCode() == 404)
                throw new ConfigError("option '" + option + "': topic '" + topic + "' does not exist on " + url);
            return ok(r, "topic " + topic).get("partitions").asInt();
        }

        private JsonNode offsets(String topic, Long ts) {
            return ok(get("/topics/" + enc(topic) + "/offsets" + (ts == null ? "" : "?timestamp_ms=" + ts), false),
                "offsets of " + topic).get("partitions");
        }

        @Override
        long[][] partitionOffsets(String topic) {
            JsonNode rows = offsets(topic, null);
            long[][] out = new long[rows.size()][];
            for (JsonNode row : rows)
                out[row.get("partition").asInt()] = new long[] {row.get("start_offset").asLong(), row.get("end_offset").asLong()};
            return out;
        }

        @Override
        long offsetForTime(String topic, int partition, long ts) {
            for (JsonNode row : offsets(topic, ts)) {
                if (row.get("partition").asInt() != partition) continue;
                JsonNode o = row.get("offset_for_time");
                return o == null || o.isNull() ? -1 : o.asLong();
            }
            return -1;
        }

        @Override
        Batches batches(String topic, int partition, long offset, int maxBytes) {
            return fetch(topic, partition, offset, maxBytes, -1);
        }

        @Override
        Batches batches(String topic, int partition, long offset, int maxBytes, long tsLo, long tsHi, long stopAt) {
            return fetch(topic, partition, offset, maxBytes, stopAt);
        }

        /**
         * The stored batches from offset on, fetched maxBytes at a time. With stopAt (the
         * end of the caller's range; -1: unknown) a fetch asks for no more records than the
         * range still needs, and the next fetch is sent as soon as an answer arrives (one
         * request ahead, while the caller consumes this one: the server reads the next
         * batches meanwhile), unless the answer reached stopAt or the log's end. The request
         * sent ahead is the one next() would send then (its offset is the answer's
         * x-vqs-next-offset, the end of its last batch), so its answer is used as is.
         */
        private Batches fetch(String topic, int partition, long offset, int maxBytes, long stopAt) {
            UrlSource self = this;
            String path = "/topics/" + enc(topic) + "/messages?partition=" + partition;
            return new Batches() {
                long pos = offset;
                long start = -1;
                byte[] body;
                int p, end;
                // two answer buffers: the one read (cur) and the one the request sent ahead fills.
                // A buffer is filled again only once every batch decoded from it was consumed:
                // the reader asks for the next batch only after Spark consumed the ColumnarBatch
                // of the previous one (RangeReader), and an answer is replaced only once all its
                // batches were handed out.
                final byte[][] bufs = new byte[2][];
                int cur = 1, aheadSlot;
                boolean first = true;
                long bytes;
                CompletableFuture<Answer> ahead; // the request for offset aheadAt
                long aheadAt = -1;

                public long startOffset() { return start; }
                public long bytesRead() { return bytes; }

                Answer fetchAt(long at, int slot) {
                    long limit = stopAt < 0 ? 100_000 : Math.max(1, Math.min(100_000, stopAt - at));
                    Answer a = get(path + "&offset=" + at + "&limit=" + limit + "&max_bytes=" + maxBytes
                        + "&stored=1", true, bufs[slot]);
                    if (a.status < 300) bufs[slot] = a.body;
                    return a;
                }

                Answer response() {
                    if (ahead != null) {
                        CompletableFuture<Answer> f = ahead;
                        ahead = null;
                        if (aheadAt == pos) {
                            cur = aheadSlot;
                            return await(f);
                        }
                        try {
                            await(f); // not the answer wanted, but its buffer is filled again next
                        } catch (RuntimeException ignored) {
                            // the request asked again below reports what is wrong
                        }
                    }
                    cur ^= 1;
                    return fetchAt(pos, cur);
                }

                public RecordBatch next() {
                    while (body == null || p >= end) {
                        if (!first && body != null && end == 0) return null;
                        Answer r = response();
                        if (r.statusCode() == 400 || r.statusCode() == 416) {
                            JsonNode n = json(r);
                            JsonNode s = n == null ? null : n.findValue("start_offset");
                            if (s != null && s.asLong() > pos) throw new OutOfRange(s.asLong());
                            if (s != null) return null; // past the end
                        }
                        if (r.statusCode() >= 300) self.ok(r, "reading " + topic + "/" + partition);
                        String so = r.header("x-vqs-start-offset", "0");
                        start = Long.parseLong(so);
                        first = false;
                        body = r.body;
                        bytes += r.length;
                        p = 0;
                        end = r.length;
                        if (end == 0) return null;
                        if (stopAt >= 0) {
                            long nxt = Long.parseLong(r.header("x-vqs-next-offset", "-1"));
                            long logEnd = Long.parseLong(r.header("x-vqs-end-offset", "-1"));
                            if (nxt > pos && nxt < stopAt && nxt < logEnd) {
                                aheadAt = nxt;
                                aheadSlot = cur ^ 1;
                                int slot = aheadSlot;
                                ahead = CompletableFuture.supplyAsync(() -> fetchAt(nxt, slot), AHEAD);
                            }
                        }
                    }
                    RecordBatch b = RecordBatch.decode(body, p, end, "server response", p);
                    p += b.sizeBytes;
                    pos = b.nextOffset();
                    return b;
                }

                public void close() {
                    ahead = null; // a request sent ahead finishes on its own thread; its answer is dropped
                }
            };
        }
    }

}
