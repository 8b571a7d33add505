//! VacationResponse/get and /set (RFC 8621 §8) on the account's Sieve
//! vacation (RFC 5230): the answer the webmail's Filters page writes into
//! its `webmail` script, so JMAP, the webmail and ManageSieve see one
//! setting and delivery runs it.
//!
//! The singleton is enabled when that script is the active one and its
//! vacation is on. Setting it rewrites the script (its rules kept) and
//! activates it when no script is active; a hand-written `webmail`
//! script, or another active script, is not overwritten (`forbidden`).
//! Dates (`fromDate`, `toDate`) and an HTML body are not offered: they
//! may only be null.

use serde_json::{json, Map, Value};
use store::ScriptOwner;
use web::rules::{self, ReadBack, RuleSet};

use super::args::Args;
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

/// The one VacationResponse's id (§8).
const ID: &str = "singleton";
/// The most scripts an account keeps (the webmail's limit too).
const MAX_SCRIPTS: usize = 32;

const PROPERTIES: &[&str] = &[
    "id",
    "isEnabled",
    "fromDate",
    "toDate",
    "subject",
    "textBody",
    "htmlBody",
];

/// The account's vacation as stored.
struct Stored {
    /// The `webmail` script, if there is one.
    source: Option<String>,
    /// The active script's name.
    active: Option<String>,
    /// How many scripts the account has.
    scripts: usize,
}

impl Stored {
    async fn load(call: &Call<'_>) -> Result<Stored, MethodError> {
        Ok(Stored::of(call.jmap.ctx.store.as_ref(), call.user.account).await?)
    }

    async fn of(
        store: &dyn store::Store,
        account: store::AccountId,
    ) -> Result<Stored, store::StoreError> {
        let owner = ScriptOwner::Account(account);
        let list = store.sieve_scripts(owner).await?;
        let source = store.sieve_script(owner, rules::SCRIPT_NAME).await?;
        Ok(Stored {
            source,
            active: list.iter().find(|s| s.active).map(|s| s.name.clone()),
            scripts: list.len(),
        })
    }

    /// The rules and vacation of the script, if the Filters page wrote it
    /// and nobody changed it since.
    fn rules(&self) -> Option<RuleSet> {
        match self.source.as_deref().map(rules::from_sieve) {
            None => Some(RuleSet::default()),
            Some(ReadBack::Rules(set)) => Some(set),
            Some(ReadBack::Edited(_) | ReadBack::Foreign) => None,
        }
    }

    fn enabled(&self) -> bool {
        self.active.as_deref() == Some(rules::SCRIPT_NAME)
            && self.rules().is_some_and(|s| s.vacation.enabled)
    }

    /// The state: a hash of what the object is made from (FNV-1a).
    fn state(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let text = format!(
            "{}\n{}",
            self.active.as_deref().unwrap_or(""),
            self.source.as_deref().unwrap_or("")
        );
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("v{h:016x}")
    }

    fn object(&self, properties: &[String]) -> Value {
        let v = self.rules().unwrap_or_default().vacation;
        let mut o = Map::new();
        for p in properties {
            let value = match p.as_str() {
                "id" => ID.into(),
                "isEnabled" => self.enabled().into(),
                "subject" if !v.subject.is_empty() => v.subject.clone().into(),
                "textBody" if !v.text.is_empty() => v.text.clone().into(),
                _ => Value::Null,
            };
            o.insert(p.clone(), value);
        }
        Value::Object(o)
    }
}

/// The VacationResponse state of `account`, for push (RFC 8620 §7.1).
pub(crate) async fn state_of(
    store: &dyn store::Store,
    account: store::AccountId,
) -> Result<String, store::StoreError> {
    Ok(Stored::of(store, account).await?.state())
}

/// VacationResponse/get (§8.1).
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ids", "properties"])?;
    let (wanted, mut properties) = super::args::get_args(
        &args,
        call.jmap.ctx.config.max_objects_in_get,
        PROPERTIES,
        PROPERTIES,
    )?;
    if !properties.iter().any(|p| p == "id") {
        properties.insert(0, "id".into());
    }
    let stored = Stored::load(call).await?;
    let (list, not_found): (Vec<Value>, Vec<String>) = match wanted {
        None => (vec![stored.object(&properties)], vec![]),
        Some(ids) => {
            let (found, missing): (Vec<String>, Vec<String>) =
                ids.into_iter().partition(|i| i == ID);
            let list = if found.is_empty() {
                vec![]
            } else {
                vec![stored.object(&properties)]
            };
            (list, missing)
        }
    };
    Ok(vec![(
        "VacationResponse/get".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "state": stored.state(),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

/// Applies a patch to the rule set's vacation; `true` when it turns the
/// answer on.
fn apply(patch: &Map<String, Value>, set: &mut RuleSet) -> Result<bool, SetError> {
    let mut enable = None;
    for (k, v) in patch {
        match (k.as_str(), v) {
            ("isEnabled", Value::Bool(b)) => enable = Some(*b),
            ("subject", Value::Null) => set.vacation.subject.clear(),
            ("subject", Value::String(s)) => set.vacation.subject = s.clone(),
            ("textBody", Value::Null) => set.vacation.text.clear(),
            // The webmail keeps line breaks as LF; the script writes CRLF.
            ("textBody", Value::String(s)) => set.vacation.text = s.replace("\r\n", "\n"),
            ("fromDate" | "toDate" | "htmlBody", Value::Null) => {}
            ("fromDate" | "toDate" | "htmlBody", _) => {
                return Err(SetError::invalid_properties(
                    &[k.as_str()],
                    "not supported: only null",
                ))
            }
            ("id", _) => return Err(SetError::invalid_properties(&["id"], "immutable")),
            (p, _) if PROPERTIES.contains(&p) => {
                return Err(SetError::invalid_properties(&[p], "wrong type"))
            }
            (p, _) => return Err(SetError::invalid_properties(&[p], "unknown property")),
        }
    }
    if let Some(e) = enable {
        set.vacation.enabled = e;
    }
    Ok(set.vacation.enabled)
}

/// Writes the vacation of `patch` into the script.
async fn update(
    call: &Call<'_>,
    stored: &Stored,
    patch: &Map<String, Value>,
) -> Result<(), SetError> {
    let mut set = stored.rules().ok_or_else(|| {
        SetError::new(
            "forbidden",
            "the webmail script was edited by hand; change its vacation in the script",
        )
    })?;
    let on = apply(patch, &mut set)?;
    let other_active = stored
        .active
        .as_deref()
        .is_some_and(|a| a != rules::SCRIPT_NAME);
    if on && other_active {
        return Err(SetError::new(
            "forbidden",
            "another Sieve script is active; add the vacation to it",
        ));
    }
    if on && set.vacation.text.trim().is_empty() {
        return Err(SetError::invalid_properties(
            &["textBody"],
            "an enabled answer needs a text",
        ));
    }
    set.check()
        .map_err(|e| SetError::invalid_properties(&[], e.0))?;
    if stored.source.is_none() && stored.scripts >= MAX_SCRIPTS {
        return Err(SetError::new(
            "overQuota",
            format!("the account has {MAX_SCRIPTS} Sieve scripts already"),
        ));
    }
    let script = rules::to_sieve(&set);
    if let Err(e) = sieve::compile(&script) {
        tracing::error!(error = %e, account = call.user.account, "generated sieve script does not compile");
        return Err(SetError::new("serverFail", "the script could not be made"));
    }
    let store = &call.jmap.ctx.store;
    let owner = ScriptOwner::Account(call.user.account);
    store
        .put_sieve_script(owner, rules::SCRIPT_NAME, &script)
        .await?;
    if on && stored.active.is_none() {
        store
            .activate_sieve_script(call.user.account, Some(rules::SCRIPT_NAME))
            .await?;
    }
    tracing::info!(address = %call.user.address, vacation = on, "vacation set over JMAP");
    Ok(())
}

/// VacationResponse/set (§8.2): only an update of the singleton.
pub(super) async fn set(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ifInState", "create", "update", "destroy"])?;
    let stored = Stored::load(call).await?;
    let old = stored.state();
    if let Some(s) = args.str("ifInState")? {
        if s != old {
            return Err(MethodError::state_mismatch());
        }
    }
    let mut not_created = Map::new();
    for cid in args.object("create")?.into_iter().flat_map(|c| c.keys()) {
        not_created.insert(
            cid.clone(),
            SetError::new("singleton", "there is one VacationResponse").to_json(),
        );
    }
    let mut not_destroyed = Map::new();
    for id in args.strings("destroy")?.unwrap_or_default() {
        not_destroyed.insert(
            id,
            SetError::new("singleton", "there is one VacationResponse").to_json(),
        );
    }
    let mut updated = Map::new();
    let mut not_updated = Map::new();
    for (id, patch) in args.object("update")?.cloned().unwrap_or_default() {
        let result = match (&patch, id == ID) {
            (_, false) => Err(SetError::not_found()),
            (Value::Object(p), true) => update(call, &stored, p).await,
            _ => Err(SetError::invalid_properties(&[], "a patch is an object")),
        };
        match result {
            Ok(()) => {
                updated.insert(id, Value::Null);
            }
            Err(e) => {
                not_updated.insert(id, e.to_json());
            }
        }
    }
    let new = Stored::load(call).await?.state();
    if new != old {
        call.jmap.ctx.push.notify(call.user.account);
    }
    Ok(vec![(
        "VacationResponse/set".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "oldState": old,
            "newState": new,
            "created": {},
            "updated": updated,
            "destroyed": [],
            "notCreated": not_created,
            "notUpdated": not_updated,
            "notDestroyed": not_destroyed,
        }),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_map_onto_the_sieve_vacation() {
        let mut set = RuleSet::default();
        let on = apply(
            json!({"isEnabled": true, "subject": "Away", "textBody": "Back\r\nsoon", "toDate": null})
                .as_object()
                .unwrap(),
            &mut set,
        )
        .unwrap();
        assert!(on);
        assert_eq!(set.vacation.text, "Back\nsoon");
        assert_eq!(set.vacation.subject, "Away");
        for bad in [
            json!({"fromDate": "2024-01-01T00:00:00Z"}),
            json!({"htmlBody": "<p>x</p>"}),
            json!({"isEnabled": "yes"}),
            json!({"colour": 1}),
        ] {
            assert!(apply(bad.as_object().unwrap(), &mut set).is_err(), "{bad}");
        }
    }
}
