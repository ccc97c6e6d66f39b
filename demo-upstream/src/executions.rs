//! The executions log: one JSON line per tool call the demo upstream actually ran.
//!
//! Integration tests read it to prove that a call the gateway denied never reached the
//! upstream. Sensitive arguments are redacted here too, as in the audit.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use skillgate_core::model::ToolSpec;

#[derive(Debug, thiserror::Error)]
pub enum ExecutionsLogError {
    #[error("cannot open the executions log {path}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot append to the executions log {path}")]
    Append {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug)]
pub struct ExecutionsLog {
    path: PathBuf,
    file: File,
}

impl ExecutionsLog {
    pub fn open(path: &Path) -> Result<Self, ExecutionsLogError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| ExecutionsLogError::Open {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    /// Appends one line. Callers hold the company lock, so lines follow execution order.
    pub fn record(
        &self,
        spec: &ToolSpec,
        arguments: &Map<String, Value>,
        ok: bool,
        at: DateTime<Utc>,
    ) -> Result<(), ExecutionsLogError> {
        let arguments: Map<String, Value> = arguments
            .iter()
            .map(|(name, value)| {
                let value = if spec.sensitive_args.contains(name) {
                    Value::String(String::from("[redacted]"))
                } else {
                    value.clone()
                };
                (name.clone(), value)
            })
            .collect();
        let mut line = json!({
            "tool": spec.name,
            "arguments": arguments,
            "ok": ok,
            "at": at.to_rfc3339_opts(SecondsFormat::Millis, true),
        })
        .to_string();
        line.push('\n');
        // One write per line: with O_APPEND a reader never sees half a line from us.
        (&self.file)
            .write_all(line.as_bytes())
            .and_then(|()| (&self.file).flush())
            .map_err(|source| ExecutionsLogError::Append {
                path: self.path.clone(),
                source,
            })
    }
}
