//! `skillgate-testpg -- COMMAND [ARGS…]`: runs COMMAND beside one throwaway PostgreSQL.
//!
//! nextest runs every test in a process of its own, so a server per test process would be
//! a server per test: seconds of `initdb` each. The runner starts one server, tells the
//! command where it is ([`ATTACH_ENV`]), and every test process attaches to it instead.
//! Meanwhile it drops the databases of test processes that have ended, so the run's disk
//! stays the size of the tests in flight. The server stops when the command ends (or when
//! this process dies: the same lifeline as any other owner's). The exit status is the
//! command's.

use std::process::{Command, ExitCode};
use std::sync::mpsc;
use std::time::Duration;

use skillgate_testpg::{ATTACH_ENV, TempPostgres};

/// How often ended tests' databases are dropped.
const JANITOR_PERIOD: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|arg| arg == "--") {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!("usage: skillgate-testpg -- COMMAND [ARGS…]");
        return ExitCode::from(2);
    };
    let pg = match TempPostgres::start() {
        Ok(pg) => pg,
        Err(error) => {
            eprintln!("skillgate-testpg: cannot start a throwaway PostgreSQL: {error}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "skillgate-testpg: PostgreSQL on 127.0.0.1:{} for this run",
        pg.port()
    );

    let (stop, stopped) = mpsc::channel::<()>();
    let code = std::thread::scope(|scope| {
        let pg = &pg;
        scope.spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(JANITOR_PERIOD) {
                if let Err(error) = pg.drop_databases_of_ended_processes() {
                    eprintln!("skillgate-testpg: dropping ended tests' databases: {error}");
                }
            }
        });
        let status = Command::new(&program)
            .args(args)
            .env(ATTACH_ENV, pg.port().to_string())
            .status();
        drop(stop);
        match status {
            Ok(status) => status.code().map_or(ExitCode::FAILURE, |code| {
                ExitCode::from(u8::try_from(code).unwrap_or(1))
            }),
            Err(error) => {
                eprintln!(
                    "skillgate-testpg: cannot run {}: {error}",
                    program.display()
                );
                ExitCode::FAILURE
            }
        }
    });
    drop(pg);
    code
}
