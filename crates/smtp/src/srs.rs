//! The Sender Rewriting Scheme, so forwarded mail passes SPF at the next
//! hop: a message from `alice@origin.example` forwarded by an alias goes
//! out from `SRS0=HHHHHH=TT=origin.example=alice@OUR.DOMAIN`, an address
//! of ours; a bounce to it comes back here, is checked and is sent on to
//! `alice@origin.example`.
//!
//! `HHHHHH` is an HMAC-SHA256 of the timestamp, domain and local part
//! under a secret kept in the data directory (hex, so case changes on the
//! way cannot break it), `TT` the day number in base 32. Addresses older
//! than [`MAX_AGE_DAYS`] or with a wrong hash are refused: nobody can use
//! us to relay to an address of their choosing.

use ring::hmac;

/// How long a rewritten address is accepted back, in days.
pub const MAX_AGE_DAYS: u32 = 21;

/// Hex digits of the hash kept in the address.
const HASH_LEN: usize = 6;

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The rewriting key and our domain.
pub struct Srs {
    key: hmac::Key,
    domain: String,
}

/// Why an SRS address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SrsError {
    /// Not of the SRS0 form.
    #[error("not an SRS address")]
    Malformed,
    /// The hash does not match: forged or damaged.
    #[error("SRS address with a wrong hash")]
    BadHash,
    /// Older than the time bounces are accepted.
    #[error("SRS address has expired")]
    Expired,
}

fn day_stamp(day: u32) -> String {
    let d = day % 1024;
    [
        BASE32[(d >> 5) as usize] as char,
        BASE32[(d & 31) as usize] as char,
    ]
    .iter()
    .collect()
}

fn stamp_day(stamp: &str) -> Option<u32> {
    let b = stamp.as_bytes();
    if b.len() != 2 {
        return None;
    }
    let v = |c: u8| {
        BASE32
            .iter()
            .position(|&x| x == c.to_ascii_lowercase())
            .map(|p| p as u32)
    };
    Some(v(b[0])? << 5 | v(b[1])?)
}

impl Srs {
    /// Rewrites under `secret` to addresses at `domain`.
    pub fn new(secret: &[u8], domain: &str) -> Srs {
        Srs {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
            domain: domain.trim_end_matches('.').to_ascii_lowercase(),
        }
    }

    /// The domain rewritten addresses are at.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    fn hash(&self, stamp: &str, domain: &str, local: &str) -> String {
        let msg = format!(
            "{}={}={}",
            stamp.to_ascii_lowercase(),
            domain.to_ascii_lowercase(),
            local
        );
        let tag = hmac::sign(&self.key, msg.as_bytes());
        hex::encode(tag.as_ref())[..HASH_LEN].to_string()
    }

    /// The address to send forwarded mail from `sender` with, on day
    /// `day` (days since 1970).
    pub fn forward(&self, sender: &str, day: u32) -> String {
        let Some((local, domain)) = sender.rsplit_once('@') else {
            return sender.to_string();
        };
        let stamp = day_stamp(day);
        let hash = self.hash(&stamp, domain, local);
        format!("SRS0={hash}={stamp}={domain}={local}@{}", self.domain)
    }

    /// Whether `address` looks like one of our SRS addresses (SRS0 at our
    /// domain), to be checked with [`Srs::reverse`].
    pub fn is_srs(&self, address: &str) -> bool {
        address.rsplit_once('@').is_some_and(|(local, domain)| {
            local.len() > 5
                && local
                    .get(..5)
                    .is_some_and(|p| p.eq_ignore_ascii_case("SRS0="))
                && domain
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(&self.domain)
        })
    }

    /// The original sender of an SRS address, on day `day`.
    pub fn reverse(&self, address: &str, day: u32) -> Result<String, SrsError> {
        if !self.is_srs(address) {
            return Err(SrsError::Malformed);
        }
        let (local, _) = address.rsplit_once('@').ok_or(SrsError::Malformed)?;
        let mut parts = local[5..].splitn(4, '=');
        let (Some(hash), Some(stamp), Some(domain), Some(orig)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(SrsError::Malformed);
        };
        if domain.is_empty() || orig.is_empty() {
            return Err(SrsError::Malformed);
        }
        let expected = self.hash(stamp, domain, orig);
        if !hash.eq_ignore_ascii_case(&expected) {
            return Err(SrsError::BadHash);
        }
        let then = stamp_day(stamp).ok_or(SrsError::Malformed)?;
        let age = (day % 1024 + 1024 - then) % 1024;
        if age > MAX_AGE_DAYS {
            return Err(SrsError::Expired);
        }
        Ok(format!("{orig}@{domain}"))
    }
}

/// Days since 1970 now.
pub fn today() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| (d.as_secs() / 86400) as u32)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn srs() -> Srs {
        Srs::new(b"a secret of thirty-two bytes!!!!", "Example.ORG")
    }

    #[test]
    fn an_address_goes_out_and_comes_back() {
        let s = srs();
        let out = s.forward("alice@origin.test", 20000);
        assert!(
            out.starts_with("SRS0=") && out.ends_with("=origin.test=alice@example.org"),
            "{out}"
        );
        assert!(s.is_srs(&out));
        assert_eq!(s.reverse(&out, 20000).unwrap(), "alice@origin.test");
        // Case changes on the way do not matter.
        let upper = out.to_uppercase().replace("ALICE", "alice");
        assert_eq!(
            s.reverse(&upper, 20005).unwrap().to_lowercase(),
            "alice@origin.test"
        );
    }

    #[test]
    fn forged_expired_and_malformed_addresses_are_refused() {
        let s = srs();
        let out = s.forward("alice@origin.test", 20000);
        let forged = out.replace("alice", "mallory");
        assert_eq!(s.reverse(&forged, 20000), Err(SrsError::BadHash));
        assert_eq!(
            s.reverse(&out, 20000 + MAX_AGE_DAYS + 1),
            Err(SrsError::Expired)
        );
        assert_eq!(
            s.reverse("SRS0=abc@example.org", 20000),
            Err(SrsError::Malformed)
        );
        assert_eq!(
            s.reverse("bob@example.org", 20000),
            Err(SrsError::Malformed)
        );
        let other = Srs::new(b"another secret entirely.........", "example.org");
        assert_eq!(other.reverse(&out, 20000), Err(SrsError::BadHash));
        // Day numbers wrap every 1,024 days.
        let late = s.forward("alice@origin.test", 1023);
        assert_eq!(s.reverse(&late, 1025).unwrap(), "alice@origin.test");
    }

    proptest! {
        #[test]
        fn reverse_never_panics(s in "\\PC{0,80}") {
            let _ = srs().reverse(&s, 20000);
            let _ = srs().reverse(&format!("SRS0={s}@example.org"), 20000);
        }

        #[test]
        fn every_sender_round_trips(local in "[a-zA-Z0-9._+=-]{1,30}", domain in "[a-z0-9-]{1,20}\\.[a-z]{2,6}", day in 0u32..100_000) {
            let s = srs();
            let out = s.forward(&format!("{local}@{domain}"), day);
            prop_assert_eq!(s.reverse(&out, day).unwrap(), format!("{local}@{domain}"));
        }
    }
}
