//! Carries the built dashboard in the binary when `CLAIMCHECK_EMBED_SITE` names the site
//! folder (what `cargo leptos build --release --frontend-only` wrote, `target/site`): every
//! file compressed here with brotli and gzip, the bundle's names given a content hash
//! (`pkg/claimcheck.<hash>.{js,wasm,css}`), so a release binary copied alone serves a
//! dashboard that hydrates. Without the variable nothing is embedded and the server reads
//! the site from its folder (development, tests).
//!
//! The release build sets it only after the front end is built: `cargo leptos build` builds
//! both halves at once, and a build that read half-written files would ship them.

use std::error::Error;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The bundle cargo-leptos writes (`output-name` in Cargo.toml).
const OUTPUT_NAME: &str = "claimcheck";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo::rerun-if-env-changed=CLAIMCHECK_EMBED_SITE");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let code = match std::env::var_os("CLAIMCHECK_EMBED_SITE") {
        None => "pub(crate) static SITE: Option<EmbeddedSite> = None;\n".to_owned(),
        Some(dir) => {
            let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?)
                .join("..")
                .join(dir);
            embed(&root, &out)?
        }
    };
    std::fs::write(out.join("site.rs"), code)?;
    Ok(())
}

/// Reads the site under `root`, writes each file's compressed forms to `out` and returns the
/// Rust source of the table that includes them.
fn embed(root: &Path, out: &Path) -> Result<String, Box<dyn Error>> {
    println!("cargo::rerun-if-changed={}", root.display());
    let pkg = root.join("pkg");
    let bundle = ["js", "wasm", "css"].map(|ext| pkg.join(format!("{OUTPUT_NAME}.{ext}")));
    let mut hasher = Sha256::new();
    for file in &bundle {
        let bytes = std::fs::read(file).map_err(|e| {
            format!(
                "CLAIMCHECK_EMBED_SITE: {} ({e}); build the front end first \
                 (cargo leptos build --release --frontend-only)",
                file.display()
            )
        })?;
        println!("cargo::rerun-if-changed={}", file.display());
        hasher.update(&bytes);
    }
    let hash = hex(&hasher.finalize()[..8]);
    let output_name = format!("{OUTPUT_NAME}.{hash}");

    let mut files = Vec::new();
    collect(root, &mut files)?;
    files.sort();
    let dir = out.join("site");
    std::fs::create_dir_all(&dir)?;
    let mut table = String::new();
    for (i, path) in files.iter().enumerate() {
        let relative = path
            .strip_prefix(root)?
            .to_str()
            .ok_or("a site file name that is not UTF-8")?
            .replace('\\', "/");
        let in_bundle = bundle.contains(path);
        let url = if in_bundle {
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            format!("/pkg/{output_name}.{ext}")
        } else {
            format!("/{relative}")
        };
        let raw = std::fs::read(path)?;
        let etag = format!("\"{}\"", hex(&Sha256::digest(&raw)[..12]));
        let content_type = content_type(path);
        let (brotli, gzip) = if compressible(content_type) && raw.len() >= 256 {
            let br = brotli_of(&raw)?;
            let gz = gzip_of(&raw)?;
            // A form that saves less than a twentieth is not worth a second variant.
            let worth = |c: &[u8]| c.len() < raw.len() - raw.len() / 20;
            (
                worth(&br)
                    .then(|| write_out(&dir, &format!("{i}.br"), &br))
                    .transpose()?,
                worth(&gz)
                    .then(|| write_out(&dir, &format!("{i}.gz"), &gz))
                    .transpose()?,
            )
        } else {
            (None, None)
        };
        let include = |p: Option<PathBuf>| match p {
            Some(p) => format!("Some(include_bytes!({:?}))", p.display().to_string()),
            None => "None".to_owned(),
        };
        writeln!(
            table,
            "    EmbeddedFile {{ path: {url:?}, content_type: {content_type:?}, \
             immutable: {in_bundle}, etag: {etag:?}, raw: include_bytes!({raw_path:?}), \
             brotli: {brotli}, gzip: {gzip} }},",
            raw_path = path.display().to_string(),
            brotli = include(brotli),
            gzip = include(gzip),
        )?;
    }
    Ok(format!(
        "pub(crate) static SITE: Option<EmbeddedSite> = Some(EmbeddedSite {{\n\
         \x20   output_name: {output_name:?},\n\
         \x20   files: &[\n{table}    ],\n}});\n"
    ))
}

/// Every file under `dir`, but TypeScript declarations and compressed copies (cargo-leptos
/// `--precompress` writes `.br`/`.gz` beside the originals).
fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.to_string_lossy();
        if path.is_dir() {
            collect(&path, files)?;
        } else if !(name.ends_with(".d.ts") || name.ends_with(".br") || name.ends_with(".gz")) {
            files.push(path);
        }
    }
    Ok(())
}

fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
    {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "html" => "text/html; charset=utf-8",
        "json" | "webmanifest" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// Images and fonts other than SVG are compressed already.
fn compressible(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || matches!(
            content_type,
            "application/wasm" | "application/json" | "image/svg+xml"
        )
}

fn brotli_of(raw: &[u8]) -> Result<Vec<u8>, Box<dyn Error>> {
    let mut compressed = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &raw[..], &mut compressed, &params)?;
    Ok(compressed)
}

fn gzip_of(raw: &[u8]) -> Result<Vec<u8>, Box<dyn Error>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(raw)?;
    Ok(encoder.finish()?)
}

fn write_out(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, Box<dyn Error>> {
    let path = dir.join(name);
    std::fs::write(&path, bytes)?;
    Ok(path)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
