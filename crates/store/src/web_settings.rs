//! Webmail settings as both back ends accept them.

/// Largest page size a user may choose.
pub(crate) const MAX_PAGE_SIZE: u32 = 500;
