//! A throwaway PostgreSQL server for tests.
//!
//! [`TempPostgres::start`] runs `initdb` into a temporary directory and starts `postgres` on a
//! free port of 127.0.0.1 (trust authentication, role `postgres`); [`TempPostgres::shared`] is
//! one such server per test process, started on first use, or the one server of a whole run
//! when the process runs under the `skillgate-testpg` runner (`src/main.rs`).
//! [`TempPostgres::fresh_database`] gives each test its own empty database on it.
//!
//! **It never outlives the test process.** A test binary keeps the shared server in a static,
//! and statics are never dropped; a test process may also panic, be killed with `kill -9` or
//! be stopped by Ctrl-C. So `postgres` runs under a small `sh` wrapper whose stdin is a pipe
//! from the test process. The kernel closes the test process's end of that pipe however the
//! process ends; at end of file the wrapper stops `postgres` (fast shutdown, SIGINT) and
//! removes the temporary directory. The pipe's end belongs to the process, not to the thread
//! that spawned the wrapper, and it is close-on-exec, so no other child holds it open. The
//! wrapper runs in its own process group, so a Ctrl-C at the terminal reaches the test process
//! and not the server directly: the shutdown always goes through the pipe.
//! Dropping a [`TempPostgres`] closes the pipe the same way and waits for the server to stop.
//!
//! [`TempPostgres::start_with_tls`] starts one that speaks TLS with a certificate the test
//! made (say, signed by a CA generated in the test), and accepts TCP connections only over
//! TLS, so a client that connected at all connected over TLS.
//!
//! The binaries come from `$SKILLGATE_PG_BIN` or else the newest `/usr/lib/postgresql/*/bin`
//! (Debian's `postgresql` package; `make deps-postgres` installs it). `initdb` refuses to run
//! as root, so as root the server and `initdb` run as the `postgres` user, which owns the
//! temporary directory. Clients (`pg_isready`, `createdb`, `psql`) connect over TCP as the
//! `postgres` role and run as the calling user.

pub mod tls;

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Environment variable naming the directory of the PostgreSQL binaries (`initdb`,
/// `postgres`, `pg_isready`, `createdb`, `psql`), overriding the search of
/// `/usr/lib/postgresql/*/bin`.
pub const BIN_ENV: &str = "SKILLGATE_PG_BIN";

/// Where Debian installs each PostgreSQL major version, as `<version>/bin`.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";
/// The binaries this crate runs.
const BINARIES: [&str; 5] = ["initdb", "postgres", "pg_isready", "createdb", "psql"];
/// How long a server may take to accept connections, and to stop.
const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often readiness is polled while a server starts.
const POLL: Duration = Duration::from_millis(100);
/// Another process may take the free port between our probe and the server's bind: try
/// another one this many times.
const PORT_ATTEMPTS: usize = 5;

/// Settings of every server, after `-D`, `-p` and `-k`.
const SETTINGS: [&str; 4] = [
    "listen_addresses=127.0.0.1",
    "fsync=on",
    // Several replicas' pools and parallel tests share one server.
    "max_connections=200",
    // The tests' own timestamps; the server's time zone is not what they check.
    "timezone=UTC",
];

/// The wrapper that ties the server's life to the test process. Arguments: the `postgres`
/// binary, the data directory, the port, the socket directory, the temporary directory to
/// remove afterwards, then the server's further arguments.
///
/// fd 3 keeps the pipe from the test process; `postgres` runs in the background without it;
/// the watcher waits for end of file on it, marks the directory for removal and asks
/// `postgres` to stop (again each second until it has, in case the first signal came before
/// `postgres` installed its handlers). When `postgres` ends on its own (say its port was
/// taken), the wrapper ends the watcher and leaves the directory to its owner.
const WRAPPER: &str = r#"
pg=$1 data=$2 port=$3 sock=$4 root=$5
shift 5
exec 3<&0 </dev/null
"$pg" -D "$data" -p "$port" -k "$sock" "$@" 3<&- &
pg_pid=$!
{
  cat <&3 >/dev/null
  : >"$root/owner-gone"
  while kill -INT "$pg_pid" 2>/dev/null; do sleep 1; done
} &
watch_pid=$!
exec 3<&-
wait "$pg_pid"
status=$?
kill "$watch_pid" 2>/dev/null
if [ -e "$root/owner-gone" ]; then rm -rf "$root"; fi
exit "$status"
"#;

/// The server's TLS certificate and key for [`TempPostgres::start_with_tls`], both PEM: the
/// certificate first, then any intermediates; the key PKCS#8, PKCS#1 or SEC1.
#[derive(Clone)]
pub struct ServerTls {
    pub cert_chain_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

/// The names of the certificate and key files in the data directory (settings read paths
/// relative to it).
const TLS_CERT_FILE: &str = "server.crt";
const TLS_KEY_FILE: &str = "server.key";
/// Client authentication of a TLS server: TCP only over TLS (`hostssl`); the wrapper's
/// Unix socket stays as it was.
const TLS_HBA: &str = "local all all trust\nhostssl all all 127.0.0.1/32 trust\n";

/// Numbers the databases [`TempPostgres::fresh_database`] creates.
static DATABASES: AtomicU64 = AtomicU64::new(0);

/// A PostgreSQL server of its own for tests, on 127.0.0.1 with trust authentication.
pub struct TempPostgres {
    port: u16,
    bin: PathBuf,
    /// The server this value started, stopped when it drops; `None` when it is attached to
    /// the server of a `skillgate-testpg` runner ([`ATTACH_ENV`]).
    owned: Option<Owned>,
}

/// A server process this crate started.
struct Owned {
    /// The write end of the wrapper's stdin: closing it stops the server.
    lifeline: Option<ChildStdin>,
    wrapper: Child,
    /// Removed by the wrapper once the server stopped; this is the fallback.
    dir: TempDir,
    /// What [`TempPostgres::start_again`] starts the server with.
    user: Option<RunAs>,
    settings: Vec<String>,
}

impl std::fmt::Debug for TempPostgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempPostgres")
            .field("port", &self.port)
            .field("dir", &self.dir())
            .finish_non_exhaustive()
    }
}

/// Set by the `skillgate-testpg` runner for the command it runs: the port of its server on
/// 127.0.0.1. [`TempPostgres::shared`] then attaches to that server instead of starting one,
/// so a test runner that gives every test its own process (nextest) starts one PostgreSQL
/// for the whole run, not one per test.
pub const ATTACH_ENV: &str = "SKILLGATE_TEST_PG_PORT";

/// The prefix of the databases [`TempPostgres::fresh_database`] creates, followed by the
/// creating process's id and a counter: `test_<pid>_<n>`.
pub const DATABASE_PREFIX: &str = "test_";

/// The directory of the PostgreSQL binaries: `$SKILLGATE_PG_BIN` when set, else the newest
/// `/usr/lib/postgresql/<version>/bin` that has them all. `None` when there is none.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        let dir = PathBuf::from(dir);
        return has_binaries(&dir).then_some(dir);
    }
    let mut versions: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(DEBIAN_ROOT)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(str::parse)
                .collect::<Result<Vec<u64>, _>>()
                .ok()?;
            let bin = entry.path().join("bin");
            has_binaries(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Whether the PostgreSQL binaries are installed (see [`bin_dir`]).
pub fn available() -> bool {
    bin_dir().is_some()
}

fn has_binaries(dir: &Path) -> bool {
    BINARIES.iter().all(|name| dir.join(name).is_file())
}

/// The OS user the server runs as: `None` for ourselves, the `postgres` user's ids as root.
#[derive(Clone, Copy)]
struct RunAs {
    uid: u32,
    gid: u32,
}

fn run_as() -> io::Result<Option<RunAs>> {
    // /proc/self belongs to the process's effective user.
    let euid = match std::fs::metadata("/proc/self") {
        Ok(meta) => meta.uid(),
        Err(_) => id(&["-u"])?,
    };
    if euid != 0 {
        return Ok(None);
    }
    let lookup = |flag| {
        id(&[flag, "postgres"]).map_err(|e| {
            io::Error::other(format!(
                "initdb refuses to run as root and there is no `postgres` user to run it as \
                 ({e}); install Debian's postgresql package (make deps-postgres)"
            ))
        })
    };
    Ok(Some(RunAs {
        uid: lookup("-u")?,
        gid: lookup("-g")?,
    }))
}

/// `id ARGS`, parsed as a number.
fn id(args: &[&str]) -> io::Result<u32> {
    let output = Command::new("id").args(args).output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "id {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|e| io::Error::other(format!("id {}: {e}", args.join(" "))))
}

/// A command for one of the server's own binaries, as the user the server runs as.
fn server_command(program: &Path, user: Option<RunAs>, cwd: &Path) -> Command {
    let mut command = Command::new(program);
    command.current_dir(cwd).env("LC_ALL", "C");
    if let Some(user) = user {
        command.uid(user.uid).gid(user.gid);
    }
    command
}

/// A client command (`pg_isready`, `createdb`, `psql`) against the server at `port`.
fn client_command(bin: &Path, program: &str, port: u16) -> Command {
    let mut command = Command::new(bin.join(program));
    for name in [
        "PGHOST",
        "PGHOSTADDR",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
        "PGSERVICE",
        "PGOPTIONS",
        "PGSSLMODE",
    ] {
        command.env_remove(name);
    }
    command.env("PGCONNECT_TIMEOUT", "5").args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        "postgres",
    ]);
    command
}

fn check(what: &str, output: Output) -> io::Result<String> {
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// Whether a server accepts connections on 127.0.0.1:`port` (`pg_isready`).
fn accepts(bin: &Path, port: u16) -> bool {
    client_command(bin, "pg_isready", port)
        .args(["-d", "postgres", "-q", "-t", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A port of 127.0.0.1 that nothing listens on right now.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// The last lines of the server's log, for an error message.
fn log_since(log: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(log) {
        let _ = file.seek(SeekFrom::Start(offset));
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Why one attempt to start the server failed.
enum StartFailure {
    /// The port was taken before the server bound it: try another.
    PortTaken,
    Other(io::Error),
}

impl TempPostgres {
    /// Creates a cluster in a temporary directory and starts a server on a free port,
    /// returning once it accepts connections (within 30 s, else an error with its log).
    pub fn start() -> io::Result<TempPostgres> {
        Self::start_inner(None, &[])
    }

    /// [`Self::start`] with more server settings (`name=value`, as `postgres -c` takes
    /// them), e.g. `shared_preload_libraries=pg_stat_statements` for a benchmark that counts
    /// statements.
    pub fn start_with_settings(settings: &[&str]) -> io::Result<TempPostgres> {
        Self::start_inner(None, settings)
    }

    /// [`Self::start`] with `ssl=on` and `tls` as the server's certificate and key. TCP
    /// connections are accepted only over TLS; what a client verifies (`sslmode`,
    /// `sslrootcert`) is up to the client.
    pub fn start_with_tls(tls: &ServerTls) -> io::Result<TempPostgres> {
        Self::start_inner(Some(tls), &[])
    }

    fn start_inner(tls: Option<&ServerTls>, extra: &[&str]) -> io::Result<TempPostgres> {
        let bin = bin_dir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no PostgreSQL binaries ({}) in ${BIN_ENV} or {DEBIAN_ROOT}/*/bin: \
                     install Debian's postgresql package (make deps-postgres)",
                    BINARIES.join(", ")
                ),
            )
        })?;
        let user = run_as()?;

        // The socket path (`<dir>/sock/.s.PGSQL.<port>`) must fit in 107 bytes, and the
        // `postgres` user must reach the directory: a private $TMPDIR would not do.
        let temp = std::env::temp_dir();
        let base = if user.is_some() || temp.as_os_str().len() > 60 {
            PathBuf::from("/tmp")
        } else {
            temp
        };
        let dir = tempfile::Builder::new()
            .prefix("skillgate-pg-")
            .tempdir_in(&base)?;
        let root = dir.path().to_path_buf();
        let data = root.join("data");
        let sock = root.join("sock");
        let log = root.join("postgres.log");
        std::fs::create_dir(&sock)?;
        File::create(&log)?;
        if let Some(user) = user {
            for path in [&root, &sock, &log] {
                std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))?;
            }
        }

        let initdb = server_command(&bin.join("initdb"), user, &root)
            .arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                // A throwaway cluster: no fsync of the files initdb writes.
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .output()?;
        check("initdb", initdb)?;
        let mut settings: Vec<String> = SETTINGS
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect();
        if let Some(tls) = tls {
            // The key must belong to the server's user and be private to it, or the server
            // refuses to start.
            for (name, text, mode) in [
                (TLS_CERT_FILE, &tls.cert_chain_pem, 0o644),
                (TLS_KEY_FILE, &tls.key_pem, 0o600),
            ] {
                write_private(&data.join(name), text.as_bytes(), mode, user)?;
            }
            write_private(&data.join("pg_hba.conf"), TLS_HBA.as_bytes(), 0o600, user)?;
            settings.extend([
                "ssl=on".to_owned(),
                format!("ssl_cert_file={TLS_CERT_FILE}"),
                format!("ssl_key_file={TLS_KEY_FILE}"),
            ]);
        }

        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            match Self::launch(&bin, user, &root, &data, &sock, &log, port, &settings) {
                Ok((wrapper, lifeline)) => {
                    return Ok(TempPostgres {
                        port,
                        bin,
                        owned: Some(Owned {
                            lifeline: Some(lifeline),
                            wrapper,
                            dir,
                            user,
                            settings,
                        }),
                    });
                }
                Err(StartFailure::PortTaken) => last = Some(port),
                Err(StartFailure::Other(error)) => return Err(error),
            }
        }
        Err(io::Error::other(format!(
            "PostgreSQL could not bind a free port in {PORT_ATTEMPTS} attempts (last {})",
            last.unwrap_or_default()
        )))
    }

    /// Starts the wrapper and the server on `port` and waits until it accepts connections.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        bin: &Path,
        user: Option<RunAs>,
        root: &Path,
        data: &Path,
        sock: &Path,
        log: &Path,
        port: u16,
        settings: &[String],
    ) -> Result<(Child, ChildStdin), StartFailure> {
        let other = StartFailure::Other;
        let log_offset = std::fs::metadata(log).map_err(other)?.len();
        let log_out = File::options().append(true).open(log).map_err(other)?;
        let log_err = log_out.try_clone().map_err(other)?;
        let mut args: Vec<OsString> = vec![
            bin.join("postgres").into(),
            data.into(),
            port.to_string().into(),
            sock.into(),
            root.into(),
        ];
        for setting in settings {
            args.push("-c".into());
            args.push(setting.into());
        }
        let mut wrapper = server_command(Path::new("/bin/sh"), user, root)
            .arg("-c")
            .arg(WRAPPER)
            .arg("skillgate-testpg")
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(log_out)
            .stderr(log_err)
            .process_group(0)
            .spawn()
            .map_err(other)?;
        let lifeline = wrapper.stdin.take().expect("the wrapper's stdin is piped");

        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = wrapper.try_wait().map_err(other)? {
                drop(lifeline);
                let tail = log_since(log, log_offset);
                if tail.contains("could not bind") || tail.contains("Address already in use") {
                    return Err(StartFailure::PortTaken);
                }
                return Err(other(io::Error::other(format!(
                    "PostgreSQL exited ({status}) before accepting connections on port \
                     {port}; its log:\n{tail}"
                ))));
            }
            if accepts(bin, port) {
                return Ok((wrapper, lifeline));
            }
            if Instant::now() >= deadline {
                // Closing the pipe stops it; wait for that so the directory can go.
                drop(lifeline);
                let _ = wait_bounded(&mut wrapper, STOP_TIMEOUT);
                return Err(other(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "PostgreSQL did not accept connections on 127.0.0.1:{port} within \
                         {} s; its log:\n{}",
                        START_TIMEOUT.as_secs(),
                        log_since(log, log_offset)
                    ),
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The server of this test process: the runner's when [`ATTACH_ENV`] names one, else
    /// one started on first use and stopped when the process ends. Panics when it cannot
    /// start, or when the runner's server does not accept connections.
    pub fn shared() -> &'static TempPostgres {
        static SHARED: OnceLock<TempPostgres> = OnceLock::new();
        SHARED.get_or_init(|| {
            let attached = std::env::var(ATTACH_ENV).ok().map(|port| {
                TempPostgres::attach(&port)
                    .unwrap_or_else(|e| panic!("cannot use the runner's PostgreSQL: {e}"))
            });
            attached.unwrap_or_else(|| {
                TempPostgres::start()
                    .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL: {e}"))
            })
        })
    }

    /// The server a runner started on `port` (decimal), which must accept connections.
    fn attach(port: &str) -> io::Result<TempPostgres> {
        let port: u16 = port.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{ATTACH_ENV} is `{port}`, not a port number"),
            )
        })?;
        let bin = bin_dir()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no PostgreSQL binaries"))?;
        if !accepts(&bin, port) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("nothing accepts PostgreSQL connections on 127.0.0.1:{port}"),
            ));
        }
        Ok(TempPostgres {
            port,
            bin,
            owned: None,
        })
    }

    /// Stops the server as `pg_ctl stop -m fast` would (SIGINT to the postmaster: every
    /// open connection is ended with `57P01`, as in a restart) and keeps its cluster, so
    /// [`Self::start_again`] brings the same databases back on the same port. Returns once
    /// the server is gone (within 30 s, else an error).
    pub fn stop(&mut self) -> io::Result<()> {
        let port = self.port;
        let owned = self.owned_mut()?;
        let pid_file = owned.dir.path().join("data").join("postmaster.pid");
        let pid = std::fs::read_to_string(&pid_file)?
            .lines()
            .next()
            .map(str::trim)
            .and_then(|pid| pid.parse::<u32>().ok())
            .ok_or_else(|| io::Error::other(format!("no pid in {}", pid_file.display())))?;
        check(
            "kill -INT",
            Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .stdin(Stdio::null())
                .output()?,
        )?;
        // The wrapper ends with the server; its watcher never saw the pipe close, so the
        // directory stays.
        if !wait_bounded(&mut owned.wrapper, STOP_TIMEOUT) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the PostgreSQL on port {port} did not stop within {} s",
                    STOP_TIMEOUT.as_secs()
                ),
            ));
        }
        Ok(())
    }

    /// Starts a server [`Self::stop`]ped again, on its cluster and port, returning once it
    /// accepts connections.
    pub fn start_again(&mut self) -> io::Result<()> {
        let (port, bin) = (self.port, self.bin.clone());
        let owned = self.owned_mut()?;
        if owned.wrapper.try_wait()?.is_none() {
            return Err(io::Error::other(format!(
                "the PostgreSQL on port {port} is still running"
            )));
        }
        let root = owned.dir.path().to_path_buf();
        let started = Self::launch(
            &bin,
            owned.user,
            &root,
            &root.join("data"),
            &root.join("sock"),
            &root.join("postgres.log"),
            port,
            &owned.settings,
        );
        let (wrapper, lifeline) = started.map_err(|failure| match failure {
            StartFailure::PortTaken => io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("port {port} was taken while the PostgreSQL was stopped"),
            ),
            StartFailure::Other(error) => error,
        })?;
        owned.wrapper = wrapper;
        // The old pipe's reader went with the old wrapper's watcher.
        owned.lifeline = Some(lifeline);
        Ok(())
    }

    fn owned_mut(&mut self) -> io::Result<&mut Owned> {
        self.owned.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "a runner's PostgreSQL is not this process's to stop",
            )
        })
    }

    /// The port on 127.0.0.1 the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory holding the cluster, its socket and log, gone once the
    /// server stopped; `None` for a runner's server this process attached to.
    pub fn dir(&self) -> Option<&Path> {
        self.owned.as_ref().map(|owned| owned.dir.path())
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a new, empty, uniquely named database and returns its URL ([`Self::url`]).
    /// Panics when it cannot.
    pub fn fresh_database(&self) -> String {
        self.try_fresh_database()
            .unwrap_or_else(|e| panic!("cannot create a database: {e}"))
    }

    /// [`Self::fresh_database`], with the error.
    pub fn try_fresh_database(&self) -> io::Result<String> {
        let name = format!(
            "{DATABASE_PREFIX}{}_{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::Relaxed)
        );
        let output = client_command(&self.bin, "createdb", self.port)
            .args(["-T", "template0", &name])
            .stdin(Stdio::null())
            .output()?;
        check(&format!("createdb {name}"), output)?;
        Ok(self.url(&name))
    }

    /// Drops the databases [`Self::fresh_database`] made for processes that have ended, and
    /// returns how many it dropped. A server shared by a whole run (the runner's) would
    /// otherwise keep one database per test, some megabytes each, until the run ends.
    pub fn drop_databases_of_ended_processes(&self) -> io::Result<usize> {
        let names = self.psql(
            "postgres",
            &format!("select datname from pg_database where datname like '{DATABASE_PREFIX}%'"),
        )?;
        let mut dropped = 0;
        for name in names.lines() {
            let Some(pid) = name
                .strip_prefix(DATABASE_PREFIX)
                .and_then(|rest| rest.split_once('_'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            // FORCE: the ended process's connections may not have closed yet on the
            // server's side. Another janitor may have dropped it first.
            self.psql(
                "postgres",
                &format!("drop database if exists \"{name}\" with (force)"),
            )?;
            dropped += 1;
        }
        Ok(dropped)
    }

    /// Runs `sql` with `psql` in `database` and returns what it printed: unaligned, tuples
    /// only, trimmed (`select 1` gives `1`). An SQL error is an error.
    pub fn psql(&self, database: &str, sql: &str) -> io::Result<String> {
        let output = client_command(&self.bin, "psql", self.port)
            .args([
                "-d",
                database,
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
            ])
            .arg("-c")
            .arg(sql)
            .stdin(Stdio::null())
            .output()?;
        Ok(check("psql", output)?.trim().to_owned())
    }
}

/// Writes `bytes` to the file at `path` (created or replaced) with `mode`, owned by the
/// server's user.
fn write_private(path: &Path, bytes: &[u8], mode: u32, user: Option<RunAs>) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut file = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)?;
    // The mode of an existing file (pg_hba.conf) is not changed by `open`.
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    if let Some(user) = user {
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))?;
    }
    Ok(())
}

/// Waits for `child` to exit, up to `timeout`; whether it did.
fn wait_bounded(child: &mut Child, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return false,
        }
    }
}

impl Drop for TempPostgres {
    /// Fast shutdown (the wrapper sends SIGINT once its stdin closes), then the directory
    /// goes.
    fn drop(&mut self) {
        let Some(owned) = self.owned.as_mut() else {
            return;
        };
        drop(owned.lifeline.take());
        if !wait_bounded(&mut owned.wrapper, STOP_TIMEOUT) {
            eprintln!(
                "skillgate-testpg: the PostgreSQL on port {} did not stop within {} s",
                self.port,
                STOP_TIMEOUT.as_secs()
            );
        }
    }
}
