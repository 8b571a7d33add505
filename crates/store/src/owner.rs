//! Who a row belongs to, in the tables that hold both per-account rows and
//! global ones (Sieve scripts, spam models): the `account_id` column, with
//! the global rows under account 0, an id no account has (row ids start
//! at 1). Both back ends write the same values.

use crate::model::{AccountId, ScriptOwner};

/// The account column's value for a Sieve script: global scripts live
/// under account 0.
pub(crate) fn script_owner_id(owner: ScriptOwner) -> AccountId {
    match owner {
        ScriptOwner::Account(id) => id,
        ScriptOwner::Global => 0,
    }
}

/// The account column's value for a spam model: the global model
/// (`None`) lives under account 0.
pub(crate) fn spam_owner_id(account: Option<AccountId>) -> AccountId {
    account.unwrap_or(0)
}
