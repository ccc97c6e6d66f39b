//! Builds `target/site`, the console's browser half, from the hydrate wasm that cargo built.
//!
//! This replaces cargo-leptos, whose install alone took 16.5 of a fresh machine's 43 minutes
//! to the first `make run`. What we used of it is small: split the wasm at its lazy routes,
//! run the pinned `wasm-bindgen` and `wasm-opt`, copy the style sheet and the public assets.
//! The file names are the ones Leptos' `HydrationScripts` looks for when the server was not
//! built by cargo-leptos: `pkg/<name>.js`, `pkg/<name>_bg.wasm`, and the split loader
//! `pkg/__wasm_split.______________________.js` with its `__wasm_split_manifest.json`.
//!
//! A second run on an unchanged wasm only copies the style sheet and assets: the stamp
//! `pkg/.site-build` holds a digest of the input and of this tool's options.
//!
//! `--max-main-bytes` and `--max-main-gzip-bytes` are the console's size budget: every
//! browser downloads the main module before the console works, so the build fails when it
//! grows past them (`make test` checks them).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::Parser;
use sha2::{Digest, Sha256};

/// The loader name Leptos' `HydrationScripts` imports (the underscores are cargo-leptos'
/// placeholder for a content hash, which we do not use).
const SPLIT_LOADER: &str = "__wasm_split.______________________.js";
const SPLIT_MANIFEST: &str = "__wasm_split_manifest.json";
const STAMP: &str = ".site-build";

#[derive(Debug, Parser)]
#[command(about = "Build the console's site directory from the hydrate wasm")]
struct Args {
    /// The hydrate library as cargo wrote it (linked with `--emit-relocs`).
    #[arg(long)]
    wasm: PathBuf,
    /// The site root the server serves (`--site-root`).
    #[arg(long, default_value = "target/site")]
    site: PathBuf,
    /// The output name the server was configured with (`LeptosOptions::output_name`).
    #[arg(long, default_value = "skillgate")]
    name: String,
    /// The style sheet, copied to `pkg/<name>.css`.
    #[arg(long, default_value = "style/main.css")]
    style: PathBuf,
    /// Files served at the site root (favicon and the like).
    #[arg(long, default_value = "public")]
    assets: PathBuf,
    /// Run `wasm-opt -Oz` on the main module and on every chunk of at least
    /// `--optimize-min-bytes` (the shipped build).
    #[arg(long)]
    optimize: bool,
    /// Smaller chunks are left as they are: starting wasm-opt costs more than it saves on
    /// the hundreds of sub-kilobyte chunks a split produces.
    #[arg(long, default_value_t = 4096)]
    optimize_min_bytes: u64,
    /// Fail when the main module is larger than this.
    #[arg(long, value_name = "BYTES")]
    max_main_bytes: Option<u64>,
    /// Fail when the main module, gzipped (level 9), is larger than this.
    #[arg(long, value_name = "BYTES")]
    max_main_gzip_bytes: Option<u64>,
}

/// The main module's size, raw and gzipped, as a browser downloads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MainSize {
    raw: u64,
    gzipped: u64,
}

impl MainSize {
    fn of(module: &[u8]) -> Result<Self> {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(module)?;
        Ok(MainSize {
            raw: module.len() as u64,
            gzipped: encoder.finish()?.len() as u64,
        })
    }

    /// What passes a budget, in one sentence each.
    fn over(&self, max_raw: Option<u64>, max_gzipped: Option<u64>) -> Vec<String> {
        let mut over = Vec::new();
        if let Some(max) = max_raw.filter(|max| self.raw > *max) {
            over.push(format!(
                "the main module is {} bytes, over its budget of {max}",
                self.raw
            ));
        }
        if let Some(max) = max_gzipped.filter(|max| self.gzipped > *max) {
            over.push(format!(
                "the main module is {} bytes gzipped, over its budget of {max}",
                self.gzipped
            ));
        }
        over
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let pkg = args.site.join("pkg");
    fs::create_dir_all(&pkg).with_context(|| format!("creating {}", pkg.display()))?;

    let wasm = fs::read(&args.wasm).with_context(|| {
        format!(
            "reading {} (build the hydrate library first)",
            args.wasm.display()
        )
    })?;
    let stamp = stamp(&wasm, &args);
    let main_wasm = pkg.join(format!("{}_bg.wasm", args.name));
    let up_to_date = fs::read_to_string(pkg.join(STAMP)).is_ok_and(|s| s == stamp)
        && main_wasm.exists()
        && pkg.join(format!("{}.js", args.name)).exists();

    if up_to_date {
        println!("site-build: wasm unchanged, kept {}", pkg.display());
    } else {
        let _ = fs::remove_file(pkg.join(STAMP));
        remove_previous_modules(&pkg)?;
        let modules = split_and_bind(&wasm, &pkg, &args)?;
        if args.optimize {
            optimize(&modules, args.optimize_min_bytes)?;
        }
        fs::write(pkg.join(STAMP), &stamp)?;
        report(&modules)?;
    }

    copy_file(&args.style, &pkg.join(format!("{}.css", args.name)))?;
    if args.assets.is_dir() {
        copy_dir(&args.assets, &args.site)?;
    }
    if args.max_main_bytes.is_some() || args.max_main_gzip_bytes.is_some() {
        let size = MainSize::of(&fs::read(&main_wasm)?)?;
        println!(
            "site-build: main module {} bytes, {} gzipped (budget {} and {})",
            size.raw,
            size.gzipped,
            args.max_main_bytes.map_or("none".into(), |b| b.to_string()),
            args.max_main_gzip_bytes
                .map_or("none".into(), |b| b.to_string()),
        );
        let over = size.over(args.max_main_bytes, args.max_main_gzip_bytes);
        if !over.is_empty() {
            bail!(
                "{}: make it smaller (twiggy top on a build without --optimize shows what \
                 it holds; BENCHMARKS.md, \"The console's main module\")",
                over.join("; ")
            );
        }
    }
    Ok(())
}

fn stamp(wasm: &[u8], args: &Args) -> String {
    let mut digest = Sha256::new();
    digest.update(wasm);
    digest.update(args.name.as_bytes());
    digest.update([u8::from(args.optimize)]);
    digest.update(args.optimize_min_bytes.to_le_bytes());
    digest.update(env!("CARGO_PKG_VERSION").as_bytes());
    hex::encode(digest.finalize())
}

/// Chunks of an earlier build have other names; a stale one must not be served.
fn remove_previous_modules(pkg: &Path) -> Result<()> {
    for entry in fs::read_dir(pkg)? {
        let path = entry?.path();
        let is_output = path
            .extension()
            .is_some_and(|e| e == "wasm" || e == "js" || e == "json");
        if is_output {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Splits the module at its `#[lazy]` points, then lets wasm-bindgen generate the glue for
/// the main module. Returns every wasm file now in `pkg`, the main module first.
fn split_and_bind(wasm: &[u8], pkg: &Path, args: &Args) -> Result<Vec<PathBuf>> {
    let scratch = args.site.join(".split");
    fs::create_dir_all(&scratch)?;
    let split_main = scratch.join(format!("{}_split.wasm", args.name));
    let main_module = format!("./{}.js", args.name);
    // Imported by the wasm-bindgen glue: a module specifier must be relative.
    let link_name = format!("./{SPLIT_LOADER}");
    let split = wasm_split_cli_support::transform({
        let mut opts = wasm_split_cli_support::Options::new(wasm);
        opts.output_dir = pkg;
        opts.main_out_path = &split_main;
        opts.main_module = &main_module;
        opts.link_name = &link_name;
        opts
    })
    .map_err(|e| anyhow::anyhow!("splitting {}: {e:?}", args.wasm.display()))?;
    fs::write(
        pkg.join(SPLIT_MANIFEST),
        serde_json::to_string_pretty(&split.prefetch_map)?,
    )?;

    // The split main module keeps the linker's exports the chunks import, under their
    // mangled names.
    let status = Command::new("wasm-bindgen")
        .args(["--target", "web", "--no-typescript"])
        .args(["--keep-lld-exports", "--no-demangle"])
        .arg("--out-name")
        .arg(&args.name)
        .arg("--out-dir")
        .arg(pkg)
        .arg(&split_main)
        .status()
        .context("running wasm-bindgen (is the pinned wasm-bindgen-cli installed?)")?;
    if !status.success() {
        bail!("wasm-bindgen failed on {}", split_main.display());
    }
    fs::remove_dir_all(&scratch)?;

    let mut modules = vec![pkg.join(format!("{}_bg.wasm", args.name))];
    modules.extend(split.split_modules);
    Ok(modules)
}

/// `wasm-opt` is single-threaded: run one per core, largest module first.
fn optimize(modules: &[PathBuf], min_bytes: u64) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let size = |p: &PathBuf| fs::metadata(p).map_or(0, |m| m.len());
    let (main, chunks) = modules.split_first().context("no main module")?;
    let mut largest_first: Vec<&PathBuf> = std::iter::once(main)
        .chain(chunks.iter().filter(|c| size(c) >= min_bytes))
        .collect();
    largest_first.sort_by_key(|p| std::cmp::Reverse(size(p)));
    let queue = std::sync::Mutex::new(largest_first.into_iter());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..cores)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    loop {
                        let Some(module) = queue.lock().expect("queue lock").next() else {
                            return Ok(());
                        };
                        let output = Command::new("wasm-opt")
                            .args(["-Oz", "--enable-bulk-memory"])
                            .arg("--enable-nontrapping-float-to-int")
                            // Function names are for debugging; the browser never needs them.
                            .arg("--strip-debug")
                            .arg(module)
                            .arg("-o")
                            .arg(module)
                            .output()
                            .context(
                                "running wasm-opt (npm's binaryen, end2end/node_modules/.bin)",
                            )?;
                        // It warns about every chunk's name section the splitter writes;
                        // its output matters only when it fails.
                        if !output.status.success() {
                            bail!(
                                "wasm-opt failed on {}: {}",
                                module.display(),
                                String::from_utf8_lossy(&output.stderr)
                            );
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("wasm-opt worker panicked"))
    })
}

fn report(modules: &[PathBuf]) -> Result<()> {
    let (main, chunks) = modules.split_first().context("no main module")?;
    let total: u64 = chunks
        .iter()
        .map(|c| fs::metadata(c).map_or(0, |m| m.len()))
        .sum();
    println!(
        "site-build: {} {} bytes; {} lazy chunks, {} bytes together",
        main.display(),
        fs::metadata(main)?.len(),
        chunks.len(),
        total
    );
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .map(drop)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            copy_file(&entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::MainSize;

    #[test]
    fn a_main_module_past_either_budget_is_named_and_one_within_both_passes() {
        let size = MainSize {
            raw: 800,
            gzipped: 300,
        };
        assert!(size.over(Some(800), Some(300)).is_empty());
        assert!(size.over(None, None).is_empty());
        let over = size.over(Some(799), Some(299));
        assert_eq!(over.len(), 2);
        assert!(
            over[0].contains("800 bytes, over its budget of 799"),
            "{over:?}"
        );
        assert!(over[1].contains("300 bytes gzipped"), "{over:?}");
    }

    #[test]
    fn the_gzipped_size_is_measured_not_assumed() {
        let repetitive = vec![b'a'; 100_000];
        let size = MainSize::of(&repetitive).unwrap();
        assert_eq!(size.raw, 100_000);
        assert!(size.gzipped < 1_000, "{size:?}");
    }
}
