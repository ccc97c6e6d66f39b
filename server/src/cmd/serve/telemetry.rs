//! OpenTelemetry traces: an OTLP/HTTP (protobuf) exporter behind `tracing-opentelemetry`,
//! configured by the standard `OTEL_*` variables and off unless an OTLP endpoint is set.
//!
//! Only the spans of [`skillgate_core::trace::TARGET`] are exported (the MCP request, the
//! platform tool, the decision, the audit appends, the upstream call); the log keeps its
//! own filter. Spans leave through the SDK's batch processor, whose own thread does the
//! (blocking) export: a slow or absent collector costs a request nothing, and a full queue
//! drops spans instead of waiting. [`Telemetry::shutdown`] flushes what is queued.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use skillgate_core::trace::TARGET;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// How long the flush at exit may take before the remaining spans are given up.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// No exporter: no OTLP endpoint is configured, or tracing is turned off.
    Off,
    /// Export to the endpoint the `OTEL_EXPORTER_OTLP_*` variables name.
    Otlp,
}

/// Reads the switches of the OpenTelemetry specification: `OTEL_SDK_DISABLED=true` and
/// `OTEL_TRACES_EXPORTER=none` turn tracing off; otherwise it is on exactly when
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the SDK's
/// default of localhost:4318 is not taken as a wish to export).
pub fn wanted(var: impl Fn(&str) -> Option<String>) -> Wanted {
    let set = |name: &str| {
        var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Wanted::Off;
    }
    if set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none")) {
        return Wanted::Off;
    }
    if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
    {
        Wanted::Otlp
    } else {
        Wanted::Off
    }
}

/// The running trace pipeline; [`Telemetry::shutdown`] it on the way out.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Builds the exporter and provider the environment asks for, or `None` when it asks
    /// for none. Connects to nothing yet: a collector that is down shows as failed exports.
    pub fn from_env() -> Result<Option<Self>, String> {
        if wanted(|name| std::env::var(name).ok()) == Wanted::Off {
            return Ok(None);
        }
        // The endpoint, headers and timeout come from OTEL_EXPORTER_OTLP_* (the exporter
        // reads them); the batch sizes and delays from OTEL_BSP_*.
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build()
            .map_err(|error| format!("cannot build the OTLP trace exporter: {error}"))?;
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter).build())
            .with_resource(resource())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        Ok(Some(Self { provider }))
    }

    /// The layer that turns Skillgate's trace spans (and only those) into OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.provider.tracer("skillgate");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::INFO))
    }

    /// Exports what is still queued and stops the exporter; off the async runtime, since
    /// the flush blocks on the export.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT))
                .await;
        match flushed {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "the last trace spans could not be exported"),
            Err(error) => tracing::warn!(%error, "the trace exporter did not shut down"),
        }
    }
}

/// `service.name` is `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`),
/// else `skillgate`; plus `service.version`.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let builder = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    if named {
        builder.build()
    } else {
        builder.with_service_name("skillgate").build()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn wanted_with(vars: &[(&str, &str)]) -> Wanted {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        wanted(|name| vars.get(name).cloned())
    }

    #[test]
    fn tracing_is_off_without_an_otlp_endpoint() {
        assert_eq!(wanted_with(&[]), Wanted::Off);
        assert_eq!(wanted_with(&[("OTEL_SERVICE_NAME", "gw")]), Wanted::Off);
        assert_eq!(
            wanted_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]),
            Wanted::Off
        );
    }

    #[test]
    fn either_endpoint_variable_turns_tracing_on() {
        assert_eq!(
            wanted_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]),
            Wanted::Otlp
        );
        assert_eq!(
            wanted_with(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://collector:4318/v1/traces"
            )]),
            Wanted::Otlp
        );
    }

    #[test]
    fn the_sdk_switches_turn_tracing_off_despite_an_endpoint() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        assert_eq!(
            wanted_with(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]),
            Wanted::Off
        );
        assert_eq!(
            wanted_with(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
            Wanted::Off
        );
        assert_eq!(
            wanted_with(&[endpoint, ("OTEL_SDK_DISABLED", "false")]),
            Wanted::Otlp
        );
    }
}
