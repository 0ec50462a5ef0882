//! Progress bars on the terminal, drawn for what the library reports
//! ([`packfs_core::progress::Progress`]); indicatif draws nothing when
//! stderr is not a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use packfs_core::progress::{Progress, Unit};

/// One bar for a command's work: bytes with a rate and an estimate, or
/// objects counted (ticking while their number is not known yet).
pub(crate) struct Bar {
    bar: ProgressBar,
    /// What the command is, shown before a count of objects.
    prefix: String,
}

impl Bar {
    /// A bar for the command `prefix`; hidden unless `show`.
    pub(crate) fn new(prefix: &str, show: bool) -> Bar {
        let bar = match show {
            true => ProgressBar::new(0),
            false => ProgressBar::hidden(),
        };
        Bar {
            bar,
            prefix: prefix.to_string(),
        }
    }
}

impl Progress for Bar {
    fn begin(&self, what: &str, unit: Unit, total: Option<u64>) {
        let template = match unit {
            Unit::Bytes => format!(
                "{{spinner}} {what} [{{bar:30}}] {{binary_bytes}}/{{binary_total_bytes}} \
                 {{binary_bytes_per_sec}} eta {{eta}} {{msg}}"
            ),
            Unit::Objects => "{spinner} {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})".into(),
        };
        let style = ProgressStyle::with_template(&template).expect("valid template");
        self.bar.set_style(style.progress_chars("=> "));
        self.bar.set_prefix(self.prefix.clone());
        if unit == Unit::Objects {
            self.bar.set_message(what.to_string());
            self.bar.enable_steady_tick(Duration::from_millis(200));
        }
        if self.bar.is_finished() {
            // The step before ended: this one is a bar of its own.
            self.bar.reset();
        }
        self.bar.set_position(0);
        self.bar.set_length(total.unwrap_or(0));
    }

    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }

    fn end(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        // A command that failed leaves no half-drawn bar above its error.
        self.bar.finish_and_clear();
    }
}
