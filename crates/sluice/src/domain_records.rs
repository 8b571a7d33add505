//! The DNS records a local domain needs so that mail for it reaches this
//! server, mail from it is trusted, and clients find their settings:
//! printed by `sluice domain add` and `sluice domain records`, in zone-file
//! syntax with a comment on what each is for.

use crate::config::Config;

/// One record to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Absolute owner name, with the trailing dot.
    pub name: String,
    /// `MX`, `TXT`, `CNAME`, `SRV`.
    pub kind: &'static str,
    /// The record data in zone-file form.
    pub data: String,
}

/// The records for `domain`, with `dkim` the TXT records of its DKIM keys
/// (as `sluice dkim record` prints them; empty when it has none yet).
pub fn for_domain(config: &Config, domain: &str) -> Vec<(&'static str, Vec<Record>)> {
    let host = format!("{}.", config.hostname.trim_end_matches('.'));
    let d = format!("{}.", domain.trim_end_matches('.').to_ascii_lowercase());
    let rec = |name: String, kind: &'static str, data: String| Record { name, kind, data };
    let mut groups = vec![
        (
            "Mail for the domain comes here",
            vec![rec(d.clone(), "MX", format!("10 {host}"))],
        ),
        (
            "SPF (RFC 7208): mail from the domain leaves from its MX hosts",
            vec![rec(d.clone(), "TXT", "\"v=spf1 mx ~all\"".to_string())],
        ),
        (
            "DMARC (RFC 7489): receivers quarantine mail that fails SPF and DKIM, and report to postmaster; move to p=reject once reports are clean",
            vec![rec(
                format!("_dmarc.{d}"),
                "TXT",
                format!("\"v=DMARC1; p=quarantine; rua=mailto:postmaster@{}\"", d.trim_end_matches('.')),
            )],
        ),
        (
            "TLS-RPT (RFC 8460): senders report TLS failures to postmaster",
            vec![rec(
                format!("_smtp._tls.{d}"),
                "TXT",
                format!("\"v=TLSRPTv1; rua=mailto:postmaster@{}\"", d.trim_end_matches('.')),
            )],
        ),
    ];
    if let Some(policy) = web::mta_sts_policy(config.web.mta_sts_mode, &config.hostname) {
        groups.push((
            "MTA-STS (RFC 8461): the policy is served by the https listener, whose certificate must name mta-sts.DOMAIN",
            vec![
                rec(
                    format!("_mta-sts.{d}"),
                    "TXT",
                    format!("\"v=STSv1; id={}\"", web::mta_sts_policy_id(&policy)),
                ),
                rec(format!("mta-sts.{d}"), "CNAME", host.clone()),
            ],
        ));
    }
    groups.push((
        "Client set-up: Thunderbird's autoconfig and Microsoft's autodiscover, served by the web listener",
        vec![
            rec(format!("autoconfig.{d}"), "CNAME", host.clone()),
            rec(format!("autodiscover.{d}"), "CNAME", host.clone()),
        ],
    ));
    let services = config.mail_services();
    let srv: Vec<Record> = [
        ("_submissions", services.submissions),
        ("_submission", services.submission),
        ("_imaps", services.imaps),
        ("_imap", services.imap),
        ("_pop3s", services.pop3s),
        ("_pop3", services.pop3),
    ]
    .into_iter()
    .filter_map(|(service, port)| {
        port.map(|port| {
            rec(
                format!("{service}._tcp.{d}"),
                "SRV",
                format!("0 1 {port} {host}"),
            )
        })
    })
    .collect();
    if !srv.is_empty() {
        groups.push(("Where clients find each service (RFC 6186, RFC 8314)", srv));
    }
    groups
}

/// The records as zone-file lines, each group under its comment.
pub fn render(groups: &[(&'static str, Vec<Record>)]) -> String {
    let width = groups
        .iter()
        .flat_map(|(_, r)| r.iter().map(|r| r.name.len()))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (why, records) in groups {
        out.push_str(&format!("; {why}\n"));
        for r in records {
            out.push_str(&format!(
                "{:width$}  IN {:5} {}\n",
                r.name,
                r.kind,
                r.data,
                width = width
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Config {
        crate::config::parse(toml).expect("config")
    }

    #[test]
    fn records_name_the_host_and_the_listeners() {
        let c = config("hostname = \"mx.example.net\"\n[listen]\nimaps = \"0.0.0.0:993\"\nsubmission = \"0.0.0.0:587\"\n");
        let text = render(&for_domain(&c, "Example.ORG"));
        for line in [
            "example.org.",
            "IN MX    10 mx.example.net.",
            "IN TXT   \"v=spf1 mx ~all\"",
            "_dmarc.example.org.",
            "rua=mailto:postmaster@example.org",
            "_smtp._tls.example.org.",
            "_mta-sts.example.org.",
            "mta-sts.example.org.",
            "autoconfig.example.org.",
            "_imaps._tcp.example.org.",
            "IN SRV   0 1 993 mx.example.net.",
            "_submission._tcp.example.org.",
            "IN SRV   0 1 587 mx.example.net.",
        ] {
            assert!(text.contains(line), "{line}:\n{text}");
        }
        assert!(!text.contains("_imap._tcp"), "{text}");
        assert!(!text.contains("_pop3._tcp"), "{text}");
    }

    #[test]
    fn no_mta_sts_records_without_a_policy() {
        let c = config("[web]\nmta_sts_mode = \"off\"\n");
        let text = render(&for_domain(&c, "example.org"));
        assert!(!text.contains("mta-sts"), "{text}");
    }
}
