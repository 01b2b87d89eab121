//! `metav1.Time` as the apiserver decodes and encodes it: Go's `time.Parse` with the RFC 3339
//! layout (its error texts included), and `MarshalJSON`'s output, the instant in UTC to the
//! second (`2024-01-01T01:00:00.5+01:00` → `2024-01-01T00:00:00Z`).

const LAYOUT: &str = "2006-01-02T15:04:05Z07:00";

/// A parsed time: the civil date and time and the offset east of UTC, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parsed {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    offset: i64,
}

/// `quote` of Go's time package: `"` and `\` escaped, bytes outside printable ASCII as `\xNN`.
fn quote(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s {
        if !(0x20..0x80).contains(&b) {
            out.push_str(&format!("\\x{b:02x}"));
        } else {
            if b == b'"' || b == b'\\' {
                out.push('\\');
            }
            out.push(char::from(b));
        }
    }
    out.push('"');
    out
}

fn digit(s: &[u8], i: usize) -> Option<i64> {
    s.get(i)
        .filter(|b| b.is_ascii_digit())
        .map(|b| i64::from(b - b'0'))
}

/// `getnum`: one or two digits (two when `fixed`).
fn getnum(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    let first = digit(s, 0)?;
    match digit(s, 1) {
        Some(second) => Some((first * 10 + second, &s[2..])),
        None if fixed => None,
        None => Some((first, &s[1..])),
    }
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Go's `time.Parse(time.RFC3339, s)`, with its error text.
fn parse(s: &str) -> Result<Parsed, String> {
    let all = s.as_bytes();
    let cannot = |value: &[u8], element: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            quote(all),
            quote(LAYOUT.as_bytes()),
            quote(value),
            quote(element.as_bytes())
        )
    };
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", quote(all));
    let literal = |value: &'_ [u8], c: u8| -> Result<(), String> {
        if value.first() == Some(&c) {
            Ok(())
        } else {
            Err(cannot(value, &char::from(c).to_string()))
        }
    };

    // 2006: four bytes, the first a digit, all digits.
    let v = all;
    if v.len() < 4 || digit(v, 0).is_none() || !v[..4].iter().all(u8::is_ascii_digit) {
        return Err(cannot(v, "2006"));
    }
    let year = v[..4].iter().fold(0, |n, b| n * 10 + i64::from(b - b'0'));
    let v = &v[4..];
    literal(v, b'-')?;
    let v = &v[1..];
    let (month, rest) = getnum(v, true).ok_or_else(|| cannot(v, "01"))?;
    if !(1..=12).contains(&month) {
        return Err(out_of_range("month"));
    }
    let v = rest;
    literal(v, b'-')?;
    let v = &v[1..];
    let (day, rest) = getnum(v, true).ok_or_else(|| cannot(v, "02"))?;
    let v = rest;
    literal(v, b'T')?;
    let v = &v[1..];
    let (hour, rest) = getnum(v, false).ok_or_else(|| cannot(v, "15"))?;
    if hour >= 24 {
        return Err(out_of_range("hour"));
    }
    let v = rest;
    literal(v, b':')?;
    let v = &v[1..];
    let (minute, rest) = getnum(v, true).ok_or_else(|| cannot(v, "04"))?;
    if minute >= 60 {
        return Err(out_of_range("minute"));
    }
    let v = rest;
    literal(v, b':')?;
    let v = &v[1..];
    let (second, mut rest) = getnum(v, true).ok_or_else(|| cannot(v, "05"))?;
    if second >= 60 {
        return Err(out_of_range("second"));
    }
    // A fraction after the seconds, though the layout has none; dropped when encoding.
    if rest.len() >= 2 && matches!(rest[0], b'.' | b',') && digit(rest, 1).is_some() {
        let digits = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
        rest = &rest[1 + digits..];
    }
    let v = rest;
    let (offset, v) = if v.first() == Some(&b'Z') {
        (0, &v[1..])
    } else {
        if v.len() < 6 || v[3] != b':' {
            return Err(cannot(v, "Z07:00"));
        }
        // Go checks the ranges (the later one winning) before a digit or sign error.
        let hours = getnum(&v[1..3], true).map(|(n, _)| n);
        let minutes = hours.and_then(|_| getnum(&v[4..6], true).map(|(n, _)| n));
        if minutes.unwrap_or(0) > 60 {
            return Err(out_of_range("time zone offset minute"));
        }
        if hours.unwrap_or(0) > 24 {
            return Err(out_of_range("time zone offset hour"));
        }
        let (Some(hours), Some(minutes)) = (hours, minutes) else {
            return Err(cannot(v, "Z07:00"));
        };
        let offset = (hours * 60 + minutes) * 60;
        match v[0] {
            b'+' => (offset, &v[6..]),
            b'-' => (-offset, &v[6..]),
            _ => return Err(cannot(v, "Z07:00")),
        }
    };
    if !v.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            quote(all),
            quote(v)
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(format!("parsing time {}: day out of range", quote(all)));
    }
    Ok(Parsed {
        year,
        month,
        day,
        hour,
        minute,
        second,
        offset,
    })
}

/// Checks `s` as `metav1.Time`'s decoder does, returning Go's error text.
pub fn check_time(s: &str) -> Result<(), String> {
    parse(s).map(|_| ())
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The time as `metav1.Time` encodes it after decoding `s`: UTC, whole seconds, RFC 3339;
/// `None` when `s` is not a time Go parses (or its year leaves 0000–9999, which Go's encoder
/// refuses).
pub fn canonical_time(s: &str) -> Option<String> {
    let t = parse(s).ok()?;
    let seconds =
        days_from_civil(t.year, t.month, t.day) * 86_400 + t.hour * 3600 + t.minute * 60 + t.second
            - t.offset;
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let of_day = seconds.rem_euclid(86_400);
    if !(0..=9999).contains(&year) {
        return None;
    }
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_encoded_in_utc_to_the_second() {
        for (input, output) in [
            ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
            ("2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00Z"),
            ("2024-01-01T00:30:00-01:00", "2024-01-01T01:30:00Z"),
            ("2024-01-01T00:00:00.999Z", "2024-01-01T00:00:00Z"),
            ("2024-03-01T00:00:00+00:01", "2024-02-29T23:59:00Z"),
            ("2024-01-01T1:02:03Z", "2024-01-01T01:02:03Z"),
        ] {
            assert_eq!(canonical_time(input).as_deref(), Some(output), "{input}");
        }
    }

    /// Every case was compared with a v1.37.2 apiserver (a Pod's
    /// `metadata.creationTimestamp` through `create --dry-run=server`).
    #[test]
    fn parse_errors_are_gos() {
        let layout = "\"2006-01-02T15:04:05Z07:00\"";
        for (input, expected) in [
            (
                "yesterday",
                format!(
                    "parsing time \"yesterday\" as {layout}: cannot parse \"yesterday\" as \"2006\""
                ),
            ),
            (
                "",
                format!("parsing time \"\" as {layout}: cannot parse \"\" as \"2006\""),
            ),
            (
                "2024-1-01T00:00:00Z",
                format!(
                    "parsing time \"2024-1-01T00:00:00Z\" as {layout}: cannot parse \
                     \"1-01T00:00:00Z\" as \"01\""
                ),
            ),
            (
                "2024-01-01 00:00:00Z",
                format!(
                    "parsing time \"2024-01-01 00:00:00Z\" as {layout}: cannot parse \
                     \" 00:00:00Z\" as \"T\""
                ),
            ),
            (
                "2024-01-01T00:00:00",
                format!(
                    "parsing time \"2024-01-01T00:00:00\" as {layout}: cannot parse \"\" as \
                     \"Z07:00\""
                ),
            ),
            (
                "2024-13-01T00:00:00Z",
                "parsing time \"2024-13-01T00:00:00Z\": month out of range".to_owned(),
            ),
            (
                "2024-02-30T00:00:00Z",
                "parsing time \"2024-02-30T00:00:00Z\": day out of range".to_owned(),
            ),
            (
                "2024-01-01T24:00:00Z",
                "parsing time \"2024-01-01T24:00:00Z\": hour out of range".to_owned(),
            ),
            (
                "2024-01-01T00:00:00Zjunk",
                "parsing time \"2024-01-01T00:00:00Zjunk\": extra text: \"junk\"".to_owned(),
            ),
        ] {
            assert_eq!(check_time(input), Err(expected), "{input:?}");
        }
        for (input, message) in [
            (
                "2024-01-01T00:00:00+25:00",
                ": time zone offset hour out of range",
            ),
            (
                "2024-01-01T00:00:00+01:61",
                ": time zone offset minute out of range",
            ),
            (
                "2024-01-01T00:00:00*01:00",
                " as \"2006-01-02T15:04:05Z07:00\": cannot parse \"*01:00\" as \"Z07:00\"",
            ),
            (
                "2024-01-01T00:00:00+0100",
                " as \"2006-01-02T15:04:05Z07:00\": cannot parse \"+0100\" as \"Z07:00\"",
            ),
            ("2024-01-01T00:60:00Z", ": minute out of range"),
            ("2024-01-01T00:00:60Z", ": second out of range"),
            (
                "20x4-01-01T00:00:00Z",
                " as \"2006-01-02T15:04:05Z07:00\": cannot parse \"20x4-01-01T00:00:00Z\" as \
                 \"2006\"",
            ),
            ("2023-02-29T00:00:00Z", ": day out of range"),
        ] {
            assert_eq!(
                check_time(input),
                Err(format!("parsing time {input:?}{message}")),
                "{input:?}"
            );
        }
        for valid in ["2024-01-01T01:00:00.5+01:00", "2024-01-01T1:02:03Z"] {
            assert_eq!(check_time(valid), Ok(()), "{valid}");
        }
        assert_eq!(check_time("2024-02-29T00:00:00Z"), Ok(()));
    }
}
