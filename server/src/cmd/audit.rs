//! `skillgate audit …`: verify the audit hash chain against its signed checkpoints, export
//! it, sign its tip and prune it from the command line, with the signing key of
//! [`super::signing_key`].

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::Target;
use crate::cmd::signing_key::{MissingKey, load_signer, trusted_keys};
use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use skillgate_core::audit::checkpoint;
use skillgate_core::audit::{
    AuditError, AuditLog, ExportFilter, ExportFormat, Extent, IntegrityReport, PublicKey,
    TipCheckpoint, TrustedKeys,
};
use skillgate_core::compliance::{Compliance, Outcome, SessionFilter, parse_time_bound};

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,

    /// The Ed25519 audit signing key file (as `serve` uses it). Default:
    /// `audit-signing.key` beside the database file.
    #[arg(
        long,
        global = true,
        env = "SKILLGATE_AUDIT_SIGNING_KEY",
        value_name = "FILE"
    )]
    pub audit_signing_key: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Re-walk the hash chain and check it against the signed checkpoints; exit 1 naming
    /// the first event that was changed, removed or reordered, a truncation, a forged
    /// anchor or checkpoint, or a pruned range that does not match.
    Verify {
        /// Trust this Ed25519 public key (64 hex digits) instead of the signing key file:
        /// for a verifier who holds no private key. Repeatable, for a rotated key.
        #[arg(long = "public-key", value_name = "HEX")]
        public_keys: Vec<PublicKey>,
        /// Re-read only what is newer than the newest checkpoint a trusted key signed (and
        /// check that its event still has the signed hash): for frequent checks between
        /// whole walks. An edit of an older event that was not re-chained is found only
        /// by a whole walk.
        #[arg(long)]
        since_checkpoint: bool,
        /// Verify every workspace's chain, `default` first, each on its own: the whole
        /// deployment. Exit 1 when any does not verify.
        #[arg(long)]
        every_workspace: bool,
    },
    /// Sign the chain tip now with the server's key (the server does it every
    /// --audit-checkpoint-interval).
    Checkpoint,
    /// Print the public key of the audit signing key (created if there is none), for
    /// `audit verify --public-key` elsewhere.
    PublicKey,
    /// Write the chain (or one session's events) to standard output.
    Export {
        /// Only this session's events (a timeline; not re-verifiable as a whole chain).
        #[arg(long)]
        session: Option<String>,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: Format,
        /// Only the events of the sessions matching these filters.
        #[command(flatten)]
        filters: Box<ExportFilters>,
    },
    /// Delete whole segments of events older than the given age, keeping the hash of the
    /// last one deleted as the anchor later verification starts from, and append a signed
    /// `audit_pruned` event.
    Prune {
        /// Age in days; events older than this are pruned in segments of 1000.
        #[arg(long)]
        older_than: u32,
    },
}

/// The console's session filters, for `audit export`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ExportFilters {
    /// Agent key name.
    #[arg(long)]
    key: Option<String>,
    #[arg(long)]
    scope: Option<String>,
    /// Sessions started on or after this date (YYYY-MM-DD) or RFC 3339 time.
    #[arg(long)]
    from: Option<String>,
    /// Sessions started on or before this date (YYYY-MM-DD), or before this RFC 3339 time.
    #[arg(long)]
    to: Option<String>,
    /// A role the session learned.
    #[arg(long)]
    role: Option<String>,
    /// A tool the session called.
    #[arg(long)]
    tool: Option<String>,
    /// Sessions that had a denial, a governance violation or a downstream error.
    #[arg(long, value_parser = ["denial", "violation", "error"])]
    outcome: Option<String>,
    /// Text in the task summary or a tool name.
    #[arg(long)]
    text: Option<String>,
}

impl ExportFilters {
    fn to_filter(&self) -> anyhow::Result<SessionFilter> {
        let time = |value: &Option<String>, end_of_day: bool| {
            value
                .as_deref()
                .map(|v| {
                    parse_time_bound(v, end_of_day).with_context(|| {
                        format!("`{v}` is not a date (YYYY-MM-DD) or an RFC 3339 time")
                    })
                })
                .transpose()
        };
        Ok(SessionFilter {
            key: self.key.clone(),
            scope: self.scope.clone(),
            from: time(&self.from, false)?,
            to: time(&self.to, true)?,
            role: self.role.clone(),
            tool: self.tool.clone(),
            outcome: self.outcome.as_deref().and_then(Outcome::parse),
            text: self.text.clone(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// A header row, then one row per event, `payload` as canonical JSON text.
    Csv,
}

impl From<Format> for ExportFormat {
    fn from(format: Format) -> Self {
        match format {
            Format::Jsonl => ExportFormat::Jsonl,
            Format::Csv => ExportFormat::Csv,
        }
    }
}

pub async fn run(target: &Target, args: AuditArgs) -> anyhow::Result<ExitCode> {
    // Every workspace's chain is signed with the platform's one key, found beside the
    // platform database.
    let database_url = target.database_url.as_str();
    let store = target.open().await?;
    let log = AuditLog::new(store);
    let key_file = args.audit_signing_key.as_deref();
    match args.command {
        AuditCommand::Verify {
            public_keys,
            since_checkpoint,
            every_workspace,
        } => {
            let keys = trusted_keys(database_url, key_file, public_keys)?;
            let extent = if since_checkpoint {
                Extent::SinceCheckpoint
            } else {
                Extent::Whole
            };
            if !every_workspace {
                let intact = verify_one(&log, &keys, extent).await?;
                return Ok(if intact {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                });
            }
            anyhow::ensure!(
                log.store().is_platform(),
                "--every-workspace verifies the whole deployment: leave out --workspace"
            );
            let mut intact = true;
            println!("workspace {}:", log.store().workspace_slug());
            intact &= verify_one(&log, &keys, extent).await?;
            for workspace in log.store().list_workspaces().await? {
                if workspace.archived_at.is_some() {
                    continue;
                }
                println!("workspace {}:", workspace.slug);
                let store = log.store().workspace(&workspace.slug).await?;
                intact &= verify_one(&AuditLog::new(store.clone()), &keys, extent).await?;
                store.close().await;
            }
            Ok(if intact {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        AuditCommand::Checkpoint => {
            let signer = load_signer(database_url, key_file, MissingKey::Refuse)?;
            match checkpoint::checkpoint_tip(log.store(), &signer, chrono::Utc::now()).await? {
                TipCheckpoint::Signed(c) => {
                    println!(
                        "signed a checkpoint of seq {} (hash {}) at {}",
                        c.seq, c.hash, c.at
                    )
                }
                TipCheckpoint::Unchanged => {
                    println!("the newest checkpoint already covers the chain tip")
                }
                TipCheckpoint::Empty => println!("the audit chain is empty: nothing to sign"),
                TipCheckpoint::Behind { tip, newest } => {
                    eprintln!(
                        "not signed: the chain tip (seq {}) is not what the newest checkpoint (seq {}) signed; run `skillgate audit verify`",
                        tip.seq, newest.seq
                    );
                    return Ok(ExitCode::FAILURE);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::PublicKey => {
            let signer = load_signer(database_url, key_file, MissingKey::Create)?;
            println!("{}", signer.public_key());
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Prune { older_than } => {
            let signer = load_signer(database_url, key_file, MissingKey::Refuse)?;
            let compliance = Compliance::new(log.store().clone());
            match compliance
                .prune_older_than(
                    older_than,
                    chrono::Utc::now(),
                    &signer,
                    "skillgate audit prune",
                )
                .await?
            {
                Some(pruned) => println!(
                    "pruned audit events {}..={} ({} events); the chain now starts after anchor {}; signed event {} records the prune",
                    pruned.range.from_seq,
                    pruned.range.through_seq,
                    pruned.range.events,
                    pruned.anchor.hash,
                    pruned.event.seq
                ),
                None => {
                    println!("nothing to prune: no whole segment is older than {older_than} days")
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Export {
            session,
            format,
            filters,
        } => {
            let filter = filters.to_filter()?;
            // `export` needs a `Send` writer, which a `StdoutLock` is not; the buffer means
            // the lock is taken once per 64 KiB rather than once per line.
            let mut out = PipeWatch::new(BufWriter::with_capacity(64 * 1024, io::stdout()));
            let exported = if filter.is_empty() {
                export(&log, session, format, &mut out).await
            } else {
                let compliance = Compliance::new(log.store().clone());
                compliance
                    .export(session.as_deref(), &filter, format.into(), &mut out)
                    .await
                    .map_err(|err| {
                        AuditError::Export(std::io::Error::other(err.to_string()).into())
                    })
            };
            match exported {
                Ok(_) => Ok(ExitCode::SUCCESS),
                Err(_) if out.closed => Ok(ExitCode::SUCCESS),
                Err(err) => Err(anyhow::Error::new(err).context("exporting the audit chain")),
            }
        }
    }
}

/// Prints the outcome of a verification; returns whether the chain and its checkpoints
/// are intact. Findings go to `err`, one line each.
/// Verifies one chain and prints the verdict; true when it is intact.
async fn verify_one(log: &AuditLog, keys: &TrustedKeys, extent: Extent) -> anyhow::Result<bool> {
    let report = log.verify_integrity(keys, extent).await.with_context(|| {
        format!(
            "reading the audit chain of workspace {}",
            log.store().workspace_slug()
        )
    })?;
    Ok(report_verification(
        &report,
        extent,
        &mut io::stdout(),
        &mut io::stderr(),
    )?)
}

fn report_verification(
    report: &IntegrityReport,
    extent: Extent,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<bool> {
    let chain = &report.chain;
    let checks = &report.checkpoints;
    if let Some(bad) = &chain.first_bad {
        writeln!(err, "audit chain BROKEN: {bad}")?;
    }
    for problem in &checks.problems {
        writeln!(err, "audit chain BROKEN: {problem}")?;
    }
    if checks.more_problems > 0 {
        writeln!(
            err,
            "audit chain BROKEN: {} more checkpoint problems",
            checks.more_problems
        )?;
    }
    if !report.is_intact() {
        return Ok(false);
    }
    let tip = &chain.verified_tip;
    if let Some(since) = &report.since {
        writeln!(
            out,
            "audit chain intact since the checkpoint of seq {} signed at {}: {} newer events \
             (tip seq {}, hash {}); events up to seq {} were not re-read (run without \
             --since-checkpoint to walk them all)",
            since.seq, since.at, chain.events, tip.seq, tip.hash, since.seq
        )?;
        writeln!(
            out,
            "{} newer signed checkpoints match; {} events are not covered yet",
            checks.checkpoints,
            checks.uncovered_events()
        )?;
        return Ok(true);
    }
    if extent == Extent::SinceCheckpoint {
        writeln!(
            out,
            "no checkpoint signed by a trusted key to start from: walked the whole chain"
        )?;
    }
    writeln!(
        out,
        "audit chain intact: {} events (tip seq {}, hash {})",
        chain.events, tip.seq, tip.hash
    )?;
    if chain.start.seq > 0 {
        writeln!(
            out,
            "starts after retention anchor seq {}, vouched for by its signed prune event",
            chain.start.seq
        )?;
    }
    match &checks.newest_valid {
        Some(newest) => writeln!(
            out,
            "{} signed checkpoints match; the newest, signed at {}, covers seq {} (hash {}); {} newer events are not covered yet",
            checks.checkpoints,
            newest.at,
            newest.seq,
            newest.hash,
            checks.uncovered_events()
        )?,
        None => writeln!(
            out,
            "no signed checkpoint yet: a deletion of the newest events would not be detected"
        )?,
    }
    Ok(true)
}

async fn export<W: Write + Send>(
    log: &AuditLog,
    session: Option<String>,
    format: Format,
    mut out: W,
) -> Result<u64, AuditError> {
    let filter = ExportFilter {
        session_id: session,
    };
    let count = log.export(&filter, format.into(), &mut out).await?;
    out.flush()
        .map_err(|e| AuditError::Export(e.into()))
        .map(|()| count)
}

/// Notices when the reader of the output goes away (`skillgate audit export | head`), which
/// is not an error of the export, whichever layer (JSON, CSV) reports the failed write.
struct PipeWatch<W> {
    inner: W,
    closed: bool,
}

impl<W> PipeWatch<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            closed: false,
        }
    }
}

impl<W: Write> Write for PipeWatch<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf);
        self.closed |= is_broken_pipe(&written);
        written
    }

    fn flush(&mut self) -> io::Result<()> {
        let flushed = self.inner.flush();
        self.closed |= is_broken_pipe(&flushed);
        flushed
    }
}

fn is_broken_pipe<T>(result: &io::Result<T>) -> bool {
    matches!(result, Err(err) if err.kind() == io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use skillgate_core::audit::{CheckpointSigner, EventKind, NewEvent};

    struct Fixture {
        _dir: tempfile::TempDir,
        url: String,
        log: AuditLog,
    }

    /// A temp-file database with `n` events, every third one in session `s-2`.
    async fn fixture(n: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("audit.db").display());
        let log = AuditLog::new(skillgate_core::store::Store::open(&url).await.unwrap());
        for i in 1..=n {
            let session = if i % 3 == 0 { "s-2" } else { "s-1" };
            log.append(
                NewEvent::new(
                    EventKind::CallAllowed,
                    json!({ "tool": "issue_refund", "i": i }),
                )
                .in_session(session)
                .by("support-key"),
            )
            .await
            .unwrap();
        }
        Fixture {
            _dir: dir,
            url,
            log,
        }
    }

    fn verify_args() -> AuditArgs {
        AuditArgs {
            command: AuditCommand::Verify {
                public_keys: Vec::new(),
                since_checkpoint: false,
                every_workspace: false,
            },
            audit_signing_key: None,
        }
    }

    async fn verify_output(log: &AuditLog) -> (bool, String, String) {
        verify_output_with(log, &TrustedKeys::default(), Extent::Whole).await
    }

    async fn verify_output_with(
        log: &AuditLog,
        keys: &TrustedKeys,
        extent: Extent,
    ) -> (bool, String, String) {
        let report = log.verify_integrity(keys, extent).await.unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let intact = report_verification(&report, extent, &mut out, &mut err).unwrap();
        (
            intact,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    async fn export_text(log: &AuditLog, session: Option<&str>, format: Format) -> String {
        let mut out = Vec::new();
        export(log, session.map(str::to_owned), format, &mut out)
            .await
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn an_untouched_chain_verifies_and_exits_successfully() {
        let fx = fixture(7).await;
        let tip = fx.log.tip().await.unwrap();
        let (intact, out, err) = verify_output(&fx.log).await;
        assert!(intact);
        assert_eq!(
            out,
            format!(
                "audit chain intact: 7 events (tip seq 7, hash {})\n\
                 no signed checkpoint yet: a deletion of the newest events would not be detected\n",
                tip.hash
            )
        );
        assert_eq!(err, "");
        let code = run(&Target::platform(&fx.url), verify_args())
            .await
            .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
    }

    #[tokio::test]
    async fn a_payload_edited_in_the_database_is_named_and_fails_the_command() {
        let fx = fixture(7).await;
        sqlx::query("UPDATE audit_events SET payload = $1 WHERE seq = 5")
            .bind(r#"{"i":500,"tool":"issue_refund"}"#)
            .execute(fx.log.store().test_pool())
            .await
            .unwrap();
        let (intact, out, err) = verify_output(&fx.log).await;
        assert!(!intact);
        assert_eq!(out, "");
        assert_eq!(err, "audit chain BROKEN: event 5 was changed\n");
        let code = run(&Target::platform(&fx.url), verify_args())
            .await
            .unwrap();
        assert_eq!(code, ExitCode::FAILURE);
    }

    #[tokio::test]
    async fn a_deleted_event_is_named_as_removed() {
        let fx = fixture(7).await;
        sqlx::query("DELETE FROM audit_events WHERE seq = 3")
            .execute(fx.log.store().test_pool())
            .await
            .unwrap();
        let (intact, _, err) = verify_output(&fx.log).await;
        assert!(!intact);
        assert_eq!(err, "audit chain BROKEN: event 3 was removed\n");
    }

    #[tokio::test]
    async fn an_empty_chain_is_intact() {
        let fx = fixture(0).await;
        let (intact, out, _) = verify_output(&fx.log).await;
        assert!(intact);
        assert!(
            out.starts_with("audit chain intact: 0 events (tip seq 0, hash 0000"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn a_walk_since_the_checkpoint_says_where_it_started_and_what_it_did_not_reread() {
        let fx = fixture(5).await;
        let signer = CheckpointSigner::generate();
        checkpoint::checkpoint_tip(fx.log.store(), &signer, chrono::Utc::now())
            .await
            .unwrap();
        for i in 0..3 {
            fx.log
                .append(NewEvent::new(EventKind::CallAllowed, json!({ "after": i })).by("k"))
                .await
                .unwrap();
        }
        let tip = fx.log.tip().await.unwrap();
        let (intact, out, err) =
            verify_output_with(&fx.log, &signer.trusted(), Extent::SinceCheckpoint).await;
        assert!(intact, "{err}");
        let mut lines = out.lines();
        let first = lines.next().unwrap();
        assert!(
            first.starts_with("audit chain intact since the checkpoint of seq 5 signed at "),
            "{out}"
        );
        assert!(
            first.ends_with(&format!(
                ": 3 newer events (tip seq 8, hash {}); events up to seq 5 were not re-read \
                 (run without --since-checkpoint to walk them all)",
                tip.hash
            )),
            "{out}"
        );
        assert_eq!(
            lines.next(),
            Some("0 newer signed checkpoints match; 3 events are not covered yet")
        );

        // With no checkpoint to start from it walks the whole chain, and says so.
        let fresh = fixture(2).await;
        let (intact, out, _) =
            verify_output_with(&fresh.log, &signer.trusted(), Extent::SinceCheckpoint).await;
        assert!(intact);
        assert!(
            out.starts_with(
                "no checkpoint signed by a trusted key to start from: walked the whole chain\n\
                 audit chain intact: 2 events"
            ),
            "{out}"
        );
    }

    #[tokio::test]
    async fn the_jsonl_export_has_one_linked_event_per_line() {
        let fx = fixture(4).await;
        let text = export_text(&fx.log, None, Format::Jsonl).await;
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        for (i, line) in lines.iter().enumerate() {
            for key in ["seq", "at", "session_id", "kind", "prev_hash", "hash"] {
                assert!(line.get(key).is_some(), "line {i} lacks `{key}`: {line}");
            }
            assert_eq!(line["seq"], json!(i + 1));
            assert_eq!(line["kind"], "call_allowed");
            assert_eq!(line["payload"]["i"], json!(i + 1));
        }
        assert_eq!(lines[0]["prev_hash"], json!("0".repeat(64)));
        for pair in lines.windows(2) {
            assert_eq!(pair[1]["prev_hash"], pair[0]["hash"]);
        }
        let report =
            skillgate_core::audit::verify_exported_jsonl(io::Cursor::new(text.as_bytes())).unwrap();
        assert!(report.is_intact());
    }

    #[tokio::test]
    async fn a_session_export_holds_only_that_sessions_events() {
        let fx = fixture(7).await;
        let text = export_text(&fx.log, Some("s-2"), Format::Jsonl).await;
        let seqs: Vec<u64> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(seqs, [3, 6]);
    }

    #[tokio::test]
    async fn the_csv_export_has_a_header_and_one_row_per_event() {
        let fx = fixture(2).await;
        let text = export_text(&fx.log, None, Format::Csv).await;
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("seq,at,session_id,kind,actor,payload,prev_hash,hash")
        );
        assert_eq!(lines.count(), 2);
    }

    /// A reader that went away, like `head` after its first lines.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }

        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    #[tokio::test]
    async fn a_reader_that_goes_away_is_noticed_in_both_formats() {
        let fx = fixture(3).await;
        for format in [Format::Jsonl, Format::Csv] {
            let mut out = PipeWatch::new(ClosedPipe);
            assert!(export(&fx.log, None, format, &mut out).await.is_err());
            assert!(out.closed, "{format:?}");
        }
        let mut full = PipeWatch::new(io::Cursor::new([0u8; 4]));
        assert!(
            export(&fx.log, None, Format::Jsonl, &mut full)
                .await
                .is_err()
        );
        assert!(!full.closed);
    }

    #[test]
    fn the_format_defaults_to_jsonl_and_accepts_csv() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            audit: AuditCommand,
        }
        let Cli {
            audit: AuditCommand::Export {
                session, format, ..
            },
        } = Cli::parse_from(["x", "export"])
        else {
            panic!("export")
        };
        assert_eq!((session, format), (None, Format::Jsonl));
        let parsed = Cli::try_parse_from(["x", "export", "--format", "csv", "--session", "s"]);
        assert!(matches!(
            parsed.map(|cli| cli.audit),
            Ok(AuditCommand::Export {
                format: Format::Csv,
                ..
            })
        ));
        assert!(Cli::try_parse_from(["x", "export", "--format", "xml"]).is_err());
    }
}
