//! Archive ingest: a 200 MiB module archive of many files, ingested by the registry (stream
//! inspection, then the copy to its own object, then the version settled), against a raw
//! gunzip of the same bytes with flate2's zlib-rs backend. Each side runs in a child process
//! of its own so that its peak resident memory (VmHWM) is its alone.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use axum::http::Method;
use hangar::archive::ArchiveLimits;
use hangar::blobs::ObjectId;
use hangar::config::Config;
use hangar::registry::ingest::IngestOutcome;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::local::{Local, ADMIN_TOKEN};
use crate::stats::{mib, millis, ratio, table, Samples};

const ARCHIVE_BYTES: u64 = 200 * 1024 * 1024;
const FILES: usize = 8_000;
const RUNS: usize = 3;

pub async fn run() -> String {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let archive = dir.path().join("module.tar.gz");
    let (files, uncompressed) = write_archive(&archive);
    let compressed = std::fs::metadata(&archive).expect("the archive").len();

    let (mut gunzip, mut ingest) = (Samples::default(), Samples::default());
    let (mut gunzip_peak, mut ingest_peak) = (0, 0);
    for _ in 0..RUNS {
        let raw = child("gunzip-child", &archive);
        gunzip.push(std::time::Duration::from_secs_f64(raw["seconds"].as_f64().expect("seconds")));
        gunzip_peak = gunzip_peak.max(raw["peak_bytes"].as_u64().expect("a peak"));
        let ingested = child("ingest-child", &archive);
        ingest.push(std::time::Duration::from_secs_f64(ingested["seconds"].as_f64().expect("seconds")));
        ingest_peak = ingest_peak.max(ingested["peak_bytes"].as_u64().expect("a peak"));
    }
    let throughput = |samples: &Samples| compressed as f64 / samples.median().as_secs_f64() / (1024.0 * 1024.0);
    let rows = vec![
        vec![
            "raw gunzip (flate2, zlib-rs)".into(),
            millis(gunzip.median()),
            format!("{:.0} MiB/s", throughput(&gunzip)),
            "1.00×".into(),
            mib(gunzip_peak),
        ],
        vec![
            "Hangar ingest".into(),
            millis(ingest.median()),
            format!("{:.0} MiB/s", throughput(&ingest)),
            ratio(throughput(&ingest), throughput(&gunzip)),
            mib(ingest_peak),
        ],
    ];
    format!(
        "### Archive ingest\n\nA {} archive ({} uncompressed, {files} files); median of {RUNS} runs of each, \
         alternated, each in a child process; throughput in compressed bytes per second.\n\n{}",
        mib(compressed),
        mib(uncompressed),
        table(&["", "median time", "throughput", "vs gunzip", "peak RSS of the process"], &rows)
    )
}

/// Writes a module archive of `FILES` files whose compressed size is about `ARCHIVE_BYTES`:
/// Terraform-like text with random identifiers, which compresses about as real modules do.
/// Returns the file count and the tar stream's size.
fn write_archive(path: &Path) -> (usize, u64) {
    let file = std::fs::File::create(path).expect("the archive file");
    let gzip = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gzip);
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut uncompressed = 0u64;
    let mut body = Vec::new();
    let mut n = 0;
    // Random base64 compresses to about three quarters of its size.
    let per_file = (ARCHIVE_BYTES as f64 / 0.76 / FILES as f64) as usize;
    while n < FILES {
        body.clear();
        writeln!(body, "# generated file {n}\nresource \"aws_s3_bucket\" \"b{n}\" {{").expect("a write");
        while body.len() < per_file {
            let mut token = [0u8; 48];
            rng.fill(&mut token[..]);
            use base64::Engine as _;
            writeln!(body, "  tag_{} = \"{}\"", body.len(), base64::engine::general_purpose::STANDARD.encode(token))
                .expect("a write");
        }
        body.extend_from_slice(b"}\n");
        let name = if n == 0 { "main.tf".to_owned() } else { format!("modules/m{:03}/f{n:05}.tf", n % 100) };
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, &name, body.as_slice()).expect("a tar entry");
        uncompressed += 512 + (body.len() as u64).div_ceil(512) * 512;
        n += 1;
    }
    builder.into_inner().and_then(|gz| gz.finish()).and_then(|mut w| w.flush()).expect("the archive is written");
    (n, uncompressed)
}

fn child(command: &str, archive: &Path) -> Value {
    let exe = std::env::current_exe().expect("this binary");
    let output = std::process::Command::new(exe).arg(command).arg(archive).output().expect("the child runs");
    assert!(output.status.success(), "{command}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the child's JSON figures")
}

/// The peak resident set of this process so far (Linux's VmHWM), in bytes.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap_or("VmHWM: 0 kB");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// The baseline, in a child: gunzip the archive to nowhere.
pub fn gunzip_child(archive: PathBuf) {
    let started = Instant::now();
    let file = std::fs::File::open(archive).expect("the archive");
    let mut gunzip = flate2::read::GzDecoder::new(BufReader::new(file));
    let mut buffer = vec![0u8; 64 * 1024];
    while gunzip.read(&mut buffer).expect("a gzip stream") > 0 {}
    let seconds = started.elapsed().as_secs_f64();
    println!("{}", json!({ "seconds": seconds, "peak_bytes": peak_resident_bytes() }));
}

/// Hangar's side, in a child: a version waiting for its upload, the archive placed where the
/// upload would have put it, then the ingest the S3 event (or dev-server's PUT) runs, timed.
pub async fn ingest_child(archive: PathBuf) {
    let limits = ArchiveLimits {
        max_compressed_bytes: 256 * 1024 * 1024,
        max_uncompressed_bytes: 1024 * 1024 * 1024,
        max_entries: 20_000,
        ..ArchiveLimits::default()
    };
    let local =
        Local::start(Config { archive_limits: limits, max_upload_bytes: 256 * 1024 * 1024, ..Config::default() }).await;
    local.api.create_organization(ADMIN_TOKEN).await;
    local.api.create_modules(ADMIN_TOKEN, 0, 1, 1).await;
    let versions = format!("{}/versions", crate::api::module_path(0));
    let body = json!({"data": {"type": "registry-module-versions", "attributes": {"version": "1.0.0"}}});
    let created = local.api.send(Method::POST, &versions, ADMIN_TOKEN, Some(body)).await;
    let link = created.body["data"]["links"]["upload"].as_str().expect("an upload link");
    let id = link.split("/upload/").nth(1).and_then(|rest| rest.split('?').next()).and_then(ObjectId::parse);
    let id = id.expect("an object id in the upload link");
    local.state.blobs.put_file(&id, &archive).await.expect("the archive is in place");

    let started = Instant::now();
    let outcome = hangar::registry::ingest::object_created(&local.state, &id).await.expect("an ingest");
    let seconds = started.elapsed().as_secs_f64();
    assert!(matches!(outcome, IngestOutcome::Ingested { .. }), "the archive was ingested: {outcome:?}");
    println!("{}", json!({ "seconds": seconds, "peak_bytes": peak_resident_bytes() }));
}
