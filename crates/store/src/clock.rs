//! The wall clock as the store records it: whole seconds since the Unix
//! epoch, the unit of every time column in both back ends (creation
//! times, internal dates, queue times, the Sieve filter's memory).

/// Now, in seconds since the Unix epoch; 0 on a clock set before 1970,
/// rather than a failure nothing could act on.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
