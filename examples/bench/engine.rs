//! The engine: the copy direct write saves, in process (no mount). A shard-like 1 MiB read (tar-like members: a 512-byte header
//! from memory, then the member's bytes from one of two packs, then PAD to
//! the next 512 bytes) is executed over warm cached blocks of the real
//! block cache, by the staging path every program took before direct write
//! (`execute_staged`: zero the destination, read each run, joining the
//! blocks it spans, and scatter), by direct write into a reused buffer
//! (`execute_into`, as the FUSE handler does) and into a new buffer
//! (`execute`, as `Reader::read` does).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use packfs_core::cache::CacheOptions;
use packfs_core::extents::{Extents, Source};
use packfs_core::reader::Reader;
use packfs_core::store::Store;
use packfs_format::engine::{ByteRangeMap, ByteRangeProgram, CoalesceLimits, Run, SourceIndex};
use tokio::runtime::Runtime;

use crate::table::{print_table, row, show_ratio};
use crate::{median_by, progress, Result};

/// The destination of one read.
const DEST_LEN: u64 = 1 << 20;
/// The length of each pack.
const PACK_LEN: u64 = 16 << 20;
/// Reads of each path per round.
const READS_PER_ROUND: usize = 64;
/// Rounds, each path in turn in every round so load on the machine hits
/// them alike.
const ROUNDS: usize = 15;
/// Tar's block: headers and PAD keep members aligned to it.
const TAR_BLOCK: u64 = 512;

/// Seconds per round of each path, and what the program copies.
pub(crate) struct EngineBench {
    staged: Vec<f64>,
    direct: Vec<f64>,
    fresh: Vec<f64>,
    runs: usize,
    pieces: usize,
    copied: Copied,
}

/// Bytes each path writes for one read, counted from the program's runs
/// and the cache's block size.
struct Copied {
    staged: u64,
    direct: u64,
}

/// The shard-like map: members of 1–16 KiB, alternating between the two
/// packs (source 0 and 1), each pack's members a few hundred bytes apart
/// in it (others' bytes between), headers back to back in source 2.
fn shard_map() -> (ByteRangeMap, u64) {
    let mut map = ByteRangeMap::new(DEST_LEN);
    let (mut dest, mut headers) = (0, 0);
    let mut pack_at = [0u64; 2];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Cut at the destination's end like a read of part of a shard (its
    // length is a multiple of 512, so PAD never runs past it).
    let mut member = 0;
    while dest < DEST_LEN {
        let header = TAR_BLOCK.min(DEST_LEN - dest);
        map.push_data(dest, header, SourceIndex(2), headers);
        (dest, headers) = (dest + header, headers + header);
        let pack = member % 2;
        let len = (1024 + next() % (15 << 10)).min(DEST_LEN - dest);
        map.push_data(dest, len, SourceIndex(pack), pack_at[pack]);
        pack_at[pack] += len + next() % 512;
        dest += len;
        let pad = dest.next_multiple_of(TAR_BLOCK) - dest;
        map.push_pad(dest, pad);
        dest += pad;
        member += 1;
    }
    (map, headers)
}

/// A pack's bytes, distinct per pack.
fn pack_bytes(pack: u8) -> Bytes {
    (0..PACK_LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ pack)
        .collect::<Vec<_>>()
        .into()
}

/// What each path writes per read: staging zeroes the destination,
/// joins each object read that spans blocks, and scatters every piece;
/// direct write zeroes PAD and copies every piece once.
fn copied(program: &ByteRangeProgram, block_size: u64) -> Copied {
    let (mut pieces, mut pad, mut joined) = (0, 0, 0);
    for run in program.runs() {
        match (run.source(), run.src()) {
            (Some(source), Some(src)) => {
                pieces += run.pieces().iter().map(|p| p.len).sum::<u64>();
                let spans_blocks = src.start / block_size != (src.end - 1) / block_size;
                if source.0 < 2 && spans_blocks {
                    joined += src.end - src.start;
                }
            }
            _ => {
                if let Run::Pad { dest } = run {
                    pad += dest.end - dest.start;
                }
            }
        }
    }
    Copied {
        staged: program.dest_len() + joined + pieces,
        direct: pad + pieces,
    }
}

/// Runs the rows.
pub(crate) fn measure(runtime: &Runtime) -> Result<EngineBench> {
    progress("engine: a shard-like 1 MiB read, staged against direct write");
    let store =
        Store::from_object_store(Arc::new(InMemory::new()), ObjectPath::default(), "memory");
    // Without read-ahead every read goes through cached blocks; with it,
    // the same read over and over looks random, and random reads of blocks
    // not yet cached are fetched exactly and not kept.
    let options = CacheOptions::default().prefetch(false);
    let block_size = options.block_size;
    let reader = Reader::new(store.clone(), options, None);
    let (map, headers_len) = shard_map();
    let mut sources = Vec::new();
    for pack in 0..2u8 {
        let path = Arc::new(ObjectPath::from(format!("engine/pack-{pack}")));
        runtime.block_on(store.put_immutable(&path, pack_bytes(pack)))?;
        sources.push(Source::Object(packfs_core::cache::ObjectRef {
            path,
            len: PACK_LEN,
            drop_behind: false,
            then: None,
        }));
    }
    sources.push(Source::Memory(vec![0x75; headers_len as usize].into()));
    let extents = Extents { map, sources };

    let program = ByteRangeProgram::compile(
        &extents.map.clone().normalize()?,
        &CoalesceLimits::default(),
    );
    let opened = reader.sources(extents.sources.clone());
    let sources: Vec<&dyn packfs_format::engine::SeekableSource> =
        opened.iter().map(|s| &**s).collect();
    // Warm the cache, and check that every path gives the same bytes.
    let expected = runtime.block_on(reader.read(extents))?;
    let mut buf = vec![0; DEST_LEN as usize];
    runtime.block_on(program.execute_into(&sources, &mut buf))?;
    let staged = runtime.block_on(program.execute_staged(&sources))?;
    if buf != expected || staged != expected {
        return Err("the engine's paths disagree".into());
    }

    let time = |read: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let start = Instant::now();
        for _ in 0..READS_PER_ROUND {
            read()?;
        }
        Ok(start.elapsed().as_secs_f64())
    };
    let mut bench = EngineBench {
        staged: Vec::new(),
        direct: Vec::new(),
        fresh: Vec::new(),
        runs: program.runs().len(),
        pieces: program.runs().iter().map(|r| r.pieces().len()).sum(),
        copied: copied(&program, block_size),
    };
    for _ in 0..ROUNDS {
        bench.staged.push(time(&mut || {
            runtime.block_on(program.execute_staged(&sources))?;
            Ok(())
        })?);
        bench.direct.push(time(&mut || {
            Ok(runtime.block_on(program.execute_into(&sources, &mut buf))?)
        })?);
        bench.fresh.push(time(&mut || {
            runtime.block_on(program.execute(&sources))?;
            Ok(())
        })?);
    }
    Ok(bench)
}

/// The engine table.
pub(crate) fn print(bench: &EngineBench) {
    // The best round is the one least disturbed by the rest of the
    // machine; the median says how disturbed.
    let per_mib = |secs: &[f64]| {
        let best = secs.iter().copied().fold(f64::INFINITY, f64::min);
        let scale = 1e6 / READS_PER_ROUND as f64;
        (best * scale, median_by(secs, |s| *s) * scale)
    };
    let show = |(best, median): (f64, f64)| format!("{best:.0} µs/MiB (median {median:.0})");
    let (staged, direct, fresh) = (
        per_mib(&bench.staged),
        per_mib(&bench.direct),
        per_mib(&bench.fresh),
    );
    let mib = |bytes: u64| bytes as f64 / DEST_LEN as f64;
    let timed = |measurement: String, path: (f64, f64)| {
        row(
            measurement,
            show(path),
            format!("staged {}", show(staged)),
            show_ratio(Some(staged.0 / path.0), "staged"),
            "—",
            "—".into(),
        )
    };
    let rows = [
        timed(
            format!(
                "1 MiB shard read ({} runs, {} pieces, 2 packs + headers, PAD), \
                 direct into a reused buffer",
                bench.runs, bench.pieces
            ),
            direct,
        ),
        timed(
            "the same, direct into a new zeroed buffer (`execute`)".into(),
            fresh,
        ),
        row(
            "bytes written per MiB read (from the program)".into(),
            format!("direct {:.2} MiB", mib(bench.copied.direct)),
            format!("staged {:.2} MiB", mib(bench.copied.staged)),
            show_ratio(
                Some(bench.copied.staged as f64 / bench.copied.direct as f64),
                "staged",
            ),
            "—",
            "—".into(),
        ),
    ];
    print_table(
        "Engine: direct write against staging, one shard-like read in process",
        &rows,
    );
    println!(
        "Best (and median) of {ROUNDS} rounds of {READS_PER_ROUND} reads per path, paths taking \
         turns; ratios of the best. Every block is cached, so this is the engine's and the \
         cache's copying alone. Ratio above 1× is direct write faster (or writing less). Load \
         average when printed: {}.",
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "unknown".into())
    );
}
