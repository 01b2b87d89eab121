/// Parses a Kubernetes resource quantity (`500m`, `2`, `1.5`, `128Mi`, `1G`, `1e3`) into a
/// number of base units.
pub fn parse_quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    if number.is_empty() {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent if exponent.starts_with(['e', 'E']) => 10f64.powi(exponent[1..].parse().ok()?),
        _ => return None,
    };
    Some(value * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for (text, value) in [
            ("500m", 0.5),
            ("2", 2.0),
            ("1.5", 1.5),
            ("128Mi", 134_217_728.0),
            ("1G", 1e9),
            ("1e3", 1000.0),
            ("1Ki", 1024.0),
        ] {
            assert_eq!(parse_quantity(text), Some(value), "{text}");
        }
        for bad in ["", "Mi", "1x", "abc"] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
    }
}
