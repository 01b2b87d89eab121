//! `string(double)` and `string(timestamp)` as cel-go writes them. A double: Go's
//! `strconv.FormatFloat(d, 'g', -1, 64)`, the shortest digits that read back as the same
//! double, in exponent form below 1e-4 and from 1e6 on (`1e+06`, `1.5e-07`,
//! `1.073741824e+09`), where Rust's formatting writes every digit (`1000000`). A timestamp:
//! Go's RFC 3339 with nanoseconds, in the timestamp's own offset, the fraction without its
//! trailing zeros (`2024-01-02T03:04:05.1+01:00`), where the cel crate writes UTC. The
//! standard library's `string` overloads cannot be replaced, so [`wrap_string_conversions`]
//! has every `string(x)` the interpreter runs read `string(@doubleText(x))`: a double or a
//! timestamp is written here, anything else passes through.

use cel::ExecutionError;
use cel::common::ast::{CallExpr, Expr, IdedExpr};
use cel::common::types::{CelDouble, CelTimestamp};
use cel::common::value::CowVal;

use crate::expressions::ast_walk::visit_children_mut;

/// The internal function that writes a double as cel-go's `string()` does.
pub(super) const DOUBLE_TEXT: &str = "@doubleText";

/// `d` as Go's `strconv.FormatFloat(d, 'g', -1, 64)` writes it.
pub(crate) fn go_format_g(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_owned();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let (digits, exponent) = go_shortest_digits(d);
    let mut out = String::from(if d.is_sign_negative() { "-" } else { "" });
    if !(-4..6).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.unsigned_abs()));
        return out;
    }
    // The position of the decimal point after the first digit's.
    let point = exponent + 1;
    if point <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat(point.unsigned_abs() as usize));
        out.push_str(&digits);
    } else {
        let point = point as usize;
        if point >= digits.len() {
            out.push_str(&digits);
            out.push_str(&"0".repeat(point - digits.len()));
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// The shortest digits that read back as `|d|` (finite), and the exponent of the first, as
/// Go's `strconv` picks them: among the shortest, the closest to `d`, and when two are as
/// close, the one whose last digit is even. Rust's `{:e}` picks the same but for that tie,
/// where it takes the larger (`949662798391029.25`: Go `…029.2`, Rust `…029.3`).
pub(crate) fn go_shortest_digits(d: f64) -> (String, i32) {
    let abs = d.abs();
    let (mut digits, exponent) = split_scientific(&format!("{abs:e}"));
    // A tie: the exact value has one digit more than the shortest, a 5, and the shortest
    // rounded it up to an odd digit. Both neighbours are then within half a unit in the last
    // place of the double, which takes 16 digits or more (2^-53 relative).
    let last = digits.as_bytes()[digits.len() - 1];
    if digits.len() >= 15 && (last - b'0') % 2 == 1 {
        // Every double's exact decimal expansion has at most 767 significant digits.
        let (exact, _) = split_scientific(&format!("{abs:.800e}"));
        let exact = exact.trim_end_matches('0');
        if exact.len() == digits.len() + 1 && exact.ends_with('5') {
            let lower = &exact[..digits.len()];
            let reads_back = format!("0.{lower}e{}", exponent + 1)
                .parse::<f64>()
                .is_ok_and(|x| x == abs);
            if reads_back && lower != digits && !lower.ends_with('0') {
                digits = lower.to_owned();
            }
        }
    }
    (digits, exponent)
}

/// The digits (without the point) and the exponent of Rust's `{:e}` text of a non-negative
/// double.
fn split_scientific(text: &str) -> (String, i32) {
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text, "0"));
    let digits = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exponent.parse().unwrap_or(0))
}

/// A timestamp as Go's `t.Format(time.RFC3339Nano)` writes it: in its own offset (`Z` for
/// UTC), the fraction of a second without trailing zeros, none when it is whole; `None` for
/// anything else.
pub(crate) fn go_rfc3339_nano(value: &cel::Value) -> Option<String> {
    let cel::Value::Timestamp(t) = value else {
        return None;
    };
    let mut out = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos() % 1_000_000_000;
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    let offset = t.offset().local_minus_utc();
    if offset == 0 {
        out.push('Z');
    } else {
        let minutes = offset.unsigned_abs() / 60;
        out.push(if offset < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}:{:02}", minutes / 60, minutes % 60));
    }
    Some(out)
}

/// `@doubleText(x)`: a double or a timestamp written as cel-go's `string()` writes it;
/// anything else as it is.
pub(super) fn double_text<'b, 'v>(
    mut args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = args
        .pop()
        .ok_or_else(|| ExecutionError::function_error(DOUBLE_TEXT, "one argument"))?;
    let text = if let Some(double) = value.downcast_ref::<CelDouble>() {
        go_format_g(*double.inner())
    } else if let Some(timestamp) = value.downcast_ref::<CelTimestamp>() {
        go_rfc3339_nano(&cel::Value::Timestamp(*timestamp.inner())).unwrap_or_default()
    } else {
        return Ok(value);
    };
    let text: Box<dyn cel::common::value::Val> = cel::Value::String(text.into()).try_into()?;
    Ok(CowVal::Owned(text))
}

/// Has every global `string(x)` of `expr` read `string(@doubleText(x))`.
pub(in crate::expressions) fn wrap_string_conversions(expr: &mut IdedExpr) {
    visit_children_mut(expr, wrap_string_conversions);
    if let Expr::Call(call) = &mut expr.expr
        && call.func_name == "string"
        && call.target.is_none()
        && call.args.len() == 1
    {
        let argument = call.args.pop().unwrap_or_default();
        call.args.push(IdedExpr {
            id: argument.id,
            expr: Expr::Call(CallExpr {
                func_name: DOUBLE_TEXT.to_owned(),
                target: None,
                args: vec![argument],
            }),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::go_format_g;

    #[test]
    fn doubles_are_written_as_go_writes_them() {
        for (d, text) in [
            (1e6, "1e+06"),
            (123_456.0, "123456"),
            (999_999.0, "999999"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-5, "-2.5e-05"),
            (1.5e-7, "1.5e-07"),
            (1.0, "1"),
            (100.5, "100.5"),
            (0.1, "0.1"),
            (-0.5, "-0.5"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1_073_741_824.0, "1.073741824e+09"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            // Two shortest candidates as close: Go takes the even one.
            (949_662_798_391_029.2, "9.496627983910292e+14"),
            (-180_013_294_179_781.62, "-1.8001329417978162e+14"),
            (1_869_115_183_105_143.2, "1.8691151831051432e+15"),
        ] {
            assert_eq!(go_format_g(d), text, "{d:?}");
        }
    }
}
