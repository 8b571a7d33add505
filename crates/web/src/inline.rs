//! Signed links to a message's inline parts (the `cid:` pictures of HTML
//! mail). The message frame is sandboxed: its document has an opaque
//! origin, so the browser sends it no `SameSite=Strict` session cookie.
//! Rather than weaken the cookie or the sandbox, each inline part gets a
//! short-lived URL carrying an HMAC-SHA256 (RFC 2104) over the account,
//! the message, the part and the expiry, under a key that lives only in
//! the server's memory (links end with the process, as they should).

use sha2::{Digest, Sha256};
use store::{AccountId, MailboxId, Uid};

/// How long a signed link works: the frame loads its pictures at once.
pub(crate) const LIFETIME_SECS: i64 = 3600;

/// HMAC-SHA256 of `msg` under `key` (RFC 2104 §2, B = 64).
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// What a link names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InlinePart {
    pub account: AccountId,
    pub mailbox: MailboxId,
    pub uid: Uid,
    /// The leaf's number (see [`crate::read::leaves`]).
    pub part: usize,
    /// Seconds since the Unix epoch after which the link is refused.
    pub expires: i64,
}

impl InlinePart {
    fn message(&self) -> String {
        format!(
            "inline\n{}\n{}\n{}\n{}\n{}",
            self.account, self.mailbox, self.uid, self.part, self.expires
        )
    }
}

/// Makes and checks the links.
pub(crate) struct Signer {
    key: [u8; 32],
}

impl Signer {
    /// A signer with a fresh random key.
    pub(crate) fn new() -> Signer {
        Signer {
            key: rand::random(),
        }
    }

    fn sign(&self, p: &InlinePart) -> String {
        hex::encode(hmac_sha256(&self.key, p.message().as_bytes()))
    }

    /// `/inline/{account}/{mailbox}/{uid}/{part}/{expires}/{signature}`
    pub(crate) fn url(&self, p: &InlinePart) -> String {
        format!(
            "/inline/{}/{}/{}/{}/{}/{}",
            p.account,
            p.mailbox,
            p.uid,
            p.part,
            p.expires,
            self.sign(p)
        )
    }

    /// Whether `signature` is this server's for `p` and `p` has not
    /// expired at `now`.
    pub(crate) fn verify(&self, p: &InlinePart, signature: &str, now: i64) -> bool {
        if now > p.expires {
            return false;
        }
        let want = self.sign(p);
        // Compared in constant time: the signature is a secret until made.
        want.len() == signature.len()
            && want
                .bytes()
                .zip(signature.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231 §4.3, test case 2.
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // §4.7, test case 6: a key longer than the block.
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn links_are_bound_to_what_they_name_and_expire() {
        let s = Signer::new();
        let p = InlinePart {
            account: 1,
            mailbox: 2,
            uid: 3,
            part: 4,
            expires: 1000,
        };
        let sig = s.sign(&p);
        assert!(s.verify(&p, &sig, 999));
        assert!(s.verify(&p, &sig, 1000));
        assert!(!s.verify(&p, &sig, 1001), "expired");
        for other in [
            InlinePart { account: 9, ..p },
            InlinePart { mailbox: 9, ..p },
            InlinePart { uid: 9, ..p },
            InlinePart { part: 9, ..p },
            InlinePart { expires: 5000, ..p },
        ] {
            assert!(!s.verify(&other, &sig, 999), "{other:?}");
        }
        assert!(!s.verify(&p, &sig[1..], 999));
        assert!(!Signer::new().verify(&p, &sig, 999), "another key");
        assert!(s.url(&p).starts_with("/inline/1/2/3/4/1000/"));
    }
}
