//! `skillgate user …`: console users from the command line.

use std::io::{BufRead, Read};

use anyhow::Context;
use skillgate_core::admin::AdminService;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, Password};

use crate::cmd::cli::UserCommand;

/// Reads one line from stdin as the password, so scripts can pipe it in and it never
/// appears in the process list or shell history.
pub(crate) fn read_password() -> anyhow::Result<Password> {
    // A line, not all of stdin: `< /dev/zero` or a wrong file must not fill the memory.
    const MAX_LINE: u64 = 4096;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .take(MAX_LINE + 1)
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    anyhow::ensure!(
        line.len() as u64 <= MAX_LINE,
        "the password line on standard input is longer than {MAX_LINE} bytes"
    );
    let password = line.trim_end_matches(['\n', '\r']);
    anyhow::ensure!(!password.is_empty(), "no password on standard input");
    Ok(Password::new(password))
}

pub async fn run(database_url: &str, command: UserCommand) -> anyhow::Result<()> {
    // The same door as the console: each change commits with its audit event.
    let admin = AdminService::open(Store::open(database_url).await?).await?;
    let actor = crate::cmd::local_actor();
    match command {
        UserCommand::Add { name, role } => {
            let role: ConsoleRole = role.parse()?;
            let password = read_password()?;
            let (user, _) = admin.add_user(&actor, &name, role, Some(password)).await?;
            println!("added console user `{}` with role {}", user.name, user.role);
        }
        UserCommand::Passwd { name } => {
            let password = read_password()?;
            admin.set_user_password(&actor, &name, password).await?;
            println!("password of `{name}` changed");
        }
        UserCommand::Scopes { name, allow } => {
            let scopes = match allow {
                Some(list) => {
                    let scopes = list
                        .iter()
                        .map(|s| s.trim())
                        .filter(|s| !s.is_empty())
                        .map(Slug::parse)
                        .collect::<Result<Vec<_>, _>>()
                        .context("--allow")?;
                    admin.set_user_scopes(&actor, &name, &scopes).await?
                }
                None => {
                    let user = admin
                        .store()
                        .find_user(&name)
                        .await?
                        .with_context(|| format!("no console user `{name}`"))?;
                    admin.user_scopes(user.id).await?
                }
            };
            let names: Vec<String> = scopes.iter().map(ToString::to_string).collect();
            if names.is_empty() {
                println!("`{name}` may consent to no scope");
            } else {
                println!("`{name}` may consent to: {}", names.join(", "));
            }
        }
    }
    Ok(())
}
