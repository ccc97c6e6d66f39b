//! `skillgate-dev walk`: the whole audit walk in one piece and in ranges at once
//! (`audit::checkpoint::walk`), alternated on the same database, so the two are compared
//! in one run rather than across runs and machines.

use std::time::Instant;

use clap::Args;
use skillgate_core::audit::Anchor;
use skillgate_core::audit::checkpoint::walk::{Ranges, walk};

use crate::database::DatabaseArg;

#[derive(Debug, Args)]
pub struct WalkArgs {
    #[command(flatten)]
    pub database: DatabaseArg,
    /// Rounds; each walks once in one piece and once in ranges.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
}

pub async fn run(args: WalkArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.rounds > 0, "--rounds must be at least 1");
    let store = args.database.open().await?;
    let start = store
        .audit_latest_anchor()
        .await?
        .unwrap_or_else(Anchor::genesis);
    let ranged = Ranges::for_this_machine();
    for round in 1..=args.rounds {
        for (label, ranges) in [("one piece", Ranges::one()), ("in ranges", ranged)] {
            let started = Instant::now();
            let report = walk(&store, start.clone(), ranges).await?;
            println!(
                "round {round}, {label} (at most {} at once): {} events in {:.1} s, {}",
                ranges.most,
                report.events,
                started.elapsed().as_secs_f64(),
                if report.is_intact() {
                    "intact"
                } else {
                    "BROKEN"
                }
            );
        }
    }
    Ok(())
}
