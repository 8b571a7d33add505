//! The Filters pages: a rule editor that writes the Sieve script
//! [`rules::SCRIPT_NAME`] (and the vacation answer), and an editor of the
//! account's raw Sieve scripts (list, edit, create, activate, delete).
//!
//! Every script is compiled before it is stored: a script that does not
//! compile is never saved, and the page says where it is wrong. Delivery
//! runs the account's active script (it sees a change within the
//! directory's poll interval).
//!
//! `GET|POST /settings/filters` (rules), `GET|POST /settings/filters/scripts`
//! (the list: activate, deactivate, delete), `GET|POST
//! /settings/filters/script?name=` (one script's editor; no name: new).

use std::sync::Arc;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use store::{ScriptOwner, SieveScriptInfo, StoreError};

use crate::error::WebError;
use crate::pages::{self, Chrome, FiltersView, RuleForm, ScriptView, ScriptsView, VacationForm};
use crate::routes::{self, App};
use crate::rules::{self, Action, Field, Invalid, ReadBack, Rule, RuleSet, Test, Vacation};
use crate::session::{self, User};

/// Largest script stored, in bytes.
pub(crate) const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// Most scripts an account keeps.
pub(crate) const MAX_SCRIPTS: usize = 32;
/// Longest script name, in characters (the store allows more; names are
/// for people).
const MAX_NAME: usize = 100;
/// Largest script form accepted: a script at the size limit, percent
/// encoded, and the other fields.
pub(crate) const MAX_SCRIPT_FORM: usize = 4 * MAX_SCRIPT_BYTES;

type Fields = Vec<(String, String)>;

fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Line breaks as `\n`, whatever the browser sent.
fn unix_lines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// The page around the content, shared by the filter pages.
struct Frame {
    folders: Vec<pages::Folder>,
    names: Vec<String>,
}

async fn frame(app: &App, user: &User) -> Result<Frame, WebError> {
    let boxes = routes::mailboxes(app, user).await?;
    let folders = routes::folder_list(&boxes);
    Ok(Frame {
        names: boxes.iter().map(|b| b.name.clone()).collect(),
        folders,
    })
}

fn chrome<'a>(user: &'a User, f: &'a Frame) -> Chrome<'a> {
    Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &f.folders,
        current: None,
        view: "filters",
        query: "",
        since: None,
    }
}

fn with_status(status: StatusCode, page: axum::response::Html<String>) -> Response {
    (status, page).into_response()
}

// ---- the rule editor --------------------------------------------------------

/// The account's scripts and the rule editor's script, as stored now.
struct Stored {
    scripts: Vec<SieveScriptInfo>,
    source: Option<String>,
    /// The account's own spam threshold (`None`: the site's).
    spam_threshold: Option<f32>,
}

impl Stored {
    async fn load(app: &App, user: &User) -> Result<Stored, WebError> {
        let owner = ScriptOwner::Account(user.account);
        let scripts = app.ctx.store.sieve_scripts(owner).await?;
        let source = app
            .ctx
            .store
            .sieve_script(owner, rules::SCRIPT_NAME)
            .await?;
        let spam_threshold = app
            .ctx
            .directory
            .get()
            .account(&user.address)
            .and_then(|a| a.spam_threshold);
        Ok(Stored {
            scripts,
            source,
            spam_threshold,
        })
    }

    fn active(&self) -> Option<&str> {
        self.scripts
            .iter()
            .find(|s| s.active)
            .map(|s| s.name.as_str())
    }

    fn read_back(&self) -> Option<ReadBack> {
        self.source.as_deref().map(rules::from_sieve)
    }

    fn rules(&self) -> RuleSet {
        match self.read_back() {
            Some(ReadBack::Rules(s) | ReadBack::Edited(s)) => s,
            Some(ReadBack::Foreign) | None => RuleSet::default(),
        }
    }

    /// Names the stored version, so a form made from an older one is
    /// refused instead of acting on rules the user did not see.
    fn revision(&self) -> String {
        match &self.source {
            None => "none".into(),
            Some(s) => hex::encode(&Sha256::digest(s.as_bytes())[..8]),
        }
    }
}

/// What the rule form shows for a rule.
fn form_of(rule: &Rule) -> RuleForm {
    let mut f = RuleForm::default();
    let (field, header) = match &rule.field {
        Field::From => ("from", String::new()),
        Field::To => ("to", String::new()),
        Field::Subject => ("subject", String::new()),
        Field::Header(h) => ("header", h.clone()),
    };
    f.field = field.into();
    f.header = header;
    f.test = match rule.test {
        Test::Contains => "contains",
        Test::Is => "is",
        Test::Matches => "matches",
        Test::NotContains => "not_contains",
    }
    .into();
    f.value = rule.value.clone();
    match &rule.action {
        Action::Move { folder, create } => {
            f.action = "move".into();
            f.folder = folder.clone();
            f.create = *create;
        }
        Action::MarkRead => f.action = "mark_read".into(),
        Action::Flag => f.action = "flag".into(),
        Action::Forward { address, keep } => {
            f.action = "forward".into();
            f.address = address.clone();
            f.keep = *keep;
        }
        Action::Discard => f.action = "discard".into(),
        Action::Reject { text } => {
            f.action = "reject".into();
            f.reject_text = text.clone();
        }
    }
    f
}

/// The rule form as posted.
fn posted_form(fields: &Fields) -> RuleForm {
    let get = |n: &str| field(fields, n).unwrap_or("").to_string();
    RuleForm {
        field: get("field"),
        header: get("header").trim().to_string(),
        test: get("test"),
        value: get("value").trim().to_string(),
        action: get("action"),
        folder: get("folder"),
        new_folder: get("new_folder").trim().to_string(),
        create: field(fields, "create").is_some(),
        address: get("address").trim().to_string(),
        keep: field(fields, "keep").is_some(),
        reject_text: unix_lines(&get("reject_text")),
    }
}

/// The rule a form describes, checked.
fn rule_of(f: &RuleForm) -> Result<Rule, Invalid> {
    let field = match f.field.as_str() {
        "from" => Field::From,
        "to" => Field::To,
        "subject" => Field::Subject,
        "header" => Field::Header(f.header.clone()),
        _ => return Err(Invalid("choose what the rule looks at".into())),
    };
    let test = match f.test.as_str() {
        "contains" => Test::Contains,
        "is" => Test::Is,
        "matches" => Test::Matches,
        "not_contains" => Test::NotContains,
        _ => return Err(Invalid("choose how the rule compares".into())),
    };
    let action = match f.action.as_str() {
        "move" => Action::Move {
            folder: if f.new_folder.is_empty() {
                f.folder.clone()
            } else {
                f.new_folder.clone()
            },
            create: f.create,
        },
        "mark_read" => Action::MarkRead,
        "flag" => Action::Flag,
        "forward" => Action::Forward {
            address: f.address.clone(),
            keep: f.keep,
        },
        "discard" => Action::Discard,
        "reject" => Action::Reject {
            text: f.reject_text.clone(),
        },
        _ => return Err(Invalid("choose what the rule does".into())),
    };
    let rule = Rule {
        field,
        test,
        value: f.value.clone(),
        action,
    };
    rule.check()?;
    Ok(rule)
}

fn vacation_form(v: &Vacation) -> VacationForm {
    VacationForm {
        enabled: v.enabled,
        subject: v.subject.clone(),
        text: v.text.clone(),
        days: v.days.to_string(),
    }
}

fn posted_vacation(fields: &Fields) -> VacationForm {
    VacationForm {
        enabled: field(fields, "vacation_enabled").is_some(),
        subject: field(fields, "vacation_subject")
            .unwrap_or("")
            .trim()
            .to_string(),
        text: unix_lines(field(fields, "vacation_text").unwrap_or("")),
        days: field(fields, "vacation_days")
            .unwrap_or("")
            .trim()
            .to_string(),
    }
}

fn vacation_of(f: &VacationForm) -> Result<Vacation, Invalid> {
    let days = f.days.parse().map_err(|_| {
        Invalid(format!(
            "the days between answers must be a number from 1 to {}",
            rules::MAX_DAYS
        ))
    })?;
    let v = Vacation {
        enabled: f.enabled,
        subject: f.subject.clone(),
        text: f.text.clone(),
        days,
    };
    v.check()?;
    Ok(v)
}

/// A rule in words, for the list.
fn describe(rule: &Rule) -> String {
    let field = match &rule.field {
        Field::From => "From".to_string(),
        Field::To => "To".to_string(),
        Field::Subject => "Subject".to_string(),
        Field::Header(h) => format!("header {h}"),
    };
    let test = match rule.test {
        Test::Contains => "contains",
        Test::Is => "is",
        Test::Matches => "matches",
        Test::NotContains => "does not contain",
    };
    let action = match &rule.action {
        Action::Move { folder, create } => format!(
            "move to “{folder}”{}",
            if *create { " (created if missing)" } else { "" }
        ),
        Action::MarkRead => "mark as read".into(),
        Action::Flag => "flag".into(),
        Action::Forward { address, keep } => format!(
            "forward to {address}{}",
            if *keep {
                " and keep a copy"
            } else {
                " (no copy kept)"
            }
        ),
        Action::Discard => "discard".into(),
        Action::Reject { text } => format!("reject with “{}”", text.replace('\n', " ")),
    };
    format!("If {field} {test} “{}”: {action}", rule.value)
}

/// What the rule editor shows besides the stored rules: the rule being
/// edited, forms as the user filled them, and what went wrong.
#[derive(Default)]
struct Shown {
    edit: Option<usize>,
    form: Option<RuleForm>,
    vacation: Option<VacationForm>,
    error: Option<String>,
}

/// Renders the rule editor.
fn rules_view(
    user: &User,
    frame: &Frame,
    stored: &Stored,
    set: &RuleSet,
    shown: Shown,
) -> axum::response::Html<String> {
    let Shown {
        edit,
        form,
        vacation,
        error,
    } = shown;
    let form = form.unwrap_or_else(|| match edit.and_then(|i| set.rules.get(i)) {
        Some(r) => form_of(r),
        None => RuleForm::default(),
    });
    let edited = match stored.read_back() {
        Some(ReadBack::Edited(_)) => Some(
            "The script “webmail” was changed in the script editor since these rules wrote it: \
             saving here replaces those changes with the rules below.",
        ),
        Some(ReadBack::Foreign) => Some(
            "The script “webmail” was not written by this page: saving here replaces it \
             with the rules below.",
        ),
        _ => None,
    };
    let view = FiltersView {
        rules: set.rules.iter().map(describe).collect(),
        vacation: vacation.unwrap_or_else(|| vacation_form(&set.vacation)),
        form,
        editing: edit.filter(|i| *i < set.rules.len()),
        mailboxes: frame.names.clone(),
        revision: stored.revision(),
        other_active: stored
            .active()
            .filter(|a| *a != rules::SCRIPT_NAME)
            .map(str::to_string),
        none_active: stored.active().is_none() && stored.source.is_some(),
        spam_threshold: stored.spam_threshold,
        edited,
        error,
    };
    pages::filters(&chrome(user, frame), &view)
}

#[derive(Deserialize)]
pub(crate) struct RulesQuery {
    edit: Option<usize>,
}

/// `GET /settings/filters`: the rules, the form to add one (or edit one
/// with `?edit=N`) and the vacation answer.
pub(crate) async fn rules_page(
    State(app): State<Arc<App>>,
    user: User,
    Query(q): Query<RulesQuery>,
) -> Result<Response, WebError> {
    let stored = Stored::load(&app, &user).await?;
    let frame = frame(&app, &user).await?;
    let set = stored.rules();
    Ok(rules_view(
        &user,
        &frame,
        &stored,
        &set,
        Shown {
            edit: q.edit,
            ..Shown::default()
        },
    )
    .into_response())
}

/// `POST /settings/filters/spam`: the account's spam threshold (the
/// score from which delivery files mail to Junk); empty for the site's.
pub(crate) async fn spam_save(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(field(&fields, "csrf"))?;
    let posted = field(&fields, "threshold").unwrap_or("").trim();
    let threshold = if posted.is_empty() {
        None
    } else {
        let t: f32 = posted
            .parse()
            .ok()
            .filter(|t: &f32| t.is_finite() && (-100.0..=1000.0).contains(t))
            .ok_or_else(|| WebError::BadRequest(format!("not a spam score: {posted:?}")))?;
        Some(t)
    };
    app.ctx
        .store
        .set_spam_threshold(&user.address, threshold)
        .await?;
    tracing::info!(account = %user.address, threshold = ?threshold, "spam threshold set");
    Ok(Redirect::to("/settings/filters").into_response())
}

/// Why saving the rules did not happen.
enum NotSaved {
    Invalid(Invalid),
    Web(WebError),
}

impl From<WebError> for NotSaved {
    fn from(e: WebError) -> Self {
        NotSaved::Web(e)
    }
}

impl From<StoreError> for NotSaved {
    fn from(e: StoreError) -> Self {
        NotSaved::Web(e.into())
    }
}

impl From<Invalid> for NotSaved {
    fn from(e: Invalid) -> Self {
        NotSaved::Invalid(e)
    }
}

/// Writes the rules as the script and makes it active when nothing else
/// is (or when asked to replace the active one). Compiles first: a
/// generated script that does not compile is a bug, shown and not stored.
async fn store_rules(
    app: &App,
    user: &User,
    stored: &Stored,
    set: &RuleSet,
    activate: bool,
) -> Result<(), NotSaved> {
    set.check()?;
    let script = rules::to_sieve(set);
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(Invalid(format!(
            "the rules make a script larger than {} KiB; remove some rules or shorten texts",
            MAX_SCRIPT_BYTES / 1024
        ))
        .into());
    }
    if let Err(e) = sieve::compile(&script) {
        tracing::error!(error = %e, account = user.account, "generated sieve script does not compile");
        return Err(Invalid(format!(
            "the rules could not be turned into a working script (this is a bug; nothing was saved): {e}"
        ))
        .into());
    }
    let owner = ScriptOwner::Account(user.account);
    if stored.source.is_none() && stored.scripts.len() >= MAX_SCRIPTS {
        return Err(Invalid(format!(
            "you have {MAX_SCRIPTS} scripts, the most an account may keep; delete one in the script editor first"
        ))
        .into());
    }
    app.ctx
        .store
        .put_sieve_script(owner, rules::SCRIPT_NAME, &script)
        .await?;
    let active = stored.active();
    let activated = active != Some(rules::SCRIPT_NAME) && (activate || active.is_none());
    if activated {
        app.ctx
            .store
            .activate_sieve_script(user.account, Some(rules::SCRIPT_NAME))
            .await?;
    }
    tracing::info!(
        address = %user.address,
        rules = set.rules.len(),
        vacation = set.vacation.enabled,
        activated,
        "webmail filter rules saved"
    );
    Ok(())
}

/// `POST /settings/filters`: `op` is `add`, `update`, `delete`, `up`,
/// `down` (with `index`), `vacation`, or `activate`; `rev` names the
/// version the form was made from.
pub(crate) async fn rules_save(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(field(&fields, "csrf"))?;
    let stored = Stored::load(&app, &user).await?;
    let frame = frame(&app, &user).await?;
    let mut set = stored.rules();
    let op = field(&fields, "op").unwrap_or("");
    let index: Option<usize> = field(&fields, "index").and_then(|i| i.parse().ok());
    let activate = field(&fields, "activate").is_some() || op == "activate";
    let mut form = None;
    let mut vacation = None;
    let edit = if op == "update" { index } else { None };
    if field(&fields, "rev") != Some(stored.revision().as_str()) {
        let page = rules_view(
            &user,
            &frame,
            &stored,
            &set,
            Shown {
                error: Some(
                    "The rules were changed elsewhere (in another window?) since this page \
                     was shown; nothing was saved. Here they are as they are now."
                        .into(),
                ),
                ..Shown::default()
            },
        );
        return Ok(with_status(StatusCode::CONFLICT, page));
    }
    let at = |i: Option<usize>, len: usize| {
        i.filter(|i| *i < len)
            .ok_or_else(|| WebError::BadRequest("no such rule".into()))
    };
    let changed: Result<(), Invalid> = match op {
        "add" | "update" => {
            let f = posted_form(&fields);
            let rule = rule_of(&f);
            form = Some(f);
            match rule {
                Ok(rule) if op == "add" => {
                    set.rules.push(rule);
                    Ok(())
                }
                Ok(rule) => {
                    let i = at(index, set.rules.len())?;
                    set.rules[i] = rule;
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        "delete" => {
            let i = at(index, set.rules.len())?;
            set.rules.remove(i);
            Ok(())
        }
        "up" => {
            let i = at(index, set.rules.len())?;
            if i > 0 {
                set.rules.swap(i, i - 1);
            }
            Ok(())
        }
        "down" => {
            let i = at(index, set.rules.len())?;
            if i + 1 < set.rules.len() {
                set.rules.swap(i, i + 1);
            }
            Ok(())
        }
        "vacation" => {
            let f = posted_vacation(&fields);
            let v = vacation_of(&f);
            vacation = Some(f);
            v.map(|v| set.vacation = v)
        }
        "activate" => Ok(()),
        _ => return Err(WebError::BadRequest("unknown operation".into())),
    };
    let saved = match changed {
        Ok(()) => store_rules(&app, &user, &stored, &set, activate).await,
        Err(e) => Err(NotSaved::Invalid(e)),
    };
    match saved {
        Ok(()) => Ok(Redirect::to("/settings/filters").into_response()),
        Err(NotSaved::Web(e)) => Err(e),
        Err(NotSaved::Invalid(e)) => {
            // Shown as stored, with the user's input kept in its form.
            let set = stored.rules();
            let page = rules_view(
                &user,
                &frame,
                &stored,
                &set,
                Shown {
                    edit,
                    form,
                    vacation,
                    error: Some(e.0),
                },
            );
            Ok(with_status(StatusCode::UNPROCESSABLE_ENTITY, page))
        }
    }
}

// ---- the script editor --------------------------------------------------------

/// A script name people can use (the store checks again).
fn check_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() {
        return Err(Invalid("the script needs a name".into()));
    }
    if name.chars().any(char::is_control) || name.chars().count() > MAX_NAME {
        return Err(Invalid(format!(
            "a script name is up to {MAX_NAME} characters, without control characters"
        )));
    }
    Ok(())
}

async fn scripts_view(
    app: &App,
    user: &User,
    error: Option<String>,
) -> Result<axum::response::Html<String>, WebError> {
    let scripts = app
        .ctx
        .store
        .sieve_scripts(ScriptOwner::Account(user.account))
        .await?;
    let frame = frame(app, user).await?;
    Ok(pages::scripts(
        &chrome(user, &frame),
        &ScriptsView {
            scripts,
            max: MAX_SCRIPTS,
            error,
        },
    ))
}

/// `GET /settings/filters/scripts`: the account's scripts.
pub(crate) async fn scripts_page(
    State(app): State<Arc<App>>,
    user: User,
) -> Result<Response, WebError> {
    Ok(scripts_view(&app, &user, None).await?.into_response())
}

/// `POST /settings/filters/scripts`: `op` is `activate`, `deactivate` or
/// `delete`, on the script `name`.
pub(crate) async fn scripts_act(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(field(&fields, "csrf"))?;
    let name = field(&fields, "name").unwrap_or("");
    let owner = ScriptOwner::Account(user.account);
    let store = &app.ctx.store;
    let op = field(&fields, "op").unwrap_or("");
    match op {
        "activate" => {
            store
                .activate_sieve_script(user.account, Some(name))
                .await?
        }
        "deactivate" => {
            let scripts = store.sieve_scripts(owner).await?;
            if scripts.iter().any(|s| s.active && s.name == name) {
                store.activate_sieve_script(user.account, None).await?;
            }
        }
        "delete" => match store.delete_sieve_script(owner, name).await {
            Ok(()) => {}
            Err(StoreError::InUse(_)) => {
                let page = scripts_view(
                    &app,
                    &user,
                    Some(format!(
                        "“{name}” is the active script, so it was not deleted: deactivate it \
                         (or activate another) first."
                    )),
                )
                .await?;
                return Ok(with_status(StatusCode::CONFLICT, page));
            }
            Err(e) => return Err(e.into()),
        },
        _ => return Err(WebError::BadRequest("unknown operation".into())),
    }
    tracing::info!(address = %user.address, script = %name, op, "webmail sieve script changed");
    Ok(Redirect::to("/settings/filters/scripts").into_response())
}

#[derive(Deserialize)]
pub(crate) struct ScriptQuery {
    name: Option<String>,
    saved: Option<u8>,
}

/// `GET /settings/filters/script?name=`: a script in a text area; without
/// a name, an empty one to create.
pub(crate) async fn script_page(
    State(app): State<Arc<App>>,
    user: User,
    Query(q): Query<ScriptQuery>,
) -> Result<Response, WebError> {
    let frame = frame(&app, &user).await?;
    let view = match q.name {
        None => ScriptView {
            name: String::new(),
            source: String::new(),
            is_new: true,
            active: false,
            saved: false,
            error: None,
        },
        Some(name) => {
            let owner = ScriptOwner::Account(user.account);
            let source = app
                .ctx
                .store
                .sieve_script(owner, &name)
                .await?
                .ok_or(WebError::NotFound)?;
            let scripts = app.ctx.store.sieve_scripts(owner).await?;
            ScriptView {
                active: scripts.iter().any(|s| s.active && s.name == name),
                name,
                source,
                is_new: false,
                saved: q.saved == Some(1),
                error: None,
            }
        }
    };
    Ok(pages::script(&chrome(&user, &frame), &view).into_response())
}

/// `POST /settings/filters/script`: saves `source` as `name` (`new` set:
/// only if no script has that name), activating it for `op=save_activate`.
/// A script that does not compile is shown again with the error.
pub(crate) async fn script_save(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    user.check_csrf(field(&fields, "csrf"))?;
    let is_new = field(&fields, "new").is_some();
    let name = field(&fields, "name").unwrap_or("").trim().to_string();
    let source = field(&fields, "source").unwrap_or("").to_string();
    let activate = field(&fields, "op") == Some("save_activate");
    let owner = ScriptOwner::Account(user.account);
    let store = &app.ctx.store;
    let scripts = store.sieve_scripts(owner).await?;
    let exists = scripts.iter().any(|s| s.name == name);
    let checked = (|| {
        check_name(&name)?;
        if source.len() > MAX_SCRIPT_BYTES {
            return Err(Invalid(format!(
                "the script is {} bytes; the most a script may have is {} KiB",
                source.len(),
                MAX_SCRIPT_BYTES / 1024
            )));
        }
        if is_new && exists {
            return Err(Invalid(format!(
                "a script named “{name}” exists already; choose another name"
            )));
        }
        if !exists && scripts.len() >= MAX_SCRIPTS {
            return Err(Invalid(format!(
                "you have {MAX_SCRIPTS} scripts, the most an account may keep; delete one first"
            )));
        }
        sieve::compile(&source)
            .map_err(|e| Invalid(format!("Not saved: the script has an error at {e}")))?;
        Ok(())
    })();
    let stored = match checked {
        Ok(()) => match store.put_sieve_script(owner, &name, &source).await {
            Ok(()) => Ok(()),
            Err(StoreError::Invalid(why)) => Err(Invalid(why)),
            Err(e) => return Err(e.into()),
        },
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        let frame = frame(&app, &user).await?;
        let view = ScriptView {
            active: scripts.iter().any(|s| s.active && s.name == name),
            name,
            source,
            is_new,
            saved: false,
            error: Some(e.0),
        };
        return Ok(with_status(
            StatusCode::UNPROCESSABLE_ENTITY,
            pages::script(&chrome(&user, &frame), &view),
        ));
    }
    if activate {
        store
            .activate_sieve_script(user.account, Some(&name))
            .await?;
    }
    tracing::info!(
        address = %user.address,
        script = %name,
        size = source.len(),
        activated = activate,
        "webmail sieve script saved"
    );
    Ok(Redirect::to(&format!(
        "/settings/filters/script?name={}&saved=1",
        pages::urlencode(&name)
    ))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn forms_become_rules_and_back() {
        let f = posted_form(&fields(&[
            ("field", "subject"),
            ("test", "contains"),
            ("value", " [list] "),
            ("action", "move"),
            ("folder", "INBOX"),
            ("new_folder", "Lists"),
            ("create", "1"),
        ]));
        let rule = rule_of(&f).unwrap();
        assert_eq!(
            rule,
            Rule {
                field: Field::Subject,
                test: Test::Contains,
                value: "[list]".into(),
                action: Action::Move {
                    folder: "Lists".into(),
                    create: true
                },
            }
        );
        let back = form_of(&rule);
        assert_eq!(rule_of(&back).unwrap(), rule);
        assert_eq!(
            describe(&rule),
            "If Subject contains “[list]”: move to “Lists” (created if missing)"
        );

        let f = posted_form(&fields(&[
            ("field", "header"),
            ("header", "X-Spam"),
            ("test", "is"),
            ("value", "yes"),
            ("action", "reject"),
            ("reject_text", "go\r\naway"),
        ]));
        let rule = rule_of(&f).unwrap();
        assert_eq!(
            rule.action,
            Action::Reject {
                text: "go\naway".into()
            }
        );
        assert_eq!(rule_of(&form_of(&rule)).unwrap(), rule);
        assert!(rule_of(&posted_form(&fields(&[("field", "subject")]))).is_err());
    }

    #[test]
    fn vacation_forms_are_checked() {
        let f = posted_vacation(&fields(&[
            ("vacation_enabled", "1"),
            ("vacation_subject", "Away"),
            ("vacation_text", "Back\r\nsoon"),
            ("vacation_days", "3"),
        ]));
        let v = vacation_of(&f).unwrap();
        assert_eq!(v.text, "Back\nsoon");
        assert!(vacation_of(&VacationForm {
            days: "x".into(),
            ..f
        })
        .is_err());
    }

    #[test]
    fn script_names_are_checked() {
        assert!(check_name("main").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a\nb").is_err());
        assert!(check_name(&"x".repeat(101)).is_err());
    }
}
