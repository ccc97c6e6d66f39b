//! The demo catalog: the customer-support company of the Skilder paper.

pub mod bench;
pub mod catalog;
pub mod tools;

use crate::model::{Upstream, UpstreamKind};
use crate::slug::Slug;
use crate::store::{Store, StoreError};

impl Store {
    /// Seeds the demo catalog into a database whose catalog has no roles yet, with an
    /// upstream `demo` that runs `command demo-upstream` (the running `skillgate` binary).
    /// Returns whether anything was seeded; a catalog that already has roles is left alone.
    pub async fn seed_demo(&self, command: &str) -> Result<bool, StoreError> {
        let upstream = Upstream {
            name: Slug::parse(catalog::DEMO_UPSTREAM).expect("the demo upstream name is a slug"),
            kind: UpstreamKind::Stdio {
                command: command.to_owned(),
                args: vec!["demo-upstream".to_owned()],
            },
        };
        self.seed_catalog(catalog::demo_catalog(), &upstream).await
    }
}
