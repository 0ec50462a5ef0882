//! `packfs info`: a dataset's items, packs and history depth, as a table
//! or JSON.

use std::io::Write;

use clap::Args;
use indicatif::HumanBytes;
use packfs_core::dataset::Dataset;
use packfs_core::info::Counts;
use packfs_core::store::StoreConfig;

use super::{CliResult, DatasetAt};

#[derive(Args, Debug)]
pub(crate) struct InfoArgs {
    #[command(flatten)]
    pub at: DatasetAt,
    /// Print JSON (for scripts) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Prints the summary of the dataset at `args`' revision on stdout.
pub(super) async fn run(args: InfoArgs, config: &StoreConfig) -> CliResult {
    let InfoArgs { at, json } = args;
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    let resolved = dataset.resolve_revision(&at.revision).await?;
    let info = packfs_core::info::info(&dataset, &resolved).await?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &info)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "dataset   {}", info.location)?;
    writeln!(
        out,
        "revision  {} = manifest {} ({}, {})",
        info.revision, info.manifest, info.created, info.writer
    )?;
    let depth = info.history_depth;
    let plural = if depth == 1 { "" } else { "s" };
    writeln!(
        out,
        "history   {depth} Manifest{plural} along first parents"
    )?;
    writeln!(out)?;
    let header = [
        "TIMELINE",
        "MODALITY",
        "ITEMS",
        "BYTES",
        "PACKED",
        "WHOLE",
        "CHUNKED",
        "PACKS",
        "PACK SIZES",
        "FILL",
    ];
    let row = |timeline: &str, modality: &str, c: &Counts| -> [String; 10] {
        let sizes = match c.packs {
            0 => "-".to_string(),
            _ => format!("{}–{}", HumanBytes(c.pack_min), HumanBytes(c.pack_max)),
        };
        [
            timeline.to_string(),
            modality.to_string(),
            c.items.to_string(),
            HumanBytes(c.bytes).to_string(),
            c.packed_items.to_string(),
            c.whole_items.to_string(),
            match c.chunked_items {
                0 => "0".to_string(),
                n => format!("{n} ({} chunks)", c.chunks),
            },
            c.packs.to_string(),
            sizes,
            format!("{:.0}%", c.pack_fill * 100.0),
        ]
    };
    let mut rows: Vec<[String; 10]> = vec![header.map(String::from)];
    rows.extend(
        info.tracks
            .iter()
            .map(|t| row(&t.timeline, &t.modality, &t.counts)),
    );
    rows.push(row("total", "", &info.totals));
    let widths: Vec<usize> = (0..10)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| match i {
                0 | 1 => format!("{cell:<w$}"),
                _ => format!("{cell:>w$}"),
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}
