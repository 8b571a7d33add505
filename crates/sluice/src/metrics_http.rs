//! The `listen.metrics` listener: `/metrics` in the Prometheus text format
//! (everything the process counts, and the outbound queue measured at
//! scrape time), `/healthz` (the process answers) and `/readyz` (the store
//! answers too). Plain HTTP, meant for a private address or loopback.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use net::Shutdown;
use store::Store;

/// Serves the endpoints on `listener` until shutdown.
pub async fn serve(listener: tokio::net::TcpListener, store: Arc<dyn Store>, shutdown: Shutdown) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(store);
    let stop = shutdown.token.clone();
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
    {
        tracing::error!(error = %e, "metrics listener stopped");
    }
}

async fn scrape(State(store): State<Arc<dyn Store>>) -> impl IntoResponse {
    let mut gauges = Vec::new();
    match store.queue_summary().await {
        Ok((count, oldest)) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            gauges.push((
                "queue_recipients",
                "Recipients waiting in the outbound queue",
                count as f64,
            ));
            gauges.push((
                "queue_oldest_age_seconds",
                "Age of the oldest recipient in the outbound queue",
                oldest.map_or(0.0, |t| (now - t).max(0) as f64),
            ));
        }
        Err(e) => tracing::warn!(error = %e, "metrics: cannot read the queue"),
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::get().encode(&gauges),
    )
}

async fn ready(State(store): State<Arc<dyn Store>>) -> impl IntoResponse {
    match store.directory_serial().await {
        Ok(_) => (StatusCode::OK, "ready\n".to_string()),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}\n")),
    }
}
