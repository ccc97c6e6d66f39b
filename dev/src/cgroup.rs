//! CPU quotas for a benchmark's replicas: one control group per replica, each allowed the
//! same fraction of a core, so that replicas sharing a small machine with the database,
//! the upstream and the load tool are measured at a fixed budget each, and adding a
//! replica adds capacity the way adding a machine would.
//!
//! cgroup v1 (a `cpu` hierarchy, `cpu.cfs_quota_us` over `cpu.cfs_period_us`) and v2
//! (`cpu.max`) are both handled. A group is removed when its guard drops, after moving any
//! process still in it back to the parent; groups left by a run that was killed outright
//! (no destructor runs on SIGKILL) are swept when the next run starts. Needs root, or
//! write access to the hierarchy: [`Quotas::open`] says why it cannot, and the caller
//! runs without quotas.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The prefix of every group this module creates, then the creating process's pid.
const PREFIX: &str = "skillgate-bench-";
/// The enforcement period, in microseconds: the kernel's default.
const PERIOD_US: u64 = 100_000;

/// A mounted cgroup hierarchy whose CPU controller this process may configure.
#[derive(Debug, Clone)]
pub enum Quotas {
    /// cgroup v1: the `cpu` controller's own hierarchy.
    V1(PathBuf),
    /// cgroup v2: the unified hierarchy's root.
    V2(PathBuf),
}

impl Quotas {
    /// The hierarchy under `/sys/fs/cgroup`, checked writable by creating and removing a
    /// probe group; the error says why quotas are unavailable.
    pub fn open() -> anyhow::Result<Self> {
        Self::open_at(Path::new("/sys/fs/cgroup"))
    }

    fn open_at(root: &Path) -> anyhow::Result<Self> {
        let quotas = if root.join("cgroup.controllers").is_file() {
            let controllers = fs::read_to_string(root.join("cgroup.controllers"))?;
            anyhow::ensure!(
                controllers.split_whitespace().any(|c| c == "cpu"),
                "the cgroup v2 hierarchy at {} offers no `cpu` controller",
                root.display()
            );
            // Children get the controller only once the parent delegates it. The root
            // group is exempt from v2's rule against processes in inner groups.
            fs::write(root.join("cgroup.subtree_control"), "+cpu").with_context(|| {
                format!(
                    "enabling the cpu controller for the children of {}",
                    root.display()
                )
            })?;
            Quotas::V2(root.to_owned())
        } else if root.join("cpu").join("cpu.cfs_quota_us").is_file() {
            Quotas::V1(root.join("cpu"))
        } else {
            anyhow::bail!(
                "no cgroup CPU controller under {} (neither v2's cgroup.controllers nor v1's cpu/cpu.cfs_quota_us)",
                root.display()
            );
        };
        quotas.sweep();
        let probe = quotas.group("probe", 1.0)?;
        drop(probe);
        Ok(quotas)
    }

    /// Where groups are made.
    fn parent(&self) -> &Path {
        match self {
            Quotas::V1(dir) | Quotas::V2(dir) => dir,
        }
    }

    /// A new group `label` allowed `cores` of CPU time (0.25: a quarter of one core).
    pub fn group(&self, label: &str, cores: f64) -> anyhow::Result<CpuGroup> {
        anyhow::ensure!(
            cores.is_finite() && cores > 0.0,
            "a CPU quota must be a positive number of cores, not {cores}"
        );
        let quota_us = ((cores * PERIOD_US as f64).round() as u64).max(1_000);
        let dir = self
            .parent()
            .join(format!("{PREFIX}{}-{label}", std::process::id()));
        fs::create_dir(&dir).with_context(|| format!("creating the cgroup {}", dir.display()))?;
        // From here on the guard removes the directory, whatever fails next.
        let group = CpuGroup {
            dir,
            parent: self.parent().to_owned(),
            v2: matches!(self, Quotas::V2(_)),
        };
        if group.v2 {
            group.write("cpu.max", &format!("{quota_us} {PERIOD_US}"))?;
        } else {
            group.write("cpu.cfs_period_us", &PERIOD_US.to_string())?;
            group.write("cpu.cfs_quota_us", &quota_us.to_string())?;
        }
        Ok(group)
    }

    /// Removes the groups of earlier runs whose process is gone.
    fn sweep(&self) {
        let Ok(entries) = fs::read_dir(self.parent()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name
                .to_str()
                .and_then(|name| name.strip_prefix(PREFIX))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{owner}")).exists() {
                let stale = CpuGroup {
                    dir: entry.path(),
                    parent: self.parent().to_owned(),
                    v2: matches!(self, Quotas::V2(_)),
                };
                eprintln!(
                    "removing the CPU quota group {} left by an interrupted run",
                    stale.dir.display()
                );
                drop(stale);
            }
        }
    }
}

/// One control group with a CPU quota; removed when dropped.
#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    parent: PathBuf,
    v2: bool,
}

/// Throttling counters of a group, from its `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttling {
    /// Enforcement periods in which the group ran.
    pub periods: u64,
    /// Periods in which it used up its quota and had to wait.
    pub throttled: u64,
}

impl CpuGroup {
    /// Moves process `pid`, all its threads, into the group; threads it starts later
    /// are born there.
    pub fn add(&self, pid: u32) -> anyhow::Result<()> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// The group's throttling counters so far.
    pub fn throttling(&self) -> anyhow::Result<Throttling> {
        let path = self.dir.join("cpu.stat");
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|value| value.trim().parse::<u64>().ok())
                .with_context(|| format!("no {name} in {}", path.display()))
        };
        Ok(Throttling {
            periods: field("nr_periods")?,
            throttled: field("nr_throttled")?,
        })
    }

    fn write(&self, file: &str, value: &str) -> anyhow::Result<()> {
        let path = self.dir.join(file);
        fs::write(&path, value).with_context(|| format!("writing `{value}` to {}", path.display()))
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // A group with processes in it cannot be removed: hand any that are left (a
        // replica being killed, or the probe's none) back to the parent first.
        let parent_procs = self.parent.join("cgroup.procs");
        for _ in 0..50 {
            if let Ok(procs) = fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = fs::write(&parent_procs, pid);
                }
            }
            match fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
                // A process that was exiting leaves the group a moment later.
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
        eprintln!(
            "could not remove the CPU quota group {} (v2: {}): remove it by hand with rmdir",
            self.dir.display(),
            self.v2
        );
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;
    use std::process::{Child, Command};

    use super::*;

    /// Quotas need root (or a delegated hierarchy); as anyone else the benchmark runs
    /// without them, and says so, which is all there is to test.
    fn quotas() -> Option<Quotas> {
        let root = fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0);
        match Quotas::open() {
            Ok(quotas) => Some(quotas),
            Err(error) if !root => {
                eprintln!("not root, no CPU quotas to test: {error:#}");
                None
            }
            Err(error) => panic!("root, yet no CPU quotas: {error:#}"),
        }
    }

    fn sleeper() -> Child {
        Command::new("sleep").arg("60").spawn().expect("sleep runs")
    }

    fn groups_of(pid: u32) -> String {
        fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("a living process")
    }

    #[test]
    fn a_group_sets_its_quota_and_hands_its_processes_back_when_dropped() {
        let Some(quotas) = quotas() else { return };
        let group = quotas.group("quota-test", 0.25).unwrap();
        let quota = match &quotas {
            Quotas::V1(_) => fs::read_to_string(group.dir.join("cpu.cfs_quota_us")).unwrap(),
            Quotas::V2(_) => fs::read_to_string(group.dir.join("cpu.max")).unwrap(),
        };
        assert!(quota.starts_with("25000"), "quota {quota:?}");
        let mut child = sleeper();
        group.add(child.id()).unwrap();
        let name = group
            .dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(groups_of(child.id()).contains(&name));
        assert_eq!(group.throttling().unwrap().throttled, 0, "sleep never runs");

        let dir = group.dir.clone();
        drop(group);
        assert!(!dir.exists(), "{} is still there", dir.display());
        assert!(!groups_of(child.id()).contains(&name));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn groups_left_by_a_run_that_ended_are_removed_by_the_next() {
        let Some(quotas) = quotas() else { return };
        let mut ended = Command::new("true").spawn().unwrap();
        ended.wait().unwrap();
        let stale = quotas.parent().join(format!("{PREFIX}{}-left", ended.id()));
        fs::create_dir(&stale).unwrap();
        let mine = quotas.group("kept", 0.5).unwrap();

        Quotas::open().unwrap();
        assert!(!stale.exists(), "{} was not swept", stale.display());
        assert!(mine.dir.exists(), "a living run's group was swept");
    }
}
