//! Homes on the test S3 server, and what the suites that run on a local
//! directory and on S3 ask of either home besides running packfs.

use std::path::Path;

use super::home::Home;
use super::s3::S3;

impl Home {
    /// A dataset at `s3://<new bucket>/ds`.
    pub fn s3() -> Home {
        let s3 = S3::get();
        let bucket = s3.bucket();
        Home::new(format!("s3://{bucket}/ds"), s3.env())
    }

    /// The bucket of a home on the test S3 server (`None`: a local one).
    pub fn bucket(&self) -> Option<&str> {
        let url = self.location().strip_prefix("s3://")?;
        url.split_once('/').map(|(bucket, _)| bucket)
    }

    /// The text `packfs log` prints.
    pub fn log(&self) -> String {
        String::from_utf8(self.packfs_ok(&["log", self.location()]).stdout).unwrap()
    }

    /// How many data objects (packs, whole items, chunks) modality
    /// `<timeline>/<modality>` has in the store.
    pub fn data_objects(&self, timeline: &str, modality: &str) -> usize {
        match self.bucket() {
            None => std::fs::read_dir(
                Path::new(self.location())
                    .join(timeline)
                    .join(modality)
                    .join("0"),
            )
            .map_or(0, |d| d.count()),
            Some(bucket) => {
                use futures::TryStreamExt;
                use object_store::ObjectStore;
                let client = S3::get().client(bucket);
                let prefix = object_store::path::Path::from(format!("ds/{timeline}/{modality}/0"));
                let runtime = tokio::runtime::Runtime::new().unwrap();
                let listed: Vec<_> = runtime
                    .block_on(client.list(Some(&prefix)).try_collect())
                    .unwrap();
                listed.len()
            }
        }
    }
}
