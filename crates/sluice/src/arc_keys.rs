//! ARC sealing keys for the SMTP server: a local domain seals the mail it
//! forwards with the DKIM key it signs with (`sluice dkim`), so one key
//! and one DNS record serve both.

use std::sync::Arc;

use store::Store;

/// The signing DKIM keys of the store, as sealing keys.
pub struct StoreSealingKeys {
    pub store: Arc<dyn Store>,
}

#[async_trait::async_trait]
impl smtp::SealingKeys for StoreSealingKeys {
    async fn sealing_key(&self, domain: &str) -> Option<smtp::SealingKey> {
        let keys = match self.store.dkim_keys().await {
            Ok(keys) => keys,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the DKIM keys for an ARC seal");
                return None;
            }
        };
        // The domain itself, else its closest parent with a key; RSA before
        // Ed25519, which fewer ARC verifiers know.
        let mut name = domain;
        loop {
            let key = keys
                .iter()
                .filter(|k| k.signing && k.domain == name)
                .min_by_key(|k| k.algorithm != "rsa-sha256");
            if let Some(key) = key {
                return match sluice_outbound::dkim::load(key) {
                    Ok(private) => Some(smtp::SealingKey {
                        domain: key.domain.clone(),
                        selector: key.selector.clone(),
                        key: private,
                    }),
                    Err(e) => {
                        tracing::warn!(domain = %key.domain, selector = %key.selector, error = %e, "DKIM key unusable for ARC");
                        None
                    }
                };
            }
            match name.split_once('.') {
                Some((_, parent)) if parent.contains('.') => name = parent,
                _ => return None,
            }
        }
    }
}
