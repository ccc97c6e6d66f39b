//! Builds `target/site`, the console's browser half, from the hydrate wasm that cargo built.
//!
//! This replaces cargo-leptos, whose install alone took 16.5 of a fresh machine's 43 minutes
//! to the first `make run`. What we used of it is small: split the wasm at its lazy routes,
//! generate wasm-bindgen's glue (its generator as a library, so there is no CLI to install),
//! run Binaryen's `-Oz` (`wasm_opt.mjs`), copy the style sheet and the public assets.
//! The file names are the ones Leptos' `HydrationScripts` looks for when the server was not
//! built by cargo-leptos: `pkg/<name>.js`, `pkg/<name>_bg.wasm`, and the split loader
//! `pkg/__wasm_split.______________________.js` with its `__wasm_split_manifest.json`.
//! Beside each bundle file it writes `<file>.gz` (gzip level 9), which the server sends as it
//! is to browsers that accept gzip instead of compressing each download.
//!
//! A second run on an unchanged wasm only copies the style sheet and assets: the stamp
//! `pkg/.site-build` holds a digest of the input and of this tool's options.
//!
//! `--max-main-bytes` and `--max-main-gzip-bytes` are the console's size budget: every
//! browser downloads the main module before the console works, so the build fails when it
//! grows past them (`make test` checks them).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use clap::Parser;
use sha2::{Digest, Sha256};

/// The loader name Leptos' `HydrationScripts` imports (the underscores are cargo-leptos'
/// placeholder for a content hash, which we do not use).
const SPLIT_LOADER: &str = "__wasm_split.______________________.js";
const SPLIT_MANIFEST: &str = "__wasm_split_manifest.json";
const STAMP: &str = ".site-build";
/// Smaller shared chunks are merged: measured in BENCHMARKS.md ("Fewer modules per page").
const MIN_CHUNK_BYTES: u64 = 16_000;
/// Part of the stamp: raise it when this tool writes a different site from the same input,
/// so that a kept site (CI's cache) is built again.
const OUTPUT_REVISION: u32 = 4;

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
    /// Run Binaryen's `-Oz` on the main module and on every chunk (the shipped build).
    #[arg(long)]
    optimize: bool,
    /// npm's binaryen package (a working `wasm-opt`: Debian's 108 breaks hydration).
    #[arg(long, default_value = "end2end/node_modules/binaryen")]
    binaryen: PathBuf,
    /// Merge a chunk (code that several pages share) estimated under this many bytes into
    /// another, so that a page needs fewer modules (`vendor/wasm_split_cli_support`); 0
    /// keeps every chunk.
    #[arg(long, value_name = "BYTES", default_value_t = MIN_CHUNK_BYTES)]
    min_chunk_bytes: u64,
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
    /// The module `path` and the gzip twin [`precompress`] wrote beside it: the bytes a
    /// browser downloads.
    fn of(path: &Path) -> Result<Self> {
        let len = |p: &Path| {
            fs::metadata(p)
                .map(|m| m.len())
                .with_context(|| format!("measuring {}", p.display()))
        };
        Ok(MainSize {
            raw: len(path)?,
            gzipped: len(&gz_path(path))?,
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
            optimize(&modules, &args.binaryen)?;
        }
        fs::write(pkg.join(STAMP), &stamp)?;
        report(&modules, &pkg)?;
    }

    copy_file(&args.style, &pkg.join(format!("{}.css", args.name)))?;
    if args.assets.is_dir() {
        copy_dir(&args.assets, &args.site)?;
    }
    precompress(&pkg)?;
    if args.max_main_bytes.is_some() || args.max_main_gzip_bytes.is_some() {
        let size = MainSize::of(&main_wasm)?;
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
    digest.update(args.min_chunk_bytes.to_le_bytes());
    digest.update(env!("CARGO_PKG_VERSION").as_bytes());
    digest.update(OUTPUT_REVISION.to_le_bytes());
    hex::encode(digest.finalize())
}

/// Chunks of an earlier build have other names; a stale one must not be served.
fn remove_previous_modules(pkg: &Path) -> Result<()> {
    for entry in fs::read_dir(pkg)? {
        let path = entry?.path();
        let is_output = path
            .extension()
            .is_some_and(|e| e == "wasm" || e == "js" || e == "json" || e == "gz");
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
        opts.min_chunk_bytes = args.min_chunk_bytes;
        opts
    })
    .map_err(|e| anyhow::anyhow!("splitting {}: {e:?}", args.wasm.display()))?;
    fs::write(
        pkg.join(SPLIT_MANIFEST),
        serde_json::to_string_pretty(&split.prefetch_map)?,
    )?;

    // The split main module keeps the linker's exports the chunks import, under their
    // mangled names. The options are the CLI's `--target web --no-typescript
    // --keep-lld-exports --no-demangle`; the library's own defaults differ from the CLI's
    // on the default module path, so that one is set as the CLI would.
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&split_main)
        .web(true)?
        .typescript(false)
        .keep_lld_exports(true)
        .demangle(false)
        .omit_default_module_path(false)
        .out_name(&args.name)
        .generate(pkg)
        .with_context(|| format!("wasm-bindgen on {}", split_main.display()))?;
    fs::remove_dir_all(&scratch)?;

    let mut modules = vec![pkg.join(format!("{}_bg.wasm", args.name))];
    modules.extend(split.split_modules);
    Ok(modules)
}

/// Binaryen is single-threaded: one Node process per core, each fed modules from one
/// queue, largest first (`wasm_opt.mjs` says why not one `wasm-opt` command per module).
fn optimize(modules: &[PathBuf], binaryen: &Path) -> Result<()> {
    let binaryen = binaryen.join("index.js");
    if !binaryen.is_file() {
        bail!(
            "{} is missing: npm's binaryen optimises the wasm (`make deps-site` installs it)",
            binaryen.display()
        );
    }
    // Every chunk: in a running process a small one costs milliseconds, and together the
    // chunks under 4 KB shrank from 465 KB to 120.
    largest_first_on_every_core(modules, |queue| optimize_worker(&binaryen, queue))
}

/// The files a worker takes, one at a time.
type Queue<'a> = std::sync::Mutex<std::vec::IntoIter<&'a PathBuf>>;

/// Runs one `worker` per core (at most one per file) over a shared queue of `files`, largest
/// first, so that no core is left with the largest file at the end; the first error wins.
fn largest_first_on_every_core<'a>(
    files: &'a [PathBuf],
    worker: impl Fn(&Queue<'a>) -> Result<()> + Sync,
) -> Result<()> {
    let size = |p: &&PathBuf| fs::metadata(p).map_or(0, |m| m.len());
    let mut largest_first: Vec<&PathBuf> = files.iter().collect();
    largest_first.sort_by_cached_key(|p| std::cmp::Reverse(size(p)));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(largest_first.len());
    let queue = std::sync::Mutex::new(largest_first.into_iter());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..workers)
            .map(|_| scope.spawn(|| worker(&queue)))
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a site-build worker panicked"))
    })
}

fn optimize_worker(binaryen: &Path, queue: &Queue<'_>) -> Result<()> {
    use std::io::{BufRead as _, Read as _, Write as _};
    let mut node = Command::new("node")
        .arg("--input-type=module")
        .arg("--eval")
        .arg(include_str!("wasm_opt.mjs"))
        .arg(binaryen)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting node for wasm-opt")?;
    let mut stdin = node.stdin.take().context("node's stdin")?;
    let mut answers = std::io::BufReader::new(node.stdout.take().context("node's stdout")?);
    // Read while the process runs, so that it never blocks on a full pipe.
    let mut stderr = node.stderr.take().context("node's stderr")?;
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let outcome = (|| -> Result<()> {
        loop {
            let Some(module) = queue.lock().expect("queue lock").next() else {
                return Ok(());
            };
            writeln!(stdin, "{}", module.display())
                .and_then(|()| stdin.flush())
                .with_context(|| format!("sending {} to wasm-opt", module.display()))?;
            let mut answer = String::new();
            answers.read_line(&mut answer)?;
            match answer.trim_end() {
                "ok" => {}
                "" => bail!("wasm-opt's node process ended on {}", module.display()),
                failure => bail!(
                    "wasm-opt failed on {}: {}",
                    module.display(),
                    failure.strip_prefix("error ").unwrap_or(failure)
                ),
            }
        }
    })();
    // Closing stdin ends the process's loop.
    drop(stdin);
    let status = node.wait()?;
    let said = said.join().unwrap_or_default();
    outcome
        .and_then(|()| {
            if status.success() {
                Ok(())
            } else {
                Err(anyhow::anyhow!("wasm-opt's node process failed ({status})"))
            }
        })
        .with_context(|| problems(&said))
}

/// What Node said that matters when a worker failed: Binaryen warns about the name section
/// of every chunk the splitter writes, and those warnings are noise.
fn problems(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("warning: "))
        .collect();
    match lines.len() {
        0 => "node said nothing else".to_owned(),
        n => format!("node said: {}", lines[n.saturating_sub(20)..].join("\n")),
    }
}

fn report(modules: &[PathBuf], pkg: &Path) -> Result<()> {
    let (main, chunks) = modules.split_first().context("no main module")?;
    let total: u64 = chunks
        .iter()
        .map(|c| fs::metadata(c).map_or(0, |m| m.len()))
        .sum();
    let main_bytes = fs::metadata(main)?.len();
    println!(
        "site-build: {} {} bytes; {} lazy chunks, {} bytes together",
        main.display(),
        main_bytes,
        chunks.len(),
        total
    );
    // A smaller main module is only a gain if the pages do not pay it back: what a browser
    // fetches before a page works is the main module and every module of the page's split.
    if let Some(heaviest) = page_downloads(pkg)?.last() {
        println!(
            "site-build: the heaviest page, {}, needs {} bytes: the main module and {} more \
             modules",
            heaviest.split,
            main_bytes + heaviest.bytes,
            heaviest.modules
        );
    }
    Ok(())
}

/// What one lazy route costs beyond the main module, from the splitter's manifest.
#[derive(Debug, PartialEq, Eq)]
struct PageDownload {
    split: String,
    modules: usize,
    bytes: u64,
}

/// Every split of the manifest, lightest first.
fn page_downloads(pkg: &Path) -> Result<Vec<PageDownload>> {
    let manifest = pkg.join(SPLIT_MANIFEST);
    let text =
        fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let splits: std::collections::BTreeMap<String, Vec<String>> =
        serde_json::from_str(&text).with_context(|| format!("reading {}", manifest.display()))?;
    let mut pages = splits
        .into_iter()
        .map(|(split, modules)| {
            let bytes = modules.iter().try_fold(0, |sum, module| {
                let path = pkg.join(format!("{module}.wasm"));
                fs::metadata(&path)
                    .map(|m| sum + m.len())
                    .with_context(|| format!("the manifest names {}", path.display()))
            })?;
            Ok(PageDownload {
                split,
                modules: modules.len(),
                bytes,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    pages.sort_by_key(|p| (p.bytes, p.modules));
    Ok(pages)
}

/// Writes `<file>.gz` beside every bundle file that lacks a fresh one. The server's static
/// file service sends such a file as it is to a browser that accepts gzip; without it the
/// server compressed every download again: 100–150 ms of its CPU for the main module on
/// each cold page load (BENCHMARKS.md, "The console's main module").
fn precompress(pkg: &Path) -> Result<()> {
    let mut stale = Vec::new();
    for entry in fs::read_dir(pkg)? {
        let path = entry?.path();
        let bundled = path
            .extension()
            .is_some_and(|e| e == "wasm" || e == "js" || e == "css");
        if bundled && !fresh(&path, &gz_path(&path))? {
            stale.push(path);
        }
    }
    largest_first_on_every_core(&stale, |queue| {
        loop {
            let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
            let Some(path) = next else { return Ok(()) };
            gzip_beside(path)?;
        }
    })
}

fn gz_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".gz");
    PathBuf::from(name)
}

/// Whether `gz` was written after `source` last changed.
fn fresh(source: &Path, gz: &Path) -> Result<bool> {
    let Ok(gz_meta) = fs::metadata(gz) else {
        return Ok(false);
    };
    Ok(gz_meta.modified()? >= fs::metadata(source)?.modified()?)
}

/// Gzip at level 9 into a temporary file, renamed into place: a running server never
/// sends half of one.
fn gzip_beside(path: &Path) -> Result<()> {
    use std::io::Write as _;
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&bytes)?;
    let gz = gz_path(path);
    let partial = gz.with_extension("gz.partial");
    fs::write(&partial, encoder.finish()?)
        .with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, &gz).with_context(|| format!("writing {}", gz.display()))
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
    use std::path::{Path, PathBuf};

    use super::{MainSize, PageDownload, optimize, page_downloads, precompress};

    /// npm's binaryen, installed by `make deps-site` before any test runs.
    fn binaryen() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../end2end/node_modules/binaryen")
    }

    /// A module whose only function adds zero, which `-Oz` folds away.
    const ADDS_ZERO: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type: (i32) -> i32
        0x03, 0x02, 0x01, 0x00, // one function of that type
        0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, // export it as "f"
        0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x41, 0x00, 0x6a,
        0x0b, // local.get 0; i32.const 0; i32.add
    ];

    fn gunzip(path: &Path) -> Vec<u8> {
        use std::io::Read as _;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).expect("a .gz file"))
            .read_to_end(&mut out)
            .expect("a gzip stream");
        out
    }

    #[test]
    fn every_bundle_file_gets_a_gzip_twin_that_follows_its_changes() {
        let pkg = tempfile::tempdir().expect("a scratch dir");
        let wasm = pkg.path().join("chunk_1.wasm");
        let css = pkg.path().join("skillgate.css");
        let manifest = pkg.path().join(super::SPLIT_MANIFEST);
        std::fs::write(&wasm, ADDS_ZERO.repeat(50)).expect("wasm");
        std::fs::write(&css, "body { color: red }").expect("css");
        std::fs::write(&manifest, "{}").expect("manifest");

        precompress(pkg.path()).expect("precompress");
        assert_eq!(
            gunzip(&pkg.path().join("chunk_1.wasm.gz")),
            ADDS_ZERO.repeat(50)
        );
        assert_eq!(
            gunzip(&pkg.path().join("skillgate.css.gz")),
            b"body { color: red }"
        );
        assert!(
            !pkg.path().join("__wasm_split_manifest.json.gz").exists(),
            "the server reads the manifest; browsers never fetch it"
        );

        // A file rewritten later than its twin gets a new one; the others stay as they were.
        let css_gz_written = std::fs::metadata(pkg.path().join("skillgate.css.gz"))
            .and_then(|m| m.modified())
            .expect("mtime");
        let later = std::fs::File::options()
            .write(true)
            .open(&wasm)
            .expect("wasm");
        std::fs::write(&wasm, ADDS_ZERO).expect("wasm");
        later
            .set_modified(css_gz_written + std::time::Duration::from_secs(5))
            .expect("set mtime");
        precompress(pkg.path()).expect("precompress again");
        assert_eq!(gunzip(&pkg.path().join("chunk_1.wasm.gz")), ADDS_ZERO);
        assert_eq!(
            std::fs::metadata(pkg.path().join("skillgate.css.gz"))
                .and_then(|m| m.modified())
                .expect("mtime"),
            css_gz_written
        );
    }

    #[test]
    fn every_module_is_optimised_in_place_by_the_shared_node_processes() {
        let dir = tempfile::tempdir().unwrap();
        let modules: Vec<PathBuf> = (0..5)
            .map(|i| {
                let path = dir.path().join(format!("m{i}.wasm"));
                std::fs::write(&path, ADDS_ZERO).unwrap();
                path
            })
            .collect();
        optimize(&modules, &binaryen()).unwrap();
        for module in &modules {
            let optimised = std::fs::read(module).unwrap();
            assert!(
                optimised.len() < ADDS_ZERO.len(),
                "{} is {} bytes, not smaller than {}",
                module.display(),
                optimised.len(),
                ADDS_ZERO.len()
            );
            assert_eq!(&optimised[..4], b"\0asm");
        }
    }

    #[test]
    fn a_module_binaryen_cannot_read_fails_the_build_and_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.wasm");
        let bad = dir.path().join("bad.wasm");
        std::fs::write(&good, ADDS_ZERO).unwrap();
        std::fs::write(&bad, b"not a wasm module").unwrap();
        let error = optimize(&[good, bad.clone()], &binaryen()).unwrap_err();
        let message = format!("{error:#}");
        assert!(message.contains(&bad.display().to_string()), "{message}");
        assert!(message.contains("parsing wasm"), "{message}");
    }

    #[test]
    fn a_binaryen_that_fails_to_load_is_reported_with_what_node_said() {
        let dir = tempfile::tempdir().unwrap();
        let broken = dir.path().join("binaryen");
        std::fs::create_dir(&broken).unwrap();
        std::fs::write(
            broken.join("index.js"),
            "throw new Error('this binaryen is broken');",
        )
        .unwrap();
        let module = dir.path().join("m.wasm");
        std::fs::write(&module, ADDS_ZERO).unwrap();
        let error = optimize(&[module], &broken).unwrap_err();
        let message = format!("{error:#}");
        assert!(message.contains("this binaryen is broken"), "{message}");
    }

    #[test]
    fn a_missing_binaryen_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m.wasm");
        std::fs::write(&module, ADDS_ZERO).unwrap();
        let error = optimize(&[module], &dir.path().join("binaryen")).unwrap_err();
        assert!(error.to_string().contains("make deps-site"), "{error}");
    }

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
        let pkg = tempfile::tempdir().unwrap();
        let module = pkg.path().join("skillgate_bg.wasm");
        std::fs::write(&module, vec![b'a'; 100_000]).unwrap();
        precompress(pkg.path()).unwrap();
        let size = MainSize::of(&module).unwrap();
        assert_eq!(size.raw, 100_000);
        assert!(size.gzipped < 1_000, "{size:?}");
    }

    #[test]
    fn a_page_costs_the_modules_its_manifest_entry_names_and_a_missing_one_is_an_error() {
        let pkg = tempfile::tempdir().expect("a scratch dir");
        std::fs::write(pkg.path().join("chunk_1.wasm"), [0u8; 300]).expect("chunk");
        std::fs::write(pkg.path().join("split_a.wasm"), [0u8; 20]).expect("split a");
        std::fs::write(pkg.path().join("split_b.wasm"), [0u8; 500]).expect("split b");
        let manifest = pkg.path().join(super::SPLIT_MANIFEST);
        std::fs::write(
            &manifest,
            r#"{"a": ["chunk_1", "split_a"], "b": ["split_b"]}"#,
        )
        .expect("manifest");
        assert_eq!(
            page_downloads(pkg.path()).expect("pages"),
            vec![
                PageDownload {
                    split: "a".into(),
                    modules: 2,
                    bytes: 320
                },
                PageDownload {
                    split: "b".into(),
                    modules: 1,
                    bytes: 500
                },
            ]
        );

        std::fs::write(&manifest, r#"{"a": ["chunk_2"]}"#).expect("manifest");
        let error = format!(
            "{:#}",
            page_downloads(pkg.path()).expect_err("a missing module")
        );
        assert!(error.contains("chunk_2.wasm"), "{error}");
    }
}
