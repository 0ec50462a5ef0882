"""TileDB arrays for tests/clients/array_mount.rs, written and read by
TileDB itself.

    python tiledb_arrays.py write KIND URI     write array KIND at URI
    python tiledb_arrays.py dump URI OUT [AT]  what TileDB reads of URI
                                               (at timestamp AT), as the
                                               files a packfs mount shows
    python tiledb_arrays.py bench URI          TileDB's own first pass over
                                               the `image` cells (the bench)
    python tiledb_arrays.py sizes URI          each `image` cell's file name
                                               and size

`dump` re-implements packfs's naming rule (docs/TILEDB.md) independently:
a var-sized attribute's non-null cells are OUT/<attribute>/<coordinates>,
integers zero-padded to the width of the dimension's widest bound and
joined by `_`; a fixed-size attribute (and a sparse array's fixed-size
dimension) is OUT/<name>.raw, its values little-endian, in global order
for a sparse array and row-major over the non-empty domain for a dense
one.
"""

import os
import sys

import numpy as np
import tiledb


def var_blob(i, salt):
    """Deterministic bytes of varying length (0 to ~3 KB) for cell i."""
    n = (i * 37 + salt * 11) % 3000
    return bytes(((i * 7 + salt + k) % 251) for k in range(n))


def write_sparse(uri):
    """1-D sparse: var blob `image`, var string `caption`, fixed `label`,
    nullable fixed `score`, nullable var `note`; three fragments, the
    second overwriting cells of the first, the third adding new ones."""
    dom = tiledb.Domain(tiledb.Dim(name="id", domain=(0, 99999), tile=500, dtype=np.int64))
    schema = tiledb.ArraySchema(
        domain=dom,
        sparse=True,
        capacity=16,
        attrs=[
            tiledb.Attr(name="image", dtype=np.bytes_, var=True),
            tiledb.Attr(name="caption", dtype=str, var=True),
            tiledb.Attr(name="label", dtype=np.int32),
            tiledb.Attr(name="score", dtype=np.float32, nullable=True),
            tiledb.Attr(name="note", dtype=np.bytes_, var=True, nullable=True),
        ],
    )
    tiledb.Array.create(uri, schema)

    def write(ts, ids, salt):
        ids = np.array(ids, dtype=np.int64)
        with tiledb.open(uri, "w", timestamp=ts) as A:
            A[ids] = {
                "image": np.array([var_blob(int(i), salt) for i in ids], dtype=object),
                "caption": np.array(["caption %d/%d é" % (i, salt) for i in ids], dtype=object),
                "label": (ids * 3 + salt).astype(np.int32),
                # tiledb-py writes NaN (fixed) and None (var) as null.
                "score": np.array(
                    [np.nan if (i + salt) % 5 == 0 else i / 7 + salt for i in ids], dtype=np.float32
                ),
                "note": np.array(
                    [None if (i + salt) % 3 == 0 else b"note-%d" % i * (i % 4) for i in ids],
                    dtype=object,
                ),
            }

    write(1000, range(0, 300, 2), 1)
    write(2000, range(100, 200, 5), 2)
    write(3000, list(range(301, 400, 3)) + [99999], 3)


def write_dense(uri):
    """2-D dense int32/float64 attributes, 4x7 space tiles over a 20x30
    domain; two overlapping fragments leave some cells unwritten."""
    dom = tiledb.Domain(
        tiledb.Dim(name="row", domain=(1, 20), tile=4, dtype=np.int32),
        tiledb.Dim(name="col", domain=(1, 30), tile=7, dtype=np.int32),
    )
    schema = tiledb.ArraySchema(
        domain=dom,
        sparse=False,
        attrs=[
            tiledb.Attr(name="a", dtype=np.int32),
            tiledb.Attr(name="b", dtype=np.float64, filters=tiledb.FilterList([tiledb.ZstdFilter()])),
            tiledb.Attr(name="c", dtype=np.float32, nullable=True),
            tiledb.Attr(name="d", dtype=np.bytes_, var=True),
        ],
    )
    tiledb.Array.create(uri, schema)

    def d_values(r, c, salt):
        cells = [var_blob(int(a * 31 + b), salt)[: (a + b) % 7 * 3] for a, b in zip(r.flat, c.flat)]
        return np.array(cells, dtype=object).reshape(r.shape)

    def c_values(r, c):
        # tiledb-py writes NaN as null.
        return np.where((r + c) % 4 == 0, np.nan, r * c).astype(np.float32)

    with tiledb.open(uri, "w", timestamp=1000) as A:
        r, c = np.mgrid[1:13, 1:31]
        A[1:13, 1:31] = {
            "a": (r * 100 + c).astype(np.int32),
            "b": (r + c / 100.0),
            "c": c_values(r, c),
            "d": d_values(r, c, 1),
        }
    with tiledb.open(uri, "w", timestamp=2000) as A:
        r, c = np.mgrid[6:21, 10:26]
        A[6:21, 10:26] = {
            "a": -(r * 100 + c).astype(np.int32),
            "b": -(r + c / 100.0),
            "c": c_values(r, -c),
            "d": d_values(r, c, 2),
        }


FILTERS = {
    "gzip": (np.int32, [tiledb.GzipFilter(level=6)]),
    "zstd": (np.int64, [tiledb.ZstdFilter(level=3)]),
    "lz4": (np.float64, [tiledb.LZ4Filter()]),
    "bitwidth": (np.int32, [tiledb.BitWidthReductionFilter(window=64), tiledb.ZstdFilter()]),
    "posdelta": (np.uint64, [tiledb.PositiveDeltaFilter(window=128)]),
    "doubledelta": (np.int64, [tiledb.DoubleDeltaFilter()]),
    "delta": (np.int32, [tiledb.DeltaFilter()]),
    "byteshuffle": (np.float32, [tiledb.ByteShuffleFilter(), tiledb.LZ4Filter()]),
    "bitshuffle": (np.int16, [tiledb.BitShuffleFilter(), tiledb.GzipFilter()]),
    "md5": (np.int32, [tiledb.ChecksumMD5Filter()]),
    "sha256": (np.uint8, [tiledb.ChecksumSHA256Filter(), tiledb.ZstdFilter()]),
}


def write_filters(uri):
    """1-D sparse: one fixed attribute per filter pipeline, and var blobs
    under zstd + SHA-256; 700 cells, so tiles hold several chunks."""
    dom = tiledb.Domain(tiledb.Dim(name="id", domain=(0, 9999), tile=1000, dtype=np.uint32))
    attrs = [tiledb.Attr(name=n, dtype=t, filters=tiledb.FilterList(f)) for n, (t, f) in FILTERS.items()]
    attrs.append(
        tiledb.Attr(
            name="blob",
            dtype=np.bytes_,
            var=True,
            filters=tiledb.FilterList([tiledb.ZstdFilter(), tiledb.ChecksumSHA256Filter()]),
        )
    )
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=300, attrs=attrs)
    tiledb.Array.create(uri, schema)
    ids = np.arange(0, 1400, 2, dtype=np.uint32)
    data = {}
    for n, (t, _) in FILTERS.items():
        if n == "posdelta":
            v = np.cumsum(ids.astype(np.uint64) % 17) + 5
        elif np.issubdtype(t, np.floating):
            v = np.sin(ids / 10.0) * 1000
        elif n == "sha256":
            v = (ids * 13) % 256
        else:
            v = (ids.astype(np.int64) * 13) % 1000 - 500
        data[n] = np.asarray(v).astype(t)
    data["blob"] = np.array([var_blob(int(i), 9) for i in ids], dtype=object)
    with tiledb.open(uri, "w", timestamp=1000) as A:
        A[ids] = data


def write_small_sparse(uri):
    """A few cells in two fragments, the second overwriting one cell: the
    committed fixture tests/fixtures/tiledb/small-sparse."""
    dom = tiledb.Domain(tiledb.Dim(name="id", domain=(0, 999), tile=10, dtype=np.int64))
    schema = tiledb.ArraySchema(
        domain=dom,
        sparse=True,
        capacity=4,
        attrs=[
            tiledb.Attr(name="image", dtype=np.bytes_, var=True),
            tiledb.Attr(name="label", dtype=np.int32),
        ],
    )
    tiledb.Array.create(uri, schema)
    with tiledb.open(uri, "w", timestamp=1000) as A:
        ids = np.array([1, 5, 7, 12, 20, 33, 400], dtype=np.int64)
        A[ids] = {
            "image": np.array([b"img-%d" % i * (i % 5 + 1) for i in ids], dtype=object),
            "label": (ids * 10).astype(np.int32),
        }
    with tiledb.open(uri, "w", timestamp=2000) as A:
        A[np.array([7, 8], dtype=np.int64)] = {
            "image": np.array([b"seven again", b""], dtype=object),
            "label": np.array([-7, -8], dtype=np.int32),
        }


def write_small_dense(uri):
    """6x8 int16 cells in 3x4 tiles, one fragment over rows 2-6: the
    committed fixture tests/fixtures/tiledb/small-dense."""
    dom = tiledb.Domain(
        tiledb.Dim(name="y", domain=(1, 6), tile=3, dtype=np.int32),
        tiledb.Dim(name="x", domain=(1, 8), tile=4, dtype=np.int32),
    )
    schema = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr(name="v", dtype=np.int16)])
    tiledb.Array.create(uri, schema)
    with tiledb.open(uri, "w", timestamp=1000) as A:
        y, x = np.mgrid[2:7, 1:9]
        A[2:7, 1:9] = {"v": (y * 10 + x).astype(np.int16)}


def write_sparse2d(uri):
    """2-D sparse: a string dimension `key` and an int dimension `n`, in
    two fragments; keys with `/`, `_`, spaces, dots and the empty one."""
    dom = tiledb.Domain(
        tiledb.Dim(name="key", domain=(None, None), tile=None, dtype="ascii"),
        tiledb.Dim(name="n", domain=(0, 99), tile=10, dtype=np.int32),
    )
    schema = tiledb.ArraySchema(
        domain=dom,
        sparse=True,
        capacity=8,
        attrs=[
            tiledb.Attr(name="image", dtype=np.bytes_, var=True),
            tiledb.Attr(name="w", dtype=np.float64),
        ],
    )
    tiledb.Array.create(uri, schema)
    keys = ["cat/01", "dog_2", "a b", "..", "", "zebra", "Ant", "cat/01.jpg"]

    def write(ts, cells, salt):
        with tiledb.open(uri, "w", timestamp=ts) as A:
            k = np.array([c[0] for c in cells], dtype="S")
            n = np.array([c[1] for c in cells], dtype=np.int32)
            A[k, n] = {
                "image": np.array([var_blob(i, salt) for i in range(len(cells))], dtype=object),
                "w": np.arange(len(cells), dtype=np.float64) + salt / 10,
            }

    write(1000, [(k, n) for k in keys for n in (0, 7, 15, 99)], 1)
    write(2000, [(k, n) for k in keys[::2] for n in (7, 42)], 2)


def image_schema(dom, capacity):
    """A sparse schema over `dom` with one var-sized attribute, `image`."""
    return tiledb.ArraySchema(
        domain=dom,
        sparse=True,
        capacity=capacity,
        attrs=[tiledb.Attr(name="image", dtype=np.bytes_, var=True)],
    )


def write_long_names(uri):
    """2-D sparse: a string dimension `key` and a float64 dimension `x`,
    with floats of every magnitude (5e-324 among them) and keys whose
    names pass 255 bytes, two of them alike for their first 250."""
    dom = tiledb.Domain(
        tiledb.Dim(name="key", domain=(None, None), tile=None, dtype="ascii"),
        tiledb.Dim(name="x", domain=(-1e300, 1e300), tile=1e299, dtype=np.float64),
    )
    tiledb.Array.create(uri, image_schema(dom, 8))
    long = "k" * 250
    cells = [("a", 5e-324), ("a", -1e-7), ("a", 0.5), ("a", 1e20), (long + "1", 1.0), (long + "2", 1.0)]
    with tiledb.open(uri, "w", timestamp=1000) as A:
        k = np.array([c[0] for c in cells], dtype="S")
        x = np.array([c[1] for c in cells], dtype=np.float64)
        A[k, x] = {"image": np.array([var_blob(i, 1) for i in range(len(cells))], dtype=object)}


def write_consolidated(uri):
    """The sparse array with its commits consolidated into a `.con` file,
    its fragments consolidated into one (the originals kept, listed in a
    `.vac` file) and the consolidated commits vacuumed."""
    write_sparse(uri)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "commits"}))
    tiledb.consolidate(uri)
    tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": "commits"}))


def write_timestamped(uri):
    """The sparse array consolidated with timestamps (one fragment that
    keeps every version of a cell with its write time) and vacuumed, so
    only that fragment is left."""
    write_sparse(uri)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.with_timestamps": "true"}))
    tiledb.vacuum(uri)


def write_evolved(uri):
    """The small sparse array, then a new attribute (schema evolution) and
    a fragment written with it at 5000."""
    write_small_sparse(uri)
    evolution = tiledb.ArraySchemaEvolution(tiledb.default_ctx())
    evolution.add_attribute(tiledb.Attr(name="extra", dtype=np.int32))
    evolution.array_evolve(uri)
    with tiledb.open(uri, "w", timestamp=5000) as A:
        A[np.array([500], dtype=np.int64)] = {"image": np.array([b"late"], dtype=object), "label": np.array([5], dtype=np.int32), "extra": np.array([1], dtype=np.int32)}


def write_unsupported(uri):
    """1-D sparse: `plain` int32 without filters and `bz` under bzip2, a
    filter packfs does not decode."""
    dom = tiledb.Domain(tiledb.Dim(name="id", domain=(0, 999), tile=100, dtype=np.int64))
    schema = tiledb.ArraySchema(
        domain=dom,
        sparse=True,
        attrs=[
            tiledb.Attr(name="plain", dtype=np.int32),
            tiledb.Attr(name="bz", dtype=np.int32, filters=tiledb.FilterList([tiledb.Bzip2Filter()])),
        ],
    )
    tiledb.Array.create(uri, schema)
    ids = np.arange(50, dtype=np.int64)
    with tiledb.open(uri, "w", timestamp=1000) as A:
        A[ids] = {"plain": ids.astype(np.int32), "bz": (ids * 2).astype(np.int32)}


def write_deleted(uri):
    """The sparse array, then a delete condition at 4000."""
    write_sparse(uri)
    with tiledb.open(uri, "d", timestamp=4000) as A:
        A.query(cond="label < 100").submit()


def write_many(uri, count):
    """1-D sparse `image` blobs of 4-40 KB, for the benchmark."""
    dom = tiledb.Domain(tiledb.Dim(name="id", domain=(0, 10**9), tile=10**6, dtype=np.int64))
    tiledb.Array.create(uri, image_schema(dom, 64))
    rng = np.random.default_rng(13)
    ids = np.arange(count, dtype=np.int64)
    blobs = [rng.bytes(int(rng.integers(4096, 40960))) for _ in ids]
    with tiledb.open(uri, "w", timestamp=1000) as A:
        A[ids] = {"image": np.array(blobs, dtype=object)}


def escape(value):
    """A string coordinate as packfs names it (docs/TILEDB.md)."""
    if isinstance(value, str):
        value = value.encode()
    if value == b"":
        return "%"
    only_dots = all(b == ord(".") for b in value)
    out = []
    for b in value:
        c = chr(b)
        if not only_dots and (c.isascii() and c.isalnum() or c in "-."):
            out.append(c)
        else:
            out.append("%%%02X" % b)
    return "".join(out)


def cell_names(schema, coords):
    dims = [schema.domain.dim(i) for i in range(schema.domain.ndim)]
    parts = []
    for d, values in zip(dims, coords):
        if d.isvar:
            parts.append([escape(v) for v in values])
            continue
        lo, hi = d.domain
        width = max(len(str(abs(int(lo)))), len(str(abs(int(hi)))))
        parts.append(["%s%0*d" % ("-" if v < 0 else "", width, abs(int(v))) for v in values])
    return ["_".join(p) for p in zip(*parts)]


def write_column(out, attr, values):
    """A fixed-size attribute's `.raw` file, and for a nullable one its
    `.validity` file (1 valid, 0 null per cell)."""
    with open(os.path.join(out, attr.name + ".raw"), "wb") as f:
        f.write(np.ascontiguousarray(np.ma.getdata(values)).tobytes())
    if attr.isnullable:
        valid = (~np.ma.getmaskarray(values)).astype(np.uint8)
        with open(os.path.join(out, attr.name + ".validity"), "wb") as f:
            f.write(np.ascontiguousarray(valid).tobytes())


def dump(uri, out, at=None):
    with tiledb.open(uri, timestamp=at) as A:
        schema = A.schema
        if schema.sparse:
            q = A.query(order="G")[:]
            dims = [schema.domain.dim(i).name for i in range(schema.domain.ndim)]
            names = cell_names(schema, [q[d] for d in dims])
            for i, d in enumerate(dims):
                if schema.domain.dim(i).isvar:
                    continue
                with open(os.path.join(out, d + ".raw"), "wb") as f:
                    f.write(np.asarray(q[d]).tobytes())
            for i in range(schema.nattr):
                attr = schema.attr(i)
                values = q[attr.name]
                if attr.isvar:
                    os.makedirs(os.path.join(out, attr.name), exist_ok=True)
                    mask = np.ma.getmaskarray(values)
                    data = np.ma.getdata(values)
                    for name, v, null in zip(names, data, mask):
                        if null:
                            continue
                        if isinstance(v, str):
                            v = v.encode()
                        with open(os.path.join(out, attr.name, name), "wb") as f:
                            f.write(bytes(v))
                else:
                    write_column(out, attr, values)
        else:
            ned = A.nonempty_domain()
            q = A[tuple(slice(lo, hi + 1) for lo, hi in ned)]
            # The cells some fragment (visible at `at`) wrote.
            written = np.zeros(q[schema.attr(0).name].shape, dtype=bool)
            for frag in tiledb.array_fragments(uri):
                if at is not None and frag.timestamp_range[1] > at:
                    continue
                box = tuple(slice(lo - n[0], hi - n[0] + 1) for (lo, hi), n in zip(frag.nonempty_domain, ned))
                written[box] = True
            coords = np.nonzero(written)
            names = cell_names(schema, [c + n[0] for c, n in zip(coords, ned)])
            for i in range(schema.nattr):
                attr = schema.attr(i)
                if not attr.isvar:
                    write_column(out, attr, q[attr.name])
                    continue
                os.makedirs(os.path.join(out, attr.name), exist_ok=True)
                for name, v in zip(names, q[attr.name][coords]):
                    with open(os.path.join(out, attr.name, name), "wb") as f:
                        f.write(bytes(v))


def bench(uri):
    """Times a first pass over every `image` cell with TileDB: one query
    for all cells, then (a fresh open) one query per cell in id order, as
    a loader indexing samples does. Prints JSON."""
    import json
    import time

    start = time.perf_counter()
    with tiledb.open(uri) as A:
        cells = A.query(attrs=["image"])[:]
        ids = cells["id"]
        total = sum(len(v) for v in cells["image"])
    all_secs = time.perf_counter() - start
    start = time.perf_counter()
    per_sample = 0
    with tiledb.open(uri) as A:
        q = A.query(attrs=["image"])
        for i in ids:
            per_sample += len(q[int(i)]["image"][0])
    per_sample_secs = time.perf_counter() - start
    assert per_sample == total
    print(json.dumps({"cells": len(ids), "bytes": int(total), "all_secs": all_secs, "per_sample_secs": per_sample_secs}))


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        kind, uri = sys.argv[2], sys.argv[3]
        if kind.startswith("many:"):
            write_many(uri, int(kind.split(":")[1]))
        else:
            kinds = {
                "sparse": write_sparse,
                "sparse2d": write_sparse2d,
                "long-names": write_long_names,
                "consolidated": write_consolidated,
                "timestamped": write_timestamped,
                "evolved": write_evolved,
                "dense": write_dense,
                "filters": write_filters,
                "unsupported": write_unsupported,
                "deleted": write_deleted,
                "small-sparse": write_small_sparse,
                "small-dense": write_small_dense,
            }
            kinds[kind](uri)
    elif cmd == "bench":
        bench(sys.argv[2])
    elif cmd == "sizes":
        with tiledb.open(sys.argv[2]) as A:
            q = A.query(attrs=["image"])[:]
            for name, v in zip(cell_names(A.schema, [q["id"]]), q["image"]):
                print(name, len(v))
    elif cmd == "dump":
        at = int(sys.argv[4]) if len(sys.argv) > 4 else None
        os.makedirs(sys.argv[3], exist_ok=True)
        dump(sys.argv[2], sys.argv[3], at)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
