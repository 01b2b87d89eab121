//! Resource quantities as the apiserver writes them back: parsed exactly, rounded up to the
//! nanounit (and to the milliunit in resource lists, as `SetDefaults_ResourceList` does), then
//! printed in the canonical form of their format (`1000m` → `1`, `1.5Gi` → `1536Mi`, `0.5` →
//! `500m`, `12e6` stays `12e6`). A value this module cannot represent exactly (beyond 38
//! digits) or that does not parse is left as written.

use serde_json::Value;

use super::fields::Object;

/// How a quantity is written: the format of its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `Ki`, `Mi` … (powers of 1024).
    Binary,
    /// `m`, `k`, `M` … or none (powers of 1000).
    Decimal,
    /// `e3`, `E-6` … (powers of ten).
    Exponent,
}

/// A parsed quantity: `sign × mantissa × 10^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quantity {
    negative: bool,
    mantissa: u128,
    exponent: i32,
    format: Format,
}

/// The canonical text of a quantity, rounded up to `10^min_exponent` (−9 for every quantity,
/// −3 in resource lists); `None` when `text` is not a quantity this module can represent.
fn canonical(text: &str, min_exponent: i32) -> Option<String> {
    if text.starts_with('+') {
        // The apiserver keeps such a string as written when it is otherwise canonical.
        return None;
    }
    let mut quantity = parse(text)?;
    quantity.round_up(min_exponent)?;
    quantity.format_text()
}

/// Canonicalises the quantity at `key` (a string, or a JSON number the apiserver accepts too).
pub(super) fn quantity_field(map: &mut Object, key: &str) {
    if let Some(value) = map.get_mut(key) {
        canonicalise(value, -9);
    }
}

/// Canonicalises every quantity of the resource list at `key`, rounded up to the milliunit.
pub(super) fn resource_list(map: &mut Object, key: &str) {
    if let Some(list) = map.get_mut(key).and_then(Value::as_object_mut) {
        for value in list.values_mut() {
            canonicalise(value, -3);
        }
    }
}

fn canonicalise(value: &mut Value, min_exponent: i32) {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        _ => return,
    };
    if let Some(canonical) = canonical(&text, min_exponent) {
        *value = Value::String(canonical);
    }
}

fn parse(text: &str) -> Option<Quantity> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let number_end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let mut mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut exponent = -i32::try_from(fraction.len()).ok()?;
    let format = match suffix {
        "" => Format::Decimal,
        "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => {
            exponent += match suffix {
                "n" => -9,
                "u" => -6,
                "m" => -3,
                "k" => 3,
                "M" => 6,
                "G" => 9,
                "T" => 12,
                "P" => 15,
                _ => 18,
            };
            Format::Decimal
        }
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                _ => 60,
            };
            mantissa = mantissa.checked_mul(1u128 << power)?;
            Format::Binary
        }
        _ => {
            let power = suffix.strip_prefix(['e', 'E'])?;
            let digits = power.strip_prefix(['+', '-']).unwrap_or(power);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            exponent = exponent.checked_add(power.parse::<i32>().ok()?)?;
            Format::Exponent
        }
    };
    let mut quantity = Quantity {
        negative,
        mantissa,
        exponent,
        format,
    };
    quantity.normalise()?;
    // A binary quantity below one is written as a decimal one.
    if quantity.format == Format::Binary && quantity.exponent < 0 {
        quantity.format = Format::Decimal;
    }
    Some(quantity)
}

impl Quantity {
    /// Moves trailing zeros of the mantissa into the exponent; a zero gets exponent 0.
    fn normalise(&mut self) -> Option<()> {
        if self.mantissa == 0 {
            self.exponent = 0;
            return Some(());
        }
        while self.mantissa.is_multiple_of(10) {
            self.mantissa /= 10;
            self.exponent = self.exponent.checked_add(1)?;
        }
        Some(())
    }

    /// Rounds away from zero to a multiple of `10^min_exponent`.
    fn round_up(&mut self, min_exponent: i32) -> Option<()> {
        if self.exponent >= min_exponent {
            return Some(());
        }
        let shift = u32::try_from(min_exponent - self.exponent).ok()?;
        let divisor = 10u128.checked_pow(shift);
        self.mantissa = match divisor {
            Some(divisor) => self.mantissa.div_ceil(divisor),
            // Smaller than any unit representable here: the smallest unit.
            None => 1,
        };
        self.exponent = min_exponent;
        self.normalise()
    }

    fn format_text(&self) -> Option<String> {
        if self.mantissa == 0 {
            return Some("0".to_owned());
        }
        let sign = if self.negative { "-" } else { "" };
        if self.format == Format::Binary
            && let Some(text) = self.binary_text()
        {
            return Some(format!("{sign}{text}"));
        }
        // Decimal: the exponent goes down to a multiple of three.
        let down = u32::try_from(self.exponent.rem_euclid(3)).ok()?;
        let mantissa = self.mantissa.checked_mul(10u128.pow(down))?;
        let exponent = self.exponent - self.exponent.rem_euclid(3);
        let suffix = match (self.format, exponent) {
            (Format::Exponent, 0) => String::new(),
            (Format::Exponent, exponent) => format!("e{exponent}"),
            (_, -9) => "n".into(),
            (_, -6) => "u".into(),
            (_, -3) => "m".into(),
            (_, 0) => String::new(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            (_, 18) => "E".into(),
            _ => return None,
        };
        Some(format!("{sign}{mantissa}{suffix}"))
    }

    /// A whole number of at least 1024 in powers of 1024; `None` (write it as a decimal)
    /// otherwise.
    fn binary_text(&self) -> Option<String> {
        if self.exponent < 0 {
            return None;
        }
        let mut value = self
            .mantissa
            .checked_mul(10u128.checked_pow(u32::try_from(self.exponent).ok()?)?)?;
        if value < 1024 {
            return None;
        }
        let mut power = 0;
        while value.is_multiple_of(1024) && power < 6 {
            value /= 1024;
            power += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
        Some(format!("{value}{suffix}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_as_the_apiserver_writes_them() {
        for (text, resource_list, expected) in [
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Ki", "512"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("100.0m", "100m"),
            ("1.5M", "1500k"),
            ("1e3", "1e3"),
            ("12e6", "12e6"),
            ("1.5e3", "1500"),
            ("2048", "2048"),
            ("0.0001", "1m"),
            ("0", "0"),
            ("0m", "0"),
            ("1Ki", "1Ki"),
            ("8Mi", "8Mi"),
            ("1000", "1k"),
            ("-1.5", "-1500m"),
        ]
        .map(|(text, expected)| (text, true, expected))
        .into_iter()
        .chain([("0.0001", false, "100u"), ("1n", false, "1n")])
        {
            let min = if resource_list { -3 } else { -9 };
            assert_eq!(canonical(text, min).as_deref(), Some(expected), "{text}");
        }
        for bad in ["", "x", "1.2.3", "1Qi", "1e", "1e+", "--1", "+1"] {
            assert_eq!(canonical(bad, -9), None, "{bad}");
        }
    }
}
