//! A local tree copied with `tar`, links and all, as a user copies one.

use std::path::Path;
use std::process::Command;

use super::process::{run_ok, succeeded};

/// `tar -c` of `tree` (into `TREE.tar` beside it), unpacked with `tar -x`
/// in `into`, which is made.
pub fn tar_copy(tree: &Path, into: &Path) {
    let archive = tree.with_extension("tar");
    let (archive, tree) = (archive.to_str().unwrap(), tree.to_str().unwrap());
    run_ok("tar", &["-cf", archive, "-C", tree, "."]);
    std::fs::create_dir_all(into).unwrap();
    let out = Command::new("tar")
        .args(["-xf", archive])
        .current_dir(into)
        .output()
        .unwrap();
    succeeded(&format!("tar -x into {}", into.display()), out);
}
