//! The database a data tool works on: one flag, the same for every `skillgate-dev` command
//! that opens the store, and the server's default.

use clap::Args;
use skillgate_core::store::Store;

#[derive(Debug, Args)]
pub struct DatabaseArg {
    #[arg(
        long,
        env = "SKILLGATE_DATABASE_URL",
        default_value = "sqlite://data/skillgate.db"
    )]
    pub database_url: String,
}

impl DatabaseArg {
    pub async fn open(&self) -> anyhow::Result<Store> {
        Ok(Store::open(&self.database_url).await?)
    }
}
