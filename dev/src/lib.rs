//! `skillgate-dev …`: measurement tools for developers, kept out of the product binary: a
//! load generator for the governed endpoint, the cluster comparison, the context-cost
//! study, a memory probe and generators of large synthetic data sets. See BENCHMARKS.md.
//! The benchmarks run the `skillgate` binary found beside `skillgate-dev` as child processes.

mod breakdown;
mod cgroup;
mod cluster;
mod context_cost;
mod crowd;
pub mod database;
mod harness;
mod load;
mod memory;
mod notify;
mod pg_stats;
pub mod seed_audit;
mod seed_catalog;
mod walk;
mod workspaces;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Throughput and latency of /mcp against calling the demo upstream directly.
    Load(load::LoadArgs),
    /// One SQLite server and 1, 2, 3 PostgreSQL replicas under CPU quotas, same load.
    Cluster(cluster::ClusterArgs),
    /// Bytes of JSON an agent receives for one lookup task: flat tool list vs Skillgate.
    ContextCost(context_cost::ContextCostArgs),
    /// Resident memory of a gateway holding many governance sessions.
    Memory(memory::MemoryArgs),
    /// Governed calls while holds are announced to a webhook that never answers, and not.
    Notify(notify::NotifyArgs),
    /// Connections kept after an early refusal, and probes while one address crowds the rest.
    Crowd(crowd::CrowdArgs),
    /// Adds a large synthetic catalog to a database (console benchmarks).
    SeedCatalog(seed_catalog::SeedCatalogArgs),
    /// Fill the database with a realistic, chain-valid audit log (compliance benchmarks).
    SeedAudit(seed_audit::SeedAuditArgs),
    /// The whole audit walk in one piece and in ranges at once, alternated.
    Walk(walk::WalkArgs),
    /// What each workspace a gateway serves costs it: memory, threads, files, first request.
    Workspaces(workspaces::WorkspacesArgs),
}

pub async fn run(command: DevCommand) -> anyhow::Result<()> {
    match command {
        DevCommand::Load(args) => load::run(args).await,
        DevCommand::Cluster(args) => cluster::run(args).await,
        DevCommand::ContextCost(args) => context_cost::run(args).await,
        DevCommand::Memory(args) => memory::run(args).await,
        DevCommand::Crowd(args) => crowd::run(args).await,
        DevCommand::Notify(args) => notify::run(args).await,
        DevCommand::SeedCatalog(args) => seed_catalog::run(args).await,
        DevCommand::SeedAudit(args) => seed_audit::run(args).await,
        DevCommand::Walk(args) => walk::run(args).await,
        DevCommand::Workspaces(args) => workspaces::run(args).await,
    }
}
