// over 500 lines: one log directory's reads (tail scan, count, cursor with its time-range skipping)
// share its open segment files, gaps and offsets
package io.vqs.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * One partition's log directory, read without a lock while its owner may be
 * appending (docs/FORMAT.md, "Log directory"; the Python twin is
 * vqs/storage/readonly_tail.py with segment.py and segment_reads.py).
 *
 * <p>Invariants: it never writes a file; its end offset is the consistent prefix
 * of the last segment (CRC-valid batches that continue the offsets, scanned from
 * the last entry of the segment's offset index); every record handed out comes
 * from a batch that was CRC-verified and continues the offsets (contiguous, or
 * across a gap a {@code quarantine/} file name records, or at a segment's base).
 * Damage met while reading is reported by {@link CorruptBatchException} naming
 * the file and position, as the Python reader's CorruptRecordError does.
 */
final class PartitionLog implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int SCAN_CHUNK = 8 << 20;
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    final Path dir;
    final long[] bases;
    final Map<Long, Long> gaps;
    private final FileChannel[] files;
    private final long[] sizes; // per segment: the bytes readable (the last one: its consistent prefix)
    final long startOffset;
    final long endOffset;

    PartitionLog(Path dir) {
        this.dir = dir;
        if (!Files.isDirectory(dir)) throw new IllegalStateException("partition directory " + dir + " is missing");
        this.bases = listBases(dir);
        if (bases.length == 0) throw new IllegalStateException(dir + " holds no log segments");
        this.gaps = loadGaps(dir);
        files = new FileChannel[bases.length];
        sizes = new long[bases.length];
        long lso = checkpointStart(dir);
        long end = bases[0];
        try {
            for (int i = 0; i < bases.length; i++) {
                try {
                    files[i] = FileChannel.open(segmentPath(i), StandardOpenOption.READ);
                    sizes[i] = files[i].size();
                } catch (NoSuchFileException e) { // deleted by the owner's retention meanwhile
                    files[i] = null;
                    sizes[i] = 0;
                }
            }
            int last = bases.length - 1;
            long[] tail = tail(last);
            sizes[last] = tail[0];
            end = tail[1];
        } catch (IOException e) {
            close();
            throw new UncheckedIOException("reading " + dir + ": " + e.getMessage(), e);
        }
        this.endOffset = end;
        this.startOffset = Math.min(Math.max(bases[0], lso), end);
    }

    Path segmentPath(int i) { return dir.resolve(String.format("%020d.log", bases[i])); }

    static long[] listBases(Path dir) {
        List<Long> out = new ArrayList<>();
        try (Stream<Path> s = Files.list(dir)) {
            s.forEach(p -> {
                String n = p.getFileName().toString();
                if (n.length() == 24 && n.endsWith(".log") && n.substring(0, 20).chars().allMatch(Character::isDigit))
                    out.add(Long.parseLong(n.substring(0, 20)));
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.stream().mapToLong(Long::longValue).sorted().toArray();
    }

    /** {from: to}: offset gaps recorded by quarantine/{base}-{position}-{from}-{to}.bad names. */
    static Map<Long, Long> loadGaps(Path dir) {
        Map<Long, Long> gaps = new HashMap<>();
        Path q = dir.resolve("quarantine");
        if (!Files.isDirectory(q)) return gaps;
        try (Stream<Path> s = Files.list(q)) {
            s.forEach(p -> {
                String n = p.getFileName().toString();
                if (!n.endsWith(".bad")) return;
                String[] parts = n.substring(0, n.length() - 4).split("-");
                if (parts.length == 4 && digits(parts[2]) && digits(parts[3]))
                    gaps.put(Long.parseLong(parts[2]), Long.parseLong(parts[3]));
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return gaps;
    }

    /** {segment base: from}: quarantine/{base}-{position}-{from}-end.bad names, a segment's quarantined tail. */
    static Map<Long, Long> loadTailGaps(Path dir) {
        Map<Long, Long> out = new HashMap<>();
        Path q = dir.resolve("quarantine");
        if (!Files.isDirectory(q)) return out;
        try (Stream<Path> s = Files.list(q)) {
            s.forEach(p -> {
                String n = p.getFileName().toString();
                if (!n.endsWith(".bad")) return;
                String[] parts = n.substring(0, n.length() - 4).split("-");
                if (parts.length == 4 && digits(parts[0]) && digits(parts[2]) && parts[3].equals("end"))
                    out.merge(Long.parseLong(parts[0]), Long.parseLong(parts[2]), Math::min);
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    /**
     * The number of records with offsets in [s, e), from the offsets alone (no batch is
     * read, so no CRC is checked: count() answers as a header-only scan would).
     * docs/FORMAT.md: offsets are contiguous but for the gaps quarantine/ names record
     * and segment boundaries after a quarantined segment tail; such a segment's end is
     * found by scanning its valid prefix (rare: only where a tail was quarantined).
     * A missing segment file (retention deleted it meanwhile) holds nothing.
     */
    long count(long s, long e) throws IOException {
        s = Math.max(s, startOffset);
        e = Math.min(e, endOffset);
        if (e <= s) return 0;
        Map<Long, Long> tails = loadTailGaps(dir);
        boolean compacted = Files.exists(dir.resolve("cleaner.checkpoint"));
        long n = 0;
        for (int i = 0; i < bases.length; i++) {
            if (files[i] == null) continue;
            long lo = bases[i];
            long hi = i == bases.length - 1 ? endOffset : bases[i + 1];
            if (compacted && i < bases.length - 1) {  // may hold the cleaner's gaps: count from batch headers
                if (Math.min(e, hi) > Math.max(s, lo)) n += countFromHeaders(i, s, e);
                continue;
            }
            if (i < bases.length - 1 && tails.containsKey(lo)) hi = Math.min(hi, scanValid(i, 0, lo, sizes[i])[1]);
            long a = Math.max(s, lo), b = Math.min(e, hi);
            if (b <= a) continue;
            n += b - a;
            for (var g : gaps.entrySet()) {
                long ga = Math.max(a, g.getKey()), gb = Math.min(b, g.getValue());
                if (gb > ga) n -= gb - ga;
            }
        }
        return n;
    }

    /** Records of sealed segment i with offsets in [s, e), from its batch headers (as scanValid reads them). */
    private long countFromHeaders(int i, long s, long e) throws IOException {
        long n = 0, pos = 0, expected = bases[i], limit = sizes[i];
        while (pos < limit) {
            byte[] h = pread(i, pos, (int) Math.min(RecordBatch.HEADER_SIZE, limit - pos));
            long[] hd = RecordBatch.peek(h, 0, h.length);
            if (hd == null || pos + hd[1] > limit) break;
            long base = hd[0], count = RecordBatch.u32(h, 20);
            if (!continues(expected, base, RecordBatch.u16(h, 18))) break;
            n += Math.max(0, Math.min(e, base + count) - Math.max(s, base));
            expected = base + count;
            pos += hd[1];
        }
        return n;
    }

    private static boolean digits(String s) { return !s.isEmpty() && s.chars().allMatch(Character::isDigit); }

    /** log.checkpoint's log_start_offset; 0 if missing or unreadable. */
    static long checkpointStart(Path dir) {
        try {
            JsonNode n = JSON.readTree(Files.readAllBytes(dir.resolve("log.checkpoint")));
            JsonNode v = n.get("log_start_offset");
            return v != null && v.canConvertToLong() ? v.asLong() : 0;
        } catch (IOException | RuntimeException e) {
            return 0;
        }
    }

    /** docs/FORMAT.md: contiguous, across a gap quarantine/ records, or forward before a batch the
     *  log cleaner wrote (attribute bit 4, inside the CRC). */
    boolean continues(long expected, long base, int attributes) {
        if (base == expected) return true;
        if ((attributes & RecordBatch.ATTR_COMPACTED) != 0 && base > expected) return true;
        Long to = gaps.get(expected);
        return to != null && to == base;
    }

    /** Offset-index entries {relative offset, position} of segment i, up to the first zero or out-of-order one. */
    private List<long[]> indexEntries(int i) {
        List<long[]> out = new ArrayList<>();
        Path p = dir.resolve(String.format("%020d.index", bases[i]));
        byte[] b;
        try {
            b = Files.readAllBytes(p);
        } catch (IOException e) {
            return out;
        }
        long pr = -1, pp = -1;
        for (int k = 0; k + 8 <= b.length; k += 8) {
            long r = RecordBatch.u32(b, k), pos = RecordBatch.u32(b, k + 4);
            if ((r == 0 && pos == 0) || r <= pr || pos <= pp) break;
            out.add(new long[] {r, pos});
            pr = r;
            pp = pos;
        }
        return out;
    }

    /** The first offset of segment i that may hold a record with timestamp >= ts (TimeIndex.floor). */
    long timeFloor(int i, long ts) {
        byte[] b;
        try {
            b = Files.readAllBytes(dir.resolve(String.format("%020d.timeindex", bases[i])));
        } catch (IOException e) {
            return bases[i]; // no index: no skip
        }
        bytesRead += b.length;
        return bases[i] + TimeIndex.floor(b, ts);
    }

    /** {position, base offset} from which a forward scan of segment i finds offset (index floor). */
    private long[] positionFor(int i, long offset, List<long[]> entries) {
        long rel = offset - bases[i];
        long[] best = null;
        int lo = 0, hi = entries.size() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (entries.get(mid)[0] <= rel) { best = entries.get(mid); lo = mid + 1; } else hi = mid - 1;
        }
        if (best == null || best[1] >= sizes[i]) return new long[] {0, bases[i]};
        return new long[] {best[1], bases[i] + best[0]};
    }

    long bytesRead; // bytes this log read from its segment files (a scan's metric)

    byte[] pread(int i, long pos, int n) throws IOException {
        bytesRead += n;
        byte[] out = new byte[n];
        ByteBuffer bb = ByteBuffer.wrap(out);
        while (bb.hasRemaining()) {
            int r = files[i].read(bb, pos + bb.position());
            if (r < 0) break;
        }
        return bb.position() == n ? out : java.util.Arrays.copyOf(out, bb.position());
    }

    /**
     * The consistent prefix of segment i scanned from {position, expected}:
     * {end position, next offset, count of valid batches}. CRC-verified, continuity-checked.
     */
    private long[] scanValid(int i, long pos, long expected, long limit) throws IOException {
        long batches = 0;
        while (pos < limit) {
            byte[] chunk = pread(i, pos, (int) Math.min(SCAN_CHUNK, limit - pos));
            int p = 0;
            boolean stop = false;
            while (true) {
                long[] h = RecordBatch.peek(chunk, p, chunk.length);
                if (h == null || p + h[1] > chunk.length) break;
                long[] v = RecordBatch.verify(chunk, p, chunk.length);
                if (v == null || !continues(expected, v[0], (int) v[3])) { stop = true; break; }
                expected = v[0] + v[2];
                p += (int) h[1];
                batches++;
            }
            if (p == 0 && !stop) {
                long[] h = RecordBatch.peek(chunk, 0, chunk.length);
                if (h == null || pos + h[1] > limit) return new long[] {pos, expected, batches};
                byte[] big = pread(i, pos, (int) h[1]);
                long[] v = RecordBatch.verify(big, 0, big.length);
                if (v == null || !continues(expected, v[0], (int) v[3])) return new long[] {pos, expected, batches};
                expected = v[0] + v[2];
                p = (int) h[1];
                batches++;
            }
            pos += p;
            if (stop) break;
        }
        return new long[] {pos, expected, batches};
    }

    /** {consistent size, next offset} of the last segment (readonly_tail.find_tail). */
    private long[] tail(int i) throws IOException {
        if (files[i] == null) return new long[] {0, bases[i]};
        long[] start = positionFor(i, bases[i] + (1L << 32) - 1, indexEntries(i));
        long[] r = scanValid(i, start[0], start[1], sizes[i]);
        if (start[0] != 0 && r[2] == 0) { // the index entry names no batch: damaged; scan from the start
            r = scanValid(i, 0, bases[i], sizes[i]);
        }
        return new long[] {r[0], r[1]};
    }

    private int segmentOf(long offset) {
        int lo = 0, hi = bases.length - 1, best = 0;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (bases[mid] <= offset) { best = mid; lo = mid + 1; } else hi = mid - 1;
        }
        return best;
    }

    /** A sequential reader of the batches holding offsets from {@code offset} on. */
    Cursor cursor(long offset) {
        return new Cursor(offset, false);
    }

    /**
     * A cursor that reads only batch headers (for a query that needs no column,
     * count()): bounds, magic, record count and the continuity of base offsets are
     * checked, the body (and so its CRC) is not read. The batch holding the first
     * offset is still fully verified when the cursor locates it.
     */
    Cursor headerCursor(long offset) {
        return new Cursor(offset, true);
    }

    /** Reads whole verified batches in order; the first may begin below the offset asked for. */
    final class Cursor {
        private int seg;
        private long pos;       // file position of the next batch in segment seg
        private long expected;  // base offset the next batch must continue from
        private long want;      // the smallest offset still wanted
        // The read buffer: direct (the file's bytes are copied once, by the kernel, and the
        // CRC and the column vectors read them in place), reused from one read to the next,
        // so a RecordBatch it returned is valid only until the next call of next()
        private ByteBuffer buf = EMPTY;
        private long bufPos = -1; // file position of buf's index 0
        private int bufLen;
        private boolean located;
        private final boolean headersOnly;
        // the pushed timestamp range (Bounds): batches none of whose records lie in
        // [tsLo, tsHi] are stepped over by their headers, below stopAt (the range's end)
        private long tsLo = Long.MIN_VALUE, tsHi = Long.MAX_VALUE, stopAt = Long.MAX_VALUE;
        long skipped; // batches stepped over by the time range

        /** Step over batches that hold no record with a timestamp in [lo, hi] (ms), below offset stop. */
        void skipOutside(long lo, long hi, long stop) {
            tsLo = lo;
            tsHi = hi;
            stopAt = stop;
        }

        private boolean filtering() { return !headersOnly && (tsLo != Long.MIN_VALUE || tsHi != Long.MAX_VALUE); }

        /** The offset this cursor has read up to (records below it were returned or skipped). */
        long reached() { return Math.max(expected, want); }

        Cursor(long offset, boolean headersOnly) {
            this.want = offset;
            this.seg = segmentOf(offset);
            this.headersOnly = headersOnly;
        }

        private String where() { return segmentPath(seg).toString(); }

        /** The next batch with records >= the wanted offset, or null at the end of the log. */
        RecordBatch next(int readAhead) throws IOException {
            while (true) {
                if (seg >= bases.length) return null;
                if (!located) {
                    if (tsLo != Long.MIN_VALUE && !headersOnly && want < stopAt)
                        want = Math.min(Math.max(want, timeFloor(seg, tsLo)), stopAt);
                    if (!locate()) { advanceSegment(); continue; }
                }
                if (pos >= sizes[seg]) { advanceSegment(); continue; }
                if (filtering() && skipByHeader(readAhead)) continue;
                RecordBatch b = headersOnly ? headerAt() : decodeAt(readAhead);
                if (!continues(expected, b.baseOffset, b.attributes))
                    throw new CorruptBatchException(where() + ": batch at position " + pos + " has base offset "
                        + b.baseOffset + ", expected " + expected, pos);
                pos += b.sizeBytes;
                expected = b.nextOffset();
                if (b.nextOffset() <= want) continue;
                want = b.nextOffset();
                return b;
            }
        }

        private void advanceSegment() {
            seg++;
            located = false;
            bufPos = -1;
            bufLen = 0;
        }

        /**
         * Step over the batch at pos when its header shows no record in the time range:
         * its largest timestamp is below tsLo, or (no timestamps column: every record has
         * the first timestamp) that timestamp is outside. Only the header is looked at
         * (its base offset must continue the offsets; its body, and so its CRC, is not
         * read: a pruned batch is never returned, as with Parquet's row-group statistics).
         */
        private boolean skipByHeader(int readAhead) throws IOException {
            int off = (int) (pos - bufPos);
            ByteBuffer h = buf;
            if (bufPos < 0 || pos < bufPos || off + RecordBatch.HEADER_SIZE > bufLen) {
                // not buffered: read the header alone, so a skipped body is not read at all
                byte[] hb = pread(seg, pos, (int) Math.min(RecordBatch.HEADER_SIZE, sizes[seg] - pos));
                if (hb.length < RecordBatch.HEADER_SIZE) return false; // decodeAt reports the truncated header
                h = ByteBuffer.wrap(hb).order(ByteOrder.LITTLE_ENDIAN);
                off = 0;
            }
            long base = h.getLong(off);
            long size = (h.getInt(off + 8) & 0xFFFFFFFFL) + RecordBatch.LENGTH_OVERHEAD;
            int magic = h.get(off + 16) & 0xFF, attrs = h.getShort(off + 18) & 0xFFFF;
            long n = h.getInt(off + 20) & 0xFFFFFFFFL;
            long first = h.getLong(off + 24), max = h.getLong(off + 32);
            if (magic != RecordBatch.MAGIC || n == 0 || size < RecordBatch.HEADER_SIZE || pos + size > sizes[seg]
                    || base >= stopAt || !continues(expected, base, attrs))
                return false; // decodeAt reports what is wrong, or the reader stops at stopAt
            long min = (attrs & RecordBatch.ATTR_TIMESTAMPS) != 0 ? Long.MIN_VALUE : first;
            if (max >= tsLo && min <= tsHi) return false;
            pos += size;
            expected = base + n;
            if (expected > want) want = expected;
            skipped++;
            return true;
        }

        private RecordBatch headerAt() throws IOException {
            byte[] h = pread(seg, pos, (int) Math.min(RecordBatch.HEADER_SIZE, sizes[seg] - pos));
            long[] hd = RecordBatch.peek(h, 0, h.length);
            long n = hd == null ? 0 : RecordBatch.u32(h, 20);
            if (hd == null || pos + hd[1] > sizes[seg] || (h[16] & 0xFF) != RecordBatch.MAGIC || n == 0)
                throw new CorruptBatchException(where() + ": invalid batch at position " + pos + " (expected base offset "
                    + expected + "); offset " + want + " cannot be read", pos);
            RecordBatch b = new RecordBatch();
            b.baseOffset = hd[0];
            b.count = (int) n;
            b.sizeBytes = (int) hd[1];
            b.attributes = RecordBatch.u16(h, 18);
            return b;
        }

        private RecordBatch decodeAt(int readAhead) throws IOException {
            int off = (int) (pos - bufPos);
            if (bufPos < 0 || pos < bufPos || off + RecordBatch.HEADER_SIZE > bufLen
                    || off + RecordBatch.peekSize(buf, off, bufLen) > bufLen) {
                fill(readAhead, bufPos >= 0 && pos >= bufPos && off + RecordBatch.HEADER_SIZE <= bufLen
                    ? RecordBatch.peekSize(buf, off, bufLen) : -1);
                off = 0;
            }
            try {
                return RecordBatch.decode(buf, off, bufLen, where(), pos);
            } catch (CorruptBatchException e) {
                throw new CorruptBatchException(where() + ": invalid batch at position " + pos + " (expected base offset "
                    + expected + "); offset " + want + " cannot be read: " + e.getMessage(), pos);
            }
        }

        /** Read from pos: readAhead bytes, or the whole batch there if it is larger (one read, not two). */
        private void fill(int readAhead, long known) throws IOException {
            long left = sizes[seg] - pos;
            long first = known;
            if (first < 0 || first == Integer.MAX_VALUE) { // the header is not in the buffer: look at it
                byte[] h = pread(seg, pos, (int) Math.min(RecordBatch.HEADER_SIZE, left));
                first = RecordBatch.peekSize(h, 0, h.length);
            }
            long want = Math.max(readAhead, 1 << 16);
            if (first != Integer.MAX_VALUE) want = Math.max(want, first);
            int n = (int) Math.min(want, left);
            if (buf.capacity() < n) buf = ByteBuffer.allocateDirect(Math.max(n, readAhead)).order(ByteOrder.LITTLE_ENDIAN);
            buf.clear().limit(n);
            while (buf.hasRemaining()) {
                if (files[seg].read(buf, pos + buf.position()) < 0) break;
            }
            bufPos = pos;
            bufLen = buf.position();
            bytesRead += bufLen;
        }

        /** Position this cursor at the batch holding {@code want} in segment seg (segment.find_batch). */
        private boolean locate() throws IOException {
            if (files[seg] == null) return false;
            long[] start = positionFor(seg, want, indexEntries(seg));
            long p = start[0], exp = start[1];
            boolean fromIndex = p != 0;
            while (true) {
                long[] found = scanTo(p, exp);
                if (found[2] == 1) { pos = found[0]; expected = found[1]; located = true; return true; }
                p = found[0];
                exp = found[1];
                if (p >= sizes[seg]) return false;
                if (fromIndex) { p = 0; exp = bases[seg]; fromIndex = false; continue; }
                // an invalid batch at p: step over it only if the wanted offset lies beyond what follows
                long[] nxt = nextValid(p, exp + 1);
                if (nxt == null || nxt[1] > want)
                    throw new CorruptBatchException(where() + ": invalid batch at position " + p + " (expected base offset "
                        + exp + "); offset " + want + " cannot be read", p);
                p = nxt[0];
                exp = nxt[1];
            }
        }

        /** Scan valid batches from p: {pos, base, 1} of the one holding want, or {stop pos, expected, 0}. */
        private long[] scanTo(long p, long exp) throws IOException {
            long limit = sizes[seg];
            while (p < limit) {
                byte[] h = pread(seg, p, (int) Math.min(RecordBatch.HEADER_SIZE, limit - p));
                long[] hd = RecordBatch.peek(h, 0, h.length);
                if (hd == null || p + hd[1] > limit) return new long[] {p, exp, 0};
                long n = RecordBatch.u32(h, 20);
                if (!continues(exp, hd[0], RecordBatch.u16(h, 18))) return new long[] {p, exp, 0};
                if (hd[0] + n > want) {
                    byte[] whole = pread(seg, p, (int) hd[1]);
                    if (RecordBatch.verify(whole, 0, whole.length) == null) return new long[] {p, exp, 0};
                    return new long[] {p, hd[0], 1};
                }
                // skipped batches are checked by their headers only (a batch we return is fully verified)
                if ((h[16] & 0xFF) != RecordBatch.MAGIC || n == 0) return new long[] {p, exp, 0};
                exp = hd[0] + n;
                p += hd[1];
            }
            return new long[] {p, exp, 0};
        }

        /** {position, base} of the first valid batch after bad position p with base >= minBase. */
        private long[] nextValid(long p, long minBase) throws IOException {
            long limit = sizes[seg];
            byte[] rest = pread(seg, p, (int) Math.min(limit - p, 256L << 20));
            for (int i = 1 + 16; i < rest.length; i++) {
                if (rest[i] != RecordBatch.MAGIC) continue;
                int cand = i - 16;
                long[] v = RecordBatch.verify(rest, cand, rest.length);
                if (v != null && v[0] >= minBase) return new long[] {p + cand, v[0]};
            }
            return null;
        }
    }

    /**
     * The first offset >= startOffset whose record timestamp is >= ts, or -1 if there is none.
     * A seek, as docs/FORMAT.md ("Time index") specifies: in each segment the scan starts at
     * the batch of the time index's last entry with T < ts (TimeIndex.floor), and batches whose
     * headers show no record at or after ts are stepped over unread (Cursor.skipOutside); so a
     * segment wholly before ts costs its index files and one batch, not a scan of its data.
     * The batch the answer comes from is fully verified, as any batch a cursor returns.
     */
    long offsetForTime(long ts) throws IOException {
        Cursor c = cursor(startOffset);
        c.skipOutside(ts, Long.MAX_VALUE, Long.MAX_VALUE);
        RecordBatch b;
        while ((b = c.next(1 << 20)) != null) {
            if (b.maxTimestamp < ts) continue;
            for (int k = (int) Math.max(0, startOffset - b.baseOffset); k < b.count; k++)
                if (b.timestamp(k) >= ts) return b.baseOffset + k;
        }
        return -1;
    }

    @Override
    public void close() {
        for (FileChannel f : files) {
            if (f == null) continue;
            try { f.close(); } catch (IOException ignored) { /* read-only: nothing to lose */ }
        }
    }
}
