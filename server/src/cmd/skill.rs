//! `skillgate skill …`: Agent Skills bundles from the command line.
//!
//! `import` proposes a file as a candidate through the same revisions service as the
//! console's upload (so it is audited the same way, as `skill_candidate.propose`), and
//! another reviewer decides it in the console: a command line with database access is no
//! reason to skip the review. The operator (no `--as`) and admins may import a skill that
//! cites no sources; a reviewer's import cites them. `export` writes a version as the zip
//! the console exports.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Subcommand;
use skillgate_core::admin::AdminService;
use skillgate_core::revisions::bundle::{MAX_UPLOAD_BYTES, zip_archive};
use skillgate_core::revisions::{Authorship, Revisions};
use skillgate_core::store::Store;

use crate::cmd::Target;
use skillgate_core::store::revisions::Proposer;
use skillgate_core::users::{ConsoleRole, Users};

use crate::http::export::version_folder;

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Propose a SKILL.md or an Agent Skills zip as a candidate of the skill its SKILL.md
    /// names; another reviewer approves or rejects it in the console.
    Import {
        /// A SKILL.md, or a zip of the skill's folder (SKILL.md, references/*.md,
        /// provenance.json).
        file: PathBuf,
        /// Propose as this console user (a reviewer or admin), who then cannot decide it;
        /// default: `cli:$USER`.
        #[arg(long = "as", value_name = "USER")]
        as_user: Option<String>,
    },
    /// Write a skill version as an Agent Skills zip.
    Export {
        skill: String,
        /// The version to export (default: the current one).
        #[arg(long)]
        version: Option<u32>,
        /// Where to write the zip (default: `<skill>-v<n>.zip`; `-` for standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

pub async fn run(target: &Target, command: SkillCommand) -> anyhow::Result<()> {
    let store = target.open().await?;
    match command {
        SkillCommand::Import { file, as_user } => {
            let (proposer, authorship) = proposer(&store, as_user.as_deref()).await?;
            let bytes = read_upload(&file)?;
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let admin = AdminService::open(store.clone())
                .await
                .context("reading the catalog")?;
            let revisions = Revisions::new(Arc::new(admin));
            let candidate = revisions
                .propose_file(None, &name, &bytes, proposer, authorship)
                .await?;
            println!(
                "candidate {} of skill `{}` (on version {}) recorded with verdict {}; another \
                 reviewer decides it in the console",
                candidate.id, candidate.skill, candidate.base_version, candidate.verdict
            );
        }
        SkillCommand::Export {
            skill,
            version,
            output,
        } => {
            let (version, files) = version_folder(&store, &skill, version)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let zip = zip_archive(&files).context("writing the zip")?;
            match output {
                Some(path) if path.as_os_str() == "-" => {
                    std::io::stdout()
                        .lock()
                        .write_all(&zip)
                        .context("writing the zip to standard output")?;
                }
                output => {
                    let path = output.unwrap_or_else(|| format!("{skill}-v{version}.zip").into());
                    std::fs::write(&path, &zip)
                        .with_context(|| format!("writing {}", path.display()))?;
                    println!(
                        "wrote version {version} of skill `{skill}` to {} ({} bytes)",
                        path.display(),
                        zip.len()
                    );
                }
            }
        }
    }
    Ok(())
}

/// The file, refused before reading when it is larger than an upload may be. The read
/// itself stops one byte past the limit too, for what has no size (a pipe, a device).
fn read_upload(path: &Path) -> anyhow::Result<Vec<u8>> {
    let reading = || format!("reading {}", path.display());
    let too_large = |size: u64| {
        anyhow::anyhow!(
            "{}: the file is {size} bytes; at most {MAX_UPLOAD_BYTES} bytes (2 MiB) are accepted",
            path.display()
        )
    };
    let file = std::fs::File::open(path).with_context(reading)?;
    let size = file.metadata().with_context(reading)?.len();
    if size > MAX_UPLOAD_BYTES as u64 {
        return Err(too_large(size));
    }
    let mut bytes = Vec::new();
    file.take(MAX_UPLOAD_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(reading)?;
    if bytes.len() > MAX_UPLOAD_BYTES {
        return Err(anyhow::anyhow!(
            "{}: more than {MAX_UPLOAD_BYTES} bytes; at most {MAX_UPLOAD_BYTES} bytes (2 MiB) are \
             accepted",
            path.display()
        ));
    }
    Ok(bytes)
}

/// `--as` must be an enabled console user who may upload in the console (a reviewer or
/// admin), so the review rule "never your own proposal" holds for them; without it the
/// proposer is the local account. The operator and an admin author a skill as an admin
/// (sources optional); a reviewer cites sources.
async fn proposer(store: &Store, as_user: Option<&str>) -> anyhow::Result<(Proposer, Authorship)> {
    let Some(name) = as_user else {
        return Ok((Proposer::User(crate::cmd::local_actor()), Authorship::Admin));
    };
    let user = Users::new(store.clone())
        .list()
        .await?
        .into_iter()
        .find(|u| u.name == name)
        .ok_or_else(|| anyhow::anyhow!("--as `{name}`: there is no console user of that name"))?;
    anyhow::ensure!(
        !user.disabled,
        "--as `{name}`: that console user is disabled"
    );
    anyhow::ensure!(
        user.role.allows(ConsoleRole::Reviewer),
        "--as `{name}`: proposing a skill needs the reviewer role; `{name}` is {}",
        user.role
    );
    let authorship = if user.role.allows(ConsoleRole::Admin) {
        Authorship::Admin
    } else {
        Authorship::Cited
    };
    Ok((Proposer::User(user.name), authorship))
}
