//! Revisions: what every command that reads a dataset is told to read.
//!
//! `BASE` or `BASE~N`, where `BASE` is a ref name, a Manifest id (64 hex
//! digits) or a unique prefix of one (at least [`MIN_PREFIX`] hex
//! digits), and `~N` goes N Manifests back along first parents (`~` alone
//! is `~1`; `~1~2` is `~3`, as in git).
//!
//! A `BASE` that is both an existing ref and a hex prefix is the ref (git's
//! rule): refs are what users type, ref names cannot be told from hex by
//! their characters (`deadbeef` is a valid ref name), and the Manifest stays
//! reachable by a longer prefix. Only a ref name alone names something that
//! moves; every other revision names one Manifest for good.

use std::fmt;
use std::str::FromStr;

use packfs_format::{validate_ref_name, FormatError, ObjectId};
use thiserror::Error;

use super::{Cuts, Dataset, DatasetError};

/// Fewest hex digits of a Manifest id prefix: fewer would make prefixes
/// ambiguous in large histories and look like short ref names.
pub(crate) const MIN_PREFIX: usize = 8;
/// Hex digits of a whole Manifest id.
const ID_HEX: usize = 64;
/// Candidates an ambiguous prefix error lists.
const MAX_CANDIDATES: usize = 10;

/// A revision as the command line gives it (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// A ref name, a Manifest id or a prefix of one: the same characters.
    base: String,
    /// Manifests back along first parents; `None` without any `~`, so that
    /// `main~0` (the same Manifest, named for good) differs from `main`.
    back: Option<u32>,
}

impl Default for Revision {
    /// The ref `main`, the default of every command.
    fn default() -> Self {
        Revision {
            base: "main".to_string(),
            back: None,
        }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.back {
            None => f.write_str(&self.base),
            Some(n) => write!(f, "{}~{n}", self.base),
        }
    }
}

impl FromStr for Revision {
    type Err = RevisionError;

    fn from_str(spec: &str) -> Result<Self, RevisionError> {
        let syntax = |detail: String| RevisionError::Syntax {
            spec: spec.to_string(),
            detail,
        };
        let (base, steps) = match spec.split_once('~') {
            Some((base, steps)) => (base, Some(steps)),
            None => (spec, None),
        };
        if base.contains('^') {
            return Err(syntax(
                "'^' is not supported: write NAME~1 for the first parent".into(),
            ));
        }
        validate_ref_name(base).map_err(|e| match e {
            FormatError::Name { reason, .. } => syntax(format!("{base:?} {reason}")),
            e => syntax(e.to_string()),
        })?;
        let back = match steps {
            None => None,
            Some(steps) => Some(steps.split('~').try_fold(0u32, |sum, step| {
                let n = match step {
                    "" => 1,
                    _ if step.bytes().all(|b| b.is_ascii_digit()) => step
                        .parse::<u32>()
                        .map_err(|_| syntax(format!("{step} Manifests back is too many")))?,
                    _ => {
                        return Err(syntax(format!(
                            "'~' is followed by {step:?}, not a number of Manifests back"
                        )))
                    }
                };
                sum.checked_add(n)
                    .ok_or_else(|| syntax("too many Manifests back".into()))
            })?),
        };
        Ok(Revision {
            base: base.to_string(),
            back,
        })
    }
}

impl Revision {
    /// Whether this can name a ref (it has no `~N`): only such a revision
    /// can be mounted read-write.
    pub fn may_be_ref(&self) -> bool {
        self.back.is_none()
    }

    /// `base` read as a Manifest id prefix: its lower-case hex digits, if it
    /// is one (at least [`MIN_PREFIX`], at most a whole id).
    fn id_prefix(&self) -> Option<String> {
        let hex = self.base.bytes().all(|b| b.is_ascii_hexdigit());
        (hex && (MIN_PREFIX..=ID_HEX).contains(&self.base.len()))
            .then(|| self.base.to_ascii_lowercase())
    }
}

/// A revision and the Manifest it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The Manifest.
    pub id: ObjectId,
    /// The ref, when the revision is a ref name alone: a mount of it may
    /// commit to it. `None`: the revision names this Manifest for good.
    pub ref_name: Option<String>,
    /// What was resolved.
    pub revision: Revision,
}

impl Resolved {
    /// How messages name what pointed at the Manifest: `ref "main"` or
    /// `revision "main~1"`.
    pub fn describe(&self) -> String {
        match &self.ref_name {
            Some(name) => format!("ref {name:?}"),
            None => format!("revision \"{}\"", self.revision),
        }
    }
}

/// Why a revision names no Manifest.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RevisionError {
    #[error(
        "invalid revision {spec:?}: {detail} (expected a ref name, a Manifest id or a prefix \
         of at least 8 of its hex digits, optionally followed by ~N)"
    )]
    Syntax { spec: String, detail: String },
    /// Hex digits that are neither a ref nor the start of any Manifest id.
    #[error(
        "no ref named {base:?} and no Manifest whose id starts with {prefix} in dataset {location}"
    )]
    NoMatch {
        base: String,
        prefix: String,
        location: String,
    },
    /// Hex digits, not a ref, too few to be a Manifest id prefix.
    #[error(
        "ref {base:?} does not exist in dataset {location}, and a Manifest id prefix needs at \
         least 8 hex digits"
    )]
    ShortPrefix { base: String, location: String },
    #[error(
        "Manifest id prefix {prefix} is ambiguous in dataset {location}: it matches {} \
         (give more digits)",
        list_candidates(.candidates)
    )]
    Ambiguous {
        prefix: String,
        location: String,
        candidates: Vec<ObjectId>,
    },
    #[error(
        "{revision} goes back past the start of history: {base} has {depth} Manifest{} along \
         first parents ({base}~{} is the first)",
        if *.depth == 1 { "" } else { "s" },
        .depth - 1
    )]
    TooDeep {
        revision: Revision,
        base: String,
        depth: u32,
    },
    #[error(
        "{revision} goes back past what `packfs expire` kept: the history of {base} was cut \
         after {depth} Manifest{} along first parents ({base}~{} is the oldest kept)",
        if *.depth == 1 { "" } else { "s" },
        .depth - 1
    )]
    Expired {
        revision: Revision,
        base: String,
        depth: u32,
    },
}

fn list_candidates(candidates: &[ObjectId]) -> String {
    let mut shown: Vec<String> = candidates
        .iter()
        .take(MAX_CANDIDATES)
        .map(ObjectId::to_hex)
        .collect();
    if candidates.len() > MAX_CANDIDATES {
        shown.push(format!("and {} more", candidates.len() - MAX_CANDIDATES));
    }
    shown.join(", ")
}

impl Dataset {
    /// The Manifest `revision` names: its base (a ref first, else a
    /// Manifest id or unique prefix), then `~N` first parents back.
    pub async fn resolve_revision(&self, revision: &Revision) -> Result<Resolved, DatasetError> {
        let base = &revision.base;
        let (mut id, ref_name) = match self.store.read_ref(base).await? {
            Some(id) => (id, Some(base.clone())),
            None => (self.manifest_by_prefix(revision).await?, None),
        };
        let mut referrer = match &ref_name {
            Some(name) => format!("ref {name:?}"),
            None => format!("revision \"{revision}\""),
        };
        let back = revision.back.unwrap_or(0);
        let cuts = match back {
            0 => Cuts::default(),
            _ => self.cuts().await?,
        };
        for depth in 1..=back {
            let manifest = self.manifest(&id, &referrer).await?;
            referrer = format!("manifest {id}");
            let parent = *manifest
                .parents
                .first()
                .ok_or_else(|| RevisionError::TooDeep {
                    revision: revision.clone(),
                    base: base.clone(),
                    depth,
                })?;
            if cuts.is_cut(&id, &parent) {
                return Err(RevisionError::Expired {
                    revision: revision.clone(),
                    base: base.clone(),
                    depth,
                }
                .into());
            }
            id = parent;
        }
        Ok(Resolved {
            id,
            ref_name: ref_name.filter(|_| revision.back.is_none()),
            revision: revision.clone(),
        })
    }

    /// The Manifest whose id is, or starts with, `revision`'s base, which
    /// is no ref. A prefix is looked up in a listing of the Manifests.
    async fn manifest_by_prefix(&self, revision: &Revision) -> Result<ObjectId, DatasetError> {
        let base = &revision.base;
        let location = self.store.location().to_string();
        let Some(prefix) = revision.id_prefix() else {
            let hex = base.bytes().all(|b| b.is_ascii_hexdigit());
            return Err(match hex && base.len() < MIN_PREFIX {
                true => RevisionError::ShortPrefix {
                    base: base.clone(),
                    location,
                }
                .into(),
                false => DatasetError::RefNotFound {
                    name: base.clone(),
                    location,
                },
            });
        };
        let layout = self.store.layout();
        let mut candidates: Vec<ObjectId> = match prefix.len() {
            // A whole id needs no listing, only a look.
            ID_HEX => {
                let id = ObjectId::from_hex(&prefix)?;
                let found = self.store.head(&layout.manifest(&id)).await?;
                found.map(|_| id).into_iter().collect()
            }
            _ => self
                .store
                .list_dir(&layout.manifests_dir())
                .await?
                .iter()
                .filter_map(|meta| meta.location.filename())
                .filter(|name| name.starts_with(&prefix))
                .filter_map(|name| ObjectId::from_hex(name).ok())
                .collect(),
        };
        candidates.sort_unstable_by_key(|id| id.0);
        match candidates[..] {
            [id] => Ok(id),
            [] => Err(RevisionError::NoMatch {
                base: base.clone(),
                prefix,
                location,
            }
            .into()),
            _ => Err(RevisionError::Ambiguous {
                prefix,
                location,
                candidates,
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Revision {
        spec.parse()
            .unwrap_or_else(|e| panic!("{spec:?} should parse: {e}"))
    }

    fn rev(base: &str, back: Option<u32>) -> Revision {
        Revision {
            base: base.into(),
            back,
        }
    }

    #[test]
    fn parses_names_ids_prefixes_and_steps_back() {
        let id = ObjectId::of(b"m").to_hex();
        for (spec, want) in [
            ("main", rev("main", None)),
            ("v1.0-rc_2", rev("v1.0-rc_2", None)),
            ("deadbeef", rev("deadbeef", None)),
            (id.as_str(), rev(&id, None)),
            ("main~0", rev("main", Some(0))),
            ("main~1", rev("main", Some(1))),
            ("main~", rev("main", Some(1))),
            ("main~~", rev("main", Some(2))),
            ("main~2~3", rev("main", Some(5))),
            ("a1b2c3d4~12", rev("a1b2c3d4", Some(12))),
        ] {
            assert_eq!(parse(spec), want, "{spec}");
        }
    }

    #[test]
    fn displays_as_it_parses() {
        for spec in ["main", "main~0", "main~3", "a1b2c3d4~1"] {
            assert_eq!(parse(spec).to_string(), spec);
        }
        assert_eq!(parse("main~~").to_string(), "main~2");
        assert_eq!(Revision::default(), parse("main"));
    }

    #[test]
    fn refuses_bad_syntax_saying_why() {
        for (spec, why) in [
            ("", "must be 1 to 128 bytes"),
            ("~1", "must be 1 to 128 bytes"),
            ("a/b", "may use only letters"),
            (".hidden", "may use only letters"),
            ("main^", "'^' is not supported"),
            ("main~x", "not a number of Manifests back"),
            ("main~-1", "not a number of Manifests back"),
            ("main~1x", "not a number of Manifests back"),
            ("main~99999999999", "is too many"),
            ("main~4294967295~1", "too many Manifests back"),
        ] {
            let e = spec.parse::<Revision>().unwrap_err().to_string();
            assert!(e.contains(why), "{spec:?}: {e}");
            assert!(e.contains(&format!("{spec:?}")), "{spec:?}: {e}");
        }
    }

    #[test]
    fn prefixes_are_8_to_64_hex_digits_in_any_case() {
        let id = ObjectId::of(b"m").to_hex();
        assert_eq!(parse("DEADBEEF").id_prefix().as_deref(), Some("deadbeef"));
        assert_eq!(parse(&id).id_prefix(), Some(id.clone()));
        assert_eq!(parse("deadbee").id_prefix(), None);
        assert_eq!(parse("deadbeeg").id_prefix(), None);
        assert_eq!(parse(&format!("{id}0")).id_prefix(), None);
        assert_eq!(parse("main").id_prefix(), None);
    }

    #[test]
    fn errors_name_the_prefix_the_candidates_and_the_depth() {
        let ids: Vec<ObjectId> = (0..12u8).map(|i| ObjectId::of(&[i])).collect();
        let e = RevisionError::Ambiguous {
            prefix: "abcdef01".into(),
            location: "ds".into(),
            candidates: ids[..2].to_vec(),
        }
        .to_string();
        assert!(
            e.contains("abcdef01") && e.contains(&ids[0].to_hex()),
            "{e}"
        );
        assert!(e.contains(&ids[1].to_hex()), "{e}");
        let e = RevisionError::Ambiguous {
            prefix: "abcdef01".into(),
            location: "ds".into(),
            candidates: ids.clone(),
        }
        .to_string();
        assert!(
            e.contains("and 2 more") && !e.contains(&ids[10].to_hex()),
            "{e}"
        );
        let too_deep = |depth| {
            RevisionError::TooDeep {
                revision: parse("main~5"),
                base: "main".into(),
                depth,
            }
            .to_string()
        };
        assert_eq!(
            too_deep(3),
            "main~5 goes back past the start of history: main has 3 Manifests along first \
             parents (main~2 is the first)"
        );
        assert!(too_deep(1).contains("main has 1 Manifest along"));
    }
}
