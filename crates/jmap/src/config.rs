//! The `[jmap]` section: the limits the session object announces (RFC 8620
//! §2, `urn:ietf:params:jmap:core`) and the server enforces.

use serde::Deserialize;

/// Settings from `[jmap]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct JmapConfig {
    /// Serve JMAP on the `http` and `https` listeners.
    pub enabled: bool,
    /// `maxSizeUpload`: largest blob one upload may hold, in bytes.
    pub max_size_upload: u64,
    /// `maxConcurrentUpload`: uploads one account may have running at once.
    pub max_concurrent_upload: usize,
    /// `maxSizeRequest`: largest API request body, in bytes.
    pub max_size_request: usize,
    /// `maxConcurrentRequests`: API requests one account may have
    /// running at once.
    pub max_concurrent_requests: usize,
    /// `maxCallsInRequest`: method calls in one request.
    pub max_calls_in_request: usize,
    /// `maxObjectsInGet`: ids one /get may ask for.
    pub max_objects_in_get: usize,
    /// `maxObjectsInSet`: creations, updates and destructions one /set
    /// may ask for, together.
    pub max_objects_in_set: usize,
    /// How long an upload is kept when nothing uses it, in seconds (RFC
    /// 8620 §6.1 asks for at least an hour).
    pub upload_lifetime_secs: u64,
}

impl Default for JmapConfig {
    fn default() -> Self {
        JmapConfig {
            enabled: true,
            max_size_upload: 50_000_000,
            max_concurrent_upload: 4,
            max_size_request: 10_000_000,
            max_concurrent_requests: 4,
            max_calls_in_request: 16,
            max_objects_in_get: 500,
            max_objects_in_set: 500,
            upload_lifetime_secs: 24 * 3600,
        }
    }
}
