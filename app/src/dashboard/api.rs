//! The dashboard's overview.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::shared::ssr;
use crate::shared::{ConsoleError, Me};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DashboardOverview {
    pub me: Me,
    pub version: String,
    pub database_ok: bool,
    pub console_users: usize,
}

#[server(prefix = "/console/api")]
pub async fn overview() -> Result<DashboardOverview, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require(ConsoleRole::Viewer).await?;
    let ctx = ssr::context();
    let console_users = ctx.users.list().await.map_err(ssr::internal)?.len();
    Ok(DashboardOverview {
        me: Me {
            name: user.name,
            role: user.role.to_string(),
            catalog_file: ctx.authoring.catalog_file().map(str::to_owned),
        },
        version: ctx.version.to_owned(),
        database_ok: ctx.store.ping().await,
        console_users,
    })
}
