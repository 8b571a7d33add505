//! Binary data (RFC 8620 §6): uploads streamed into the store as the body
//! arrives, downloads streamed out of it piece by piece, so neither holds
//! more than one piece of a blob in memory.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::json;
use store::{BlobId, Delivery, Upload};

use crate::auth::User;
use crate::error::problem;
use crate::{ids, Jmap};

/// Longest media type kept with an upload.
const MAX_TYPE: usize = 255;

fn not_found() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        json!({"type": "about:blank", "detail": "no such blob"}),
    )
}

fn limit(name: &str, code: StatusCode) -> Response {
    problem(
        code,
        json!({
            "type": "urn:ietf:params:jmap:error:limit",
            "limit": name,
            "detail": format!("the {name} limit was reached"),
        }),
    )
}

fn server_fail(e: store::StoreError) -> Response {
    tracing::error!(error = %e, "JMAP blob request failed");
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"type": "about:blank", "detail": "the store failed"}),
    )
}

impl Jmap {
    /// POST /jmap/upload/{accountId}/ (§6.1).
    pub(crate) async fn upload(
        &self,
        user: &User,
        account_id: &str,
        headers: &HeaderMap,
        body: Body,
    ) -> Response {
        if ids::parse_account(account_id) != Some(user.account) {
            return not_found();
        }
        let Ok(_running) = self.uploads.try_acquire(user.account) else {
            return limit("maxConcurrentUpload", StatusCode::TOO_MANY_REQUESTS);
        };
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|t| !t.is_empty() && t.len() <= MAX_TYPE)
            .unwrap_or("application/octet-stream")
            .to_string();
        let max = self.ctx.config.max_size_upload;
        let mut writer = self.ctx.store.message_writer();
        let mut stream = body.into_data_stream();
        while let Some(piece) = stream.next().await {
            let piece: Bytes = match piece {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!(error = %e, "JMAP upload broken off");
                    writer.abort().await;
                    return problem(
                        StatusCode::BAD_REQUEST,
                        json!({"type": "about:blank", "detail": "the upload was broken off"}),
                    );
                }
            };
            if writer.size() + piece.len() as u64 > max {
                writer.abort().await;
                return limit("maxSizeUpload", StatusCode::PAYLOAD_TOO_LARGE);
            }
            if let Err(e) = writer.write(&piece).await {
                writer.abort().await;
                return server_fail(e);
            }
        }
        let size = writer.size();
        let expires = crate::now() + self.ctx.config.upload_lifetime_secs as i64;
        let delivery = Delivery {
            upload: Some(Upload {
                account: user.account,
                content_type: content_type.clone(),
                expires,
            }),
            ..Default::default()
        };
        match writer.deliver(delivery).await {
            Ok(receipt) => (
                StatusCode::CREATED,
                [(header::CONTENT_TYPE, "application/json")],
                json!({
                    "accountId": account_id,
                    "blobId": ids::blob(receipt.blob),
                    "type": content_type,
                    "size": size,
                })
                .to_string(),
            )
                .into_response(),
            Err(e) => server_fail(e),
        }
    }

    /// GET /jmap/download/{accountId}/{blobId}/{name}?accept= (§6.2).
    pub(crate) async fn download(
        &self,
        user: &User,
        account_id: &str,
        blob_id: &str,
        name: &str,
        accept: Option<&str>,
    ) -> Response {
        if ids::parse_account(account_id) != Some(user.account) {
            return not_found();
        }
        let Some((blob, section)) = ids::parse_blob(blob_id) else {
            return not_found();
        };
        let found = match self.ctx.store.account_blob(user.account, blob).await {
            Ok(Some(found)) => found,
            Ok(None) => return not_found(),
            Err(e) => return server_fail(e),
        };
        let body = match section {
            None => whole(self.ctx.store.clone(), blob),
            Some(section) => match find_part(self, user, blob, &section).await {
                Ok(Some(part)) => Body::from_stream(crate::message::part_stream(
                    self.ctx.store.clone(),
                    blob,
                    &part,
                )),
                Ok(None) => return not_found(),
                Err(e) => return server_fail(e),
            },
        };
        let content_type = accept
            .filter(|t| valid_media_type(t))
            .map(str::to_string)
            .or(found.content_type)
            .unwrap_or_else(|| "application/octet-stream".into());
        let mut res = Response::new(body);
        let h = res.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&content_type) {
            h.insert(header::CONTENT_TYPE, v);
        }
        if let Ok(v) = HeaderValue::from_str(&content_disposition(name)) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
        // §6.2: the same blob id always has the same content.
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, immutable, max-age=31536000"),
        );
        res
    }
}

/// The MIME part `section` ("1.2") of a message of the user's, from the
/// structure the store keeps; `None` when there is no such part (or no
/// such message).
pub(crate) async fn find_part(
    jmap: &Jmap,
    user: &User,
    blob: BlobId,
    section: &str,
) -> Result<Option<mime_tree::Part>, store::StoreError> {
    let store = &jmap.ctx.store;
    let Some(email) = store
        .account_emails(user.account, Some(&[blob]))
        .await?
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    let (mailbox, entry) = &email.entries[0];
    let Some(data) = store
        .message_data(*mailbox, &[entry.uid])
        .await?
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    let tree = crate::message::tree(&data.structure);
    Ok(crate::message::find(&tree, section).map(|n| n.part.clone()))
}

/// A whole blob as a stream of its chunks, read one at a time.
pub(crate) fn whole(store: std::sync::Arc<dyn store::Store>, blob: BlobId) -> Body {
    let chunks = futures_util::stream::unfold(Some(0u32), move |seq| {
        let store = store.clone();
        async move {
            let seq = seq?;
            match store.read_chunk(blob, seq).await {
                Ok(Some(data)) => Some((Ok::<_, std::io::Error>(Bytes::from(data)), Some(seq + 1))),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            }
        }
    });
    Body::from_stream(chunks)
}

/// A media type worth sending back as `Content-Type`: `type/subtype` with
/// parameters, printable ASCII only.
fn valid_media_type(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= MAX_TYPE
        && t.contains('/')
        && t.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// `attachment` with the name, as RFC 6266 writes one: an ASCII fallback
/// and the UTF-8 name percent-encoded (RFC 8187).
pub(crate) fn content_disposition(name: &str) -> String {
    let fallback: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_written_safely() {
        assert_eq!(
            content_disposition("a b.txt"),
            "attachment; filename=\"a b.txt\"; filename*=UTF-8''a%20b.txt"
        );
        let d = content_disposition("Zürich\"\r\n.pdf");
        assert!(
            d.starts_with("attachment; filename=\"Z_rich___.pdf\""),
            "{d}"
        );
        assert!(d.ends_with("Z%C3%BCrich%22%0D%0A.pdf"), "{d}");
        assert!(valid_media_type("text/plain; charset=utf-8"));
        assert!(!valid_media_type("text"));
        assert!(!valid_media_type("text/plain\r\nX: y"));
    }
}
