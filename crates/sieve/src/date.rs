//! RFC 5260 dates: reading RFC 5322 date-times from header fields, zones,
//! and the date parts the `date` and `currentdate` tests compare.

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

use crate::script::DatePart;

/// The date part named `name` (RFC 5260 §4.2), case-insensitively.
pub(crate) fn part_from_name(name: &str) -> Option<DatePart> {
    Some(match name.to_ascii_lowercase().as_str() {
        "year" => DatePart::Year,
        "month" => DatePart::Month,
        "day" => DatePart::Day,
        "date" => DatePart::Date,
        "julian" => DatePart::Julian,
        "hour" => DatePart::Hour,
        "minute" => DatePart::Minute,
        "second" => DatePart::Second,
        "time" => DatePart::Time,
        "iso8601" => DatePart::Iso8601,
        "std11" => DatePart::Std11,
        "zone" => DatePart::Zone,
        "weekday" => DatePart::Weekday,
        _ => return None,
    })
}

/// RFC 5260 §4.1: a `:zone` argument, `+hhmm` or `-hhmm`.
pub(crate) fn parse_zone(s: &str) -> Option<UtcOffset> {
    let b = s.as_bytes();
    if b.len() != 5 || !matches!(b[0], b'+' | b'-') || !b[1..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let h: i8 = s[1..3].parse().ok()?;
    let m: i8 = s[3..5].parse().ok()?;
    if m > 59 {
        return None;
    }
    let (h, m) = if b[0] == b'-' { (-h, -m) } else { (h, m) };
    UtcOffset::from_hms(h, m, 0).ok()
}

/// Reads an RFC 5322 §3.3 date-time (with the obsolete forms of §4.3:
/// two-digit years, zone names, missing seconds).
pub(crate) fn parse_datetime(s: &str) -> Option<OffsetDateTime> {
    // Comments and the day name do not matter.
    let mut clean = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            ',' => clean.push(' '),
            c => clean.push(c),
        }
    }
    let mut toks: Vec<&str> = clean.split_whitespace().collect();
    if toks
        .first()
        .is_some_and(|t| t.chars().all(|c| c.is_ascii_alphabetic()))
    {
        toks.remove(0);
    }
    if toks.len() < 4 {
        return None;
    }
    let day: u8 = toks[0].parse().ok()?;
    let month = month_from_name(toks[1])?;
    let mut year: i32 = toks[2].parse().ok()?;
    if toks[2].len() <= 2 {
        year += if year < 50 { 2000 } else { 1900 };
    } else if toks[2].len() == 3 {
        year += 1900;
    }
    let mut hms = toks[3].split(':');
    let hour: u8 = hms.next()?.parse().ok()?;
    let minute: u8 = hms.next()?.parse().ok()?;
    let second: u8 = match hms.next() {
        Some(s) => s.parse().ok()?,
        None => 0,
    };
    if hms.next().is_some() {
        return None;
    }
    let offset = match toks.get(4) {
        Some(z) => zone_from_token(z)?,
        None => UtcOffset::UTC,
    };
    let date = Date::from_calendar_date(year, month, day).ok()?;
    // A leap second reads as the last second of the minute.
    let time = Time::from_hms(hour, minute, second.min(59)).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_offset(offset))
}

fn month_from_name(s: &str) -> Option<Month> {
    const NAMES: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let lower = s.to_ascii_lowercase();
    let i = NAMES.iter().position(|n| lower.starts_with(n))?;
    Month::try_from(i as u8 + 1).ok()
}

/// RFC 5322 §3.3 zone, or an obsolete zone name (§4.3).
fn zone_from_token(z: &str) -> Option<UtcOffset> {
    if let Some(o) = parse_zone(z) {
        return Some(o);
    }
    let h = match z.to_ascii_uppercase().as_str() {
        "UT" | "GMT" | "Z" => 0,
        "EDT" => -4,
        "EST" | "CDT" => -5,
        "CST" | "MDT" => -6,
        "MST" | "PDT" => -7,
        "PST" => -8,
        // Military and unknown zones mean "no information" (§4.3): -0000.
        _ => 0,
    };
    UtcOffset::from_hms(h, 0, 0).ok()
}

fn zone_text(o: UtcOffset) -> String {
    let (h, m, _) = o.as_hms();
    let sign = if h < 0 || m < 0 { '-' } else { '+' };
    format!("{sign}{:02}{:02}", h.unsigned_abs(), m.unsigned_abs())
}

/// The text of a date part (RFC 5260 §4.2).
pub(crate) fn format_part(dt: OffsetDateTime, part: DatePart) -> String {
    let (y, mo, d) = (dt.year(), dt.month() as u8, dt.day());
    let (h, mi, s) = (dt.hour(), dt.minute(), dt.second());
    match part {
        DatePart::Year => format!("{y:04}"),
        DatePart::Month => format!("{mo:02}"),
        DatePart::Day => format!("{d:02}"),
        DatePart::Date => format!("{y:04}-{mo:02}-{d:02}"),
        // Modified Julian Day: days since 1858-11-17.
        DatePart::Julian => (dt.date().to_julian_day() - 2_400_001).to_string(),
        DatePart::Hour => format!("{h:02}"),
        DatePart::Minute => format!("{mi:02}"),
        DatePart::Second => format!("{s:02}"),
        DatePart::Time => format!("{h:02}:{mi:02}:{s:02}"),
        DatePart::Iso8601 => {
            // RFC 3339 §5.6, as Pigeonhole writes it: "Z" for UTC.
            let z = zone_text(dt.offset());
            let z = if dt.offset().is_utc() {
                "Z".to_string()
            } else {
                format!("{}:{}", &z[..3], &z[3..])
            };
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{z}")
        }
        DatePart::Std11 => {
            const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
            const MONTHS: [&str; 12] = [
                "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
            ];
            format!(
                "{}, {d:02} {} {y:04} {h:02}:{mi:02}:{s:02} {}",
                DAYS[dt.weekday().number_days_from_monday() as usize],
                MONTHS[mo as usize - 1],
                zone_text(dt.offset())
            )
        }
        DatePart::Zone => zone_text(dt.offset()),
        DatePart::Weekday => dt.weekday().number_days_from_sunday().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc5322_dates() {
        let d = parse_datetime("Tue, 1 Jul 2003 10:52:37 +0200").unwrap();
        assert_eq!(
            format_part(d, DatePart::Iso8601),
            "2003-07-01T10:52:37+02:00"
        );
        assert_eq!(format_part(d, DatePart::Weekday), "2");
        assert_eq!(format_part(d, DatePart::Julian), "52821");
        assert_eq!(
            format_part(d, DatePart::Std11),
            "Tue, 01 Jul 2003 10:52:37 +0200"
        );
        let d = parse_datetime("21 Nov 97 09:55 -0600 (CST)").unwrap();
        assert_eq!(format_part(d, DatePart::Date), "1997-11-21");
        assert_eq!(format_part(d, DatePart::Zone), "-0600");
        assert_eq!(format_part(d, DatePart::Second), "00");
        assert!(parse_datetime("yesterday").is_none());
        assert!(parse_datetime("32 Jan 2020 00:00 +0000").is_none());
    }

    #[test]
    fn zones() {
        assert_eq!(parse_zone("-0130").unwrap().whole_minutes(), -90);
        assert!(parse_zone("0100").is_none());
        assert!(parse_zone("+0160").is_none());
    }
}
