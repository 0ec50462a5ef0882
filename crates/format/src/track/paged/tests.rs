use std::collections::{HashMap, HashSet};

use ciborium::value::Value;
use proptest::prelude::*;

use super::encode::push_pack_page;
use super::*;
use crate::cbor;
use crate::{read_columns, Attrs, Columns, FormatError, PackLengths, Track, DEFAULT_MEDIA_TYPE};

/// What the root is called in errors.
const ROOT: &str = "track R";

/// What a page is called in errors: its id, so a message says which page.
fn page_what(id: &ObjectId) -> String {
    format!("page {}", id.to_hex())
}

/// Decodes `root` with the pages it names, looked up by id in `pages`.
fn decode_with(root: &TrackRoot, pages: &HashMap<ObjectId, Vec<u8>>) -> Result<Track, FormatError> {
    let names: Vec<&[u8]> = root.pages.iter().map(|p| &pages[&p.id][..]).collect();
    let packs: Vec<&[u8]> = root.pack_pages.iter().map(|p| &pages[&p.id][..]).collect();
    Track::decode_paged(root, names, packs, ROOT, page_what)
}

/// The page bytes of `p`, by id.
fn by_id(p: &PagedTrack) -> HashMap<ObjectId, Vec<u8>> {
    p.pages.iter().cloned().collect()
}

/// Decodes the paged Track `p` as a reader does: the root, its index
/// pages if it lists its name pages through them, then its pages.
fn decode(p: &PagedTrack) -> Result<Track, FormatError> {
    let pages = by_id(p);
    let mut root = TrackRoot::decode(&p.root, ROOT)?;
    if root.needs_index() {
        let index: Vec<&[u8]> = root.index.iter().map(|i| &pages[&i.id][..]).collect();
        root.fill_index(index, page_what)?;
    }
    decode_with(&root, &pages)
}

fn entry_key(e: &FragmentEntry) -> (ObjectId, Option<u64>, u64, i64, i64) {
    (e.address, packed(e), e.byte_size, e.t_start, e.t_end)
}

/// The directories a paged Track gives back for `t`'s: the paged form lists
/// every directory and drops, on read, those that record nothing and have
/// something below them (an item or a recorded directory, at any depth),
/// and `""` when it records nothing.
fn normalized_dirs(t: &Track) -> Vec<TrackDir> {
    let mut parents = HashSet::new();
    let names = t.items().iter().map(|i| i.name.as_str());
    for mut name in names.chain(t.dirs().iter().map(|d| d.name.as_str())) {
        while let Some((parent, _)) = name.rsplit_once('/') {
            parents.insert(parent);
            name = parent;
        }
    }
    t.dirs()
        .iter()
        .filter(|d| {
            d.attrs != Attrs::default() || !(d.name.is_empty() || parents.contains(d.name.as_str()))
        })
        .cloned()
        .collect()
}

/// `back`, decoded from the paged form of `t`, is `t`: its items in
/// [`name_order`], its retired entries as a multiset, its directories
/// normalized, and the same pack lengths.
fn assert_same(back: &Track, t: &Track) {
    let mut items = t.items().to_vec();
    items.sort_by(|a, b| name_order(&a.name, &b.name));
    assert_eq!(back.items(), &items[..], "items, in name order");
    let mut want: Vec<_> = t.retired().iter().map(entry_key).collect();
    let mut got: Vec<_> = back.retired().iter().map(entry_key).collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "retired entries");
    assert_eq!(back.dirs(), &normalized_dirs(t)[..], "directories");
    assert_eq!(back.pack_lengths, t.pack_lengths, "pack lengths");
}

/// What a name page holds, as any Track reader reads it.
#[derive(Default)]
struct Rows {
    names: Vec<Option<String>>,
    entries: Vec<FragmentEntry>,
}

impl Columns for Rows {
    fn entry(&mut self, entry: FragmentEntry) {
        self.entries.push(entry);
    }
    fn name(&mut self, name: Option<&str>) {
        self.names.push(name.map(str::to_string));
    }
    fn media_type(&mut self, _: u32) {}
    fn mode(&mut self, _: Option<u16>) {}
    fn mtime(&mut self, _: Option<i64>) {}
}

/// The item names and directory names of a name page.
fn page_rows(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    let mut rows = Rows::default();
    let layout = read_columns(bytes, "page", &mut rows).expect("a name page reads as a Track");
    let names = rows.names.into_iter().map(|n| n.expect("named")).collect();
    (names, layout.dirs.into_iter().map(|d| d.name).collect())
}

/// Checks what holds of every paged encoding of `t`, beyond the round
/// trip: ids, the root's lists and totals, page sizes, pack records,
/// `page_of`.
fn check_encoding(t: &Track, shape: &PageShape, p: &PagedTrack) {
    assert_eq!(p.id, ObjectId::of(&p.root), "the root's id");
    for (id, bytes) in &p.pages {
        assert_eq!(
            *id,
            ObjectId::of(bytes),
            "a page's id is the hash of its bytes"
        );
    }
    assert!(TrackRoot::is_paged(&p.root));
    assert!(!TrackRoot::is_paged(&t.encode()));
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert_eq!(root.encode(), p.root, "the root re-encodes to its bytes");
    let listed: Vec<ObjectId> = root.page_ids().collect();
    let returned: Vec<ObjectId> = p.pages.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        listed, returned,
        "the root names exactly the pages returned"
    );
    assert_eq!(
        listed.iter().collect::<HashSet<_>>().len(),
        listed.len(),
        "no page twice"
    );
    assert_eq!(root.items, t.items().len() as u64);
    let bytes: u64 = t.items().iter().map(|i| i.entry.byte_size).sum();
    assert_eq!(root.bytes, bytes);
    assert!(!root.pages.is_empty(), "the modality directory is a row");
    assert_eq!(root.pages[0].first, "");

    let pages = by_id(p);
    let mut on_pages = Vec::new();
    let (mut all_rows, mut dir_rows) = (Vec::new(), HashSet::new());
    for (k, page) in root.pages.iter().enumerate() {
        let (names, dirs) = page_rows(&pages[&page.id]);
        let mut rows: Vec<&String> = names.iter().chain(&dirs).collect();
        rows.sort_by(|a, b| name_order(a, b));
        all_rows.extend(rows.into_iter().cloned());
        dir_rows.extend(dirs.iter().cloned());
        assert!(
            (names.len() + dirs.len()) as u64 <= shape.max_rows,
            "page {k} holds {} rows, more than {}",
            names.len() + dirs.len(),
            shape.max_rows
        );
        assert_eq!(names.len() as u64, page.items);
        on_pages.extend(names.into_iter().map(|n| (n, k)));
    }
    assert_eq!(on_pages.len(), t.items().len(), "every item on one page");
    // Every directory is a row, and the rows of one directory are one run.
    assert!(dir_rows.contains(""));
    let mut runs: Vec<&str> = Vec::new();
    for name in all_rows.iter().filter(|n| !n.is_empty()) {
        let parent = split(name).0;
        assert!(dir_rows.contains(parent), "{name:?} has no parent row");
        if runs.last() != Some(&parent) {
            assert!(!runs.contains(&parent), "a second run of {parent:?}");
            runs.push(parent);
        }
    }
    for (name, k) in &on_pages {
        assert_eq!(root.page_of(name), Some(*k), "page_of({name:?})");
    }

    let mut records = Vec::new();
    for page in &root.pack_pages {
        let r = read_pack_page(&pages[&page.id], "pack page").unwrap();
        assert!(r.len() as u64 <= shape.packs * 4);
        assert_eq!(r.len() as u64, page.packs);
        assert_eq!(r[0].address, page.first);
        records.extend(r);
    }
    let mut live: HashMap<ObjectId, u64> = HashMap::new();
    for item in t.items() {
        if packed(&item.entry).is_some() {
            *live.entry(item.entry.address).or_default() += 1;
        }
    }
    assert_eq!(records.len(), t.pack_lengths.len(), "one record per pack");
    assert!(records.windows(2).all(|w| w[0].address < w[1].address));
    for r in &records {
        assert_eq!(Some(r.length), t.pack_len(&r.address));
        assert_eq!(Some(&r.live), live.get(&r.address), "live entries");
        let mut want: Vec<_> = t
            .retired()
            .iter()
            .filter(|e| e.address == r.address)
            .map(entry_key)
            .collect();
        let mut got: Vec<_> = r.retired.iter().map(entry_key).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "the record holds its pack's retired entries");
    }
}

fn whole(name: &str, size: u64) -> FragmentEntry {
    FragmentEntry {
        t_start: 0,
        t_end: 1,
        byte_size: size,
        address: ObjectId::of(name.as_bytes()),
        placement: Placement::Whole,
    }
}

fn packed_at(pack: &str, offset: u64, size: u64) -> FragmentEntry {
    FragmentEntry {
        t_start: offset as i64,
        t_end: offset as i64 + 1,
        byte_size: size,
        address: ObjectId::of(pack.as_bytes()),
        placement: Placement::Packed { offset },
    }
}

fn item(name: &str, entry: FragmentEntry) -> TrackItem {
    TrackItem {
        name: name.into(),
        media_type: "image/jpeg".into(),
        entry,
        attrs: Attrs::default(),
    }
}

fn dir(name: &str, mode: Option<u16>, mtime_ns: Option<i64>) -> TrackDir {
    TrackDir {
        name: name.into(),
        attrs: Attrs { mode, mtime_ns },
    }
}

// --- Property tests -------------------------------------------------------

/// Directory components: `-` sorts before `/` and `0` after it, so
/// [`name_order`] and bytewise order disagree on them.
const COMPONENTS: [&str; 6] = ["a", "a-", "a0", "b", "é", "Z"];

/// An item as generated: leaves have a `.` and directory components none,
/// so no name is both a file and a directory.
#[derive(Clone, Debug)]
struct Spec {
    dir: Vec<&'static str>,
    leaf: String,
    /// 0: whole object, 1: chunked, 2-4: packed, 5: packed at the range of
    /// the previous packed item (a copy with the same bytes).
    kind: u8,
    /// A packed item starts a new pack.
    new_pack: bool,
    size: u64,
    media: usize,
    mode: Option<u16>,
    mtime: Option<i64>,
    /// 0: kept, 1: removed, 2: replaced by a whole object.
    fate: u8,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec(prop::sample::select(&COMPONENTS[..]), 0..4),
        "[a-z0-9]{1,5}\\.[a-z]{1,2}",
        0u8..6,
        prop::bool::weighted(0.3),
        prop_oneof![2 => Just(0u64), 8 => 1u64..1000],
        0usize..3,
        prop::option::of(0u16..=0o7777),
        prop::option::of(any::<i64>()),
        prop_oneof![6 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(
            |(dir, leaf, kind, new_pack, size, media, mode, mtime, fate)| Spec {
                dir,
                leaf,
                kind,
                new_pack,
                size,
                media,
                mode,
                mtime,
                fate,
            },
        )
}

fn dir_spec() -> impl Strategy<Value = (Vec<&'static str>, Attrs)> {
    let attrs = prop_oneof![
        Just(Attrs::default()),
        (
            prop::option::of(0u16..=0o7777),
            prop::option::of(any::<i64>())
        )
            .prop_map(|(mode, mtime_ns)| Attrs { mode, mtime_ns }),
    ];
    (
        prop::collection::vec(prop::sample::select(&COMPONENTS[..]), 0..4),
        attrs,
    )
}

const MEDIA: [&str; 3] = ["image/jpeg", "text/plain", DEFAULT_MEDIA_TYPE];

/// The Track `specs` and `dirs` describe: packs of consecutive packed
/// items tiled from 0, then the removals and replacements (retiring
/// packed entries), then the directories.
fn build(specs: &[Spec], dirs: &[(Vec<&'static str>, Attrs)]) -> Track {
    let mut seen = HashSet::new();
    let mut items = Vec::new();
    let mut fates = HashMap::new();
    let (mut pack, mut offset) = (0, 0);
    let mut last_packed: Option<FragmentEntry> = None;
    for s in specs {
        let name = match s.dir.is_empty() {
            true => s.leaf.clone(),
            false => format!("{}/{}", s.dir.join("/"), s.leaf),
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        let entry = match (s.kind, &last_packed) {
            (0, _) => whole(&name, s.size),
            (1, _) => FragmentEntry {
                placement: Placement::Chunked,
                ..whole(&format!("manifest of {name}"), s.size)
            },
            (5, Some(copy)) => copy.clone(),
            _ => {
                if s.new_pack && last_packed.is_some() {
                    (pack, offset) = (pack + 1, 0);
                }
                let e = packed_at(&format!("pack {pack}"), offset, s.size);
                offset += s.size;
                last_packed = Some(e.clone());
                e
            }
        };
        fates.insert(name.clone(), s.fate);
        items.push(TrackItem {
            name,
            media_type: MEDIA[s.media].into(),
            entry,
            attrs: Attrs {
                mode: s.mode,
                mtime_ns: s.mtime,
            },
        });
    }
    let t = Track::new(items, vec![], "t").unwrap();
    let replaced: Vec<TrackItem> = t
        .items()
        .iter()
        .filter(|i| fates[&i.name] == 2)
        .map(|i| TrackItem {
            entry: whole(&format!("new {}", i.name), i.entry.byte_size + 1),
            ..i.clone()
        })
        .collect();
    let (mut kept, retired) = t.remove_items(|i| fates[&i.name] != 0);
    kept.extend(replaced);
    let mut dir_names = HashSet::new();
    let dirs = dirs
        .iter()
        .map(|(path, attrs)| TrackDir {
            name: path.join("/"),
            attrs: *attrs,
        })
        .filter(|d| dir_names.insert(d.name.clone()))
        .collect();
    Track::new(kept, retired, "t")
        .unwrap()
        .with_dirs(dirs, "t")
        .unwrap()
}

/// The same Track built from its items, retired entries and directories
/// in reverse order.
fn reversed(t: &Track) -> Track {
    let mut items = t.items().to_vec();
    let mut retired = t.retired().to_vec();
    let mut dirs = t.dirs().to_vec();
    items.reverse();
    retired.reverse();
    dirs.reverse();
    Track::new(items, retired, "t")
        .unwrap()
        .with_dirs(dirs, "t")
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every Track, cut into pages of any size, reads back as itself (its
    /// directories normalized), by pages whose ids are their hashes; the
    /// encoding does not depend on the order the Track was built in.
    #[test]
    fn paged_tracks_round_trip(
        specs in prop::collection::vec(spec(), 0..120),
        dirs in prop::collection::vec(dir_spec(), 0..8),
        rows in 1u64..=64,
    ) {
        let t = build(&specs, &dirs);
        let shape = PageShape::with_rows(rows);
        let p = t.encode_paged(&shape);
        check_encoding(&t, &shape, &p);
        let back = decode(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_same(&back, &t);

        // The decoded Track encodes to the same pages: nothing it dropped
        // was there to encode.
        let again = back.encode_paged(&shape);
        prop_assert_eq!(again.id, p.id);
        prop_assert_eq!(t.encode_paged(&shape).id, p.id, "encoding twice");
        prop_assert_eq!(reversed(&t).encode_paged(&shape).id, p.id, "items in another order");
        prop_assert!(!TrackRoot::is_paged(&t.encode()));
        prop_assert_eq!(Track::decode(&t.encode(), "t").unwrap(), t);
    }
}

// --- Copy-on-write ------------------------------------------------------

/// Pages of `new` that `old` does not have: (name pages, pack pages).
fn changed(old: &PagedTrack, new: &PagedTrack) -> (usize, usize) {
    let old: HashSet<ObjectId> = old.pages.iter().map(|(id, _)| *id).collect();
    let root = TrackRoot::decode(&new.root, ROOT).unwrap();
    let names = root.pages.iter().filter(|p| !old.contains(&p.id)).count();
    let packs = root
        .pack_pages
        .iter()
        .filter(|p| !old.contains(&p.id))
        .count();
    (names, packs)
}

fn big_name(i: u64) -> String {
    format!("d{}/s{}/f{i:05}.jpg", i % 5, i % 13)
}

/// 3,000 items in 65 directories, packed ten to a pack except every 17th,
/// a whole object.
fn big() -> Track {
    let items = (0..3000u64)
        .map(|i| {
            let name = big_name(i);
            let entry = match i % 17 {
                0 => whole(&name, i % 7 + 1),
                _ => packed_at(&format!("pack {}", i / 10), 0, i % 7 + 1),
            };
            item(&name, entry)
        })
        .collect::<Vec<_>>();
    // Offsets: each pack's items tile it in order.
    let mut next: HashMap<ObjectId, u64> = HashMap::new();
    let items = items
        .into_iter()
        .map(|mut it| {
            if let Placement::Packed { offset } = &mut it.entry.placement {
                let at = next.entry(it.entry.address).or_default();
                *offset = *at;
                *at += it.entry.byte_size;
            }
            it
        })
        .collect();
    Track::new(items, vec![], "t")
        .unwrap()
        .with_dirs(
            vec![dir("", Some(0o755), Some(1)), dir("empty", None, None)],
            "t",
        )
        .unwrap()
}

/// A change of one item re-encodes a few pages and shares the rest.
#[test]
fn one_change_rewrites_a_few_pages() {
    let shape = PageShape::with_rows(64);
    let t = big();
    let old = t.encode_paged(&shape);
    let root = TrackRoot::decode(&old.root, ROOT).unwrap();
    assert!(root.pages.len() > 30, "{} name pages", root.pages.len());
    assert!(
        root.pack_pages.len() > 2,
        "{} pack pages",
        root.pack_pages.len()
    );
    let rebuild = |items: Vec<TrackItem>, retired| {
        Track::new(items, retired, "t")
            .unwrap()
            .with_dirs(t.dirs().to_vec(), "t")
            .unwrap()
    };
    let check = |what: &str, new: &Track, names: usize, packs: usize| {
        let p = new.encode_paged(&shape);
        assert_same(&decode(&p).unwrap(), new);
        let (n, k) = changed(&old, &p);
        assert!(
            (1..=names).contains(&n),
            "{what}: {n} new name pages (expected 1 to {names})"
        );
        assert!(k <= packs, "{what}: {k} new pack pages (at most {packs})");
        k
    };

    // A new pack of one item.
    let mut items = t.items().to_vec();
    items.push(item("d2/s7/new.jpg", packed_at("new pack", 0, 9)));
    assert_eq!(check("a new pack", &rebuild(items, vec![]), 3, 2), 1);

    // A whole object: no pack page changes.
    let mut items = t.items().to_vec();
    items.push(item("d2/s7/new.jpg", whole("new", 9)));
    assert_eq!(
        check("a new whole object", &rebuild(items, vec![]), 3, 0),
        0
    );

    // A packed item removed: its entry is retired into its pack's record.
    let (kept, retired) = t.clone().remove_items(|i| i.name == big_name(1005));
    assert_eq!(retired.len(), 1);
    assert_eq!(
        check("a packed item removed", &rebuild(kept, retired), 3, 2),
        1
    );

    // A whole object removed.
    let (kept, retired) = t.clone().remove_items(|i| i.name == big_name(1717));
    assert!(retired.is_empty());
    assert_eq!(
        check("a whole object removed", &rebuild(kept, retired), 3, 0),
        0
    );

    // A packed item replaced by a packed item in a new pack: its old
    // pack's record and the new pack's.
    let name = big_name(1414);
    let (mut kept, retired) = t.clone().remove_items(|i| i.name == name);
    kept.push(item(&name, packed_at("replacement", 0, 3)));
    let k = check("a packed item replaced", &rebuild(kept, retired), 3, 2);
    assert!(k >= 1);
}

/// Replacing a whole object's entry touches its name page only.
#[test]
fn replacing_a_whole_object_touches_one_name_page() {
    let shape = PageShape::with_rows(64);
    let t = big();
    let old = t.encode_paged(&shape);
    let name = big_name(17 * 119);
    let mut items = t.items().to_vec();
    let it = items.iter_mut().find(|i| i.name == name).unwrap();
    assert_eq!(it.entry.placement, Placement::Whole);
    it.entry = whole("other bytes", 12);
    let new = Track::new(items, vec![], "t")
        .unwrap()
        .with_dirs(t.dirs().to_vec(), "t")
        .unwrap();
    let p = new.encode_paged(&shape);
    assert_same(&decode(&p).unwrap(), &new);
    assert_eq!(changed(&old, &p), (1, 0));
    assert_ne!(p.id, old.id);
}

// --- Determinism ----------------------------------------------------------

/// Pack p: `x/a` (0..5), `x/b` (5..5, empty), `c` (5..12), `y/d`
/// (12..13); `x/b` and `c` removed, so two retired entries start at 5.
fn two_retired_at_one_offset() -> Track {
    let items = vec![
        item("x/a", packed_at("p", 0, 5)),
        item("x/b", packed_at("p", 5, 0)),
        item("c", packed_at("p", 5, 7)),
        item("y/d", packed_at("p", 12, 1)),
        item("w", whole("w", 1)),
    ];
    let t = Track::new(items, vec![], "t").unwrap();
    let (kept, retired) = t.remove_items(|i| i.name == "x/b" || i.name == "c");
    assert_eq!(retired.len(), 2);
    Track::new(kept, retired, "t")
        .unwrap()
        .with_dirs(
            vec![dir("z", Some(0o700), None), dir("", None, Some(3))],
            "t",
        )
        .unwrap()
}

/// The same Track encodes to the same root and pages, however it was
/// built: twice, from its items in another order, with its retired
/// entries in another order (two of them at one offset).
#[test]
fn the_encoding_does_not_depend_on_the_order_a_track_was_built_in() {
    for t in [two_retired_at_one_offset(), big()] {
        let other = reversed(&t);
        assert_ne!(t.items()[0], other.items()[0], "built in another order");
        for rows in [1, 2, 64] {
            let shape = PageShape::with_rows(rows);
            let p = t.encode_paged(&shape);
            assert_eq!(t.encode_paged(&shape).id, p.id, "encoded twice");
            let q = other.encode_paged(&shape);
            assert_eq!(q.id, p.id, "built in another order, rows {rows}");
            assert_eq!(q.pages, p.pages);
            assert_same(&decode(&p).unwrap(), &t);
        }
    }
}

// --- page_of --------------------------------------------------------------

/// `page_of` finds the page that holds each item and directory, and for a
/// name the Track does not have, the page whose range it falls in.
#[test]
fn page_of_finds_the_page_holding_each_name() {
    let t = big();
    let p = t.encode_paged(&PageShape::with_rows(8));
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert!(root.pages.len() > 100);
    let pages = by_id(&p);
    let mut found = 0;
    for (k, page) in root.pages.iter().enumerate() {
        let (names, dirs) = page_rows(&pages[&page.id]);
        for name in names.iter().chain(&dirs) {
            assert_eq!(root.page_of(name), Some(k), "{name:?}");
            found += 1;
        }
    }
    // Every item, the 65 + 5 directories, "" and "empty".
    assert_eq!(found, t.items().len() + 65 + 5 + 2);
    for name in [
        "d0/s0/f00000.jpg0",
        "d1/s1/a",
        "d4/zzz",
        "zzz",
        "d2/s9/f99999.jpg",
    ] {
        let k = root.page_of(name).unwrap();
        assert_ne!(name_order(&root.pages[k].first, name), Ordering::Greater);
        if let Some(next) = root.pages.get(k + 1) {
            assert_eq!(name_order(name, &next.first), Ordering::Less, "{name:?}");
        }
    }
    assert_eq!(root.page_of(""), Some(0));
    assert_eq!(TrackRoot::default().page_of("a"), None);
}

// --- Damage ---------------------------------------------------------------

/// Every kind of row: items of two packs, one retired entry, a whole and a
/// chunked item, attributes, media types, recorded directories.
fn sample() -> Track {
    let mut a = item("a.jpg", packed_at("p", 0, 5));
    a.attrs = Attrs {
        mode: Some(0o600),
        mtime_ns: Some(-5),
    };
    let mut d = item("b/d.txt", whole("d", 3));
    d.media_type = "text/plain".into();
    d.attrs.mtime_ns = Some(1_700_000_000_000_000_000);
    let mut g = item(
        "e/f/g.bin",
        FragmentEntry {
            placement: Placement::Chunked,
            ..whole("g", 1 << 40)
        },
    );
    g.media_type = "video/mp4".into();
    let items = vec![
        a,
        item("b/c.jpg", packed_at("p", 5, 3)),
        d,
        g,
        item("e/h.jpg", packed_at("q", 0, 4)),
        item("e/i.jpg", packed_at("q", 4, 4)),
    ];
    let t = Track::new(items, vec![], "t").unwrap();
    let (kept, retired) = t.remove_items(|i| i.name == "b/c.jpg");
    let dirs = vec![
        dir("", Some(0o700), None),
        dir("e", None, Some(7)),
        dir("empty", None, None),
        dir("b/sub", Some(0o750), Some(-1)),
    ];
    Track::new(kept, retired, "t")
        .unwrap()
        .with_dirs(dirs, "t")
        .unwrap()
}

/// A name page holding `items` and `dirs` in the order given: the
/// single-object encoding of a Track of them, unchecked.
fn name_page(items: Vec<TrackItem>, dirs: Vec<TrackDir>) -> Vec<u8> {
    Track {
        items,
        retired: Vec::new(),
        dirs,
        pack_lengths: PackLengths::default(),
    }
    .encode()
}

/// The root's entry for a name page from `first` holding `items`.
fn page_ref(first: &str, bytes: &[u8], items: &[TrackItem]) -> PageRef {
    PageRef {
        first: first.into(),
        id: ObjectId::of(bytes),
        items: items.len() as u64,
        bytes: items.iter().map(|i| i.entry.byte_size).sum(),
        t_end: items.iter().map(|i| i.entry.t_end).max(),
    }
}

/// A root of `pages` and `pack_pages`, its totals theirs.
fn root_of(pages: Vec<PageRef>, pack_pages: Vec<PackPageRef>) -> TrackRoot {
    TrackRoot {
        items: pages.iter().map(|p| p.items).sum(),
        bytes: pages.iter().map(|p| p.bytes).sum(),
        pages,
        pack_pages,
        index: vec![],
    }
}

/// A pack page of `records`, and the root's entry for it.
fn pack_page(records: Vec<PackRecord>) -> (PackPageRef, Vec<u8>) {
    let (mut root, mut pages) = (TrackRoot::default(), Vec::new());
    push_pack_page(records, &mut root, &mut pages);
    (root.pack_pages.remove(0), pages.remove(0).1)
}

fn record(pack: &str, length: u64, live: u64, retired: Vec<FragmentEntry>) -> PackRecord {
    PackRecord {
        address: ObjectId::of(pack.as_bytes()),
        length,
        live,
        retired,
    }
}

/// Decodes `root` over the given pages, expecting an error.
fn refused(root: &TrackRoot, names: &[&[u8]], packs: &[&[u8]]) -> String {
    let bytes = root.encode();
    let root = TrackRoot::decode(&bytes, ROOT).expect("the root itself is sound");
    Track::decode_paged(
        &root,
        names.iter().copied(),
        packs.iter().copied(),
        ROOT,
        page_what,
    )
    .expect_err("damage must be refused")
    .to_string()
}

/// A byte flipped anywhere in a page is refused, naming that page (or the
/// root, for a check across pages) and no other, or changes the Track;
/// never a panic. (Readers check a page's id first; this is what the
/// decoder does without that check.)
#[test]
fn a_flipped_byte_in_a_page_is_refused_or_changes_the_track() {
    let t = sample();
    let p = t.encode_paged(&PageShape::with_rows(1));
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert!(root.pages.len() >= 10, "one row a page");
    assert_eq!(root.pack_pages.len(), 2);
    let original = decode(&p).unwrap();
    let (mut named, mut cross, mut changes, mut harmless) = (0, 0, 0, Vec::new());
    let mut pages = by_id(&p);
    for id in root.page_ids() {
        let good = pages[&id].clone();
        for at in 0..good.len() {
            for mask in [0x01, 0x20, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= mask;
                assert_ne!(ObjectId::of(&bad), id);
                pages.insert(id, bad);
                match decode_with(&root, &pages) {
                    Err(e) => {
                        let e = e.to_string();
                        for other in root.page_ids().filter(|other| *other != id) {
                            assert!(!e.contains(&other.to_hex()), "{e}");
                        }
                        if e.starts_with(&page_what(&id)) {
                            named += 1;
                        } else {
                            assert!(e.starts_with(ROOT), "{id} byte {at}: {e}");
                            cross += 1;
                        }
                    }
                    Ok(back) if back != original => changes += 1,
                    Ok(_) => harmless.push((id, at, mask, good[at])),
                }
            }
        }
        pages.insert(id, good);
    }
    assert!(
        named > 0 && cross > 0 && changes > 0,
        "{named} errors naming the page, {cross} across pages, {changes} changes"
    );
    // A flip with no effect turns a key into one readers skip: `kind`
    // (optional), or the names and media type keys of a name page without
    // items.
    for (id, at, mask, was) in harmless {
        let bytes = &pages[&id];
        let mut skippable = vec![key_span(bytes, "kind")];
        if root.pages.iter().any(|p| p.id == id && p.items == 0) {
            skippable.push(key_span(bytes, "names"));
            skippable.push(key_span(bytes, "media_type_table"));
            skippable.push(key_span(bytes, "media_types"));
        }
        assert!(
            skippable.iter().any(|r| r.contains(&at)),
            "page {id} byte {at} ({was:#x} ^ {mask:#x}): a flip with no effect"
        );
    }
}

/// Where the map key `key` is in `bytes`: its text header and text.
fn key_span(bytes: &[u8], key: &str) -> std::ops::Range<usize> {
    let mut encoded = vec![0x60 + key.len() as u8];
    encoded.extend(key.as_bytes());
    let at = bytes
        .windows(encoded.len())
        .position(|w| w == encoded)
        .expect("the key is there");
    at..at + encoded.len()
}

/// A page cut short anywhere is refused, naming it.
#[test]
fn a_truncated_page_is_refused_naming_it() {
    let p = sample().encode_paged(&PageShape::with_rows(1));
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert!(root.pages.len() > 2 && root.pack_pages.len() == 2);
    for id in root.page_ids() {
        let mut pages = by_id(&p);
        let good = pages[&id].clone();
        for len in 0..good.len() {
            pages.insert(id, good[..len].to_vec());
            let e = decode_with(&root, &pages).unwrap_err().to_string();
            assert!(e.starts_with(&page_what(&id)), "cut at {len}: {e}");
        }
        // And a page with a byte too many.
        let mut long = good.clone();
        long.push(0);
        pages.insert(id, long);
        let e = decode_with(&root, &pages).unwrap_err().to_string();
        assert!(e.starts_with(&page_what(&id)), "{e}");
        pages.insert(id, good);
        assert!(decode_with(&root, &pages).is_ok());
    }
}

/// A root listing its pages out of order is refused as a root; one whose
/// entries point at each other's pages is refused at the first page that
/// does not hold what the root says.
#[test]
fn a_root_naming_pages_out_of_order_is_refused() {
    let p = sample().encode_paged(&PageShape::with_rows(1));
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert!(root.pages.len() > 3 && root.pack_pages.len() == 2);

    let mut swapped = root.clone();
    swapped.pages.swap(1, 2);
    let e = TrackRoot::decode(&swapped.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{ROOT} pages[2]: first name"))
            && e.contains("does not come after the previous page's"),
        "{e}"
    );
    let mut twice = root.clone();
    twice.pages[2] = twice.pages[1].clone();
    let e = TrackRoot::decode(&twice.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pages[2]") && e.contains("does not come after"),
        "{e}"
    );

    let mut swapped = root.clone();
    swapped.pack_pages.swap(0, 1);
    let e = TrackRoot::decode(&swapped.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{ROOT} pack_pages[1]"))
            && e.contains("first address does not come after"),
        "{e}"
    );

    // Pages 1 and 2 trade ids (and counts): the page read second holds
    // names past its range.
    let mut crossed = root.clone();
    let (one, two) = (crossed.pages[1].clone(), crossed.pages[2].clone());
    crossed.pages[1] = PageRef {
        first: one.first.clone(),
        ..two.clone()
    };
    crossed.pages[2] = PageRef {
        first: two.first.clone(),
        ..one.clone()
    };
    let e = decode_with(&crossed, &by_id(&p)).unwrap_err().to_string();
    assert!(e.starts_with(&page_what(&two.id)), "{e}");
    assert!(e.contains("is outside the page's range"), "{e}");

    // Pack pages trading ids: the first holds a pack other than the root's.
    let mut crossed = root.clone();
    let (one, two) = (crossed.pack_pages[0].clone(), crossed.pack_pages[1].clone());
    crossed.pack_pages[0].id = two.id;
    crossed.pack_pages[1].id = one.id;
    let e = decode_with(&crossed, &by_id(&p)).unwrap_err().to_string();
    assert!(
        e.starts_with(&page_what(&two.id))
            && e.contains(&format!(
                "the root says the page holds 1 packs from {}",
                one.first
            )),
        "{e}"
    );

    // Pages given out of the root's order: the first is not the one the
    // root names first, and the error names the page the root expected.
    let pages = by_id(&p);
    let packs: Vec<&[u8]> = root.pack_pages.iter().map(|r| &pages[&r.id][..]).collect();
    let names: Vec<&[u8]> = root
        .pages
        .iter()
        .skip(1)
        .map(|r| &pages[&r.id][..])
        .collect();
    let e = Track::decode_paged(&root, names, packs.clone(), ROOT, page_what).unwrap_err();
    assert!(
        e.to_string().starts_with(&page_what(&root.pages[0].id))
            && e.to_string().contains("is outside the page's range"),
        "{e}"
    );
    // Fewer pages than the root names.
    let mut names: Vec<&[u8]> = root.pages.iter().map(|r| &pages[&r.id][..]).collect();
    names.pop();
    let e = Track::decode_paged(&root, names.clone(), packs.clone(), ROOT, page_what);
    let e = e.unwrap_err().to_string();
    assert_eq!(e, format!("{ROOT}: not every page of the root was read"));
    names.push(&pages[&root.pages.last().unwrap().id]);
    let e = Track::decode_paged(&root, names, packs[..1].to_vec(), ROOT, page_what);
    let e = e.unwrap_err().to_string();
    assert_eq!(e, format!("{ROOT}: not every page of the root was read"));
}

/// A root whose totals are not the sums of its pages' is refused.
#[test]
fn a_root_whose_totals_do_not_add_up_is_refused() {
    let p = sample().encode_paged(&PageShape::with_rows(2));
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert_eq!((root.items, root.bytes), (5, 5 + 3 + (1 << 40) + 8));

    let mut more = root.clone();
    more.items += 1;
    let e = TrackRoot::decode(&more.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "{ROOT}: the root says 6 items of {b} bytes, but its pages add up to 5 items of {b} bytes",
            b = root.bytes
        )
    );
    let mut fewer = root.clone();
    fewer.bytes -= 1;
    let e = TrackRoot::decode(&fewer.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert!(e.contains("but its pages add up to 5 items"), "{e}");
    let mut huge = root.clone();
    huge.pages[0].bytes = u64::MAX;
    huge.pages[1].bytes = 2;
    let e = TrackRoot::decode(&huge.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 2^64 bytes"), "{e}");

    // Totals that add up, over a page that holds other counts.
    let mut wrong = root.clone();
    let k = wrong.pages.iter().position(|p| p.items > 0).unwrap();
    wrong.pages[k].items += 1;
    wrong.items += 1;
    let e = decode_with(&wrong, &by_id(&p)).unwrap_err().to_string();
    assert!(
        e.starts_with(&page_what(&wrong.pages[k].id)) && e.contains("the root says the page holds"),
        "{e}"
    );
}

/// A name page whose rows are out of order, outside its range, not from
/// the first name the root gives, or retired, is refused naming it.
#[test]
fn a_name_page_out_of_order_or_range_is_refused() {
    let a = item("a", whole("a", 1));
    let b = item("b", whole("b", 2));
    let c = item("c", whole("c", 4));
    let one_page = |items: Vec<TrackItem>, dirs: Vec<TrackDir>, first: &str| {
        let bytes = Track {
            items: items.clone(),
            retired: Vec::new(),
            dirs,
            pack_lengths: PackLengths::default(),
        }
        .encode();
        let root = root_of(vec![page_ref(first, &bytes, &items)], vec![]);
        (
            refused(&root, &[&bytes], &[]),
            page_what(&ObjectId::of(&bytes)),
        )
    };

    // The crafted page is a valid single-object Track.
    let bytes = name_page(vec![b.clone(), a.clone()], vec![]);
    assert!(Track::decode(&bytes, "t").is_ok());
    let (e, page) = one_page(vec![b.clone(), a.clone()], vec![], "a");
    assert_eq!(e, format!("{page} names[1]: \"a\" is out of order"));
    let (e, page) = one_page(vec![a.clone(), a.clone()], vec![], "a");
    assert_eq!(e, format!("{page} names[1]: \"a\" is out of order"));
    // Bytewise "a-/x" < "a/b", but a's entries come before a-'s.
    let (e, page) = one_page(
        vec![item("a-/x", whole("x", 1)), item("a/b", whole("y", 1))],
        vec![],
        "a-/x",
    );
    assert_eq!(e, format!("{page} names[1]: \"a/b\" is out of order"));
    let dirs = vec![dir("b", None, None), dir("a", Some(0o700), None)];
    let (e, page) = one_page(vec![], dirs, "a");
    assert_eq!(e, format!("{page} dirs[1]: \"a\" is out of order"));
    let (e, page) = one_page(vec![a.clone(), b.clone()], vec![], "");
    assert_eq!(
        e,
        format!("{page}: the root says the page starts at \"\", but its first name is Some(\"a\")")
    );
    let (e, page) = one_page(vec![a.clone(), b.clone()], vec![dir("", None, None)], "a");
    assert_eq!(
        e,
        format!("{page}: \"\" is outside the page's range (from \"a\")")
    );
    let (e, page) = one_page(vec![], vec![], "");
    assert!(
        e.starts_with(&format!("{page}: the root says the page starts at")),
        "{e}"
    );

    // Two pages: the first holds a name from the second's range.
    let first = name_page(vec![a.clone(), c.clone()], vec![dir("", None, None)]);
    let second = name_page(vec![b.clone()], vec![]);
    let root = root_of(
        vec![
            page_ref("", &first, &[a.clone(), c.clone()]),
            page_ref("b", &second, std::slice::from_ref(&b)),
        ],
        vec![],
    );
    let e = refused(&root, &[&first, &second], &[]);
    assert_eq!(
        e,
        format!(
            "{}: \"c\" is outside the page's range (from \"\" up to \"b\")",
            page_what(&ObjectId::of(&first))
        )
    );
    // The same names, cut where the root says: read.
    let first = name_page(vec![a.clone()], vec![dir("", None, None)]);
    let second = name_page(vec![b.clone(), c.clone()], vec![]);
    let root = root_of(
        vec![
            page_ref("", &first, std::slice::from_ref(&a)),
            page_ref("b", &second, &[b.clone(), c.clone()]),
        ],
        vec![],
    );
    let t = Track::decode_paged(&root, [&first[..], &second[..]], [], ROOT, page_what).unwrap();
    assert_eq!(t.items(), &[a.clone(), b.clone(), c.clone()]);

    // A retired entry, and items without names.
    let t = Track::new(
        vec![item("a", packed_at("p", 0, 1))],
        vec![packed_at("p", 1, 1)],
        "t",
    )
    .unwrap();
    let bytes = t.encode();
    let root = root_of(vec![page_ref("a", &bytes, t.items())], vec![]);
    let e = refused(&root, &[&bytes], &[]);
    let page = page_what(&ObjectId::of(&bytes));
    assert_eq!(
        e,
        format!("{page} names[1]: a name page holds no retired entry")
    );
    let bytes = cbor::encode(&Value::Map(vec![(
        cbor::text("object_index"),
        Value::Array(vec![whole("a", 1).to_cbor()]),
    )]));
    let root = root_of(vec![page_ref("", &bytes, std::slice::from_ref(&a))], vec![]);
    let e = refused(&root, &[&bytes], &[]);
    assert_eq!(
        e,
        format!(
            "{}: a name page must name its items",
            page_what(&ObjectId::of(&bytes))
        )
    );
}

/// A name page holding item `a` packed at 0..5 of pack p, the root over
/// it and `packs`, and what decoding them says.
fn with_pack_pages(records: Vec<Vec<PackRecord>>) -> Result<Track, String> {
    let a = item("a", packed_at("p", 0, 5));
    let names = name_page(vec![a.clone()], vec![dir("", None, None)]);
    let packs: Vec<(PackPageRef, Vec<u8>)> = records.into_iter().map(pack_page).collect();
    let root = root_of(
        vec![page_ref("", &names, &[a])],
        packs.iter().map(|(r, _)| r.clone()).collect(),
    );
    let root = TrackRoot::decode(&root.encode(), ROOT).map_err(|e| e.to_string())?;
    Track::decode_paged(
        &root,
        [&names[..]],
        packs.iter().map(|(_, b)| &b[..]),
        ROOT,
        page_what,
    )
    .map_err(|e| e.to_string())
}

/// Pack records that disagree with the name pages (live counts, lengths,
/// packs no item names) are refused, naming the pack.
#[test]
fn pack_records_disagreeing_with_the_name_pages_are_refused() {
    let p = ObjectId::of(b"p").to_hex();
    let t = with_pack_pages(vec![vec![record("p", 5, 1, vec![])]]).unwrap();
    assert_eq!(t.pack_len(&ObjectId::of(b"p")), Some(5));

    let e = with_pack_pages(vec![vec![record("p", 5, 2, vec![])]]).unwrap_err();
    assert_eq!(
        e,
        format!("{ROOT}: pack {p}: 1 items are packed in it, but the pack pages record 2 items")
    );
    let e = with_pack_pages(vec![]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{ROOT}: pack {p}: 1 items are packed in it, but the pack pages record no such pack"
        )
    );
    let mut two = vec![record("p", 5, 1, vec![]), record("zzz", 5, 1, vec![])];
    two.sort_by_key(|r| r.address);
    let e = with_pack_pages(vec![two]).unwrap_err();
    let z = ObjectId::of(b"zzz").to_hex();
    assert_eq!(
        e,
        format!("{ROOT}: pack {z}: the pack pages record it, but no item is packed in it")
    );
    let e = with_pack_pages(vec![vec![record("p", 6, 1, vec![])]]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{ROOT}: pack {p}: the pack pages say it is 6 bytes long, but its entries tile 5 bytes"
        )
    );
    // A retired entry inside the length that overlaps the live one.
    let e = with_pack_pages(vec![vec![record("p", 5, 1, vec![packed_at("p", 1, 2)])]]).unwrap_err();
    assert!(
        e.starts_with(&format!("{ROOT}: pack {p}: entries overlap")),
        "{e}"
    );
    // A retired entry that extends the pack: the record's length agrees.
    let t = with_pack_pages(vec![vec![record("p", 8, 1, vec![packed_at("p", 5, 3)])]]).unwrap();
    assert_eq!(t.retired(), &[packed_at("p", 5, 3)]);
    assert_eq!(t.pack_len(&ObjectId::of(b"p")), Some(8));
}

/// Each pack record is checked on its own: a retired entry outside its
/// pack, no live entry, packs out of order, a wrong kind.
#[test]
fn pack_records_are_checked_on_their_own() {
    let p = ObjectId::of(b"p");
    let page = |records| {
        let (r, bytes) = pack_page(records);
        (page_what(&r.id), read_pack_page(&bytes, &page_what(&r.id)))
    };
    let (_, read) = page(vec![record("p", 8, 1, vec![packed_at("p", 5, 3)])]);
    assert_eq!(read.unwrap()[0].retired, vec![packed_at("p", 5, 3)]);

    // Through a whole decode, the error is the page's.
    let bad = vec![record("p", 5, 1, vec![packed_at("p", 5, 3)])];
    let (r, _) = pack_page(bad.clone());
    let e = with_pack_pages(vec![bad]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{} packs[0] retired[0]: not an entry inside pack {p} of 5 bytes",
            page_what(&r.id)
        )
    );
    let bad = vec![record("p", 5, 0, vec![])];
    let (r, _) = pack_page(bad.clone());
    let e = with_pack_pages(vec![bad]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{} packs[0]: a pack with no live item is not recorded",
            page_what(&r.id)
        )
    );

    let (what, read) = page(vec![record("p", 8, 1, vec![packed_at("p", 6, 3)])]);
    assert_eq!(
        read.unwrap_err().to_string(),
        format!("{what} packs[0] retired[0]: not an entry inside pack {p} of 8 bytes")
    );
    let (what, read) = page(vec![record("p", 8, 1, vec![packed_at("q", 0, 3)])]);
    assert_eq!(
        read.unwrap_err().to_string(),
        format!("{what} packs[0] retired[0]: not an entry inside pack {p} of 8 bytes")
    );
    let mut unpacked = packed_at("p", 0, 3);
    unpacked.placement = Placement::Whole;
    let (what, read) = page(vec![record(
        "p",
        8,
        1,
        vec![packed_at("p", 5, 3), unpacked],
    )]);
    assert_eq!(
        read.unwrap_err().to_string(),
        format!("{what} packs[0] retired[1]: not an entry inside pack {p} of 8 bytes")
    );
    let (what, read) = page(vec![record(
        "p",
        u64::MAX,
        1,
        vec![packed_at(
            "p",
            u64::from(u32::MAX),
            u64::MAX - u64::from(u32::MAX),
        )],
    )]);
    assert!(read.is_ok(), "{what}: an entry that ends at 2^64 - 1");

    let (what, read) = page(vec![record("p", 5, 0, vec![])]);
    assert_eq!(
        read.unwrap_err().to_string(),
        format!("{what} packs[0]: a pack with no live item is not recorded")
    );

    let mut records = vec![record("p", 5, 1, vec![]), record("q", 5, 1, vec![])];
    records.sort_by_key(|r| std::cmp::Reverse(r.address));
    let (what, read) = page(records.clone());
    assert_eq!(
        read.unwrap_err().to_string(),
        format!("{what} packs[1]: pack out of order")
    );
    records[1] = records[0].clone();
    let (what, read) = page(records);
    assert_eq!(
        read.unwrap_err().to_string(),
        format!("{what} packs[1]: pack out of order")
    );

    let wrong_kind = cbor::encode(&Value::Map(vec![
        (cbor::text("kind"), cbor::text("fragment")),
        (cbor::text("packs"), Value::Array(vec![])),
    ]));
    let e = read_pack_page(&wrong_kind, "page P")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "page P: kind \"fragment\" is not a pack page (\"fragment-packs\")"
    );
    let no_packs = cbor::encode(&Value::Map(vec![(
        cbor::text("kind"),
        cbor::text(PACK_PAGE_KIND),
    )]));
    let e = read_pack_page(&no_packs, "page P").unwrap_err().to_string();
    assert_eq!(e, "page P: missing field \"packs\"");
    let short = cbor::encode(&Value::Map(vec![(
        cbor::text("packs"),
        Value::Array(vec![Value::Array(vec![
            cbor::id(&p),
            cbor::uint(5),
            cbor::uint(1),
        ])]),
    )]));
    let e = read_pack_page(&short, "page P").unwrap_err().to_string();
    assert_eq!(
        e,
        "page P packs[0]: expected [address, length, live, retired]"
    );
    // A single-object Track is not a pack page, nor a pack page a Track.
    let track = sample().encode();
    assert!(read_pack_page(&track, "page P").is_err());
    let (_, bytes) = pack_page(vec![record("p", 5, 1, vec![])]);
    assert!(Track::decode(&bytes, "t").is_err());
}

// --- Old Tracks, empty Tracks ---------------------------------------------

/// A single-object Track decodes as before and is not a root; a root is
/// not a single-object Track.
#[test]
fn single_object_tracks_still_decode() {
    let t = sample();
    let single = t.encode();
    assert_eq!(Track::decode(&single, "t").unwrap(), t);
    assert!(!TrackRoot::is_paged(&single));
    let e = TrackRoot::decode(&single, ROOT).unwrap_err().to_string();
    assert_eq!(e, format!("{ROOT}: missing field \"pages\""));
    let p = t.encode_paged(&PageShape::default());
    assert!(TrackRoot::is_paged(&p.root));
    let e = Track::decode(&p.root, "t").unwrap_err().to_string();
    assert!(e.contains("missing field \"object_index\""), "{e}");
    assert_same(&decode(&p).unwrap(), &t);
}

/// `is_paged` reads keys up to `pages` or `object_index`, whichever
/// comes first, skipping others.
#[test]
fn is_paged_looks_for_the_first_of_pages_and_object_index() {
    let map = |keys: Vec<(Value, Value)>| cbor::encode(&Value::Map(keys));
    let list = || Value::Array(vec![cbor::uint(1)]);
    assert!(TrackRoot::is_paged(&map(vec![
        (cbor::text("x"), list()),
        (cbor::uint(7), list()),
        (cbor::text("pages"), list()),
    ])));
    assert!(!TrackRoot::is_paged(&map(vec![
        (cbor::text("object_index"), list()),
        (cbor::text("pages"), list()),
    ])));
    assert!(!TrackRoot::is_paged(&map(vec![(cbor::text("x"), list())])));
    // Indefinite lengths: {_ "kind": "fragment", "pages": []}.
    let mut indefinite = vec![0xbf, 0x64];
    indefinite.extend(b"kind");
    indefinite.push(0x68);
    indefinite.extend(b"fragment");
    indefinite.push(0x65);
    indefinite.extend(b"pages");
    indefinite.extend([0x80, 0xff]);
    assert!(TrackRoot::is_paged(&indefinite));
    assert!(!TrackRoot::is_paged(&indefinite[..1]));
    for not_a_map in [&[][..], &[0x80], &[0xa1], &[0x65, b'p']] {
        assert!(!TrackRoot::is_paged(not_a_map), "{not_a_map:?}");
    }
}

/// A Track of no items is one name page (the modality directory) and no
/// pack page, and reads back.
#[test]
fn an_empty_track_is_one_page() {
    for t in [
        Track::new(vec![], vec![], "t").unwrap(),
        Track::new(vec![], vec![], "t")
            .unwrap()
            .with_dirs(
                vec![dir("", Some(0o700), Some(9)), dir("d", None, None)],
                "t",
            )
            .unwrap(),
    ] {
        for rows in [1, 64] {
            let shape = PageShape::with_rows(rows);
            let p = t.encode_paged(&shape);
            check_encoding(&t, &shape, &p);
            let root = TrackRoot::decode(&p.root, ROOT).unwrap();
            assert_eq!(
                p.pages.len(),
                1 + usize::from(rows == 1 && !t.dirs().is_empty())
            );
            assert!(root.pack_pages.is_empty());
            assert_eq!((root.items, root.bytes), (0, 0));
            assert_eq!(decode(&p).unwrap(), t);
        }
    }
}

/// A directory above a recorded one is a row of its own, even when no
/// item names it, so the form read back encodes to the same pages.
#[test]
fn directories_above_recorded_directories_are_rows() {
    let t = Track::new(vec![item("c.jpg", whole("c", 1))], vec![], "t")
        .unwrap()
        .with_dirs(
            vec![
                dir("b", None, None),
                dir("b/a/x", None, None),
                dir("d/e", Some(0o700), None),
            ],
            "t",
        )
        .unwrap();
    for rows in [1, 64] {
        let shape = PageShape::with_rows(rows);
        let p = t.encode_paged(&shape);
        let pages = by_id(&p);
        let root = TrackRoot::decode(&p.root, ROOT).unwrap();
        let mut dirs: Vec<String> = root
            .pages
            .iter()
            .flat_map(|r| page_rows(&pages[&r.id]).1)
            .collect();
        dirs.sort();
        assert_eq!(dirs, ["", "b", "b/a", "b/a/x", "d", "d/e"]);
        let back = decode(&p).unwrap();
        // "b" records nothing and has "b/a/x" below it.
        let names: Vec<&str> = back.dirs().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["b/a/x", "d/e"]);
        assert_eq!(back.encode_paged(&shape).id, p.id);
    }
}

/// A name page whose items' sizes add up past 2^64 is refused, not a
/// panic (an overflow in a debug build) or a wrapped sum.
#[test]
fn a_name_page_whose_sizes_overflow_is_refused() {
    let items = vec![item("a", whole("a", u64::MAX)), item("b", whole("b", 2))];
    let bytes = name_page(items.clone(), vec![]);
    let root = TrackRoot {
        pages: vec![PageRef {
            first: "a".into(),
            id: ObjectId::of(&bytes),
            items: 2,
            bytes: 1,
            t_end: None,
        }],
        pack_pages: vec![],
        index: vec![],
        items: 2,
        bytes: 1,
    };
    let e = refused(&root, &[&bytes], &[]);
    assert_eq!(
        e,
        format!(
            "{}: the root says the page holds 2 items of 1 bytes, but it holds 2 of more than 2^64",
            page_what(&root.pages[0].id)
        )
    );
}

/// A name that is both an item's and a directory's (the tree refuses it,
/// naming it) is never cut apart: every shape still decodes, so the
/// refusal is the tree's clear one, not a page's.
#[test]
fn a_file_directory_clash_stays_on_one_page() {
    let t = Track::new(
        vec![item("a", whole("a", 1)), item("a/b", whole("a/b", 2))],
        vec![],
        "t",
    )
    .unwrap()
    .with_dirs(vec![dir("a", Some(0o700), None)], "t")
    .unwrap();
    for rows in 1..=6 {
        let p = t.encode_paged(&PageShape::with_rows(rows));
        let back = decode(&p).unwrap_or_else(|e| panic!("with_rows({rows}): {e}"));
        assert_eq!(back.items(), t.items(), "with_rows({rows})");
        assert_eq!(back.dirs(), t.dirs(), "with_rows({rows})");
    }
}

/// Past twice the index size a root lists its name pages through index
/// pages: the Track reads back the same, a root needs them read first, and
/// one change rewrites one index page besides its own.
#[test]
fn many_pages_are_listed_through_index_pages() {
    let t = big();
    let shape = PageShape::with_rows(8).with_index_pages(4);
    let p = t.encode_paged(&shape);
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    assert!(
        root.needs_index() && root.index.len() > 10,
        "{}",
        root.index.len()
    );
    assert_same(&decode(&p).unwrap(), &t);
    let pages = by_id(&p);
    assert!(decode_with(&root, &pages).is_err(), "unread index pages");
    assert!(root
        .page_ids()
        .all(|id| p.pages.iter().any(|(i, _)| *i == id)));

    let mut items = t.items().to_vec();
    items.push(item("d1/zz-new", whole("zz-new", 3)));
    let retired = t.retired().to_vec();
    let changed = Track::new(items, retired, "t")
        .unwrap()
        .encode_paged(&shape);
    let old: HashSet<ObjectId> = p.pages.iter().map(|(id, _)| *id).collect();
    let new_root = TrackRoot::decode(&changed.root, ROOT).unwrap();
    let new_index = new_root
        .index
        .iter()
        .filter(|i| !old.contains(&i.id))
        .count();
    // Its own, and perhaps a neighbour whose cut moved.
    assert!((1..=3).contains(&new_index), "{new_index} new index pages");
    assert!(changed.root.len() < p.root.len() * 2);
}

/// Index pages are checked like the root: their counts, their first
/// names, their order; a damaged one names itself.
#[test]
fn a_damaged_or_misplaced_index_page_is_refused() {
    let p = big().encode_paged(&PageShape::with_rows(8).with_index_pages(4));
    let pages = by_id(&p);
    let root = TrackRoot::decode(&p.root, ROOT).unwrap();
    let index =
        |root: &TrackRoot| -> Vec<&[u8]> { root.index.iter().map(|i| &pages[&i.id][..]).collect() };
    let mut swapped = root.clone();
    swapped.index.swap(1, 2);
    let e = TrackRoot::decode(&swapped.encode(), ROOT)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not come after"), "{e}");

    let mut wrong = root.clone();
    wrong.index[1].pages += 1;
    let e = wrong
        .fill_index(index(&root), page_what)
        .unwrap_err()
        .to_string();
    let named = page_what(&root.index[1].id);
    assert!(e.contains(&named) && e.contains("lists"), "{e}");

    let mut wrong = root.clone();
    wrong.index[2].items += 1;
    wrong.items += 1;
    let e = wrong
        .fill_index(index(&root), page_what)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&page_what(&root.index[2].id)), "{e}");

    let mut short = root.clone();
    let e = short
        .fill_index(index(&root).into_iter().take(3), page_what)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not every index page"), "{e}");

    let mut damaged = pages[&root.index[0].id].clone();
    damaged.truncate(damaged.len() / 2);
    let mut r = root.clone();
    let mut list = index(&root);
    list[0] = &damaged;
    let e = r.fill_index(list, page_what).unwrap_err().to_string();
    assert!(e.contains(&page_what(&root.index[0].id)), "{e}");
}

// --- Edits -----------------------------------------------------------------

/// A row of a Track as an edit sees it: (name, is an item) and its content.
fn rows_of(t: &Track) -> HashMap<(String, bool), super::encode::Row<'_>> {
    t.rows()
        .into_iter()
        .map(|r| ((r.name().to_string(), r.key().2), r))
        .collect()
}

/// The edit that turns `a` into `b`: the rows `b` lacks removed, those it
/// has new or otherwise added.
fn edit_between(a: &Track, b: &Track) -> TrackEdit {
    use super::encode::Row;
    let (ra, rb) = (rows_of(a), rows_of(b));
    let mut edit = TrackEdit::default();
    for (name, item) in ra.keys() {
        if !rb.contains_key(&(name.clone(), *item)) {
            edit.removed.push(name.clone());
        }
    }
    for (key, row) in &rb {
        let same = match (ra.get(key), row) {
            (Some(Row::Item(x)), Row::Item(y)) => x == y,
            (Some(Row::Dir(x)), Row::Dir(y)) => x == y,
            _ => false,
        };
        if !same {
            match row {
                Row::Item(i) => edit.items.push(i.clone().into_owned()),
                Row::Dir(d) => edit.dirs.push(d.clone()),
            }
        }
    }
    edit
}

/// `a` changed: each item kept, removed, moved, re-attributed or replaced
/// as `ops` says in turn, `new` items added in one new pack, the
/// directories kept as `keep_dirs` says and `new_dirs` added; the entries
/// of `a` passed as retired, as a flush passes them.
fn changed_track(
    a: &Track,
    ops: &[u8],
    new: &[Spec],
    keep_dirs: &[bool],
    new_dirs: &[(Vec<&'static str>, Attrs)],
) -> Track {
    let mut items = Vec::new();
    let mut names = HashSet::new();
    for (i, item) in a.items().iter().enumerate() {
        let mut item = item.clone();
        match ops.get(i % ops.len().max(1)).copied().unwrap_or(0) {
            0 | 1 => {}
            2 => continue,
            3 => item.name = format!("moved/{}", item.name),
            4 => item.attrs.mode = Some(item.attrs.mode.map_or(0o600, |m| m ^ 0o1)),
            _ => item.entry = whole(&format!("replaced {}", item.name), item.entry.byte_size),
        }
        names.insert(item.name.clone());
        items.push(item);
    }
    let mut offset = 0;
    for s in new {
        let name = format!("{}/n{}", s.dir.join("/"), s.leaf).replace("//", "/");
        let name = name.trim_start_matches('/').to_string();
        if !names.insert(name.clone()) {
            continue;
        }
        items.push(item(&name, packed_at("fresh pack", offset, s.size)));
        offset += s.size;
    }
    let retired = a
        .items()
        .iter()
        .map(|i| i.entry.clone())
        .chain(a.retired().iter().cloned())
        .collect();
    let mut dirs: Vec<TrackDir> = a
        .dirs()
        .iter()
        .enumerate()
        .filter(|(i, _)| keep_dirs.get(*i).copied().unwrap_or(true))
        .map(|(_, d)| d.clone())
        .collect();
    let mut dir_names: HashSet<String> = dirs.iter().map(|d| d.name.clone()).collect();
    for (path, attrs) in new_dirs {
        let name = path.join("/");
        if dir_names.insert(name.clone()) && !names.contains(&name) {
            dirs.push(TrackDir {
                name,
                attrs: *attrs,
            });
        }
    }
    Track::new(items, retired, "b")
        .unwrap()
        .with_dirs(dirs, "b")
        .unwrap()
}

/// Whether two live items of `t` name one range of a pack.
fn shares_ranges(t: &Track) -> bool {
    let mut seen = HashSet::new();
    t.items()
        .iter()
        .filter(|i| packed(&i.entry).is_some())
        .any(|i| !seen.insert(entry_key(&i.entry)))
}

/// `root` (its index read) edited, reading its pages from `pages` only.
fn edited(
    root: &TrackRoot,
    edit: &TrackEdit,
    shape: &PageShape,
    pages: &HashMap<ObjectId, Vec<u8>>,
) -> Result<PagedTrack, EditError> {
    root.edit(
        edit,
        shape,
        &|id| pages.get(id).map(|p| &p[..]),
        ROOT,
        &page_what,
    )
}

/// The root of `p`, its index pages read.
/// The Track an edit stored as `got`, over the pages `old` of the Track
/// it edited.
fn decode_edited(old: &HashMap<ObjectId, Vec<u8>>, got: &PagedTrack) -> Track {
    let mut all = old.clone();
    all.extend(got.pages.iter().cloned());
    let mut root = TrackRoot::decode(&got.root, ROOT).unwrap();
    if root.needs_index() {
        let index: Vec<&[u8]> = root.index.iter().map(|i| &all[&i.id][..]).collect();
        root.fill_index(index, page_what).unwrap();
    }
    decode_with(&root, &all).unwrap_or_else(|e| panic!("{e}"))
}

fn filled_root(p: &PagedTrack) -> TrackRoot {
    let pages = by_id(p);
    let mut root = TrackRoot::decode(&p.root, ROOT).unwrap();
    if root.needs_index() {
        let index: Vec<&[u8]> = root.index.iter().map(|i| &pages[&i.id][..]).collect();
        root.fill_index(index, page_what).unwrap();
    }
    root
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// An edit gives the pages the edited Track encodes to, whatever the
    /// change and the cut, and writes only the pages that encoding has and
    /// the old one has not; clearing a directory and adding its rows back
    /// gives the same.
    #[test]
    fn edits_give_the_pages_of_the_edited_track(
        specs in prop::collection::vec(spec(), 0..100),
        dirs in prop::collection::vec(dir_spec(), 0..8),
        ops in prop::collection::vec(prop_oneof![8 => Just(0u8), 1 => 2u8..6], 1..12),
        new in prop::collection::vec(spec(), 0..12),
        keep_dirs in prop::collection::vec(prop::bool::weighted(0.8), 0..8),
        new_dirs in prop::collection::vec(dir_spec(), 0..3),
        rows in 1u64..=24,
        index in 1u64..=4,
        clear in any::<prop::sample::Index>(),
    ) {
        let a = build(&specs, &dirs);
        let b = changed_track(&a, &ops, &new, &keep_dirs, &new_dirs);
        let shape = PageShape::with_rows(rows).with_index_pages(index);
        let (pa, pb) = (a.encode_paged(&shape), b.encode_paged(&shape));
        let root = filled_root(&pa);
        let old = by_id(&pa);
        let edit = edit_between(&a, &b);
        let got = edited(&root, &edit, &shape, &old).unwrap_or_else(|e| panic!("{e:?}"));

        assert_same(&decode_edited(&old, &got), &b);

        // New items are numbered after the items the edit keeps.
        let goes: HashSet<&str> = edit
            .removed
            .iter()
            .map(String::as_str)
            .chain(edit.items.iter().map(|i| i.name.as_str()))
            .collect();
        let kept = a.items().iter().filter(|i| !goes.contains(i.name.as_str()));
        let survey = root.survey(&edit, &|id| old.get(id).map(|p| &p[..]), &page_what).unwrap();
        prop_assert_eq!(survey.kept_t_end, kept.map(|i| i.entry.t_end).max());
        let mut dropped: Vec<_> = survey.dropped.iter().map(entry_key).collect();
        let mut want: Vec<_> = a
            .items()
            .iter()
            .filter(|i| goes.contains(i.name.as_str()))
            .map(|i| entry_key(&i.entry))
            .collect();
        dropped.sort_unstable();
        want.sort_unstable();
        prop_assert_eq!(dropped, want, "dropped entries");

        // New directories that record nothing may be given as implied, and
        // so may directories that exist already.
        let mut implied = edit.clone();
        let (plain, recorded): (Vec<TrackDir>, Vec<TrackDir>) = implied
            .dirs
            .drain(..)
            .partition(|d| d.attrs == Attrs::default() && !rows_of(&a).contains_key(&(d.name.clone(), false)));
        implied.dirs = recorded;
        implied.implied = plain.into_iter().map(|d| d.name).collect();
        implied.implied.extend(
            b.rows().iter().filter(|r| !r.key().2).map(|r| r.name().to_string()).take(3),
        );
        let via_implied = edited(&root, &implied, &shape, &old).unwrap_or_else(|e| panic!("{e:?}"));
        if !shares_ranges(&a) {
            prop_assert_eq!(via_implied.id, pb.id, "implied directories");
        }
        if !shares_ranges(&a) {
            prop_assert_eq!(got.id, pb.id, "the edited root is the encoded one");
            let mut written: Vec<ObjectId> = got.pages.iter().map(|(id, _)| *id).collect();
            let mut fresh: Vec<ObjectId> = pb
                .pages
                .iter()
                .map(|(id, _)| *id)
                .filter(|id| !old.contains_key(id))
                .collect();
            written.sort_unstable();
            fresh.sort_unstable();
            prop_assert_eq!(written, fresh, "pages written");

            // The same change, as a cleared directory and its rows again.
            let dir_rows: Vec<String> = a
                .rows()
                .iter()
                .filter(|r| !r.key().2)
                .map(|r| r.name().to_string())
                .collect();
            let d = clear.get(&dir_rows).clone();
            let inside = |name: &str| super::edit::below(name, &d) || d.is_empty() && !name.is_empty();
            let mut cleared = TrackEdit {
                cleared: vec![d.clone()],
                removed: edit.removed.iter().filter(|n| !inside(n)).cloned().collect(),
                ..TrackEdit::default()
            };
            for row in b.rows() {
                let changed = match &row {
                    super::encode::Row::Item(i) => edit.items.contains(i),
                    super::encode::Row::Dir(x) => edit.dirs.contains(x),
                };
                if changed || inside(row.name()) {
                    match row {
                        super::encode::Row::Item(i) => cleared.items.push(i.into_owned()),
                        super::encode::Row::Dir(x) => cleared.dirs.push(x),
                    }
                }
            }
            let again = edited(&root, &cleared, &shape, &old).unwrap_or_else(|e| panic!("{e:?}"));
            prop_assert_eq!(again.id, pb.id, "cleared {:?}", d);
        }
    }
}

#[test]
fn an_edit_asks_for_the_pages_it_reads() {
    let t = big();
    let shape = PageShape::with_rows(16);
    let p = t.encode_paged(&shape);
    let root = filled_root(&p);
    let mut edit = TrackEdit::default();
    edit.removed.push(t.items()[500].name.clone());
    let mut read = HashMap::new();
    let all = by_id(&p);
    let mut rounds = 0;
    let got = loop {
        match edited(&root, &edit, &shape, &read) {
            Ok(got) => break got,
            Err(EditError::Need(ids)) => {
                rounds += 1;
                for id in ids {
                    read.insert(id, all[&id].clone());
                }
            }
            Err(EditError::Format(e)) => panic!("{e}"),
        }
    };
    assert!(rounds >= 1, "the edit read a page");
    assert!(
        read.len() <= 4,
        "read {} of {} pages",
        read.len(),
        all.len()
    );
    assert!(got.pages.len() <= 4, "wrote {} pages", got.pages.len());
    let expected = pages_to_edit(&root, &edit);
    assert!(expected.iter().all(|id| read.contains_key(id)));
}

#[test]
fn an_edit_contradicting_the_pack_pages_is_refused() {
    let t = sample();
    let shape = PageShape::with_rows(4);
    let p = t.encode_paged(&shape);
    let root = filled_root(&p);
    let packed_item = t
        .items()
        .iter()
        .find(|i| packed(&i.entry).is_some())
        .unwrap()
        .clone();
    // An item into a pack the Track holds, past its end.
    let mut past = packed_item.clone();
    past.name = "past".into();
    past.entry = packed_at("pack 0", 1 << 40, 10);
    past.entry.address = packed_item.entry.address;
    let edit = TrackEdit {
        items: vec![past],
        ..TrackEdit::default()
    };
    match edited(&root, &edit, &shape, &by_id(&p)) {
        Err(EditError::Format(e)) => assert!(e.to_string().contains("past its length"), "{e}"),
        other => panic!("not refused: {:?}", other.map(|p| p.id)),
    }
    // A name added twice.
    let edit = TrackEdit {
        items: vec![packed_item.clone(), packed_item],
        ..TrackEdit::default()
    };
    let e = edited(&root, &edit, &shape, &by_id(&p)).err().unwrap();
    assert!(format!("{e:?}").contains("duplicate name"), "{e:?}");
}

#[test]
fn page_refs_record_where_their_items_end() {
    let t = sample();
    let p = t.encode_paged(&PageShape::with_rows(4));
    let root = filled_root(&p);
    let max = root.pages.iter().filter_map(|r| r.t_end).max();
    assert_eq!(max, t.items().iter().map(|i| i.entry.t_end).max());

    // A ref that says otherwise is refused; one that does not say (as
    // roots written before refs recorded it) is read.
    let j = root.pages.iter().position(|r| r.items > 0).unwrap();
    let mut wrong = root.clone();
    wrong.pages[j].t_end = wrong.pages[j].t_end.map(|t| t + 1);
    let e = decode_with(&wrong, &by_id(&p)).unwrap_err().to_string();
    assert!(e.contains("end at t"), "{e}");
    let mut silent = root.clone();
    silent.pages.iter_mut().for_each(|r| r.t_end = None);
    let back = TrackRoot::decode(&silent.encode(), ROOT).unwrap();
    assert_same(&decode_with(&back, &by_id(&p)).unwrap(), &t);
    let four = Value::Array(vec![
        cbor::text("a"),
        cbor::id(&root.pages[0].id),
        cbor::uint(1),
        cbor::uint(2),
    ]);
    let bytes = cbor::encode(&Value::Map(vec![
        (cbor::text("kind"), cbor::text("fragment")),
        (cbor::text("pages"), Value::Array(vec![four])),
        (cbor::text("items"), cbor::uint(1)),
        (cbor::text("bytes"), cbor::uint(2)),
    ]));
    assert_eq!(
        TrackRoot::decode(&bytes, ROOT).unwrap().pages[0].t_end,
        None
    );
}

// --- Writing row by row ------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A Track written row by row, its pages taken as they are cut, is the
    /// Track encoded whole.
    #[test]
    fn a_track_written_row_by_row_is_the_one_encoded_whole(
        specs in prop::collection::vec(spec(), 0..100),
        dirs in prop::collection::vec(dir_spec(), 0..8),
        rows in 1u64..=24,
        take_every in 1usize..20,
    ) {
        let t = build(&specs, &dirs);
        let shape = PageShape::with_rows(rows).with_index_pages(2);
        let whole = t.encode_paged(&shape);
        let mut writer = PagedWriter::new(&shape);
        for (&address, &length) in &t.pack_lengths {
            writer.pack(address, length);
        }
        for e in t.retired() {
            writer.retired(e.clone());
        }
        let mut pages = Vec::new();
        for (i, row) in t.rows().into_iter().enumerate() {
            match row {
                super::encode::Row::Item(item) => writer.item(item.into_owned()).unwrap(),
                super::encode::Row::Dir(dir) => writer.dir(dir).unwrap(),
            }
            if i % take_every == 0 {
                pages.extend(writer.take_pages());
            }
        }
        let written = writer.finish().unwrap();
        pages.extend(written.pages.iter().cloned());
        prop_assert_eq!(written.id, whole.id);
        let mut ids: Vec<ObjectId> = pages.iter().map(|(id, _)| *id).collect();
        let mut want: Vec<ObjectId> = whole.pages.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        want.sort_unstable();
        prop_assert_eq!(ids, want);
    }
}

#[test]
fn a_writer_refuses_rows_out_of_order_and_packs_without_a_length() {
    let shape = PageShape::with_rows(2);
    let mut writer = PagedWriter::new(&shape);
    writer.dir(dir("", None, None)).unwrap();
    writer.item(item("b", whole("b", 1))).unwrap();
    writer.item(item("c", whole("c", 1))).unwrap();
    writer.item(item("d", whole("d", 1))).unwrap();
    let e = writer.item(item("a", whole("a", 1))).unwrap_err();
    assert!(e.to_string().contains("does not come after"), "{e}");
    let e = writer.item(item("../x", whole("x", 1))).unwrap_err();
    assert!(e.to_string().contains("invalid name"), "{e}");

    let mut writer = PagedWriter::new(&shape);
    writer.dir(dir("", None, None)).unwrap();
    writer.item(item("a", packed_at("pack", 0, 4))).unwrap();
    let e = writer.finish().err().expect("refused");
    assert!(e.to_string().contains("its length is not given"), "{e}");
}

#[test]
fn a_new_pack_is_tiled_by_its_items_and_the_retired_ranges_the_edit_gives() {
    let a = sample();
    let shape = PageShape::with_rows(2);
    let pa = a.encode_paged(&shape);
    let root = filled_root(&pa);
    // Pack "n" of three ranges, the middle one removed where it was made.
    let items = vec![
        item("n/0.jpg", packed_at("n", 0, 4)),
        item("n/2.jpg", packed_at("n", 6, 5)),
    ];
    let middle = packed_at("n", 4, 2);
    let mut edit = TrackEdit {
        items: items.clone(),
        implied: vec!["n".into()],
        ..TrackEdit::default()
    };
    match edited(&root, &edit, &shape, &by_id(&pa)) {
        Err(EditError::Format(e)) => assert!(e.to_string().contains("gap"), "{e}"),
        other => panic!("a pack with a gap taken: {:?}", other.map(|p| p.id)),
    }
    // Retired ranges of a pack the Track records are its record's own.
    let ignored = packed_at("p", 0, 5);
    edit.retired = vec![middle.clone(), ignored];
    let got = edited(&root, &edit, &shape, &by_id(&pa)).unwrap_or_else(|e| panic!("{e:?}"));
    let back = decode_edited(&by_id(&pa), &got);
    let mut want = a.items().to_vec();
    want.extend(items);
    let mut retired = a.retired().to_vec();
    retired.push(middle);
    let want = Track::new(want, retired, "want")
        .unwrap()
        .with_dirs(a.dirs().to_vec(), "want")
        .unwrap();
    assert_same(&back, &want);
    assert_eq!(back.pack_len(&ObjectId::of(b"n")), Some(11));
}
