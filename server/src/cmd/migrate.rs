//! `skillgate migrate --from URL --to URL`: copies a deployment (a SQLite file) into an
//! empty database (PostgreSQL, or another SQLite file), then proves the copy: its audit
//! chain must verify, against the same signed checkpoints, with the source's tip.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use skillgate_core::audit::checkpoint::default_key_path;
use skillgate_core::audit::{CheckpointSigner, Extent, IntegrityReport, PublicKey, TrustedKeys};
use skillgate_core::store::Store;
use skillgate_core::store::copy::CopyReport;

#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// The deployment to copy: sqlite://PATH (an existing file; it is migrated to this
    /// version's schema first, then only read). Stop every server on it first.
    #[arg(long, env = "SKILLGATE_MIGRATE_FROM", value_name = "URL")]
    pub from: String,

    /// The database to copy into: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (or
    /// sqlite://PATH, for a backup). It is migrated, and must hold no rows. The variable
    /// keeps a password off the command line.
    #[arg(long, env = "SKILLGATE_MIGRATE_TO", value_name = "URL")]
    pub to: String,

    /// The Ed25519 audit signing key file the source's servers use, to check the signed
    /// checkpoints of both chains. Default: `audit-signing.key` beside the source file.
    #[arg(long, env = "SKILLGATE_AUDIT_SIGNING_KEY", value_name = "FILE")]
    pub audit_signing_key: Option<PathBuf>,

    /// Trust this Ed25519 public key (64 hex digits) instead of the key file; repeatable.
    #[arg(long = "public-key", value_name = "HEX")]
    pub public_keys: Vec<PublicKey>,
}

/// Where the keys the verification trusts came from.
enum KeySource {
    Given,
    File(PathBuf),
    /// None found; the path looked at, if any.
    Missing(Option<PathBuf>),
}

pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.from.trim() != args.to.trim(),
        "--from and --to name the same database: copy into another, empty one"
    );
    require_source_file(&args.from)?;
    let (keys, key_source) = trusted_keys(&args)?;
    let (from, to) = (shown(&args.from), shown(&args.to));
    let source = Store::open(&args.from)
        .await
        .with_context(|| format!("opening the source {from}"))?;
    let target = Store::open(&args.to)
        .await
        .with_context(|| format!("opening the target {to}"))?;
    let mut out = io::stdout().lock();
    // The platform's database (the `default` workspace, with the registry of the others),
    // then each workspace's database: each chain proven on its own.
    let labels = (from.clone(), to.clone());
    let mut proven = copy_and_prove(&source, &target, &keys, &args.from, &labels, &mut out).await?;
    for workspace in source.list_workspaces().await? {
        let slug = &workspace.slug;
        let from_workspace = source
            .workspace(slug)
            .await
            .with_context(|| format!("opening workspace {slug} of the source {from}"))?;
        let to_workspace = target
            .create_workspace_database(slug)
            .await
            .with_context(|| format!("creating workspace {slug} in the target {to}"))?;
        let labels = (
            format!("workspace {slug} of {from}"),
            format!("workspace {slug} of {to}"),
        );
        proven &= copy_and_prove(
            &from_workspace,
            &to_workspace,
            &keys,
            &args.from,
            &labels,
            &mut out,
        )
        .await?;
        from_workspace.close().await;
        to_workspace.close().await;
    }
    if proven {
        print_key_hint(&key_source, &mut out)?;
    }
    source.close().await;
    target.close().await;
    Ok(if proven {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Copies one database (the platform's or a workspace's) and proves the copy: its chain
/// verifies and ends with the source's tip.
async fn copy_and_prove(
    source: &Store,
    target: &Store,
    keys: &TrustedKeys,
    from_url: &str,
    (from, to): &(String, String),
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let report = source
        .copy_into(target)
        .await
        .with_context(|| format!("copying {from} into {to}"))?;
    print_copy(&report, from, to, out)?;
    let source_check = skillgate_core::audit::verify_integrity(source, keys, Extent::Whole)
        .await
        .with_context(|| format!("verifying the audit chain of {from}"))?;
    let copy_check = skillgate_core::audit::verify_integrity(target, keys, Extent::Whole)
        .await
        .with_context(|| format!("verifying the audit chain of {to}"))?;
    Ok(conclude(
        &source_check,
        &copy_check,
        from_url,
        out,
        &mut io::stderr(),
    )?)
}

/// A SQLite source must be an existing file: opening a mistyped path would create an
/// empty database and "copy" it.
fn require_source_file(url: &str) -> anyhow::Result<()> {
    if !url.starts_with("sqlite:") {
        return Ok(());
    }
    anyhow::ensure!(
        !url.contains(":memory:"),
        "--from {url} is a new, empty in-memory database: name the deployment's file"
    );
    let path = skillgate_core::store::sqlite_file(url)
        .with_context(|| format!("--from {url} is not a database URL"))?
        .with_context(|| format!("--from {url} names no database file"))?;
    anyhow::ensure!(
        path.is_file(),
        "--from {url}: there is no database file at {}",
        path.display()
    );
    Ok(())
}

/// The keys to check checkpoints with: those given, else the key file (given, or beside
/// the source); none when there is no such file.
fn trusted_keys(args: &MigrateArgs) -> anyhow::Result<(TrustedKeys, KeySource)> {
    if !args.public_keys.is_empty() {
        return Ok((TrustedKeys::new(args.public_keys.clone()), KeySource::Given));
    }
    let path = match &args.audit_signing_key {
        Some(path) => path.clone(),
        None => match default_key_path(&args.from) {
            Some(path) if path.exists() => path,
            other => return Ok((TrustedKeys::default(), KeySource::Missing(other))),
        },
    };
    let signer = CheckpointSigner::from_file(&path)
        .with_context(|| format!("reading the audit signing key {}", path.display()))?;
    Ok((signer.trusted(), KeySource::File(path)))
}

/// A database URL without its password, for messages.
fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

fn print_copy(report: &CopyReport, from: &str, to: &str, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Copied {} rows of {} tables from {from} into {to}:",
        report.total_rows(),
        report.tables.len()
    )?;
    for table in &report.tables {
        writeln!(out, "  {:<26}{:>10}", table.table, table.rows)?;
    }
    for (table, why) in report.not_copied {
        writeln!(out, "Not copied: {table} ({why}).")?;
    }
    Ok(())
}

/// One line about a chain: intact with its tip, or broken.
fn chain_line(report: &IntegrityReport) -> String {
    let tip = &report.checkpoints.stored_tip;
    let state = if report.is_intact() {
        "intact"
    } else {
        "does NOT verify"
    };
    format!(
        "{state}, {} events, tip seq {}, hash {}",
        report.chain.events, tip.seq, tip.hash
    )
}

/// The findings of a verification, one line each.
fn findings(report: &IntegrityReport) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(bad) = &report.chain.first_bad {
        lines.push(bad.to_string());
    }
    lines.extend(report.checkpoints.problems.iter().map(ToString::to_string));
    if report.checkpoints.more_problems > 0 {
        lines.push(format!(
            "{} more checkpoint problems",
            report.checkpoints.more_problems
        ));
    }
    lines
}

/// Prints both verifications and whether the copy is proven: its chain verifies and ends
/// where the source's does.
fn conclude(
    source: &IntegrityReport,
    copy: &IntegrityReport,
    from: &str,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<bool> {
    writeln!(out, "Audit chain of the source: {}", chain_line(source))?;
    writeln!(out, "Audit chain of the copy:   {}", chain_line(copy))?;
    let same_tip = source.chain.events == copy.chain.events
        && source.chain.start == copy.chain.start
        && source.checkpoints.stored_tip == copy.checkpoints.stored_tip;
    if !copy.is_intact() {
        for finding in findings(copy) {
            writeln!(err, "the copy's audit chain is BROKEN: {finding}")?;
        }
        if source.is_intact() {
            writeln!(
                err,
                "skillgate migrate: the copy's audit chain does not verify, though the \
                 source's does: do not use the copy; drop the target database and report this"
            )?;
        } else {
            writeln!(
                err,
                "skillgate migrate: the copy's audit chain does not verify, and the source's \
                 does not either: the chain was broken before the copy, which carries it as it \
                 is. Investigate with `skillgate audit verify --database-url {}`",
                shown(from)
            )?;
        }
        return Ok(false);
    }
    if !same_tip {
        writeln!(
            err,
            "skillgate migrate: the copy's audit chain ({} events, tip seq {}) is not the \
             source's ({} events, tip seq {}): the source changed during the copy. Stop every \
             server on it, drop and recreate the target, and copy again",
            copy.chain.events,
            copy.checkpoints.stored_tip.seq,
            source.chain.events,
            source.checkpoints.stored_tip.seq
        )?;
        return Ok(false);
    }
    let tip = &copy.checkpoints.stored_tip;
    match &copy.checkpoints.newest_valid {
        Some(newest) => writeln!(
            out,
            "The copy's audit chain verifies with the source's tip (seq {}, hash {}); {} signed \
             checkpoints match, the newest covers seq {}.",
            tip.seq, tip.hash, copy.checkpoints.checkpoints, newest.seq
        )?,
        None => writeln!(
            out,
            "The copy's audit chain verifies with the source's tip (seq {}, hash {}); it has \
             no signed checkpoint yet.",
            tip.seq, tip.hash
        )?,
    }
    Ok(true)
}

fn print_key_hint(source: &KeySource, out: &mut impl Write) -> io::Result<()> {
    match source {
        KeySource::File(path) => writeln!(
            out,
            "Serve the copy with --audit-signing-key {} (or SKILLGATE_AUDIT_SIGNING_KEY), the \
             key that signed these checkpoints: a server without it signs with a key no \
             verifier of this chain trusts.",
            path.display()
        ),
        KeySource::Given => writeln!(
            out,
            "Serve the copy with --audit-signing-key and the private key of the public key \
             given, so that its checkpoints keep verifying."
        ),
        KeySource::Missing(looked_at) => {
            let place = looked_at
                .as_ref()
                .map(|path| format!(" (none at {})", path.display()))
                .unwrap_or_default();
            writeln!(
                out,
                "No audit signing key was found{place}: serve the copy with \
                 --audit-signing-key and the key the source's servers used."
            )
        }
    }
}
