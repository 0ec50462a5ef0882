//! Shell completions and the man page are generated from the command
//! line's definition: bash completes subcommands and options with them,
//! and the pages document every subcommand.

use crate::common::*;

#[test]
fn bash_completes_subcommands_and_options() {
    let script = String::from_utf8(packfs_ok(&["completions", "bash"]).stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("packfs.bash");
    std::fs::write(&path, script).unwrap();
    let complete = |words: &str| -> Vec<String> {
        let cword = words.split(' ').count() - 1;
        let shell = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; \
             COMP_POINT=${{#COMP_LINE}}; _packfs packfs \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let out = run_ok("bash", &["-c", &shell]);
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let subcommands = complete("packfs m");
    assert!(
        subcommands.contains(&"mount".to_string()),
        "{subcommands:?}"
    );
    assert!(
        subcommands.contains(&"merge".to_string()),
        "{subcommands:?}"
    );
    let options = complete("packfs mount --vi");
    assert_eq!(options, ["--view"]);
}

#[test]
fn zsh_and_fish_scripts_name_every_subcommand() {
    for shell in ["zsh", "fish"] {
        let script = String::from_utf8(packfs_ok(&["completions", shell]).stdout).unwrap();
        for word in ["mount", "import", "diff", "--view", "--read-only"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    failed_with(&packfs(&["completions", "tcsh"]), &["invalid value 'tcsh'"]);
}

#[test]
fn man_pages_document_every_subcommand() {
    let page = String::from_utf8(packfs_ok(&["man"]).stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH packfs 1"),
        "{page}"
    );
    assert!(page.contains(".TH packfs 1"));
    for sub in ["mount", "import", "verify", "diff", "completions"] {
        assert!(page.contains(sub), "packfs.1 lacks {sub}");
    }
    let dir = tempfile::tempdir().unwrap();
    packfs_ok(&["man", "--dir", dir.path().to_str().unwrap()]);
    let mount = std::fs::read_to_string(dir.path().join("packfs-mount.1")).unwrap();
    assert!(
        mount.contains(".TH packfs\\-mount 1") || mount.contains(".TH packfs-mount 1"),
        "{}",
        &mount[..200]
    );
    assert!(
        mount.contains("\\-\\-view"),
        "packfs-mount.1 documents --view"
    );
    assert!(dir.path().join("packfs-bundle-create.1").exists());
}
