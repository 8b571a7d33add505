//! What can go wrong answering a request, and the page each case gets.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A request that cannot be answered normally.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] store::StoreError),
    /// No such mailbox, message or part (or not the user's).
    #[error("not found")]
    NotFound,
    /// A state-changing request without this session's CSRF token, or
    /// sent from another site.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// A form that does not make sense.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// A limit was reached (the account's hourly sending limit).
    #[error("limit reached: {0}")]
    TooMany(String),
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = match &self {
            WebError::Store(store::StoreError::NotFound(_)) | WebError::NotFound => {
                StatusCode::NOT_FOUND
            }
            WebError::Store(e) => {
                tracing::error!(error = %e, "webmail request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
            WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WebError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
        };
        let text = match &self {
            WebError::Store(store::StoreError::NotFound(_)) | WebError::NotFound => {
                "Not found.".to_string()
            }
            WebError::Store(_) => "Something went wrong on the server; try again.".to_string(),
            WebError::Forbidden(why) => format!("Refused: {why}."),
            WebError::BadRequest(why) => format!("Bad request: {why}."),
            WebError::TooMany(why) => format!("Not sent: {why}."),
        };
        (status, crate::pages::error_page(status, &text)).into_response()
    }
}
