//! Where sending identities (RFC 8621 §6) live among the per-account
//! records: their kind and the id of the one made for each of the
//! account's addresses. JMAP and the webmail both read and write them, so
//! a signature set in one shows in the other.

/// The kind the per-account records keep identities under.
pub const IDENTITY_KIND: &str = "Identity";

/// The record id of the identity made for one of the account's addresses:
/// a 64-bit FNV-1a hash of it (case-insensitive), so that two requests
/// making it at once write the same record.
pub fn identity_record_id(address: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in address.to_ascii_lowercase().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("d{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_are_stable_and_case_insensitive() {
        assert_eq!(
            identity_record_id("ann@example.org"),
            identity_record_id("ANN@example.org")
        );
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(identity_record_id(""), "dcbf29ce484222325");
        assert_ne!(
            identity_record_id("ann@example.org"),
            identity_record_id("bob@example.org")
        );
    }
}
