//! `string.format(list)` as Kubernetes runs it: cel-go's formatting v1.
//!
//! kube-apiserver v1.37 (k8s.io/apiserver v0.37.2, cel-go v0.29.2) and Gatekeeper
//! (k8s.io/apiserver v0.36.2, cel-go v0.30.0) declare `ext.Strings(ext.StringsVersion(2))`,
//! which runs `ext/formatting.go` (the two cel-go releases have the same file). The `cel`
//! crate's own `format` follows formatting v2 (strings version 4 and later), which writes
//! differently what v1 writes, so this overload, registered ahead of the crate's, answers
//! every `string.format(list)` call. What v1 does that v2 does not:
//! - `%s` of a list or a map writes its elements as CEL literals: strings and bytes quoted
//!   as Go's `%q` (`["a", b"x"]`), doubles as `%.6f`, timestamps and durations as
//!   `timestamp("…")` and `duration("…")`, map entries as `key:value`, sorted by the written
//!   key; an opaque value inside is refused ("no formatting function for net.IP");
//! - `%s` of a double is Go's `%g` (`1e+21`), of bytes that are not UTF-8 an error;
//! - `%d` takes integers only, `%f` and `%e` doubles only (and the strings `NaN`, `Infinity`
//!   and `-Infinity`), with the v1 error texts;
//! - `%f` and `%e` print through `golang.org/x/text/message` in `en_US`: `%f` groups the
//!   integer digits (`1,234.500000`) and writes infinities as `∞`; `%e` writes
//!   `2.718280×10⁰⁰`, and its precision is a width (cel-go builds `%6e` from `%.6e`): the
//!   digits after the point are always six, and the text is padded with spaces to the width;
//! - precisions are not bounded; x/text keeps the low 8 bits of a `%f` precision as the
//!   minimum number of fraction digits and the low 16 (signed) as the maximum.

use cel::ExecutionError;
use cel::common::traits::{Indexer, Iterable};
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelString, CelTimestamp, CelType, CelUInt,
    Kind,
};
use cel::common::value::{CowVal, Val};

use crate::kubernetes::go_text::go_quote;

use super::double_text::{go_format_g, go_rfc3339_nano, go_shortest_digits};

/// cel-go's `defaultPrecision`: of `%f` without one, and the width of `%e` without one.
const DEFAULT_PRECISION: i64 = 6;

/// What Go's `fmt` (and x/text's printer) writes for a verb it could not parse.
const NO_VERB: &str = "%!(NOVERB)";

/// cel-go's text when `bytes` that are not UTF-8 are converted to a string for `%s`.
const BYTES_NOT_UTF8: &str =
    "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string";

/// The `string.format(list)` overload (`string` receiver, any argument: a call with an
/// argument that is not a list fails as a call no overload matched).
pub(super) fn format<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let no_overload = || {
        ExecutionError::no_such_member_overload(
            "format",
            args.iter()
                .map(|a| a.as_ref().get_type().name().to_owned())
                .collect(),
        )
    };
    let [receiver, list] = args.as_slice() else {
        return Err(no_overload());
    };
    let Some(text) = receiver.as_ref().downcast_ref::<CelString>() else {
        return Err(no_overload());
    };
    if list.as_ref().get_type().kind() != Kind::List {
        return Err(no_overload());
    }
    let Some(items) = list.as_ref().as_iterable() else {
        return Err(no_overload());
    };
    let mut values = Vec::new();
    let mut iter = items.iter();
    while let Some(item) = iter.next() {
        values.push(item);
    }
    format_v1(text.inner(), &values)
        .map(|s| CowVal::owned(CelString::from(s)))
        .map_err(|message| ExecutionError::function_error("format", message))
}

/// cel-go's `parseFormatString`: `format` with each clause replaced by its argument.
/// Arguments left over are ignored (the static check refuses them in a literal list).
fn format_v1(format: &str, args: &[&dyn Val]) -> Result<String, String> {
    let bytes = format.as_bytes();
    let mut out = String::with_capacity(format.len());
    let (mut i, mut index, mut copied) = (0, 0, 0);
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        // `%` is ASCII: every index met here is on a character boundary.
        out.push_str(&format[copied..i]);
        if bytes.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            copied = i;
            continue;
        }
        // The argument is fetched before the clause is read.
        let Some(arg) = args.get(index) else {
            return Err(format!("index {index} out of range"));
        };
        if i + 1 >= bytes.len() {
            return Err("unexpected end of string".to_owned());
        }
        let (read, clause) = Clause::parse(&bytes[i + 1..])
            .map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let text = clause
            .format(*arg)
            .map_err(|e| format!("error during formatting: {e}"))?;
        out.push_str(&text);
        i += 1 + read;
        copied = i;
        index += 1;
    }
    out.push_str(&format[copied..]);
    Ok(out)
}

/// A clause's verb, with the precision `%f` and `%e` use (the others ignore theirs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clause {
    String,
    Decimal,
    Fixed(i64),
    Scientific(i64),
    Binary,
    Hex { upper: bool },
    Octal,
}

impl Clause {
    /// cel-go's `parseFormattingClause` on the text after `%` (not empty): the clause and how
    /// many bytes it took.
    fn parse(clause: &[u8]) -> Result<(usize, Self), String> {
        let (mut read, precision) =
            precision(clause).map_err(|e| format!("error while parsing precision: {e}"))?;
        let verb = clause[read];
        read += 1;
        let precision = precision.unwrap_or(DEFAULT_PRECISION);
        let parsed = match verb {
            b's' => Self::String,
            b'd' => Self::Decimal,
            b'f' => Self::Fixed(precision),
            b'e' => Self::Scientific(precision),
            b'b' => Self::Binary,
            b'x' => Self::Hex { upper: false },
            b'X' => Self::Hex { upper: true },
            b'o' => Self::Octal,
            // Go's `%c` of the byte taken as a rune: `%é` names "Ã".
            other => {
                return Err(format!(
                    "unrecognized formatting clause \"{}\"",
                    char::from(other)
                ));
            }
        };
        Ok((read, parsed))
    }

    fn format(self, val: &dyn Val) -> Result<String, String> {
        let arg = Arg::of(val);
        let type_name = || val.get_type().name().to_owned();
        match self {
            Self::String => format_string(val),
            Self::Decimal => match arg {
                Arg::Int(i) => Ok(i.to_string()),
                Arg::UInt(u) => Ok(u.to_string()),
                _ => Err(format!(
                    "decimal clause can only be used on integers, was given {}",
                    type_name()
                )),
            },
            Self::Fixed(precision) => match float_argument(&arg) {
                Some(d) => Ok(fixed(d, precision)),
                None => Err(format!(
                    "fixed-point clause can only be used on doubles, was given {}",
                    type_name()
                )),
            },
            Self::Scientific(width) => match float_argument(&arg) {
                Some(d) => Ok(scientific(d, width)),
                None => Err(format!(
                    "scientific clause can only be used on doubles, was given {}",
                    type_name()
                )),
            },
            Self::Binary => match arg {
                Arg::Int(i) => Ok(format!("{}{:b}", sign(i), i.unsigned_abs())),
                Arg::UInt(u) => Ok(format!("{u:b}")),
                Arg::Bool(b) => Ok(if b { "1" } else { "0" }.to_owned()),
                _ => Err(format!(
                    "only integers and bools can be formatted as binary, was given {}",
                    type_name()
                )),
            },
            Self::Hex { upper } => match arg {
                Arg::String(s) => Ok(hex(s.as_bytes(), upper)),
                Arg::Bytes(b) => Ok(hex(b, upper)),
                Arg::Int(i) if upper => Ok(format!("{}{:X}", sign(i), i.unsigned_abs())),
                Arg::Int(i) => Ok(format!("{}{:x}", sign(i), i.unsigned_abs())),
                Arg::UInt(u) if upper => Ok(format!("{u:X}")),
                Arg::UInt(u) => Ok(format!("{u:x}")),
                _ => Err(format!(
                    "only integers, byte buffers, and strings can be formatted as hex, was given \
                     {}",
                    type_name()
                )),
            },
            Self::Octal => match arg {
                Arg::Int(i) => Ok(format!("{}{:o}", sign(i), i.unsigned_abs())),
                Arg::UInt(u) => Ok(format!("{u:o}")),
                _ => Err(format!(
                    "octal clause can only be used on integers, was given {}",
                    type_name()
                )),
            },
        }
    }
}

/// cel-go's `parsePrecision`: the bytes a `.digits` prefix takes, and its value.
fn precision(clause: &[u8]) -> Result<(usize, Option<i64>), String> {
    if clause.first() != Some(&b'.') {
        return Ok((0, None));
    }
    let mut end = 1;
    loop {
        match clause.get(end) {
            None => return Err("could not find end of precision specifier".to_owned()),
            Some(b) if b.is_ascii_digit() => end += 1,
            Some(_) => break,
        }
    }
    let digits = std::str::from_utf8(&clause[1..end]).unwrap_or_default();
    match digits.parse::<i64>() {
        Ok(precision) => Ok((end, Some(precision))),
        Err(_) => {
            let reason = if digits.is_empty() {
                "invalid syntax"
            } else {
                "value out of range"
            };
            Err(format!(
                "error while converting precision to integer: strconv.Atoi: parsing \
                 \"{digits}\": {reason}"
            ))
        }
    }
}

/// The `-` before the digits of a negative integer (Go's `%b`, `%o`, `%x`), where Rust's
/// would write the two's complement.
fn sign(i: i64) -> &'static str {
    if i < 0 { "-" } else { "" }
}

/// Each byte as two hex digits (Go's `%x` of a string or a byte slice).
fn hex(bytes: &[u8], upper: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = if upper {
            write!(out, "{b:02X}")
        } else {
            write!(out, "{b:02x}")
        };
    }
    out
}

// ---- values ---------------------------------------------------------------------------------

/// An argument, as the clauses tell them apart.
enum Arg<'b, 'v> {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    String(&'b str),
    Bytes(&'b [u8]),
    Duration(&'b CelDuration),
    Timestamp(&'b CelTimestamp),
    Null,
    Type(&'b str),
    List(&'b (dyn Iterable + 'v)),
    Map(&'b (dyn Iterable + 'v), &'b (dyn Indexer + 'v)),
    Other,
}

impl<'b, 'v> Arg<'b, 'v> {
    fn of(val: &'b (dyn Val + 'v)) -> Self {
        let arg = match val.get_type().kind() {
            Kind::Boolean => val
                .downcast_ref::<CelBool>()
                .map(|b| Self::Bool(*b.inner())),
            Kind::Int => val.downcast_ref::<CelInt>().map(|i| Self::Int(*i.inner())),
            Kind::UInt => val
                .downcast_ref::<CelUInt>()
                .map(|u| Self::UInt(*u.inner())),
            Kind::Double => val
                .downcast_ref::<CelDouble>()
                .map(|d| Self::Double(*d.inner())),
            Kind::String => val
                .downcast_ref::<CelString>()
                .map(|s| Self::String(s.inner())),
            Kind::Bytes => val
                .downcast_ref::<CelBytes>()
                .map(|b| Self::Bytes(b.inner())),
            Kind::Duration => val.downcast_ref::<CelDuration>().map(Self::Duration),
            Kind::Timestamp => val.downcast_ref::<CelTimestamp>().map(Self::Timestamp),
            Kind::NullType => Some(Self::Null),
            Kind::Type => val.downcast_ref::<CelType>().map(|t| Self::Type(t.name())),
            Kind::List => val.as_iterable().map(Self::List),
            Kind::Map => val
                .as_iterable()
                .zip(val.as_indexer())
                .map(|(keys, values)| Self::Map(keys, values)),
            _ => None,
        };
        arg.unwrap_or(Self::Other)
    }
}

/// The double `%f` and `%e` take: a double, or one of the strings `NaN`, `Infinity` and
/// `-Infinity`.
fn float_argument(arg: &Arg<'_, '_>) -> Option<f64> {
    match *arg {
        Arg::Double(d) => Some(d),
        Arg::String("NaN") => Some(f64::NAN),
        Arg::String("Infinity") => Some(f64::INFINITY),
        Arg::String("-Infinity") => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// cel-go's `FormatString`, what `%s` writes: the value converted to a string, a list or a
/// map as CEL literals.
fn format_string(val: &dyn Val) -> Result<String, String> {
    Ok(match Arg::of(val) {
        Arg::List(list) => format_list(list)?,
        Arg::Map(keys, values) => format_map(keys, values)?,
        Arg::Int(i) => i.to_string(),
        Arg::UInt(u) => u.to_string(),
        Arg::Double(d) => go_format_g(d),
        Arg::Bool(b) => b.to_string(),
        Arg::String(s) => s.to_owned(),
        Arg::Bytes(b) => utf8(b)?.to_owned(),
        Arg::Duration(d) => duration_text(d),
        Arg::Timestamp(t) => timestamp_text(t),
        Arg::Type(name) => name.to_owned(),
        Arg::Null => "null".to_owned(),
        Arg::Other => {
            return Err(format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, \
                 lists, types, durations, and timestamps, was given {}",
                val.get_type().name()
            ));
        }
    })
}

/// cel-go's `clauseForType` then `quoteForCEL`: an element of a list, or a value of a map, as
/// `%s` of its container writes it.
fn format_element(val: &dyn Val) -> Result<String, String> {
    Ok(match Arg::of(val) {
        Arg::Int(i) => i.to_string(),
        Arg::UInt(u) => u.to_string(),
        Arg::String(s) => go_quote(s),
        Arg::Bytes(b) => format!("b{}", go_quote(utf8(b)?)),
        Arg::Bool(b) => b.to_string(),
        Arg::Null => "null".to_owned(),
        Arg::Type(name) => name.to_owned(),
        Arg::Timestamp(t) => format!("timestamp({})", go_quote(&timestamp_text(t))),
        Arg::Duration(d) => format!("duration({})", go_quote(&duration_text(d))),
        Arg::List(list) => format_list(list)?,
        Arg::Map(keys, values) => format_map(keys, values)?,
        // Go's `%.6f`, not x/text's: no grouping, `+Inf`, and quoted when not finite.
        Arg::Double(d) if d.is_nan() => "\"NaN\"".to_owned(),
        Arg::Double(d) if d.is_infinite() => {
            if d > 0.0 { "\"+Inf\"" } else { "\"-Inf\"" }.to_owned()
        }
        Arg::Double(d) => format!("{d:.6}"),
        Arg::Other => {
            return Err(format!(
                "no formatting function for {}",
                val.get_type().name()
            ));
        }
    })
}

/// cel-go's `formatList`: `[e1, e2]`.
fn format_list(list: &dyn Iterable) -> Result<String, String> {
    let mut out = String::from("[");
    let mut items = list.iter();
    let mut first = true;
    while let Some(item) = items.next() {
        if !first {
            out.push_str(", ");
        }
        first = false;
        out.push_str(&format_element(item)?);
    }
    out.push(']');
    Ok(out)
}

/// cel-go's `formatMap`: `{k1:v1, k2:v2}`, sorted by the written keys.
fn format_map(keys: &dyn Iterable, values: &dyn Indexer) -> Result<String, String> {
    let mut entries = Vec::new();
    let mut iter = keys.iter();
    while let Some(key) = iter.next() {
        let written = match Arg::of(key) {
            Arg::String(s) => go_quote(s),
            Arg::Bool(b) => b.to_string(),
            Arg::Int(i) => i.to_string(),
            Arg::UInt(u) => u.to_string(),
            _ => {
                return Err(format!(
                    "no formatting function for map key of type {}",
                    key.get_type().name()
                ));
            }
        };
        let value = values.get(key).map_err(|e| e.to_string())?;
        entries.push((written, format_element(value.as_ref())?));
    }
    // Go's `sort.SliceStable` on the keys' text, compared as bytes.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let entries: Vec<String> = entries
        .into_iter()
        .map(|(key, value)| format!("{key}:{value}"))
        .collect();
    Ok(format!("{{{}}}", entries.join(", ")))
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|_| BYTES_NOT_UTF8.to_owned())
}

/// cel-go's `string(duration)`: Go's `strconv.FormatFloat(d.Seconds(), 'f', -1, 64)` and `s`.
fn duration_text(d: &CelDuration) -> String {
    let d = d.inner();
    // Go's `Duration.Seconds()`: whole seconds plus the nanoseconds left over, each a float.
    let seconds = match d.num_nanoseconds() {
        Some(nanos) => (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9,
        None => d.num_seconds() as f64 + f64::from(d.subsec_nanos()) / 1e9,
    };
    format!("{}s", go_shortest_fixed(seconds))
}

/// Go's `strconv.FormatFloat(d, 'f', -1, 64)` of a finite `d`: the shortest digits that read
/// back, without an exponent.
fn go_shortest_fixed(d: f64) -> String {
    let (digits, exponent) = go_shortest_digits(d);
    let sign = if d.is_sign_negative() { "-" } else { "" };
    if digits == "0" {
        return format!("{sign}0");
    }
    let point = i64::from(exponent) + 1;
    if point <= 0 {
        format!(
            "{sign}0.{}{digits}",
            "0".repeat(point.unsigned_abs() as usize)
        )
    } else if point as usize >= digits.len() {
        format!(
            "{sign}{digits}{}",
            "0".repeat(point as usize - digits.len())
        )
    } else {
        let (integer, fraction) = digits.split_at(point as usize);
        format!("{sign}{integer}.{fraction}")
    }
}

/// cel-go's `string(timestamp)`: RFC 3339 with nanoseconds, in the timestamp's offset.
fn timestamp_text(t: &CelTimestamp) -> String {
    go_rfc3339_nano(&cel::Value::Timestamp(*t.inner())).unwrap_or_default()
}

// ---- x/text's en_US numbers -----------------------------------------------------------------

/// `%f`: cel-go's `message.NewPrinter(en_US).Sprintf("%.<precision>f", d)`.
fn fixed(d: f64, precision: i64) -> String {
    if too_large_for_go_fmt(precision) {
        return NO_VERB.to_owned();
    }
    // x/text keeps the precision as a `uint8` minimum and an `int16` maximum of fraction
    // digits.
    fixed_en_us(d, precision as u8, precision as i16)
}

/// `%e`: cel-go's `message.NewPrinter(en_US).Sprintf("%<precision>e", d)`, the precision
/// taken as the width (`%0e` is the zero flag, and no width).
fn scientific(d: f64, width: i64) -> String {
    if too_large_for_go_fmt(width) {
        return NO_VERB.to_owned();
    }
    let text = scientific_en_us(d);
    let width = usize::try_from(width).unwrap_or(0);
    let count = text.chars().count();
    if count >= width {
        return text;
    }
    format!("{}{text}", " ".repeat(width - count))
}

/// Whether the printf parser gives up on `n` as a width or precision: it stops, and writes
/// `%!(NOVERB)`, on a digit that follows a prefix above 10⁶.
fn too_large_for_go_fmt(n: i64) -> bool {
    n / 10 > 1_000_000
}

/// x/text's `fmtDecimalFloat` for `en`: rounded to `max_frac` fraction digits (the shortest
/// digits when negative), at least `min_frac` of them written, the integer digits grouped
/// by three, a `-` for any negative number (not for `-0.0`), `∞` for infinities.
fn fixed_en_us(d: f64, min_frac: u8, max_frac: i16) -> String {
    if d.is_nan() {
        return "NaN".to_owned();
    }
    let negative = d < 0.0;
    let sign = if negative { "-" } else { "" };
    let abs = d.abs();
    if abs.is_infinite() {
        return format!("{sign}∞");
    }
    // strconv's `'f'` at that precision, or its shortest `'g'`: the same digits as Rust's.
    let (digits, exp) = match usize::try_from(max_frac) {
        Ok(places) => decimal_digits(&format!("{abs:.places$}")),
        Err(_) => {
            let (digits, exponent) = go_shortest_digits(abs);
            decimal_digits(&format!("0.{digits}e{}", exponent + 1))
        }
    };
    let (digits, exp) = normalize(digits, exp);
    let end = if digits.is_empty() {
        i64::from(min_frac)
    } else {
        (digits.len() as i64).max(exp + i64::from(min_frac))
    };
    let integers = exp.max(0) as usize;
    let fractions = (end - exp).max(0) as usize;
    let mut out = String::from(sign);
    if integers == 0 {
        out.push('0');
    }
    for i in 0..integers {
        out.push(char::from(b'0' + digits.get(i).copied().unwrap_or(0)));
        let left = integers - i;
        if left > 1 && (left - 1).is_multiple_of(3) {
            out.push(',');
        }
    }
    if fractions > 0 {
        out.push('.');
    }
    let mut written = 0;
    for _ in 0..(-exp).max(0) {
        out.push('0');
        written += 1;
    }
    for d in digits.iter().skip(integers) {
        out.push(char::from(b'0' + d));
        written += 1;
    }
    for _ in written..fractions {
        out.push('0');
    }
    out
}

/// x/text's `fmtScientific` for `en` at its default precision: seven significant digits,
/// `d.dddddd×10` and the exponent in at least two superscript digits (`⁻` when negative).
fn scientific_en_us(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_owned();
    }
    let negative = d < 0.0;
    let sign = if negative { "-" } else { "" };
    let abs = d.abs();
    if abs.is_infinite() {
        return format!("{sign}∞");
    }
    // Rust's `{:.6e}` rounds to seven significant digits as strconv's `'g'` at 7 does.
    let text = format!("{abs:.6e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut out = format!("{sign}{mantissa}×10");
    if exponent < 0 {
        out.push('\u{207b}');
    }
    for digit in format!("{:02}", exponent.unsigned_abs()).bytes() {
        out.push(superscript(digit - b'0'));
    }
    out
}

fn superscript(digit: u8) -> char {
    match digit {
        1 => '\u{b9}',
        2 => '\u{b2}',
        3 => '\u{b3}',
        d => char::from_u32(0x2070 + u32::from(d)).unwrap_or('\u{2070}'),
    }
}

/// The digits of a decimal text (`123.45`, or `1.2345e2`) and the position of the point
/// after the first of them, as x/text's `Decimal` holds them.
fn decimal_digits(text: &str) -> (Vec<u8>, i64) {
    let (mantissa, exponent) = match text.split_once('e') {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().ok()),
        None => (text, None),
    };
    let mut digits = Vec::with_capacity(mantissa.len());
    let mut point = None;
    for b in mantissa.bytes() {
        match b {
            b'0'..=b'9' => digits.push(b - b'0'),
            b'.' => point = Some(digits.len() as i64),
            _ => {}
        }
    }
    let exp = match exponent {
        Some(e) => e + 1,
        None => point.unwrap_or(digits.len() as i64),
    };
    (digits, exp)
}

/// Without leading and trailing zeros (zero has no digits, and the point at 0).
fn normalize(mut digits: Vec<u8>, mut exp: i64) -> (Vec<u8>, i64) {
    let leading = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..leading);
    exp -= leading as i64;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        exp = 0;
    }
    (digits, exp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expressions::{Activation, CelEnvironment};

    /// Evaluates `source` (which the static checks must accept), as the webhook would.
    fn eval(source: &str) -> Result<String, String> {
        let object = serde_json::json!({});
        let value = CelEnvironment::kubernetes()
            .compile(source)
            .map_err(|e| format!("compile: {}", e.message))?
            .evaluate(&Activation::new().object(&object))
            .map_err(|e| e.to_string())?;
        match value {
            cel::Value::String(s) => Ok(s.to_string()),
            other => Err(format!("not a string: {other:?}")),
        }
    }

    #[track_caller]
    fn assert_formats(cases: &[(&str, &str)]) {
        for (source, want) in cases {
            assert_eq!(eval(source).as_deref(), Ok(*want), "{source}");
        }
    }

    #[track_caller]
    fn assert_fails(cases: &[(&str, &str)]) {
        for (source, want) in cases {
            match eval(source) {
                Err(got) => assert!(got.contains(want), "{source}: {got:?} lacks {want:?}"),
                Ok(got) => panic!("{source}: {got:?}, want an error containing {want:?}"),
            }
        }
    }

    /// cel-go v0.29.2 `ext/formatting_test.go` (TestStringFormat), the cases whose output
    /// does not depend on the locale or on x/text's version.
    #[test]
    fn cel_go_formatting_v1_cases() {
        assert_formats(&[
            ("'no substitution'.format([])", "no substitution"),
            (
                "'str is %s and some more'.format(['filler'])",
                "str is filler and some more",
            ),
            ("'%% and also %%'.format([])", "% and also %"),
            ("'%%%s%%'.format(['text'])", "%text%"),
            (
                "'%s%%'.format(['percent on the right'])",
                "percent on the right%",
            ),
            (
                "'%%%s'.format(['percent on the left'])",
                "%percent on the left",
            ),
            (
                "'%d %d %d, %s %s %s, %d %d %d, %s %s %s'.format([1, 2, 3, 'A', 'B', 'C', 4, 5, \
                 6, 'D', 'E', 'F'])",
                "1 2 3, A B C, 4 5 6, D E F",
            ),
            (
                "'\\u0025\\u0025escaped \\u0025s\\u0025\\u0025'.format(['percent'])",
                "%escaped percent%",
            ),
            ("'%.3f'.format([1.2345])", "1.234"),
            (
                "'this is 5 in binary: %b'.format([5])",
                "this is 5 in binary: 101",
            ),
            (
                "'this is -5 in binary: %b'.format([-5])",
                "this is -5 in binary: -101",
            ),
            (
                "'unsigned 64 in binary: %b'.format([uint(64)])",
                "unsigned 64 in binary: 1000000",
            ),
            (
                "'bit set from bool: %b'.format([true])",
                "bit set from bool: 1",
            ),
            ("'%o'.format([11])", "13"),
            ("'%o'.format([-11])", "-13"),
            (
                "'this is an unsigned octal: %o'.format([uint(65535)])",
                "this is an unsigned octal: 177777",
            ),
            (
                "'%x is 30 in hexadecimal'.format([30])",
                "1e is 30 in hexadecimal",
            ),
            (
                "'%X is 20 in hexadecimal'.format([30])",
                "1E is 20 in hexadecimal",
            ),
            (
                "'%x is -30 in hexadecimal'.format([-30])",
                "-1e is -30 in hexadecimal",
            ),
            (
                "'%X is 6000 in hexadecimal'.format([uint(6000)])",
                "1770 is 6000 in hexadecimal",
            ),
            ("'%x'.format(['Hello world!'])", "48656c6c6f20776f726c6421"),
            ("'%X'.format(['Hello world!'])", "48656C6C6F20776F726C6421"),
            ("'%x'.format([b'byte string'])", "6279746520737472696e67"),
            (
                "'%x'.format([b'\\x00\\x00byte string\\x00'])",
                "00006279746520737472696e6700",
            ),
            ("'%X'.format([b'byte string'])", "6279746520737472696E67"),
            ("'%f'.format([2.71828])", "2.718280"),
            ("'%s'.format([2.71])", "2.71"),
            ("'%s'.format([[2.71]])", "[2.710000]"),
            ("'%s'.format([0.000000002])", "2e-09"),
            ("'%s'.format([[0.000000002]])", "[0.000000]"),
            ("'%f'.format(['NaN'])", "NaN"),
            ("'%f'.format(['Infinity'])", "∞"),
            ("'%f'.format(['-Infinity'])", "-∞"),
            ("'%s'.format([double('NaN')])", "NaN"),
            ("'%s'.format([double('Inf')])", "+Inf"),
            ("'%s'.format([double('-Inf')])", "-Inf"),
            (
                "'%s'.format([[double('NaN'), double('+Inf'), double('-Inf')]])",
                r#"["NaN", "+Inf", "-Inf"]"#,
            ),
            ("'%d'.format([uint(64)])", "64"),
            ("'null: %s'.format([null])", "null: null"),
            ("'%s'.format([999999999999])", "999999999999"),
            ("'some bytes: %s'.format([b'xyz'])", "some bytes: xyz"),
            (
                "'type is %s'.format([type('test string')])",
                "type is string",
            ),
            (
                "'%s'.format([timestamp('2023-02-03T23:31:20+00:00')])",
                "2023-02-03T23:31:20Z",
            ),
            ("'%s'.format([duration('1h45m47s')])", "6347s"),
            ("'%s'.format([duration('2ns')])", "0.000000002s"),
            (
                "'%s'.format([['abc', 3.14, null, [9, 8, 7, 6], \
                 timestamp('2023-02-03T23:31:20Z')]])",
                r#"["abc", 3.140000, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20Z")]"#,
            ),
            (
                "'%s'.format([{'key1': b'xyz', 'key5': null, 'key2': duration('2h'), 'key4': \
                 true, 'key3': 2.71828}])",
                r#"{"key1":b"xyz", "key2":duration("7200s"), "key3":2.718280, "key4":true, "key5":null}"#,
            ),
            (
                "'map with multiple key types: %s'.format([{1: 'value1', uint(2): 'value2', \
                 true: double('NaN')}])",
                r#"map with multiple key types: {1:"value1", 2:"value2", true:"NaN"}"#,
            ),
            (
                "'true bool: %s, false bool: %s'.format([true, false])",
                "true bool: true, false bool: false",
            ),
            (
                "'dynamic string: %s'.format([dyn('a string')])",
                "dynamic string: a string",
            ),
            (
                "'dynIntStr: %s dynDoubleStr: %s'.format([dyn(32), dyn(56.8)])",
                "dynIntStr: 32 dynDoubleStr: 56.8",
            ),
            ("'dynamic int: %d'.format([dyn(128)])", "dynamic int: 128"),
            (
                "'dynamic unsigned int: %d'.format([dyn(256u)])",
                "dynamic unsigned int: 256",
            ),
            (
                "'dynamic hex int: %x'.format([dyn(22)])",
                "dynamic hex int: 16",
            ),
            (
                "'dynamic hex int: %X (uppercase)'.format([dyn(26)])",
                "dynamic hex int: 1A (uppercase)",
            ),
            (
                "'dynamic hex int: %x (unsigned)'.format([dyn(500u)])",
                "dynamic hex int: 1f4 (unsigned)",
            ),
            (
                "'dynamic double: %.3f'.format([dyn(4.5)])",
                "dynamic double: 4.500",
            ),
            (
                "'NaN: %f, infinity: %f'.format([dyn('NaN'), dyn('Infinity')])",
                "NaN: NaN, infinity: ∞",
            ),
            (
                "'dyntype list: %s'.format([dyn([6, 4.2, 'a string'])])",
                r#"dyntype list: [6, 4.200000, "a string"]"#,
            ),
            (
                "'dyntype map: %s'.format([dyn({'strKey': 'x', 6: duration('422s'), true: 42})])",
                r#"dyntype map: {"strKey":"x", 6:duration("422s"), true:42}"#,
            ),
            ("'%.200f'.format([1.0])", &format!("1.{}", "0".repeat(200))),
        ]);
    }

    /// The runtime errors of the same table (`skipCompileCheck`), reached here through `dyn`
    /// where the static check would refuse the literal.
    #[test]
    fn cel_go_formatting_v1_errors() {
        assert_fails(&[
            (
                "'%a'.format(dyn([1]))",
                "could not parse formatting clause: unrecognized formatting clause \"a\"",
            ),
            ("'%d %d %d'.format(dyn([0, 1]))", "index 2 out of range"),
            (
                "'string is %b'.format([dyn('abc')])",
                "error during formatting: only integers and bools can be formatted as binary, \
                 was given string",
            ),
            (
                "'%d'.format([dyn(duration('30m2s'))])",
                "error during formatting: decimal clause can only be used on integers, was \
                 given google.protobuf.Duration",
            ),
            (
                "'octal: %o'.format([dyn('a string')])",
                "error during formatting: octal clause can only be used on integers, was given \
                 string",
            ),
            (
                "'double is %x'.format([dyn(0.5)])",
                "error during formatting: only integers, byte buffers, and strings can be \
                 formatted as hex, was given double",
            ),
            (
                "'double is %E'.format(dyn([0.5]))",
                "could not parse formatting clause: unrecognized formatting clause \"E\"",
            ),
            (
                "'null: %d'.format([dyn(null)])",
                "error during formatting: decimal clause can only be used on integers, was \
                 given null_type",
            ),
            (
                "'null: %e'.format([dyn(null)])",
                "error during formatting: scientific clause can only be used on doubles, was \
                 given null_type",
            ),
            (
                "'null: %f'.format([dyn(null)])",
                "error during formatting: fixed-point clause can only be used on doubles, was \
                 given null_type",
            ),
            (
                "'null: %x'.format([dyn(null)])",
                "error during formatting: only integers, byte buffers, and strings can be \
                 formatted as hex, was given null_type",
            ),
            (
                "'null: %X'.format([dyn(null)])",
                "error during formatting: only integers, byte buffers, and strings can be \
                 formatted as hex, was given null_type",
            ),
            (
                "'null: %b'.format([dyn(null)])",
                "error during formatting: only integers and bools can be formatted as binary, \
                 was given null_type",
            ),
            (
                "'null: %o'.format([dyn(null)])",
                "error during formatting: octal clause can only be used on integers, was given \
                 null_type",
            ),
            ("'%s %s'.format(dyn(['abc']))", "index 1 out of range"),
            ("'filler %'.format(dyn([]))", "index 0 out of range"),
            ("'filler %'.format(dyn([1]))", "unexpected end of string"),
            (
                "'double is %.34'.format(dyn([5.0]))",
                "could not parse formatting clause: error while parsing precision: could not \
                 find end of precision specifier",
            ),
        ]);
    }

    /// What kube-apiserver v1.37.2 answers (cel-go v0.29.2 with x/text v0.40.0, through
    /// `environment.MustBaseEnvSet`), for the cases the cel-go table leaves out.
    #[test]
    fn apiserver_answers() {
        assert_formats(&[
            // Lists and maps as CEL literals.
            ("'%s'.format([['a', 'b']])", r#"["a", "b"]"#),
            ("'%s'.format([[null, true, false]])", "[null, true, false]"),
            (
                r#"'%s'.format([[b'xyz', b'a"b\n']])"#,
                r#"[b"xyz", b"a\"b\n"]"#,
            ),
            (
                "'%s'.format([[b'\\x01\\x7f', b'\\xc3\\xa9']])",
                r#"[b"\x01\x7f", b"é"]"#,
            ),
            (
                "'%s'.format([[type('x'), int, list, map, null_type, type, bytes]])",
                "[string, int, list, map, null_type, type, bytes]",
            ),
            (
                "'%s'.format([[type(1u), type(1.0), type(true), type([]), type({}), type(null), \
                 type(duration('1s')), type(timestamp('2023-02-03T23:31:20Z')), \
                 type(optional.none()), type(ip('1.2.3.4'))]])",
                "[uint, double, bool, list, map, null_type, google.protobuf.Duration, \
                 google.protobuf.Timestamp, optional_type, net.IP]",
            ),
            (
                "'%s'.format([{'b': 1, 'a': 2, 'B': 3, 10: 1, 9: 2, false: 0}])",
                r#"{"B":3, "a":2, "b":1, 10:1, 9:2, false:0}"#,
            ),
            (
                "'%s'.format([{'k': {'x': [1, 'y']}}])",
                r#"{"k":{"x":[1, "y"]}}"#,
            ),
            (
                "'%s'.format([['a\"b', 'tab\\there', 'uni\\u00e9', 'ctl\\u0001', 'bs\\\\']])",
                r#"["a\"b", "tab\there", "unié", "ctl\x01", "bs\\"]"#,
            ),
            (
                "'%s'.format([['\\u2028', '\\u00a0', '\\ufeff']])",
                r#"["\u2028", "\u00a0", "\ufeff"]"#,
            ),
            ("'%s'.format([[1u, -5]])", "[1, -5]"),
            ("'%s'.format([[]])", "[]"),
            ("'%s'.format([{}])", "{}"),
            ("'%s'.format([[[]]])", "[[]]"),
            (
                "'%s'.format([[1, [2, [3, {'a': [b'x']}]]]])",
                r#"[1, [2, [3, {"a":[b"x"]}]]]"#,
            ),
            (
                "'%s'.format([{'a': 1.0, 'b': -0.0}])",
                r#"{"a":1.000000, "b":-0.000000}"#,
            ),
            (
                "'%s'.format([[1e-7, 123456789.123456789, 1.0/3.0]])",
                "[0.000000, 123456789.123457, 0.333333]",
            ),
            (
                "'%s'.format([[0.000000002, 1e21, 2.5]])",
                "[0.000000, 1000000000000000000000.000000, 2.500000]",
            ),
            (
                "'%s'.format([{-1: 'a', 1: 'b', 0: 'c'}])",
                r#"{-1:"a", 0:"c", 1:"b"}"#,
            ),
            (
                "'%s'.format([{'\"': 1, 'a': 2, ' ': 3}])",
                r#"{" ":3, "\"":1, "a":2}"#,
            ),
            (
                "'%s'.format([[9223372036854775807, 18446744073709551615u]])",
                "[9223372036854775807, 18446744073709551615]",
            ),
            (
                "'%s'.format([[timestamp('2023-02-03T23:31:20.123+05:30')]])",
                r#"[timestamp("2023-02-03T23:31:20.123+05:30")]"#,
            ),
            (
                "'%s'.format([[duration('2ns'), duration('-1.5s')]])",
                r#"[duration("0.000000002s"), duration("-1.5s")]"#,
            ),
            // Scalars as `string()` writes them.
            ("'%s'.format([1e21])", "1e+21"),
            ("'%s'.format([1234567.0])", "1.234567e+06"),
            ("'%s'.format([100000.0])", "100000"),
            ("'%s'.format([-0.0])", "-0"),
            (
                "'%s'.format([timestamp('2023-02-03T23:31:20.123+05:30')])",
                "2023-02-03T23:31:20.123+05:30",
            ),
            ("'%s'.format([duration('1.5s')])", "1.5s"),
            ("'%s'.format([duration('0s')])", "0s"),
            (
                "'%s'.format([duration('1h0.000000001s')])",
                "3600.000000001s",
            ),
            (
                "'%s'.format([duration('-2562047h47m16.854775808s')])",
                "-9223372036.854776s",
            ),
            ("'%s'.format([type(ip('1.2.3.4'))])", "net.IP"),
            ("'%s'.format(['%d'])", "%d"),
            ("'é%s'.format(['α'])", "éα"),
            // `%f`: x/text's en_US digits.
            ("'%f'.format([1234567.891])", "1,234,567.891000"),
            ("'%.2f'.format([-1234567.891])", "-1,234,567.89"),
            ("'%.0f'.format([2.5])", "2"),
            ("'%.0f'.format([3.5])", "4"),
            ("'%.1f'.format([0.05])", "0.1"),
            ("'%.2f'.format([0.125])", "0.12"),
            ("'%.2f'.format([0.375])", "0.38"),
            ("'%.0f'.format([999.5])", "1,000"),
            ("'%.3f'.format([999.9999])", "1,000.000"),
            ("'%f'.format([123.0])", "123.000000"),
            ("'%f'.format([-12345.678])", "-12,345.678000"),
            ("'%f'.format([1e20])", "100,000,000,000,000,000,000.000000"),
            ("'%.3f'.format([-0.0])", "0.000"),
            ("'%.2f'.format([-0.0001])", "-0.00"),
            ("'%.0f'.format([-0.4])", "-0"),
            ("'%f'.format([5e-324])", "0.000000"),
            ("'%.30f'.format([0.1])", "0.100000000000000005551115123126"),
            ("'%f'.format([double('-Inf')])", "-∞"),
            ("'%.2f'.format(['NaN'])", "NaN"),
            // Past 255 and 32767 the precision wraps as x/text's uint8 and int16 do.
            ("'%.256f'.format([1.5])", "1.5"),
            ("'%.257f'.format([1.125])", "1.125"),
            (
                "'%.258f'.format([0.1])",
                "0.1000000000000000055511151231257827021181583404541015625",
            ),
            ("'%.32768f'.format([1234.5])", "1,234.5"),
            ("'%.65536f'.format([1.5])", "2"),
            ("'%.65537f'.format([1.25])", "1.2"),
            ("'%.100000000f'.format([1.0])", "%!(NOVERB)"),
            // `%e`: x/text's en_US superscripts, the precision a width.
            ("'%e'.format([2.71828])", "2.718280×10⁰⁰"),
            ("'%.6e'.format([1052.032911275])", "1.052033×10⁰³"),
            ("'%.3e'.format([1052.032911275])", "1.052033×10⁰³"),
            ("'%.20e'.format([1052.032911275])", "       1.052033×10⁰³"),
            ("'%.15e'.format([-1.0])", " -1.000000×10⁰⁰"),
            ("'%.0e'.format([1.0])", "1.000000×10⁰⁰"),
            ("'%e'.format([0.0])", "0.000000×10⁰⁰"),
            ("'%e'.format([-0.0])", "0.000000×10⁰⁰"),
            ("'%e'.format([-1.5e-300])", "-1.500000×10⁻³⁰⁰"),
            ("'%e'.format([1e100])", "1.000000×10¹⁰⁰"),
            ("'%e'.format([123456789.0])", "1.234568×10⁰⁸"),
            ("'%e'.format([-0.000123])", "-1.230000×10⁻⁰⁴"),
            ("'%e'.format([9.9999999])", "1.000000×10⁰¹"),
            ("'%e'.format([9.9999995])", "9.999999×10⁰⁰"),
            ("'%e'.format([1234567.5])", "1.234568×10⁰⁶"),
            ("'%e'.format([1234568.5])", "1.234568×10⁰⁶"),
            ("'%e'.format([5e-324])", "4.940656×10⁻³²⁴"),
            ("'%e'.format(['NaN'])", "   NaN"),
            ("'%e'.format(['Infinity'])", "     ∞"),
            ("'%e'.format(['-Infinity'])", "    -∞"),
            ("'%.8e'.format(['NaN'])", "     NaN"),
            ("'%.100000000e'.format([1.0])", "%!(NOVERB)"),
            // The other verbs.
            ("'%X'.format([b'\\x00\\xffab'])", "00FF6162"),
            ("'%x'.format([-255])", "-ff"),
            ("'%X'.format([18446744073709551615u])", "FFFFFFFFFFFFFFFF"),
            ("'%x'.format([-9223372036854775808])", "-8000000000000000"),
            (
                "'%b'.format([-9223372036854775808])",
                "-1000000000000000000000000000000000000000000000000000000000000000",
            ),
            (
                "'%o'.format([-9223372036854775808])",
                "-1000000000000000000000",
            ),
            ("'%b'.format([false])", "0"),
            ("'%o'.format([8u])", "10"),
            ("'%x'.format([''])", ""),
            ("'%x'.format(['é'])", "c3a9"),
            ("'%.3s'.format([1.0])", "1"),
            ("'%.3d'.format([1])", "1"),
            // Arguments past the clauses are ignored at runtime.
            ("'%s %s'.format(dyn(['a', 'b', 'c']))", "a b"),
            ("''.format(dyn(['a']))", ""),
            ("'%%'.format(dyn([1]))", "%"),
        ]);
    }

    #[test]
    fn apiserver_errors() {
        assert_fails(&[
            (
                "'%f'.format([dyn('inf')])",
                "error during formatting: fixed-point clause can only be used on doubles, was \
                 given string",
            ),
            (
                "'%f'.format([dyn(1)])",
                "error during formatting: fixed-point clause can only be used on doubles, was \
                 given int",
            ),
            (
                "'%e'.format([dyn(1)])",
                "error during formatting: scientific clause can only be used on doubles, was \
                 given int",
            ),
            (
                "'%d'.format([dyn(1.0)])",
                "error during formatting: decimal clause can only be used on integers, was \
                 given double",
            ),
            (
                "'%d'.format([dyn(timestamp('2023-02-03T23:31:20Z'))])",
                "error during formatting: decimal clause can only be used on integers, was \
                 given google.protobuf.Timestamp",
            ),
            (
                "'%d'.format([dyn(ip('1.2.3.4'))])",
                "error during formatting: decimal clause can only be used on integers, was \
                 given net.IP",
            ),
            (
                "'%b'.format([dyn(1.0)])",
                "error during formatting: only integers and bools can be formatted as binary, \
                 was given double",
            ),
            (
                "'%s'.format([b'\\xff'])",
                "error during formatting: could not convert argument \"invalid UTF-8 in bytes, \
                 cannot convert to string\" to string",
            ),
            (
                "'%s'.format([[b'\\xff']])",
                "error during formatting: could not convert argument \"invalid UTF-8 in bytes, \
                 cannot convert to string\" to string",
            ),
            (
                "'%s'.format([dyn(ip('1.2.3.4'))])",
                "error during formatting: string clause can only be used on strings, bools, \
                 bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given \
                 net.IP",
            ),
            (
                "'%s'.format([dyn(optional.of(1))])",
                "error during formatting: string clause can only be used on strings, bools, \
                 bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given \
                 optional_type",
            ),
            (
                "'%s'.format([dyn([ip('1.2.3.4')])])",
                "error during formatting: no formatting function for net.IP",
            ),
            (
                "'%s'.format([dyn({'a': quantity('1')})])",
                "error during formatting: no formatting function for kubernetes.Quantity",
            ),
            ("'%'.format(dyn([]))", "index 0 out of range"),
            ("'x%'.format(dyn(['a']))", "unexpected end of string"),
            (
                "'%.'.format(dyn([1.0]))",
                "could not parse formatting clause: error while parsing precision: could not \
                 find end of precision specifier",
            ),
            (
                "'%.f'.format(dyn([1.0]))",
                "could not parse formatting clause: error while parsing precision: error while \
                 converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax",
            ),
            (
                "'%.99999999999999999999f'.format(dyn([1.0]))",
                "could not parse formatting clause: error while parsing precision: error while \
                 converting precision to integer: strconv.Atoi: parsing \
                 \"99999999999999999999\": value out of range",
            ),
            (
                "'%é'.format(dyn([1]))",
                "could not parse formatting clause: unrecognized formatting clause \"Ã\"",
            ),
        ]);
    }

    /// `format` on an object's fields, which the compiled evaluator reads, answers alike.
    #[test]
    fn request_values_format_alike() {
        let object = serde_json::json!({
            "spec": {"names": ["a", "b"], "ratio": 1234.5, "labels": {"z": "1", "a": "2"}}
        });
        let program = CelEnvironment::kubernetes()
            .compile(
                "'%s %s %.1f %s'.format([object.spec.names, object.spec.labels, \
                 object.spec.ratio, object.spec.names[0]])",
            )
            .expect("compiles");
        let value = program
            .evaluate(&Activation::new().object(&object))
            .expect("evaluates");
        assert_eq!(
            value,
            cel::Value::String(r#"["a", "b"] {"a":"2", "z":"1"} 1,234.5 a"#.to_owned().into())
        );
    }

    #[test]
    fn x_text_digits() {
        assert_eq!(fixed_en_us(1234.5, 6, 6), "1,234.500000");
        assert_eq!(fixed_en_us(0.001, 2, 2), "0.00");
        assert_eq!(fixed_en_us(0.001, 3, 3), "0.001");
        assert_eq!(fixed_en_us(123_456.0, 0, 0), "123,456");
        assert_eq!(fixed_en_us(0.1, 0, -1), "0.1");
        assert_eq!(fixed_en_us(1e21, 0, -1), "1,000,000,000,000,000,000,000");
        assert_eq!(scientific_en_us(1e21), "1.000000×10²¹");
        assert_eq!(
            fixed_en_us(949_662_798_391_029.2, 0, -1),
            "949,662,798,391,029.2"
        );
        assert_eq!(
            go_shortest_fixed(949_662_798_391_029.2),
            "949662798391029.2"
        );
        assert_eq!(go_shortest_fixed(2e-9), "0.000000002");
        assert_eq!(go_shortest_fixed(-1.5), "-1.5");
        assert_eq!(go_shortest_fixed(6347.0), "6347");
        assert_eq!(go_shortest_fixed(1e21), "1000000000000000000000");
        assert_eq!(go_shortest_fixed(0.0), "0");
        assert_eq!(decimal_digits("0.0012"), (vec![0, 0, 0, 1, 2], 1));
        assert_eq!(decimal_digits("1.25e-3"), (vec![1, 2, 5], -2));
        assert_eq!(normalize(vec![0, 0, 0, 1, 2, 0], 1), (vec![1, 2], -2));
    }
}
