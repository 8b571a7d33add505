//! Privilege drop: started as root with `[server] user = "nobody"`, the
//! server binds its ports, then runs as nobody, and what it writes in its
//! data directory belongs to nobody. (CI runs as root; started as another
//! user the setting has nothing to do, which the test checks instead.)

use sluice_testkit as kit;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use kit::{python, Server};

fn status_field(pid: u32, name: &str) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn started_as_root_it_runs_as_the_configured_user() {
    let me = nix::unistd::Uid::effective();
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a nobody user");
    let server = Server::start_prepared("[server]\nuser = \"nobody\"\n", |dir| {
        if me.is_root() {
            // The temp dir is root's, 0700: let nobody through to its own
            // data directory.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            let data = dir.join("data");
            std::fs::create_dir(&data).unwrap();
            std::os::unix::fs::chown(&data, Some(nobody.uid.as_raw()), Some(nobody.gid.as_raw()))
                .unwrap();
        }
    });
    let uids = status_field(server.pid(), "Uid:");
    let gids = status_field(server.pid(), "Gid:");
    if me.is_root() {
        assert!(uids.iter().all(|u| *u == nobody.uid.as_raw()), "{uids:?}");
        assert!(gids.iter().all(|g| *g == nobody.gid.as_raw()), "{gids:?}");
        let db = std::fs::metadata(server.data_dir().join("sluice.db")).unwrap();
        assert_eq!(db.uid(), nobody.uid.as_raw());
        assert!(server.log().contains("dropped root"), "{}", server.log());
    } else {
        assert!(uids.iter().all(|u| *u == me.as_raw()), "{uids:?}");
    }
    // And it serves.
    let out = python(
        r#"
import smtplib, sys
h, p = sys.argv[1].rsplit(":", 1)
s = smtplib.SMTP(h, int(p)); print(s.noop()[0]); s.quit()
"#,
        &[&server.smtp.to_string()],
    );
    assert_eq!(out.trim(), "250");
}
