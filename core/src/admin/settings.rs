//! Gateway settings an admin changes: today the audit's retention period.

use serde_json::json;

use super::{AdminError, AdminService};
use crate::compliance::RETENTION_KEY;
use crate::store::audit_query::{compliance_setting_on, set_compliance_setting_on};

impl AdminService {
    /// Sets how many days audit events are kept (`None`: forever). Audited as
    /// `audit.retention` on `audit:retention_days` with the old and new period; setting the
    /// period it already has writes nothing.
    #[tracing::instrument(skip(self))]
    pub async fn set_retention_days(
        &self,
        actor: &str,
        days: Option<u32>,
    ) -> Result<(), AdminError> {
        if days == Some(0) {
            return Err(AdminError::bad_input(
                "days",
                "The retention period must be a whole number of days, at least 1.",
            ));
        }
        self.record(
            actor,
            Box::new(move |conn| {
                Box::pin(async move {
                    let before: Option<u32> = compliance_setting_on(conn, RETENTION_KEY)
                        .await?
                        .and_then(|v| v.parse().ok());
                    if before == days {
                        return Ok(((), Vec::new()));
                    }
                    let value = days.map(|d| d.to_string());
                    set_compliance_setting_on(conn, RETENTION_KEY, value.as_deref()).await?;
                    let changed = super::Changed::new(
                        "audit.retention",
                        "audit:retention_days".to_owned(),
                        json!(before),
                        json!(days),
                    );
                    Ok(((), vec![changed]))
                })
            }),
        )
        .await
    }
}
