package io.vqs.spark;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * One decoded, CRC-verified record batch (docs/FORMAT.md, "Record batch"): an
 * independent implementation of the format, kept honest by the conformance
 * tests that run it beside the Python codec (vqs/record/batch.py).
 *
 * <p>Invariants: a RecordBatch exists only for bytes that passed every check of
 * the spec's "Validity" section except continuity (the caller's, as it knows the
 * expected base offset); lengths are bounds-checked before anything is
 * allocated from them. The body is uncompressed; column positions index it.
 * The body is a little-endian ByteBuffer: for an uncompressed batch read from a
 * file it is the reader's (direct) read buffer itself, so a batch is valid only
 * until its cursor reads again (see PartitionLog.Cursor).
 */
final class RecordBatch {
    static final int HEADER_SIZE = 64;
    static final int CRC_START = 16;
    static final int LENGTH_OVERHEAD = 12;
    static final int MIN_BATCH_LENGTH = HEADER_SIZE - LENGTH_OVERHEAD;
    static final int MAX_BATCH_BYTES = 1 << 30;
    static final int MAGIC = 1;
    static final int MAX_CODEC = 3; // 0 none, 1 zstd, 2 lz4, 3 gzip
    static final int ATTR_KEYS = 1, ATTR_HEADERS = 2, ATTR_TIMESTAMPS = 4, ATTR_NULL_VALUES = 8;
    /** Written by the log cleaner: the batch's base offset may skip forward past removed records. */
    static final int ATTR_COMPACTED = 16;
    static final int ATTR_KNOWN = 31;

    private static final VarHandle I32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle I64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle I16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);

    long baseOffset;
    int count;
    long firstTimestamp;
    long maxTimestamp;
    int attributes;
    int sizeBytes; // header + stored body, in the file
    ByteBuffer body; // little-endian; absolute indexes only (never its position)
    int bodyStart;
    int bodyLength;
    int valueOffsets, valueData;
    int keyValidity = -1, keyOffsets, keyData;
    int headerOffsets = -1, headerData;
    int timestamps = -1;
    int valueValidity = -1; // the values' validity bitmap (bit 3), or -1: no value is null

    static int i32(byte[] b, int p) { return (int) I32.get(b, p); }
    static long u32(byte[] b, int p) { return ((int) I32.get(b, p)) & 0xFFFFFFFFL; }
    static long i64(byte[] b, int p) { return (long) I64.get(b, p); }
    static int u16(byte[] b, int p) { return ((short) I16.get(b, p)) & 0xFFFF; }

    long nextOffset() { return baseOffset + count; }

    /** Offset i (0..count) of the values column: value i is data[off(i), off(i+1)). */
    int valueOffset(int i) { return body.getInt(valueOffsets + 4 * i); }
    int keyOffset(int i) { return body.getInt(keyOffsets + 4 * i); }
    int headerOffset(int i) { return body.getInt(headerOffsets + 4 * i); }
    boolean hasKey(int i) { return keyValidity >= 0 && ((body.get(keyValidity + (i >> 3)) >> (i & 7)) & 1) != 0; }
    boolean hasValue(int i) { return valueValidity < 0 || ((body.get(valueValidity + (i >> 3)) >> (i & 7)) & 1) != 0; }
    long timestamp(int i) { return timestamps < 0 ? firstTimestamp : body.getLong(timestamps + 8 * i); }

    /** (base offset, total size) of the header at pos, or null when incomplete or out of bounds; no CRC. */
    static long[] peek(byte[] buf, int pos, int end) {
        if (pos + HEADER_SIZE > end) return null;
        long length = u32(buf, pos + 8);
        if (length < MIN_BATCH_LENGTH || length > MAX_BATCH_BYTES) return null;
        return new long[] {i64(buf, pos), length + LENGTH_OVERHEAD};
    }

    /** Total size of the batch at pos per its header, or Integer.MAX_VALUE when unknown. */
    static long peekSize(byte[] buf, int pos, int end) {
        long[] h = peek(buf, pos, end);
        return h == null ? Integer.MAX_VALUE : h[1];
    }

    /** Header checks and CRC of the batch at pos, without decoding its body: {base offset, size, record
     *  count, attributes}; null if invalid or incomplete. */
    static long[] verify(byte[] buf, int pos, int end) {
        long[] h = peek(buf, pos, end);
        if (h == null || pos + h[1] > end) return null;
        int magic = buf[pos + 16] & 0xFF, codec = buf[pos + 17] & 0xFF, attrs = u16(buf, pos + 18);
        long n = u32(buf, pos + 20);
        if (magic != MAGIC || n == 0 || codec > MAX_CODEC || (attrs & ~ATTR_KNOWN) != 0) return null;
        CRC32C crc = new CRC32C();
        crc.update(buf, pos + CRC_START, (int) h[1] - CRC_START);
        if ((int) crc.getValue() != i32(buf, pos + 12)) return null;
        return new long[] {h[0], h[1], n, attrs};
    }

    /** Decode and verify the batch at pos of buf[..end); CorruptBatchException names where and the position. */
    static RecordBatch decode(byte[] buf, int pos, int end, String where, long filePos) {
        return decode(ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN), pos, end, where, filePos);
    }

    /** Total size of the batch at pos of a little-endian buffer per its header, or Integer.MAX_VALUE when unknown. */
    static long peekSize(ByteBuffer buf, int pos, int end) {
        if (pos + HEADER_SIZE > end) return Integer.MAX_VALUE;
        long length = buf.getInt(pos + 8) & 0xFFFFFFFFL;
        if (length < MIN_BATCH_LENGTH || length > MAX_BATCH_BYTES) return Integer.MAX_VALUE;
        return length + LENGTH_OVERHEAD;
    }

    /** The same over a little-endian buffer (heap or direct); an uncompressed body stays in buf. */
    static RecordBatch decode(ByteBuffer buf, int pos, int end, String where, long filePos) {
        if (pos + HEADER_SIZE > end) throw new CorruptBatchException(where + ": truncated batch header at position " + filePos, filePos);
        long length = buf.getInt(pos + 8) & 0xFFFFFFFFL;
        if (length < MIN_BATCH_LENGTH || length > MAX_BATCH_BYTES)
            throw new CorruptBatchException(where + ": batch at position " + filePos + " has impossible length " + length, filePos);
        int stop = (int) (pos + LENGTH_OVERHEAD + length);
        if (pos + LENGTH_OVERHEAD + length > end)
            throw new CorruptBatchException(where + ": batch at position " + filePos + " (length " + length + ") runs past the end", filePos);
        long base = buf.getLong(pos);
        CRC32C crc = new CRC32C();
        crc.update(buf.duplicate().limit(stop).position(pos + CRC_START)); // intrinsic on heap and direct buffers
        if ((int) crc.getValue() != buf.getInt(pos + 12))
            throw new CorruptBatchException(where + ": CRC mismatch in batch at position " + filePos + " (base offset " + base + ")", filePos);
        int magic = buf.get(pos + 16) & 0xFF, codec = buf.get(pos + 17) & 0xFF, attrs = buf.getShort(pos + 18) & 0xFFFF;
        long n = buf.getInt(pos + 20) & 0xFFFFFFFFL;
        if (magic != MAGIC || n == 0 || (attrs & ~ATTR_KNOWN) != 0 || codec > MAX_CODEC)
            throw new CorruptBatchException(where + ": batch at position " + filePos + " has unsupported magic " + magic
                + ", codec " + codec + ", attributes " + attrs + " or count " + n, filePos);
        long bodyLen = buf.getInt(pos + 54) & 0xFFFFFFFFL;
        RecordBatch b = new RecordBatch();
        b.baseOffset = base;
        b.count = (int) n;
        b.firstTimestamp = buf.getLong(pos + 24);
        b.maxTimestamp = buf.getLong(pos + 32);
        b.attributes = attrs;
        b.sizeBytes = stop - pos;
        int stored = stop - pos - HEADER_SIZE;
        if (codec == 0) {
            b.body = buf;
            b.bodyStart = pos + HEADER_SIZE;
            b.bodyLength = stored;
        } else {
            if (bodyLen > MAX_BATCH_BYTES)
                throw new CorruptBatchException(where + ": batch at " + filePos + " claims body of " + bodyLen + " bytes", filePos);
            byte[] src;
            int srcOff;
            if (buf.hasArray()) {
                src = buf.array();
                srcOff = buf.arrayOffset() + pos + HEADER_SIZE;
            } else {
                src = new byte[stored];
                buf.get(pos + HEADER_SIZE, src, 0, stored);
                srcOff = 0;
            }
            byte[] out;
            try {
                out = codec == 1 ? Codecs.zstd(src, srcOff, stored, (int) bodyLen)
                    : codec == 2 ? Codecs.lz4(src, srcOff, stored, (int) bodyLen)
                    : Codecs.gzip(src, srcOff, stored, (int) bodyLen);
            } catch (RuntimeException e) {
                throw new CorruptBatchException(where + ": batch at " + filePos + " does not decompress: " + e.getMessage(), filePos);
            }
            b.body = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
            b.bodyStart = 0;
            b.bodyLength = out.length;
        }
        if (b.bodyLength != bodyLen)
            throw new CorruptBatchException(where + ": batch at position " + filePos + " body is " + b.bodyLength
                + " bytes, header says " + bodyLen, filePos);
        String bad = b.layout();
        if (bad != null)
            throw new CorruptBatchException(where + ": batch at position " + filePos + " (base offset " + base + ") is malformed: " + bad, filePos);
        return b;
    }

    /** Find the columns in the body; a message if they do not fit it exactly. */
    private String layout() {
        int n = count;
        int end = bodyStart + bodyLength;
        int p = bodyStart;
        int[] col = column(p, end, n);
        if (col == null) return "values column runs past the body";
        valueOffsets = p; valueData = col[0]; p = col[1];
        if ((attributes & ATTR_KEYS) != 0) {
            int nb = (n + 7) >> 3;
            if ((long) p + nb > end) return "key validity bitmap";
            keyValidity = p; p += nb;
            col = column(p, end, n);
            if (col == null) return "keys column runs past the body";
            keyOffsets = p; keyData = col[0]; p = col[1];
        }
        if ((attributes & ATTR_HEADERS) != 0) {
            col = column(p, end, n);
            if (col == null) return "headers column runs past the body";
            headerOffsets = p; headerData = col[0]; p = col[1];
        }
        if ((attributes & ATTR_TIMESTAMPS) != 0) {
            if ((long) p + 8L * n > end) return "timestamps column";
            timestamps = p; p += 8 * n;
        }
        if ((attributes & ATTR_NULL_VALUES) != 0) {
            int nb = (n + 7) >> 3;
            if ((long) p + nb > end) return "value validity bitmap";
            valueValidity = p; p += nb;
        }
        if (p != end) return (end - p) + " trailing bytes";
        return null;
    }

    /** {data position, end} of an offsets+data column at p, or null if it does not fit. */
    private int[] column(int p, int end, int n) {
        long olen = 4L * (n + 1);
        if (p + olen > end) return null;
        int data = (int) (p + olen);
        long size = body.getInt(p + 4 * n) & 0xFFFFFFFFL;
        if (body.getInt(p) != 0 || data + size > end) return null;
        // offsets must not decrease, or a slice would run backwards
        int prev = 0;
        for (int i = 1; i <= n; i++) {
            int o = body.getInt(p + 4 * i);
            if (Integer.compareUnsigned(o, prev) < 0) return null;
            prev = o;
        }
        return new int[] {data, (int) (data + size)};
    }

    /** A header value's length that stands for a null value (docs/FORMAT.md). */
    static final long NULL_HEADER_VALUE = 0xFFFFFFFFL;

    /** Decode record i's headers blob into names and values (a null value as null), or an
     * exception if malformed. */
    void headers(int i, java.util.List<String> names, java.util.List<byte[]> values) {
        if (headerOffsets < 0) return;
        int a = headerData + headerOffset(i), z = headerData + headerOffset(i + 1);
        if (z == a) return;
        try {
            int cnt = body.getShort(a) & 0xFFFF;
            int p = a + 2;
            for (int k = 0; k < cnt; k++) {
                int kl = body.getShort(p) & 0xFFFF; p += 2;
                if (p + kl > z) throw new IllegalStateException();
                byte[] kb = new byte[kl];
                body.get(p, kb);
                String name = new String(kb, java.nio.charset.StandardCharsets.UTF_8);
                p += kl;
                long vl = body.getInt(p) & 0xFFFFFFFFL; p += 4;
                if (vl == NULL_HEADER_VALUE) { // a null value: no bytes follow
                    names.add(name);
                    values.add(null);
                    continue;
                }
                if (p + vl > z) throw new IllegalStateException();
                names.add(name);
                byte[] vb = new byte[(int) vl];
                body.get(p, vb);
                values.add(vb);
                p += (int) vl;
            }
        } catch (RuntimeException e) {
            throw new CorruptBatchException("malformed record headers in batch with base offset " + baseOffset, -1);
        }
    }

    static final class Codecs {
        /**
         * One gzip member (RFC 1952) and nothing after it, inflated into the header's
         * body length and not a byte more (gzip declares no size up front); its CRC-32
         * and length trailer must match what was inflated.
         */
        static byte[] gzip(byte[] src, int off, int len, int size) {
            int end = off + len;
            if (len < 18 || (src[off] & 0xFF) != 0x1f || (src[off + 1] & 0xFF) != 0x8b || src[off + 2] != 8)
                throw new IllegalStateException("not a gzip member");
            int flg = src[off + 3] & 0xFF, p = off + 10;
            if ((flg & 0xE0) != 0) throw new IllegalStateException("gzip member with reserved flags " + flg);
            if ((flg & 0x04) != 0) { // FEXTRA
                if (p + 2 > end) throw new IllegalStateException("gzip header is truncated");
                p += 2 + ((src[p] & 0xFF) | (src[p + 1] & 0xFF) << 8);
            }
            for (int bit = 0x08; bit <= 0x10; bit <<= 1) { // FNAME, FCOMMENT: zero-terminated
                if ((flg & bit) == 0) continue;
                while (p < end && src[p] != 0) p++;
                p++;
            }
            if ((flg & 0x02) != 0) p += 2; // FHCRC
            if (p + 8 > end) throw new IllegalStateException("gzip header is truncated");
            java.util.zip.Inflater inf = new java.util.zip.Inflater(true);
            byte[] out = new byte[size];
            int o;
            try {
                inf.setInput(src, p, end - 8 - p);
                o = inf.inflate(out);
                if (!inf.finished() && o == size && inf.inflate(new byte[1]) > 0)
                    throw new IllegalStateException("the gzip member holds more than the header's " + size + " bytes");
                if (!inf.finished()) throw new IllegalStateException("the gzip member is truncated");
                if (inf.getRemaining() != 0) throw new IllegalStateException("bytes follow the gzip member");
            } catch (java.util.zip.DataFormatException e) {
                throw new IllegalStateException("gzip: " + e.getMessage());
            } finally {
                inf.end();
            }
            java.util.zip.CRC32 crc = new java.util.zip.CRC32();
            crc.update(out, 0, o);
            if ((int) crc.getValue() != i32(src, end - 8) || o != i32(src, end - 4))
                throw new IllegalStateException("the gzip member's trailer does not match its " + o + " bytes");
            if (o != size) throw new IllegalStateException("gzip member holds " + o + " bytes, header says " + size);
            return out;
        }

        static byte[] zstd(byte[] src, int off, int len, int size) {
            long declared = com.github.luben.zstd.Zstd.getFrameContentSize(src, off, len);
            if (declared != -1 && declared != size)
                throw new IllegalStateException("zstd frame declares " + declared + " bytes, header says " + size);
            byte[] out = new byte[size];
            long r = com.github.luben.zstd.Zstd.decompressByteArray(out, 0, size, src, off, len);
            if (com.github.luben.zstd.Zstd.isError(r)) throw new IllegalStateException(com.github.luben.zstd.Zstd.getErrorName(r));
            if (r != size) throw new IllegalStateException("zstd frame holds " + r + " bytes, header says " + size);
            return out;
        }

        /**
         * One LZ4 frame (lz4.org frame format) whose descriptor declares the content
         * size. Blocks may be linked (a match may reach back into earlier blocks: the
         * Python lz4 package's default), so the blocks are decoded here into one
         * output array rather than by lz4-java's frame stream, which refuses them.
         * Checksums are not verified: the batch CRC already covers these bytes.
         */
        static byte[] lz4(byte[] src, int off, int len, int size) {
            int end = off + len;
            if (len < 7 || i32(src, off) != 0x184D2204) throw new IllegalStateException("not an lz4 frame");
            int flg = src[off + 4] & 0xFF;
            if ((flg >> 6) != 1) throw new IllegalStateException("lz4 frame version " + (flg >> 6));
            if ((flg & 0x08) == 0 || len < 15) throw new IllegalStateException("lz4 frame declares no content size");
            long declared = i64(src, off + 6);
            if (declared != size) throw new IllegalStateException("lz4 frame declares " + declared + " bytes, header says " + size);
            boolean blockChecksum = (flg & 0x10) != 0;
            int p = off + 6 + 8 + ((flg & 0x01) != 0 ? 4 : 0) + 1; // descriptor, content size, dict id, HC
            byte[] out = new byte[size];
            int o = 0;
            while (true) {
                if (p + 4 > end) throw new IllegalStateException("lz4 frame is truncated");
                int bs = i32(src, p);
                p += 4;
                if (bs == 0) break; // end mark
                int n = bs & 0x7FFFFFFF;
                if (n > end - p) throw new IllegalStateException("lz4 block runs past the frame");
                if (bs < 0) { // stored uncompressed
                    if (n > size - o) throw new IllegalStateException("lz4 frame holds more than it declares");
                    System.arraycopy(src, p, out, o, n);
                    o += n;
                } else {
                    o = lz4Block(src, p, p + n, out, o);
                }
                p += n + (blockChecksum ? 4 : 0);
            }
            if (o != size) throw new IllegalStateException("lz4 frame holds " + o + " bytes, header says " + size);
            return out;
        }

        /** Decode one LZ4 block from src[p, end) into out at o; matches may reach into earlier output. */
        private static int lz4Block(byte[] src, int p, int end, byte[] out, int o) {
            int cap = out.length;
            while (p < end) {
                int token = src[p++] & 0xFF;
                int lit = token >>> 4;
                if (lit == 15) {
                    int b;
                    do {
                        if (p >= end) throw new IllegalStateException("lz4 block is truncated");
                        b = src[p++] & 0xFF;
                        lit += b;
                    } while (b == 255);
                }
                if (lit > end - p || lit > cap - o) throw new IllegalStateException("lz4 literals run past the block");
                System.arraycopy(src, p, out, o, lit);
                p += lit;
                o += lit;
                if (p >= end) break; // the last sequence has literals only
                if (p + 2 > end) throw new IllegalStateException("lz4 block is truncated");
                int dist = (src[p] & 0xFF) | (src[p + 1] & 0xFF) << 8;
                p += 2;
                if (dist == 0 || dist > o) throw new IllegalStateException("lz4 match reaches before the frame");
                int ml = token & 15;
                if (ml == 15) {
                    int b;
                    do {
                        if (p >= end) throw new IllegalStateException("lz4 block is truncated");
                        b = src[p++] & 0xFF;
                        ml += b;
                    } while (b == 255);
                }
                ml += 4;
                if (ml > cap - o) throw new IllegalStateException("lz4 frame holds more than it declares");
                int from = o - dist;
                if (dist >= ml) {
                    System.arraycopy(out, from, out, o, ml);
                } else {
                    for (int k = 0; k < ml; k++) out[o + k] = out[from + k]; // overlapping: byte by byte
                }
                o += ml;
            }
            return o;
        }
    }
}
