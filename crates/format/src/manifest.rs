//! Manifest: one immutable version of the dataset.
//!
//! CBOR map: `{"v": 1, "parents": [id…], "timelines": [text…],
//! "tracks": [{"timeline", "modality", "kind", "track": id}…],
//! "ts": unix-ns, "writer": text}`, and on a merge that met conflicts
//! `"conflicts": [{"timeline", "modality", "name", "renamed_to"}…]`.
//!
//! The conflicts are a note on how a Manifest was made, not part of the
//! dataset it describes: they travel beside [`Manifest`]
//! ([`Manifest::encode_with_conflicts`], [`Manifest::decode_with_conflicts`]).

use ciborium::value::Value;

use super::cbor::{self, as_array, as_object_id, as_text, as_u64, MapReader};
use super::{validate_item_name, validate_segment, FormatError, ObjectId, TRACK_KIND_FRAGMENT};

const VERSION: u64 = 1;

/// Points a (timeline, modality) at its Track object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackEntry {
    pub timeline: String,
    pub modality: String,
    /// Track kind; packfs reads `fragment` tracks.
    pub kind: String,
    pub track: ObjectId,
}

/// One version of the dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Previous versions: empty for the first, two or more after a merge.
    pub parents: Vec<ObjectId>,
    pub timelines: Vec<String>,
    /// At most one entry per (timeline, modality), sorted by that key.
    pub tracks: Vec<TrackEntry>,
    /// Creation time, nanoseconds since the Unix epoch.
    pub ts_unix_ns: u64,
    /// Who wrote it, e.g. `packfs/0.1.0 import`.
    pub writer: String,
}

/// A name two sides of a merge changed: the earlier side kept it, the
/// later side's item went to `renamed_to` (in the same directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeConflict {
    pub timeline: String,
    pub modality: String,
    pub name: String,
    pub renamed_to: String,
}

impl Manifest {
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with_conflicts(&[])
    }

    /// Encodes the Manifest of a merge with the conflicts it resolved
    /// (the `conflicts` key, written only when there are some).
    pub fn encode_with_conflicts(&self, conflicts: &[MergeConflict]) -> Vec<u8> {
        let tracks = self
            .tracks
            .iter()
            .map(|t| {
                Value::Map(vec![
                    (cbor::text("timeline"), cbor::text(&t.timeline)),
                    (cbor::text("modality"), cbor::text(&t.modality)),
                    (cbor::text("kind"), cbor::text(&t.kind)),
                    (cbor::text("track"), cbor::id(&t.track)),
                ])
            })
            .collect();
        let mut fields = vec![
            (cbor::text("v"), cbor::uint(VERSION)),
            (
                cbor::text("parents"),
                Value::Array(self.parents.iter().map(cbor::id).collect()),
            ),
            (
                cbor::text("timelines"),
                Value::Array(self.timelines.iter().map(|t| cbor::text(t)).collect()),
            ),
            (cbor::text("tracks"), Value::Array(tracks)),
            (cbor::text("ts"), cbor::uint(self.ts_unix_ns)),
            (cbor::text("writer"), cbor::text(&self.writer)),
        ];
        if !conflicts.is_empty() {
            let conflicts = conflicts
                .iter()
                .map(|c| {
                    Value::Map(vec![
                        (cbor::text("timeline"), cbor::text(&c.timeline)),
                        (cbor::text("modality"), cbor::text(&c.modality)),
                        (cbor::text("name"), cbor::text(&c.name)),
                        (cbor::text("renamed_to"), cbor::text(&c.renamed_to)),
                    ])
                })
                .collect();
            fields.push((cbor::text("conflicts"), Value::Array(conflicts)));
        }
        cbor::encode(&Value::Map(fields))
    }

    /// Decodes and validates a Manifest; `what` names the object for errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<Self, FormatError> {
        Ok(Self::decode_with_conflicts(bytes, what)?.0)
    }

    /// Like [`Manifest::decode`], with the merge conflicts the Manifest
    /// records (none for Manifests written without any, or before packfs
    /// recorded them).
    pub fn decode_with_conflicts(
        bytes: &[u8],
        what: &str,
    ) -> Result<(Self, Vec<MergeConflict>), FormatError> {
        let value = cbor::decode(bytes, what)?;
        let map = MapReader::versioned(&value, what, VERSION)?;
        let parents = as_array(map.required("parents")?, &format!("{what} parents"))?
            .iter()
            .enumerate()
            .map(|(i, p)| as_object_id(p, &format!("{what} parents[{i}]")))
            .collect::<Result<_, _>>()?;
        let timelines: Vec<String> =
            as_array(map.required("timelines")?, &format!("{what} timelines"))?
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let at = format!("{what} timelines[{i}]");
                    let t = as_text(t, &at)?;
                    validate_segment(t, &at)?;
                    Ok(t.to_string())
                })
                .collect::<Result<_, FormatError>>()?;
        let mut tracks = Vec::new();
        for (i, t) in as_array(map.required("tracks")?, &format!("{what} tracks"))?
            .iter()
            .enumerate()
        {
            let at = format!("{what} tracks[{i}]");
            let m = MapReader::new(t, &at)?;
            let entry = TrackEntry {
                timeline: as_text(m.required("timeline")?, &at)?.to_string(),
                modality: as_text(m.required("modality")?, &at)?.to_string(),
                kind: match m.get("kind") {
                    Some(k) => as_text(k, &at)?.to_string(),
                    None => TRACK_KIND_FRAGMENT.to_string(),
                },
                track: as_object_id(m.required("track")?, &at)?,
            };
            validate_segment(&entry.timeline, &format!("{at} timeline"))?;
            validate_segment(&entry.modality, &format!("{at} modality"))?;
            if !timelines.contains(&entry.timeline) {
                return Err(FormatError::shape(
                    &at,
                    format!("timeline {:?} is not listed in timelines", entry.timeline),
                ));
            }
            tracks.push(entry);
        }
        tracks.sort_by(|a, b| (&a.timeline, &a.modality).cmp(&(&b.timeline, &b.modality)));
        if let Some(w) = tracks
            .windows(2)
            .find(|w| (&w[0].timeline, &w[0].modality) == (&w[1].timeline, &w[1].modality))
        {
            return Err(FormatError::shape(
                what,
                format!("two tracks for {}/{}", w[0].timeline, w[0].modality),
            ));
        }
        let conflicts = match map.get("conflicts") {
            None => Vec::new(),
            Some(list) => as_array(list, &format!("{what} conflicts"))?
                .iter()
                .enumerate()
                .map(|(i, c)| decode_conflict(c, &format!("{what} conflicts[{i}]")))
                .collect::<Result<_, _>>()?,
        };
        let manifest = Manifest {
            parents,
            timelines,
            tracks,
            ts_unix_ns: as_u64(map.required("ts")?, &format!("{what} ts"))?,
            writer: as_text(map.required("writer")?, &format!("{what} writer"))?.to_string(),
        };
        Ok((manifest, conflicts))
    }
}

/// One entry of `conflicts`, held to the naming rules of the items it names.
fn decode_conflict(value: &Value, at: &str) -> Result<MergeConflict, FormatError> {
    let m = MapReader::new(value, at)?;
    let field = |key| Ok::<_, FormatError>(as_text(m.required(key)?, at)?.to_string());
    let conflict = MergeConflict {
        timeline: field("timeline")?,
        modality: field("modality")?,
        name: field("name")?,
        renamed_to: field("renamed_to")?,
    };
    validate_segment(&conflict.timeline, &format!("{at} timeline"))?;
    validate_segment(&conflict.modality, &format!("{at} modality"))?;
    validate_item_name(&conflict.name, &format!("{at} name"))?;
    validate_item_name(&conflict.renamed_to, &format!("{at} renamed_to"))?;
    Ok(conflict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            parents: vec![ObjectId::of(b"p1"), ObjectId::of(b"p2")],
            timelines: vec!["train".into(), "val".into()],
            tracks: vec![
                TrackEntry {
                    timeline: "train".into(),
                    modality: "image".into(),
                    kind: TRACK_KIND_FRAGMENT.into(),
                    track: ObjectId::of(b"t1"),
                },
                TrackEntry {
                    timeline: "val".into(),
                    modality: "image".into(),
                    kind: TRACK_KIND_FRAGMENT.into(),
                    track: ObjectId::of(b"t2"),
                },
            ],
            ts_unix_ns: 1_700_000_000_000_000_000,
            writer: "packfs test".into(),
        }
    }

    #[test]
    fn round_trip_with_multiple_parents() {
        let m = sample();
        assert_eq!(Manifest::decode(&m.encode(), "manifest").unwrap(), m);
    }

    #[test]
    fn merge_conflicts_round_trip_and_are_optional() {
        let m = sample();
        let conflicts = vec![MergeConflict {
            timeline: "train".into(),
            modality: "image".into(),
            name: "x/cat.jpg".into(),
            renamed_to: "x/cat.conflict-0123456789ab.jpg".into(),
        }];
        let bytes = m.encode_with_conflicts(&conflicts);
        assert_eq!(
            Manifest::decode_with_conflicts(&bytes, "m").unwrap(),
            (m.clone(), conflicts.clone())
        );
        assert_eq!(Manifest::decode(&bytes, "m").unwrap(), m);
        // Without conflicts nothing is added: Manifests encode as before
        // and decode with none.
        assert_eq!(m.encode_with_conflicts(&[]), m.encode());
        assert!(!m.encode().windows(9).any(|w| w == b"conflicts"));
        let (_, none) = Manifest::decode_with_conflicts(&m.encode(), "m").unwrap();
        assert!(none.is_empty());
        // A recorded name is held to the item-name rules.
        let mut bad = conflicts;
        bad[0].renamed_to = "../escape".into();
        let e = Manifest::decode_with_conflicts(&m.encode_with_conflicts(&bad), "m")
            .unwrap_err()
            .to_string();
        assert!(e.contains("conflicts[0] renamed_to"), "{e}");
    }

    #[test]
    fn corrupt_bytes_give_a_named_error() {
        let mut bytes = sample().encode();
        bytes.truncate(bytes.len() / 2);
        let e = Manifest::decode(&bytes, "manifest abc")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("manifest abc: malformed CBOR"), "{e}");
    }

    #[test]
    fn rejects_duplicate_tracks_and_unlisted_timelines() {
        let mut m = sample();
        m.tracks[1].timeline = "train".into();
        let e = Manifest::decode(&m.encode(), "m").unwrap_err().to_string();
        assert!(e.contains("two tracks for train/image"), "{e}");
        let mut m = sample();
        m.tracks[1].timeline = "test".into();
        let e = Manifest::decode(&m.encode(), "m").unwrap_err().to_string();
        assert!(e.contains("not listed"), "{e}");
        let mut m = sample();
        m.tracks[0].modality = "../x".into();
        assert!(Manifest::decode(&m.encode(), "m").is_err());
    }
}
