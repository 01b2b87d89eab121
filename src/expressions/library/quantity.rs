//! `quantity()`, `isQuantity()`: resource quantities, exact to the nano-unit.

use super::*;

/// A resource quantity, held exactly in nano-units (Kubernetes rounds finer values up); one
/// too large for that is kept as an approximation (it is then never an integer).
#[derive(Debug, Clone)]
pub(super) struct Quantity {
    pub(super) nanos: Option<i128>,
    pub(super) approx: f64,
    pub(super) raw: String,
}

impl Quantity {
    pub(super) fn exact(nanos: i128) -> Quantity {
        Quantity {
            nanos: Some(nanos),
            approx: nanos as f64 / NANO as f64,
            raw: format_nanos(nanos),
        }
    }

    pub(super) fn cmp(&self, other: &Quantity) -> Ordering {
        match (self.nanos, other.nanos) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.approx.total_cmp(&other.approx),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

pub(super) const NANO: i128 = 1_000_000_000;

/// Parses `s` as `resource.ParseQuantity` does: what it accepts (`-`, `.` and `-Ki` are 0, its
/// regular expression notwithstanding) and its errors are those of the object model's check.
pub(super) fn parse_quantity(s: &str) -> Result<Quantity, String> {
    crate::kubernetes::schema::quantity::check_quantity(s)
        .map_err(|error| error.message().to_owned())?;
    let suffix_error = || "unable to parse quantity's suffix".to_owned();
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let (exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exp = other.strip_prefix(['e', 'E']).ok_or_else(suffix_error)?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return Err(suffix_error());
            }
            (exp.parse().map_err(|_| suffix_error())?, 0)
        }
    };
    let approx = format!("{int_part}.{frac_part}0")
        .parse::<f64>()
        .unwrap_or(0.0)
        * 10f64.powi(exp10)
        * 2f64.powi(exp2 as i32);
    let approx = if negative { -approx } else { approx };
    // nanos = digits * 10^(9 + exp10 - frac) * 2^exp2, rounded up.
    let exact = || -> Option<i128> {
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        let scale = 9 + exp10 - frac_part.len() as i32;
        let mut nanos = mantissa;
        if scale >= 0 {
            nanos = nanos.checked_mul(10i128.checked_pow(scale as u32)?)?;
        }
        nanos = nanos.checked_mul(1i128 << exp2)?;
        if scale < 0 {
            let divisor = 10i128.checked_pow((-scale) as u32)?;
            nanos = nanos.checked_add(divisor - 1)? / divisor;
        }
        Some(if negative { -nanos } else { nanos })
    };
    Ok(Quantity {
        nanos: exact(),
        approx,
        raw: s.to_owned(),
    })
}

pub(super) fn quantity(args: &[Value]) -> Fallible {
    parse_quantity(str_arg("quantity", args, 0)?)
        .map(wrap)
        .map_err(|e| fail("quantity", e))
}

pub(super) fn is_quantity(args: &[Value]) -> Fallible {
    Ok(Value::Bool(
        parse_quantity(str_arg("isQuantity", args, 0)?).is_ok(),
    ))
}
