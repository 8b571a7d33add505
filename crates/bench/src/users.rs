//! The accounts a workload sends to or logs in as: read from a file
//! (postal/rabid style, one `address [password]` a line) or generated as
//! `PREFIX1@DOMAIN` … `PREFIXn@DOMAIN`.

use std::path::PathBuf;

use crate::error::BenchError;

/// Command-line options naming the accounts.
#[derive(Debug, Clone, clap::Args)]
pub struct UserArgs {
    /// File of accounts, one `address [password]` per line; `#` starts a
    /// comment. Without it, accounts are generated from the options below.
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// Domain of generated accounts.
    #[arg(long, default_value = "example.org")]
    pub domain: String,
    /// Number of generated accounts.
    #[arg(long, default_value_t = 10)]
    pub user_count: usize,
    /// Local-part prefix of generated accounts (`user1`, `user2`, …).
    #[arg(long, default_value = "user")]
    pub user_prefix: String,
    /// Password for accounts that do not name one.
    #[arg(long, default_value = "password")]
    pub password: String,
}

/// One account.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    /// The mail address, also the login name.
    pub address: String,
    /// The password.
    pub password: String,
}

impl UserArgs {
    /// The accounts these options name (at least one).
    pub fn accounts(&self) -> Result<Vec<Account>, BenchError> {
        let accounts = match &self.users {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    BenchError::Invalid(format!("user list {}: {e}", path.display()))
                })?;
                parse_list(&text, &self.password)
            }
            None => (1..=self.user_count)
                .map(|i| Account {
                    address: format!("{}{i}@{}", self.user_prefix, self.domain),
                    password: self.password.clone(),
                })
                .collect(),
        };
        if accounts.is_empty() {
            return Err(BenchError::Invalid("no accounts to use".into()));
        }
        Ok(accounts)
    }

    /// The domain of the accounts (for unknown-recipient addresses).
    pub fn domain_of(accounts: &[Account]) -> String {
        accounts[0]
            .address
            .rsplit_once('@')
            .map(|(_, d)| d.to_string())
            .unwrap_or_else(|| "localhost".into())
    }
}

fn parse_list(text: &str, default_password: &str) -> Vec<Account> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut parts = l.split_whitespace();
            let address = parts.next().unwrap_or_default().to_string();
            let password = parts.next().unwrap_or(default_password).to_string();
            Account { address, password }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_user_list() {
        let list = parse_list("a@x.org pw1\n# comment\n\n  b@x.org  \n", "dflt");
        assert_eq!(
            list,
            vec![
                Account {
                    address: "a@x.org".into(),
                    password: "pw1".into()
                },
                Account {
                    address: "b@x.org".into(),
                    password: "dflt".into()
                },
            ]
        );
    }

    #[test]
    fn generates_accounts() {
        let args = UserArgs {
            users: None,
            domain: "d.test".into(),
            user_count: 3,
            user_prefix: "u".into(),
            password: "p".into(),
        };
        let accounts = args.accounts().unwrap();
        assert_eq!(accounts.len(), 3);
        assert_eq!(accounts[2].address, "u3@d.test");
        assert_eq!(UserArgs::domain_of(&accounts), "d.test");
    }
}
