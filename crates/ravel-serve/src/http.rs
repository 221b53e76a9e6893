//! The HTTP endpoints: `/healthz`, `/metrics` (Prometheus text), `/v1/tables` and
//! `/v1/tables/{name}` (JSON).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::service::Shared;

/// The service's routes over `shared`.
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/tables", get(tables))
        .route("/v1/tables/{name}", get(table))
        .with_state(shared)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        shared.metrics_text(),
    )
        .into_response()
}

async fn tables(State(shared): State<Arc<Shared>>) -> Response {
    Json(serde_json::json!({ "tables": shared.statuses() })).into_response()
}

async fn table(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.statuses().into_iter().find(|t| t.name == name) {
        Some(t) => Json(t).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": format!("no table {name:?} is served") })),
        )
            .into_response(),
    }
}
