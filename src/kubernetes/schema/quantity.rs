//! `resource.Quantity` as the apiserver parses and writes it (k8s.io/apimachinery v0.37.2,
//! `pkg/api/resource`): the parse errors of `ParseQuantity`, and the form that encoding a
//! decoded quantity writes (`0.5` → `500m`, `1000` → `1k`, `2048Ki` → `2Mi`, but `1E3` and `+2`
//! as given, because `ParseQuantity` keeps such inputs).
//!
//! Values are held exactly as an `i128` mantissa and a power of ten; a quantity too large for
//! that (over 38 digits) is accepted and written back unchanged.

/// Why a string is not a quantity, worded as `ParseQuantity`'s errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    FormatWrong,
    /// `ErrSuffix`.
    Suffix,
}

impl QuantityError {
    /// The apiserver's message.
    pub fn message(self) -> &'static str {
        match self {
            QuantityError::FormatWrong => {
                "quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Suffix => "unable to parse quantity's suffix",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// A parsed quantity: `mantissa × 10^exponent`, in the format its suffix asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: Format,
}

/// The parts of a quantity string, as `parseQuantityString` splits it.
struct Parts<'s> {
    negative: bool,
    num: &'s str,
    denom: &'s str,
    suffix: &'s str,
}

fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = s.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    match bytes.first() {
        Some(b'-') => {
            negative = true;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < bytes.len() && bytes[pos] == b'0' {
        pos += 1;
    }
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .map_or(bytes.len(), |n| from + n)
    };
    let num_end = digits(pos);
    let num = &s[pos..num_end];
    pos = num_end;
    let mut denom = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        let denom_end = digits(pos + 1);
        denom = &s[pos + 1..denom_end];
        pos = denom_end;
    }
    let suffix_start = pos;
    while pos < bytes.len() && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < bytes.len() && matches!(bytes[pos], b'-' | b'+') {
        pos += 1;
    }
    if digits(pos) != bytes.len() {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        negative,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// (format, base-10 exponent or base-2 exponent) of a suffix, as `interpret` reads it.
fn interpret(suffix: &str) -> Option<(Format, i32)> {
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(exponent) = decimal {
        return Some((Format::DecimalSi, exponent));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(exponent) = binary {
        return Some((Format::BinarySi, exponent));
    }
    let rest = suffix
        .strip_prefix(['e', 'E'])
        .filter(|rest| !rest.is_empty())?;
    let exponent: i64 = rest.parse().ok()?;
    Some((Format::DecimalExponent, i32::try_from(exponent).ok()?))
}

/// Checks `s` as `ParseQuantity` does.
pub fn check_quantity(s: &str) -> Result<(), QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let parts = split(s)?;
    interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
    Ok(())
}

fn parse(s: &str) -> Option<Quantity> {
    let parts = split(s).ok()?;
    let (mut format, suffix_exponent) = interpret(parts.suffix)?;
    let digits = format!("{}{}", parts.num, parts.denom);
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut exponent = -i32::try_from(parts.denom.len()).ok()?;
    match format {
        Format::BinarySi => {
            mantissa = mantissa.checked_mul(1i128.checked_shl(suffix_exponent as u32)?)?;
        }
        _ => exponent = exponent.checked_add(suffix_exponent)?,
    }
    // Non-zero values are rounded up (away from zero) to a whole number of nanos.
    if exponent < -9 && mantissa != 0 {
        let shift = (-9 - exponent) as u32;
        mantissa = match 10i128.checked_pow(shift) {
            Some(divisor) => mantissa / divisor + i128::from(mantissa % divisor != 0),
            None => 1,
        };
        exponent = -9;
    }
    if parts.negative {
        mantissa = -mantissa;
    }
    if format == Format::BinarySi && mantissa != 0 && value_below_one(mantissa, exponent) {
        format = Format::DecimalSi;
    }
    Some(Quantity {
        mantissa,
        exponent,
        format,
    })
}

fn value_below_one(mantissa: i128, exponent: i32) -> bool {
    exponent < 0
        && 10i128
            .checked_pow((-exponent) as u32)
            .is_none_or(|scale| mantissa.abs() < scale)
}

/// Removes trailing zeros of the mantissa into the exponent.
fn normalise(mut mantissa: i128, mut exponent: i32) -> (i128, i32) {
    if mantissa == 0 {
        return (0, 0);
    }
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    (mantissa, exponent)
}

/// Whether `ParseQuantity` keeps the string it was given, which encoding then writes as it
/// is: its int64 fast path caches the input when it is in a canonical-looking form (`1E3`,
/// `+2`, `01` and `1.G` are kept; `1000`, `0.5` and `1024Ki` are not).
fn keeps_input(s: &str) -> bool {
    let Ok(parts) = split(s) else {
        return false;
    };
    let Some((format, suffix_exponent)) = interpret(parts.suffix) else {
        return false;
    };
    let num = if parts.num.is_empty() { "0" } else { parts.num };
    let shifted = format!("{num}{}", parts.denom);
    let Ok(value) = shifted.parse::<i64>() else {
        return false;
    };
    match format {
        Format::BinarySi => {
            let precision = 15 - num.len() as i64 - i64::from(suffix_exponent * 3 / 10) - 1;
            parts.denom.is_empty()
                && precision >= 0
                && value.checked_mul(1i64 << suffix_exponent).is_some()
                && value & 0x07 != 0
        }
        _ => {
            let precision = 18 - (num.len() + parts.denom.len()) as i64;
            let scale = i64::from(suffix_exponent) - parts.denom.len() as i64;
            precision >= 0
                && scale >= -9
                && scale % 3 == 0
                && !shifted.ends_with("000")
                && !shifted.starts_with('0')
        }
    }
}

/// The string of a quantity as encoding a decoded `Quantity` writes it: the input when
/// `ParseQuantity` keeps it, else the canonical form; `None` when `s` is not a quantity or is
/// beyond what is held exactly here.
pub fn canonical_quantity(s: &str) -> Option<String> {
    if s == "0" || keeps_input(s) {
        return Some(s.to_owned());
    }
    let q = parse(s)?;
    if q.mantissa == 0 {
        return Some("0".to_owned());
    }
    let (mantissa, exponent) = normalise(q.mantissa, q.exponent);
    let mut format = q.format;
    if format == Format::BinarySi {
        let small = exponent < 0
            || 10i128
                .checked_pow(exponent as u32)
                .and_then(|scale| mantissa.checked_mul(scale))
                .is_some_and(|value| value.abs() < 1024);
        if small || exponent < 0 {
            format = Format::DecimalSi;
        } else {
            let mut value = mantissa.checked_mul(10i128.checked_pow(exponent as u32)?)?;
            let mut power = 0;
            while value % 1024 == 0 && power < 6 {
                value /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return Some(format!("{value}{suffix}"));
        }
    }
    // The exponent goes down to a multiple of three, the mantissa up.
    let (mantissa, exponent) = match exponent.rem_euclid(3) {
        1 => (mantissa.checked_mul(10)?, exponent - 1),
        2 => (mantissa.checked_mul(100)?, exponent - 2),
        _ => (mantissa, exponent),
    };
    let suffix = match format {
        Format::DecimalExponent if exponent == 0 => String::new(),
        Format::DecimalExponent => format!("e{exponent}"),
        _ => match exponent {
            -9 => "n".to_owned(),
            -6 => "u".to_owned(),
            -3 => "m".to_owned(),
            0 => String::new(),
            3 => "k".to_owned(),
            6 => "M".to_owned(),
            9 => "G".to_owned(),
            12 => "T".to_owned(),
            15 => "P".to_owned(),
            18 => "E".to_owned(),
            _ => return None,
        },
    };
    Some(format!("{mantissa}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair but the sub-milli ones was compared with a v1.37.2 apiserver (a
    /// ResourceQuota's `hard` through `create --dry-run=server`, which also rounds CPU up to
    /// milli units by defaulting, so that sub-milli values are not comparable there).
    #[test]
    fn canonical_forms() {
        for (input, canonical) in [
            ("0", "0"),
            ("0.0", "0"),
            ("500m", "500m"),
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1.5", "1500m"),
            ("100M", "100M"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("1E3", "1E3"),
            ("1Ki", "1Ki"),
            ("1024Ki", "1Mi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Ki", "1536"),
            ("0.5Ki", "512"),
            ("512", "512"),
            ("1024", "1024"),
            ("0.0000000001", "1n"),
            ("1.0000000001", "1000000001n"),
            ("-0.5", "-500m"),
            ("+2", "+2"),
            ("01", "01"),
            ("1.", "1."),
            ("1.G", "1.G"),
            ("12E", "12E"),
            ("2048", "2048"),
            ("3072", "3072"),
            ("123456789", "123456789"),
            ("0.1Ki", "102400m"),
            ("1Ei", "1Ei"),
            ("3Ki", "3Ki"),
            ("8Ki", "8Ki"),
            ("1.5Mi", "1536Ki"),
            ("100000000000Ki", "97656250Mi"),
        ] {
            assert_eq!(
                canonical_quantity(input).as_deref(),
                Some(canonical),
                "{input}"
            );
        }
    }

    #[test]
    fn parse_errors() {
        assert_eq!(check_quantity("500m"), Ok(()));
        assert_eq!(check_quantity(""), Err(QuantityError::FormatWrong));
        assert_eq!(check_quantity("lots"), Err(QuantityError::FormatWrong));
        assert_eq!(check_quantity("true"), Err(QuantityError::FormatWrong));
        assert_eq!(check_quantity("1Qi"), Err(QuantityError::FormatWrong));
        assert_eq!(check_quantity("1iK"), Err(QuantityError::Suffix));
        assert_eq!(check_quantity("1e"), Err(QuantityError::Suffix));
        assert_eq!(check_quantity("1 Gi"), Err(QuantityError::FormatWrong));
        assert_eq!(canonical_quantity("1iK"), None);
    }
}
