//! Release binary size of each function: raw, and zipped as `cargo lambda build
//! --output-format zip` packages it for upload.

use std::path::Path;

use crate::cold::FUNCTIONS;
use crate::stats::{mib, table};

const GOAL: u64 = 5 * 1024 * 1024;

pub fn run(lambda_dir: &Path, target: &str) -> String {
    let rows: Vec<Vec<String>> = FUNCTIONS
        .iter()
        .chain(&["hello-lambda"])
        .map(|name| {
            let (raw, zipped) = sizes(&lambda_dir.join(name).join("bootstrap.zip"));
            let verdict = if zipped <= GOAL { "yes" } else { "no" };
            vec![name.to_string(), mib(raw), mib(zipped), verdict.into()]
        })
        .collect();
    format!(
        "### Binary sizes ({target})\n\n`cargo lambda build --release --output-format zip`.\n\n{}",
        table(&["function", "raw", "zipped", "≤ 5 MiB zipped"], &rows)
    )
}

/// The size of the binary inside the package, and of the package.
fn sizes(package: &Path) -> (u64, u64) {
    let file = std::fs::File::open(package).unwrap_or_else(|e| panic!("{}: {e}", package.display()));
    let zipped = file.metadata().expect("its size").len();
    let mut archive = zip::ZipArchive::new(file).expect("a zip package");
    let index = archive.index_for_name("bootstrap").expect("a bootstrap entry");
    let raw = archive.by_index_raw(index).expect("its header").size();
    (raw, zipped)
}
