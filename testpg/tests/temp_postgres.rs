//! The throwaway server: it starts, hands out separate databases, and never outlives the
//! process that owns it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use skillgate_testpg::{ATTACH_ENV, TempPostgres, bin_dir};

/// Set in the child process of `the_server_stops_when_its_owning_process_is_killed`.
const OWNER_ENV: &str = "SKILLGATE_TESTPG_OWNER";
const OWNER_TEST: &str = "owner_process_holds_the_shared_server_until_it_is_killed";
/// The runner, this crate's binary.
const RUNNER: &str = env!("CARGO_BIN_EXE_skillgate-testpg");
const ATTACHED_TEST: &str = "attached_process_uses_the_runners_server";

/// Whether something accepts PostgreSQL connections on 127.0.0.1:`port`.
fn accepts(port: u16) -> bool {
    let bin = bin_dir().expect("PostgreSQL binaries");
    Command::new(bin.join("pg_isready"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
        .args(["-d", "postgres", "-q", "-t", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Polls `condition` every 100 ms for up to `timeout`; whether it became true.
fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    condition()
}

fn database_name(url: &str) -> &str {
    url.rsplit('/').next().expect("a URL with a path")
}

#[test]
fn the_shared_server_accepts_connections_on_the_port_its_url_names() {
    let pg = TempPostgres::shared();
    assert!(accepts(pg.port()));
    assert_eq!(
        pg.url("skillgate"),
        format!("postgres://postgres@127.0.0.1:{}/skillgate", pg.port())
    );
    assert_eq!(pg.psql("postgres", "select 1 + 1").unwrap(), "2");
    assert_eq!(pg.psql("postgres", "show fsync").unwrap(), "on");
    // The same server for every caller in the process.
    assert_eq!(TempPostgres::shared().port(), pg.port());
}

#[test]
fn two_fresh_databases_are_distinct_empty_and_usable() {
    let pg = TempPostgres::shared();
    let first = pg.fresh_database();
    let second = pg.fresh_database();
    assert_ne!(first, second);
    assert!(first.starts_with(&pg.url("")));
    let (first, second) = (database_name(&first), database_name(&second));

    pg.psql(
        first,
        "create table notes (body text); insert into notes values ('only here')",
    )
    .unwrap();
    assert_eq!(
        pg.psql(first, "select body from notes").unwrap(),
        "only here"
    );
    assert_eq!(
        pg.psql(second, "select to_regclass('public.notes') is null")
            .unwrap(),
        "t",
        "a table created in one fresh database shows in another"
    );
    assert_eq!(
        pg.psql(
            second,
            "select count(*) from pg_tables where schemaname = 'public'"
        )
        .unwrap(),
        "0"
    );
}

#[test]
fn dropping_a_server_stops_it_and_removes_its_directory() {
    let pg = TempPostgres::start().unwrap();
    let (port, dir) = (pg.port(), pg.dir().expect("started here").to_path_buf());
    assert!(accepts(port));
    assert!(dir.join("data").is_dir());
    drop(pg);
    assert!(!accepts(port), "the server still accepts after drop");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[test]
fn a_stopped_server_refuses_connections_and_started_again_serves_the_same_data_on_the_same_port() {
    let mut pg = TempPostgres::start().unwrap();
    let (port, dir) = (pg.port(), pg.dir().expect("started here").to_path_buf());
    let url = pg.fresh_database();
    let database = database_name(&url);
    pg.psql(
        database,
        "create table notes (body text); insert into notes values ('kept')",
    )
    .unwrap();

    pg.stop().unwrap();
    assert!(!accepts(port), "the server still accepts after stop");
    assert!(dir.join("data").is_dir(), "stop removed the cluster");
    assert!(pg.stop().is_err(), "a stopped server stopped again");

    pg.start_again().unwrap();
    assert!(accepts(port));
    assert_eq!(pg.psql(database, "select body from notes").unwrap(), "kept");
    assert!(pg.start_again().is_err(), "a running server started twice");

    drop(pg);
    assert!(!accepts(port), "the server still accepts after drop");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

/// Not a test of its own: the child process of the next test. It starts the shared server,
/// prints its port and directory, and waits to be killed.
#[test]
#[ignore = "the child process of the_server_stops_when_its_owning_process_is_killed"]
fn owner_process_holds_the_shared_server_until_it_is_killed() {
    if std::env::var_os(OWNER_ENV).is_none() {
        return;
    }
    let pg = TempPostgres::shared();
    println!("TESTPG_PORT={}", pg.port());
    println!("TESTPG_DIR={}", pg.dir().expect("started here").display());
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn the_server_stops_when_its_owning_process_is_killed() {
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args([OWNER_TEST, "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(OWNER_ENV, "1")
        // Under the runner, the owner must start a server of its own.
        .env_remove(ATTACH_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();

    // The owner's port and directory, read on a thread so that a silent owner fails the
    // test instead of hanging it.
    let stdout = owner.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let (mut port, mut dir) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(60);
    while port.is_none() || dir.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = received.recv_timeout(left) else {
            let _ = owner.kill();
            panic!("the owner process printed no port and directory within 60 s");
        };
        // libtest prints `test NAME ... ` without a newline before the test's own output.
        if let Some((_, value)) = line.split_once("TESTPG_PORT=") {
            port = Some(value.trim().parse::<u16>().unwrap());
        } else if let Some((_, value)) = line.split_once("TESTPG_DIR=") {
            dir = Some(PathBuf::from(value));
        }
    }
    let (port, dir) = (port.unwrap(), dir.unwrap());
    assert!(
        accepts(port),
        "the owner's server does not accept connections"
    );

    // SIGKILL: no destructor, no atexit handler, nothing of the owner runs.
    owner.kill().unwrap();
    owner.wait().unwrap();

    assert!(
        eventually(Duration::from_secs(30), || !accepts(port)),
        "the server on port {port} still accepts connections 30 s after its owner died"
    );
    assert!(
        eventually(Duration::from_secs(30), || !dir.exists()),
        "{} is still there 30 s after its owner died",
        dir.display()
    );
}

#[test]
fn the_databases_of_ended_processes_are_dropped_and_those_of_live_ones_kept() {
    let pg = TempPostgres::start().unwrap();
    let mine = pg.fresh_database();
    let mine = database_name(&mine);
    // A process that has ended: its id names no running process any more.
    let mut ended = Command::new("true").spawn().unwrap();
    let ended_pid = ended.id();
    ended.wait().unwrap();
    let orphan = format!("test_{ended_pid}_0");
    pg.psql("postgres", &format!("create database {orphan}"))
        .unwrap();
    pg.psql("postgres", "create database unrelated").unwrap();

    assert_eq!(pg.drop_databases_of_ended_processes().unwrap(), 1);

    let left = pg
        .psql(
            "postgres",
            "select string_agg(datname, ' ' order by datname) from pg_database",
        )
        .unwrap();
    let left: Vec<&str> = left.split(' ').collect();
    assert!(
        !left.contains(&orphan.as_str()),
        "{orphan} survived: {left:?}"
    );
    assert!(
        left.contains(&mine),
        "this process's {mine} was dropped: {left:?}"
    );
    assert!(
        left.contains(&"unrelated"),
        "a database not made by a test was dropped"
    );
}

/// Not a test of its own: run by the next test under the runner.
#[test]
#[ignore = "the child process of the_runner_serves_its_command_one_server_and_stops_it_after"]
fn attached_process_uses_the_runners_server() {
    let Ok(port) = std::env::var(ATTACH_ENV) else {
        return;
    };
    let pg = TempPostgres::shared();
    assert_eq!(pg.port().to_string(), port);
    assert!(
        pg.dir().is_none(),
        "a process under the runner started its own server"
    );
    let url = pg.fresh_database();
    assert_eq!(
        pg.psql(database_name(&url), "select current_database()")
            .unwrap(),
        database_name(&url)
    );
    println!("ATTACHED_PORT={port}");
}

#[test]
fn the_runner_serves_its_command_one_server_and_stops_it_after() {
    let output = Command::new(RUNNER)
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([ATTACHED_TEST, "--exact", "--ignored", "--nocapture"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the attached test failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let port: u16 = stdout
        .lines()
        .find_map(|line| {
            line.split_once("ATTACHED_PORT=")
                .map(|(_, p)| p.trim().parse().unwrap())
        })
        .expect("the attached test ran under the runner");
    assert!(!accepts(port), "the runner's server outlived its command");

    // The command's exit status is the runner's.
    let status = Command::new(RUNNER)
        .args(["--", "sh", "-c", "exit 3"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
}
