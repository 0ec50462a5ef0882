#!/usr/bin/env python3
"""An independent DataBundle reader, written from docs/DATABUNDLE.md alone.

Usage: bundle_reader.py BUNDLE_DIR SOURCE_DIR [--writer-rules]

Reads every file of the bundle in BUNDLE_DIR back, checks its size and
CRC32C, and compares the whole tree (directories, empty ones included,
files, contents, modes and mtimes) with SOURCE_DIR. With --writer-rules
it also checks how packfs cuts records (at most record_size, a file over
1 MiB starts a record, all-zero records are stored as zeros). Exits 1
with a message naming what differs; prints a summary when all is well.

Standard library only (sqlite3, zlib), plus `zstandard` for zstd.
"""

import os
import sqlite3
import sys
import urllib.parse
import zlib

APPLICATION_ID = 0x50464442
MAGIC = "packfs.DataBundle"
VERSION = 1
SHARD_MAGIC = b"PFDBSHRD"
LARGE_FILE = 1 << 20
ATTRIBUTES_URL = "type.googleapis.com/packfs.databundle.v1.FileAttributes"
FILE_PREFIX = "FILE_METADATA # "
SHARD_PREFIX = "SHARD_METADATA # "


class Mismatch(Exception):
    pass


def fail(message):
    raise Mismatch(message)


# --- CRC32C (Castagnoli), reflected, table-driven -------------------------

CRC_TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    CRC_TABLE.append(c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    table = CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- protobuf wire format --------------------------------------------------


def varint(buf, at):
    value, shift = 0, 0
    while True:
        if at >= len(buf):
            fail("truncated varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            fail("varint longer than 10 bytes")


def fields(buf):
    """{tag: last value}: ints for varint/fixed fields, bytes for length-delimited."""
    out, at = {}, 0
    while at < len(buf):
        key, at = varint(buf, at)
        tag, wire = key >> 3, key & 7
        if wire == 0:
            out[tag], at = varint(buf, at)
        elif wire == 1:
            out[tag], at = int.from_bytes(buf[at : at + 8], "little"), at + 8
        elif wire == 2:
            n, at = varint(buf, at)
            out[tag], at = bytes(buf[at : at + n]), at + n
        elif wire == 5:
            out[tag], at = int.from_bytes(buf[at : at + 4], "little"), at + 4
        else:
            fail(f"unsupported wire type {wire}")
        if at > len(buf):
            fail("truncated field")
    return out


def int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_config(buf):
    f = fields(buf)
    return {
        "magic": f.get(1, b"").decode(),
        "version": f.get(2, 0),
        "block_size": f.get(3, 0),
        "record_size": f.get(4, 0),
        "compression": f.get(5, b"").decode(),
        "shard_count": f.get(6, 0),
    }


def decode_file(buf):
    f = fields(buf)
    meta = {
        "type": f.get(1, 0),
        "shard": f.get(2, 0),
        "offset": f.get(3, 0),
        "size": f.get(4, 0),
        "checksum": f.get(5, 0),
        "attributes": None,
    }
    if 6 in f:
        any_ = fields(f[6])
        if any_.get(1, b"").decode() == ATTRIBUTES_URL:
            attrs = fields(any_.get(2, b""))
            meta["attributes"] = (int64(attrs.get(1, 0)), attrs.get(2, 0))
    return meta


def decode_record(buf):
    f = fields(buf)
    return {
        "offset": f.get(1, 0),
        "csize": f.get(2, 0),
        "usize": f.get(3, 0),
        "zeros": bool(f.get(4, 0)),
    }


# --- the bundle ------------------------------------------------------------


def split_file_key(key):
    rest = key[len(FILE_PREFIX) :]
    cut = rest.rfind("/ # ")
    if cut < 0:
        fail(f"key {key!r} has no '/ # '")
    return rest[:cut], rest[cut + 4 :]


def shard_key(shard, offset):
    return f"{SHARD_PREFIX}{shard:08d} # {offset:020d}"


class Bundle:
    def __init__(self, root):
        self.root = root
        path = os.path.abspath(os.path.join(root, "index", "bundle.sqlite"))
        if not os.path.isfile(path):
            fail(f"{path}: no index")
        uri = "file:" + urllib.parse.quote(path) + "?mode=ro&immutable=1"
        self.db = sqlite3.connect(uri, uri=True)
        (app,) = self.db.execute("PRAGMA application_id").fetchone()
        if app != APPLICATION_ID:
            fail(f"application_id {app:#x}, not {APPLICATION_ID:#x}")
        row = self.db.execute("SELECT value FROM bundle WHERE key = 'BUNDLE_CONFIG #'").fetchone()
        if row is None:
            fail("no 'BUNDLE_CONFIG #' key")
        c = decode_config(row[0])
        if c["magic"] != MAGIC or not 1 <= c["version"] <= VERSION:
            fail(f"not a version-{VERSION} bundle: {c}")
        bs = c["block_size"]
        if bs < 16 or bs & (bs - 1) or not 1 <= c["record_size"] <= 64 << 20:
            fail(f"bad sizes in {c}")
        if c["compression"] not in ("none", "zstd", "gzip"):
            fail(f"unknown compression {c['compression']!r}")
        self.config = c
        self.shards = [self.open_shard(i) for i in range(c["shard_count"])]
        self.cache = {}

    def open_shard(self, i):
        path = os.path.join(self.root, f"shard-{i:08d}")
        f = open(path, "rb")
        header = f.read(self.config["block_size"])
        if len(header) != self.config["block_size"] or header[:8] != SHARD_MAGIC:
            fail(f"{path}: bad shard header")
        version = int.from_bytes(header[8:12], "little")
        number = int.from_bytes(header[12:16], "little")
        if not 1 <= version <= VERSION or number != i or any(header[16:]):
            fail(f"{path}: header says version {version}, shard {number}, or is not zero-padded")
        return f

    def records(self, shard):
        """Every record of `shard`, in stream order: (start, record)."""
        prefix = f"{SHARD_PREFIX}{shard:08d} # "
        rows = self.db.execute(
            "SELECT key, value FROM bundle WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, prefix[:-1] + "!"),
        )
        return [(int(k[len(prefix) :]), decode_record(v)) for k, v in rows]

    def record_at(self, shard, offset):
        """The record holding stream offset `offset` (the spec's query)."""
        prefix = f"{SHARD_PREFIX}{shard:08d} # "
        row = self.db.execute(
            "SELECT key, value FROM bundle WHERE key >= ? AND key <= ? ORDER BY key DESC LIMIT 1",
            (prefix, shard_key(shard, offset)),
        ).fetchone()
        if row is None:
            fail(f"shard {shard}: no record holds offset {offset}")
        start, rec = int(row[0].rsplit(" # ", 1)[1]), decode_record(row[1])
        if offset >= start + rec["usize"]:
            fail(f"shard {shard}: offset {offset} is past the record at {start}")
        return start, rec

    def record_bytes(self, shard, start, rec):
        key = (shard, start)
        if key in self.cache:
            return self.cache[key]
        if rec["zeros"]:
            data = bytes(rec["usize"])
        else:
            f = self.shards[shard]
            f.seek(rec["offset"])
            packed = f.read(rec["csize"])
            data = decompress(self.config["compression"], packed, f"shard {shard} record {start}")
        if len(data) != rec["usize"]:
            fail(f"shard {shard} record {start}: {len(data)} bytes, the index says {rec['usize']}")
        self.cache = {key: data}
        return data

    def read(self, meta):
        shard, offset, size = meta["shard"], meta["offset"], meta["size"]
        if size == 0:
            return b""
        if shard >= len(self.shards):
            fail(f"shard {shard} does not exist")
        if self.config["compression"] == "none":
            f = self.shards[shard]
            f.seek(self.config["block_size"] + offset)
            return f.read(size)
        out = bytearray()
        o, end = offset, offset + size
        while o < end:
            start, rec = self.record_at(shard, o)
            data = self.record_bytes(shard, start, rec)
            take = min(end, start + rec["usize"]) - o
            out += data[o - start : o - start + take]
            o += take
        return bytes(out)

    def check_layout(self, large_starts, writer_rules):
        """Records cover each stream; stored ones are block-aligned and padded."""
        bs, rs = self.config["block_size"], self.config["record_size"]
        counts = [0, 0]
        for shard, f in enumerate(self.shards):
            recs = self.records(shard)
            if self.config["compression"] == "none":
                if recs:
                    fail(f"shard {shard}: records in an uncompressed bundle")
                continue
            expect, at = 0, bs
            for n, (start, rec) in enumerate(recs):
                where = f"shard {shard} record {start}"
                if start != expect or rec["usize"] == 0:
                    fail(f"{where}: expected a record at {expect}")
                expect = start + rec["usize"]
                if rec["offset"] != at:
                    fail(f"{where}: compressed_offset {rec['offset']}, expected {at}")
                if rec["zeros"]:
                    counts[1] += 1
                    if rec["csize"]:
                        fail(f"{where}: zeros with stored bytes")
                else:
                    counts[0] += 1
                    at = -(-(at + rec["csize"]) // bs) * bs
                    f.seek(rec["offset"] + rec["csize"])
                    if any(f.read(at - rec["offset"] - rec["csize"])):
                        fail(f"{where}: padding is not zeros")
                if writer_rules:
                    if rec["usize"] > rs:
                        fail(f"{where}: {rec['usize']} bytes, record_size is {rs}")
                    last = n + 1 == len(recs)
                    if rec["usize"] < rs and not last and recs[n + 1][0] not in large_starts[shard]:
                        fail(f"{where}: ends early, but no large file starts after it")
                    if not rec["zeros"] and not any(self.record_bytes(shard, start, rec)):
                        fail(f"{where}: all zeros but stored")
            f.seek(0, os.SEEK_END)
            if f.tell() != at:
                fail(f"shard {shard}: {f.tell()} bytes, the records end at {at}")
            starts = {s for s, _ in recs}
            if writer_rules and not large_starts[shard] <= starts:
                fail(f"shard {shard}: a file over 1 MiB does not start a record")
        return counts


def decompress(algorithm, packed, where):
    if algorithm == "zstd":
        import zstandard

        if not zstandard.get_frame_parameters(packed).has_checksum:
            fail(f"{where}: zstd frame without a content checksum")
        d = zstandard.ZstdDecompressor().decompressobj()
    else:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = d.decompress(packed)
    except Exception as e:  # noqa: BLE001 - any decoder error is a mismatch
        fail(f"{where}: bad {algorithm} data: {e}")
    if not d.eof or d.unused_data:
        fail(f"{where}: not exactly one {algorithm} frame/member")
    return data


# --- comparison with the source --------------------------------------------


def source_tree(root):
    """{relative path: ('dir'|'file', stat)} of everything below root."""
    tree, stack = {}, [""]
    while stack:
        rel = stack.pop()
        for e in os.scandir(os.path.join(root, rel) if rel else root):
            path = f"{rel}/{e.name}" if rel else e.name
            st = os.stat(e.path)
            kind = "dir" if e.is_dir(follow_symlinks=False) else "file"
            tree[path] = (kind, st)
            if kind == "dir":
                stack.append(path)
    return tree


def main(argv):
    writer_rules = "--writer-rules" in argv
    args = [a for a in argv if a != "--writer-rules"]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    bundle_dir, src = args
    if crc32c(b"123456789") != 0xE3069283:
        fail("this script's CRC32C is wrong")
    b = Bundle(bundle_dir)
    entries = {}
    for key, value in b.db.execute("SELECT key, value FROM bundle WHERE key >= ? AND key < ?", (FILE_PREFIX, FILE_PREFIX[:-1] + "!")):
        d, name = split_file_key(key)
        path = f"{d}/{name}" if d else name
        entries[path] = decode_file(value)
    large_starts = [set() for _ in b.shards]
    for meta in entries.values():
        if meta["type"] == 0 and meta["size"] > LARGE_FILE:
            large_starts[meta["shard"]].add(meta["offset"])
    records, zeros = b.check_layout(large_starts, writer_rules)

    tree = source_tree(src)
    missing = sorted(set(tree) - set(entries))
    extra = sorted(set(entries) - set(tree))
    if missing or extra:
        fail(f"missing from the bundle: {missing[:5]}; not in the source: {extra[:5]}")
    total = 0
    # Stream order, so consecutive files share decompressed records.
    for path, meta in sorted(entries.items(), key=lambda e: (e[1]["shard"], e[1]["offset"])):
        kind, st = tree[path]
        parent = path.rpartition("/")[0]
        if parent and entries[parent]["type"] != 1:
            fail(f"{path}: its parent has no directory entry")
        if meta["attributes"] != (st.st_mtime_ns, st.st_mode & 0o7777):
            fail(f"{path}: attributes {meta['attributes']}, source has {(st.st_mtime_ns, st.st_mode & 0o7777)}")
        if kind == "dir":
            if meta["type"] != 1 or meta["size"] != 0:
                fail(f"{path}: a directory in the source, {meta} in the bundle")
            continue
        if meta["type"] != 0:
            fail(f"{path}: a file in the source, a directory in the bundle")
        data = b.read(meta)
        if len(data) != meta["size"]:
            fail(f"{path}: read {len(data)} bytes, the index says {meta['size']}")
        if crc32c(data) != meta["checksum"]:
            fail(f"{path}: CRC32C {crc32c(data):#010x}, the index says {meta['checksum']:#010x}")
        with open(os.path.join(src, path), "rb") as f:
            if f.read() != data:
                fail(f"{path}: contents differ from the source")
        total += len(data)
    files = sum(1 for m in entries.values() if m["type"] == 0)
    print(
        f"bundle_reader: OK {bundle_dir}: {files} files, {len(entries) - files} directories, "
        f"{total} bytes, {len(b.shards)} shards, {records} stored records, {zeros} zeros records"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Mismatch as e:
        print(f"bundle_reader: MISMATCH: {e}", file=sys.stderr)
        sys.exit(1)
