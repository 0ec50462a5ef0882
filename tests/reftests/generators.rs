//! The operations' proptest strategies, over a small universe of names so
//! that most operations meet something another one made.

use proptest::prelude::*;

use crate::operations::{Data, Op, H, S};

/// A name: mostly item names, sometimes one a timeline or modality
/// cannot have, or the stats file's.
fn name_strategy() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        4 => Just("a"),
        4 => Just("b"),
        4 => Just("c"),
        1 => Just("_packfs"),
        1 => Just(".packfs"),
        1 => Just("stats"),
    ]
}

/// A path of the universe: timelines `t` and `u`, modalities `m` and `n`,
/// items `a`, `b`, `c` one or two deep, and reserved names.
fn path_strategy() -> impl Strategy<Value = S> {
    let timeline = prop_oneof![
        12 => Just("t"),
        3 => Just("u"),
        1 => Just(".packfs"),
        1 => Just("_packfs"),
    ];
    let modality = prop_oneof![
        8 => Just("m"),
        5 => Just("n"),
        1 => Just("stats"),
        1 => Just("_packfs"),
    ];
    let item = || prop_oneof![Just("a"), Just("b"), Just("c")];
    (timeline, modality, item(), item(), 0..10u8).prop_map(|(t, m, i, j, depth)| {
        S::P(match depth {
            0 => t.to_string(),
            1 => format!("{t}/{m}"),
            2..=6 => format!("{t}/{m}/{i}"),
            _ => format!("{t}/{m}/{i}/{j}"),
        })
    })
}

/// Something that may exist: mostly a node of the mount.
fn existing() -> impl Strategy<Value = S> {
    prop_oneof![
        3 => any::<u8>().prop_map(S::Any),
        3 => any::<u8>().prop_map(S::File),
        2 => path_strategy(),
    ]
}

/// Something that may be a directory: mostly one of the mount.
fn existing_dir() -> impl Strategy<Value = S> {
    prop_oneof![
        3 => any::<u8>().prop_map(S::Dir),
        3 => any::<u8>().prop_map(S::Empty),
        2 => any::<u8>().prop_map(S::Any),
        1 => path_strategy(),
    ]
}

/// Somewhere a new entry may go: mostly a name in a directory of the mount.
fn fresh() -> impl Strategy<Value = S> {
    prop_oneof![
        5 => (any::<u8>(), name_strategy()).prop_map(|(i, name)| S::In(i, name)),
        2 => path_strategy(),
    ]
}

fn data_strategy() -> impl Strategy<Value = Data> {
    (any::<u8>(), 0..40u8).prop_map(|(fill, len)| Data { fill, len })
}

pub fn op_strategy() -> impl Strategy<Value = Op> {
    let perm = || prop_oneof![Just(0o644u16), Just(0o600), Just(0o755), Just(0o700)];
    let h = || any::<u8>().prop_map(H);
    let target = || prop_oneof![3 => fresh(), 2 => any::<u8>().prop_map(S::Any)];
    prop_oneof![
        6 => (fresh(), data_strategy(), perm(), any::<bool>()).prop_map(
            |(path, data, perm, keep_open)| Op::Create { path, data, perm, keep_open }
        ),
        4 => (existing(), 0..160u16, data_strategy())
            .prop_map(|(path, offset, data)| Op::Write { path, offset, data }),
        3 => (existing(), any::<bool>())
            .prop_map(|(path, truncate)| Op::OpenWrite { path, truncate }),
        2 => existing().prop_map(|path| Op::OpenRead { path }),
        5 => (h(), 0..160u16, data_strategy())
            .prop_map(|(h, offset, data)| Op::HandleWrite { h, offset, data }),
        2 => (h(), 0..160u16, 0..100u16)
            .prop_map(|(h, offset, len)| Op::HandleRead { h, offset, len }),
        1 => (h(), 0..160u16).prop_map(|(h, size)| Op::HandleTruncate { h, size }),
        2 => h().prop_map(|h| Op::HandleFlush { h }),
        3 => h().prop_map(|h| Op::HandleClose { h }),
        2 => (existing(), 0..160u16).prop_map(|(path, size)| Op::Truncate { path, size }),
        6 => (existing(), target()).prop_map(|(from, to)| Op::Rename { from, to }),
        3 => (existing_dir(), target()).prop_map(|(from, to)| Op::Rename { from, to }),
        3 => existing().prop_map(|path| Op::Unlink { path }),
        4 => (fresh(), perm()).prop_map(|(path, perm)| Op::Mkdir { path, perm }),
        3 => existing_dir().prop_map(|path| Op::Rmdir { path }),
        1 => (existing(), perm()).prop_map(|(path, perm)| Op::Chmod { path, perm }),
        1 => (existing(), 1..3u32)
            .prop_map(|(path, secs)| Op::Utimens { path, secs: secs * 1_000_000 }),
        2 => existing().prop_map(|path| Op::Fsync { path }),
        2 => (existing(), 0..160u16, 0..100u16)
            .prop_map(|(path, offset, len)| Op::Read { path, offset, len }),
        2 => existing().prop_map(|path| Op::ReadAll { path }),
        1 => Just(Op::Stats),
        2 => Just(Op::Commit),
        2 => Just(Op::Crash),
        2 => Just(Op::Remount),
    ]
}
