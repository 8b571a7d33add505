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
    /// The message was refused for its content (a virus).
    #[error("refused: {0}")]
    Refused(String),
    /// Something the request needs is down for now (the scanner).
    #[error("unavailable: {0}")]
    Unavailable(String),
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
            WebError::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            WebError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let text = match &self {
            WebError::Store(store::StoreError::NotFound(_)) | WebError::NotFound => {
                "Not found.".to_string()
            }
            WebError::Store(_) => "Something went wrong on the server; try again.".to_string(),
            WebError::Forbidden(why) => format!("Refused: {why}."),
            WebError::BadRequest(why) => format!("Bad request: {why}."),
            WebError::TooMany(why) => format!("Not sent: {why}."),
            WebError::Refused(why) => {
                format!("Not sent: {why}. The message is kept in Drafts.")
            }
            WebError::Unavailable(why) => {
                format!("Not sent: {why}; try again soon. The message is kept in Drafts.")
            }
        };
        (status, crate::pages::error_page(status, &text)).into_response()
    }
}
