//! Password hashing with argon2id (RFC 9106), stored as PHC strings.

use argon2::password_hash::{rand_core::OsRng, PasswordHash, SaltString};
use argon2::{Argon2, PasswordHasher, PasswordVerifier};

use crate::error::{Result, StoreError};

/// Hashes a password with argon2id and a random salt. The parameters are
/// the argon2 crate's defaults (19 MiB, 2 passes), OWASP's recommendation.
pub fn hash_password(password: &str) -> Result<String> {
    if password.is_empty() {
        return Err(StoreError::Invalid("password must not be empty".into()));
    }
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| StoreError::Invalid(format!("cannot hash password: {e}")))
}

/// Checks a password against a stored PHC hash. A malformed hash never
/// matches.
pub fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(hash) => Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash_password("secret").unwrap();
        let b = hash_password("secret").unwrap();
        assert!(a.starts_with("$argon2id$"));
        assert_ne!(a, b);
        assert!(verify_password("secret", &a));
        assert!(!verify_password("Secret", &a));
        assert!(!verify_password("secret", "not a hash"));
        assert!(hash_password("").is_err());
    }
}
