//! A read-only look at a test server's database, for checking what was
//! stored: the SQLite file, or the PostgreSQL database the server is on.

use crate::Server;

impl Server {
    /// The stored text of the one blob `filter` (SQL over `b`, its blobs
    /// row) picks, its chunks decoded as the store reads them.
    pub fn stored_text(&self, filter: &str) -> Vec<u8> {
        if let Some((pg, db)) = &self.postgres {
            let rows = pg.psql(
                db,
                &format!(
                    "SELECT c.codec || ' ' || encode(c.data, 'hex') FROM blob_chunks c
                     JOIN blobs b ON b.id = c.blob_id WHERE {filter} ORDER BY c.seq"
                ),
            );
            return rows
                .lines()
                .flat_map(|line| {
                    let (codec, hex) = line.split_once(' ').expect("codec and data");
                    let data: Vec<u8> = (0..hex.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                        .collect();
                    store::decode_chunk(codec.parse().expect("codec"), &data).unwrap()
                })
                .collect();
        }
        let db = self.db();
        store::load_dictionaries(&db).unwrap();
        let mut stmt = db
            .prepare(&format!(
                "SELECT c.codec, c.data FROM blob_chunks c JOIN blobs b ON b.id = c.blob_id
                 WHERE {filter} ORDER BY c.seq"
            ))
            .unwrap();
        let mut text = Vec::new();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let data: Vec<u8> = row.get(1).unwrap();
            text.extend(store::decode_chunk(row.get(0).unwrap(), &data).unwrap());
        }
        text
    }

    /// The server's database, opened read-only.
    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.data_dir().join("sluice.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap()
    }

    /// The single integer a query returns (SQL both back ends accept).
    pub fn count(&self, sql: &str) -> i64 {
        match &self.postgres {
            Some((pg, db)) => {
                let out = pg.psql(db, sql);
                out.parse()
                    .unwrap_or_else(|_| panic!("{sql}: not a number: {out:?}"))
            }
            None => self.db().query_row(sql, [], |r| r.get(0)).unwrap(),
        }
    }

    /// The single integer a query of the full-text index file returns.
    pub fn index_count(&self, sql: &str) -> i64 {
        rusqlite::Connection::open_with_flags(
            self.data_dir().join("fts.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
    }
}
