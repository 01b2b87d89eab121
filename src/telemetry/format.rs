//! The text log format's fields and timestamps, written with less work per line than
//! tracing-subscriber's defaults and byte for byte the same: every admission decision writes
//! one line with a dozen fields, a measurable share of a small review's CPU.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};
use tracing_subscriber::fmt::time::FormatTime;

/// Fields as [`DefaultFields`] writes them. Without ANSI colours, plain `name=value` fields
/// of strings, numbers, booleans and `Debug`/`Display` values are written directly; the
/// message, errors, raw identifiers and `log.` fields go to [`DefaultVisitor`], as does
/// everything when the writer uses colours.
#[derive(Debug, Default)]
pub struct PlainFields {
    styled: DefaultFields,
}

impl<'a> MakeVisitor<Writer<'a>> for PlainFields {
    type Visitor = FieldVisitor<'a>;

    fn make_visitor(&self, target: Writer<'a>) -> FieldVisitor<'a> {
        if target.has_ansi_escapes() {
            FieldVisitor::Styled(self.styled.make_visitor(target))
        } else {
            FieldVisitor::Plain(PlainVisitor {
                writer: target,
                is_empty: true,
                result: Ok(()),
            })
        }
    }
}

/// The visitor [`PlainFields`] makes.
pub enum FieldVisitor<'a> {
    /// No colours: the direct path.
    Plain(PlainVisitor<'a>),
    /// Colours: tracing-subscriber's own visitor.
    Styled(DefaultVisitor<'a>),
}

/// Writes fields without colours; see [`PlainFields`].
pub struct PlainVisitor<'a> {
    writer: Writer<'a>,
    is_empty: bool,
    result: fmt::Result,
}

/// Whether [`DefaultVisitor`] writes this field as `name=` followed by the value's `Debug`.
fn is_plain_name(name: &str) -> bool {
    name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
}

impl PlainVisitor<'_> {
    /// Writes the separator and `name=`; false when an earlier write failed.
    fn start(&mut self, name: &str) -> bool {
        if self.result.is_err() {
            return false;
        }
        if self.is_empty {
            self.is_empty = false;
            self.result = self.writer.write_str(name);
        } else {
            self.result = self
                .writer
                .write_char(' ')
                .and_then(|()| self.writer.write_str(name));
        }
        self.result = self.result.and_then(|()| self.writer.write_char('='));
        self.result.is_ok()
    }

    /// Lets [`DefaultVisitor`] write one field where this visitor stands.
    fn delegate(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut visitor);
        self.result = visitor.finish();
        // DefaultVisitor skips `log.` fields without writing a separator.
        if !field.name().starts_with("log.") {
            self.is_empty = false;
        }
    }

    fn write_number(&mut self, field: &Field, negative: bool, magnitude: u64) {
        if !self.start(field.name()) {
            return;
        }
        let mut digits = [0u8; 20];
        if negative {
            self.result = self.writer.write_char('-');
        }
        let text = decimal(magnitude, &mut digits);
        self.result = self.result.and_then(|()| self.writer.write_str(text));
    }
}

/// `n` in decimal, written at the end of `digits`.
pub(super) fn decimal(n: u64, digits: &mut [u8; 20]) -> &str {
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&digits[at..]).unwrap_or_default()
}

/// Whether `<str as Debug>` writes `text` unchanged between its quotes: printable ASCII
/// without `"` or `\`.
pub(super) fn debug_is_verbatim(text: &str) -> bool {
    text.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !is_plain_name(field.name()) {
            return self.delegate(field, |visitor| visitor.record_str(field, value));
        }
        if !self.start(field.name()) {
            return;
        }
        self.result = if debug_is_verbatim(value) {
            self.writer
                .write_char('"')
                .and_then(|()| self.writer.write_str(value))
                .and_then(|()| self.writer.write_char('"'))
        } else {
            write!(self.writer, "{value:?}")
        };
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if !is_plain_name(field.name()) {
            return self.delegate(field, |visitor| visitor.record_bool(field, value));
        }
        if self.start(field.name()) {
            self.result = self.writer.write_str(if value { "true" } else { "false" });
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if !is_plain_name(field.name()) {
            return self.delegate(field, |visitor| visitor.record_u64(field, value));
        }
        self.write_number(field, false, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if !is_plain_name(field.name()) {
            return self.delegate(field, |visitor| visitor.record_i64(field, value));
        }
        self.write_number(field, value < 0, value.unsigned_abs());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.delegate(field, |visitor| visitor.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !is_plain_name(field.name()) {
            return self.delegate(field, |visitor| visitor.record_debug(field, value));
        }
        if self.start(field.name()) {
            self.result = write!(self.writer, "{value:?}");
        }
    }
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for PlainVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match self {
            FieldVisitor::Plain(v) => v.record_str(field, value),
            FieldVisitor::Styled(v) => v.record_str(field, value),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        match self {
            FieldVisitor::Plain(v) => v.record_bool(field, value),
            FieldVisitor::Styled(v) => v.record_bool(field, value),
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match self {
            FieldVisitor::Plain(v) => v.record_u64(field, value),
            FieldVisitor::Styled(v) => v.record_u64(field, value),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        match self {
            FieldVisitor::Plain(v) => v.record_i64(field, value),
            FieldVisitor::Styled(v) => v.record_i64(field, value),
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        match self {
            FieldVisitor::Plain(v) => v.record_error(field, value),
            FieldVisitor::Styled(v) => v.record_error(field, value),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match self {
            FieldVisitor::Plain(v) => v.record_debug(field, value),
            FieldVisitor::Styled(v) => v.record_debug(field, value),
        }
    }
}

impl VisitOutput<fmt::Result> for FieldVisitor<'_> {
    fn finish(self) -> fmt::Result {
        match self {
            FieldVisitor::Plain(v) => v.finish(),
            FieldVisitor::Styled(v) => v.finish(),
        }
    }
}

impl VisitFmt for FieldVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        match self {
            FieldVisitor::Plain(v) => v.writer(),
            FieldVisitor::Styled(v) => v.writer(),
        }
    }
}

/// Timestamps as tracing-subscriber's `SystemTime` writes them (RFC 3339, UTC, microseconds:
/// `2026-12-02T05:55:51.371990Z`), with the part up to the second kept per thread while the
/// second lasts.
#[derive(Debug, Default, Clone, Copy)]
pub struct UtcMicros;

thread_local! {
    /// The Unix second last written on this thread and its `YYYY-MM-DDTHH:MM:SS.` text.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

impl FormatTime for UtcMicros {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let Ok(since_epoch) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            return tracing_subscriber::fmt::time::SystemTime.format_time(w);
        };
        let seconds = since_epoch.as_secs();
        let Some(civil) = Civil::from_unix(seconds) else {
            return tracing_subscriber::fmt::time::SystemTime.format_time(w);
        };
        SECOND.with_borrow_mut(|(cached, prefix)| {
            if *cached != seconds {
                prefix.clear();
                write!(
                    prefix,
                    "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
                    civil.year, civil.month, civil.day, civil.hour, civil.minute, civil.second
                )?;
                *cached = seconds;
            }
            w.write_str(prefix)
        })?;
        let micros = since_epoch.subsec_micros();
        let mut digits = *b"000000Z";
        let mut rest = micros;
        for at in (0..6).rev() {
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        // Only ASCII digits and `Z`.
        w.write_str(std::str::from_utf8(&digits).unwrap_or_default())
    }
}

/// A UTC calendar date and time of day.
struct Civil {
    year: u64,
    month: u64,
    day: u64,
    hour: u64,
    minute: u64,
    second: u64,
}

impl Civil {
    /// The date and time of a Unix second, for years up to 9999 (tracing-subscriber writes
    /// later years differently; those go to it).
    fn from_unix(seconds: u64) -> Option<Civil> {
        let days = seconds / 86_400;
        let of_day = seconds % 86_400;
        // Days to a proleptic Gregorian date, counting 400-year eras from 0000-03-01.
        let shifted = days + 719_468;
        let era = shifted / 146_097;
        let day_of_era = shifted % 146_097;
        let year_of_era =
            (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let month_from_march = (5 * day_of_year + 2) / 153;
        let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
        let month = if month_from_march < 10 {
            month_from_march + 3
        } else {
            month_from_march - 9
        };
        let year = year_of_era + era * 400 + u64::from(month <= 2);
        (year <= 9999).then_some(Civil {
            year,
            month,
            day,
            hour: of_day / 3_600,
            minute: of_day % 3_600 / 60,
            second: of_day % 60,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[derive(Debug)]
    struct Failure {
        source: std::io::Error,
    }

    impl fmt::Display for Failure {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer \x1b[31mfailure")
        }
    }

    impl std::error::Error for Failure {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    /// Every kind of field the server logs, and the awkward ones: quotes, escapes, control
    /// characters, non-ASCII, negative numbers, errors with sources, raw identifiers, spans.
    fn emit() {
        let span = tracing::info_span!("reload", policy = "a \"b\"", count = 3u64);
        let _entered = span.enter();
        tracing::info!(
            uid = %"3f1c-\u{1b}[2J",
            endpoint = "validate",
            kind = %"ConfigMap",
            namespace = "",
            name = "n\u{e9}e\\\"x\"\n\u{85}",
            dry_run = false,
            allowed = true,
            code = 200u16,
            violations = 0usize,
            offset = -42i64,
            least = i64::MIN,
            most = u64::MAX,
            ratio = 0.5f64,
            r#type = "raw",
            list = ?["a", "b"],
            "admission decision \u{1b}[1m{}",
            "formatted"
        );
        let error = Failure {
            source: std::io::Error::other("inner \u{7} cause"),
        };
        tracing::warn!(
            error = &error as &(dyn std::error::Error + 'static),
            "failed"
        );
        tracing::error!(message = "a message field", extra = "x");
        tracing::debug!("");
    }

    fn render(plain: bool, ansi: bool) -> String {
        let captured = Captured::default();
        let builder = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(captured.clone())
            .with_ansi(ansi)
            .without_time();
        let subscriber: Box<dyn tracing::Subscriber + Send + Sync> = if plain {
            Box::new(builder.fmt_fields(PlainFields::default()).finish())
        } else {
            Box::new(builder.finish())
        };
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    /// The decision line formatted whole is byte for byte the line the subscriber formats
    /// from the event with its fields, but for the times, read as each line is written.
    #[test]
    fn a_decision_line_formatted_whole_is_the_subscribers_line() {
        let review = crate::admission::parse_review(
            br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "request": {"uid": "u-1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                             "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                             "name": "we\"b \u00fc\u0007", "namespace": "shop", "operation": "UPDATE",
                             "userInfo": {"username": "system:serviceaccount:a \"b\"\u001b[1m"}, "dryRun": true}}"#,
        )
        .unwrap();
        let mut unnamed = review.request.clone();
        unnamed.name = None;
        unnamed.namespace = None;
        unnamed.dry_run = None;
        // The timestamp (`2026-12-07T06:30:00.123456Z`) and the duration, masked.
        let masked = |text: &str| {
            text.lines()
                .map(|line| {
                    let (time, rest) = line.split_once(' ').unwrap();
                    assert_eq!(time.len(), 27, "{line}");
                    assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{line}");
                    let (head, duration) = rest.rsplit_once("duration_us=").unwrap();
                    assert!(duration.parse::<u64>().is_ok(), "{line}");
                    format!("T {head}duration_us=N")
                })
                .collect::<Vec<_>>()
        };
        for request in [&review.request, &unnamed] {
            let line = crate::telemetry::DecisionLine {
                request,
                endpoint: "mutate",
                allowed: false,
                code: 403,
                violations: 2,
                patch_operations: 3,
                warnings: 1,
                started: std::time::Instant::now(),
            };
            for info in [true, false] {
                let captured = Captured::default();
                let subscriber = tracing_subscriber::fmt()
                    .with_max_level(tracing::Level::TRACE)
                    .with_writer(captured.clone())
                    .with_ansi(false)
                    .with_timer(UtcMicros)
                    .fmt_fields(PlainFields::default())
                    .finish();
                tracing::subscriber::with_default(subscriber, || line.event_with_fields(info));
                let from_event = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
                let whole = line.text_line(info);
                assert!(whole.ends_with('\n') && whole.matches('\n').count() == 1);
                assert_eq!(masked(&whole), masked(&from_event), "{whole}{from_event}");
                assert!(
                    from_event
                        .contains("portcullis::server::handlers: admission decision uid=u-1 "),
                    "{from_event}"
                );
            }
        }
    }

    #[test]
    fn fields_are_written_as_tracing_subscriber_writes_them() {
        for ansi in [false, true] {
            let stock = render(false, ansi);
            assert_eq!(stock.lines().count(), 4, "{stock}");
            assert_eq!(render(true, ansi), stock, "ansi {ansi}");
        }
        let plain = render(true, false);
        assert!(
            plain.contains(r#" endpoint="validate" kind=ConfigMap namespace="" name="n"#),
            "{plain}"
        );
    }

    #[test]
    fn timestamps_are_written_as_tracing_subscriber_writes_them() {
        let stamp = |timer: &dyn FormatTime| {
            let mut text = String::new();
            timer.format_time(&mut Writer::new(&mut text)).unwrap();
            text
        };
        for _ in 0..1_000 {
            let ours = stamp(&UtcMicros);
            let stock = stamp(&tracing_subscriber::fmt::time::SystemTime);
            // Taken a moment apart: equal up to the second, and the same shape after it.
            assert_eq!(ours.len(), stock.len(), "{ours} {stock}");
            assert!(ours.ends_with('Z'), "{ours}");
            if ours[..19] == stock[..19] {
                return;
            }
        }
        panic!("never within the same second");
    }

    #[test]
    fn calendar_dates() {
        let at = |seconds| {
            let c = Civil::from_unix(seconds).unwrap();
            (c.year, c.month, c.day, c.hour, c.minute, c.second)
        };
        assert_eq!(at(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(at(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(at(1_709_164_799), (2024, 2, 28, 23, 59, 59));
        assert_eq!(at(1_709_251_199), (2024, 2, 29, 23, 59, 59));
        assert_eq!(at(1_735_689_600), (2025, 1, 1, 0, 0, 0));
        assert_eq!(at(4_102_444_800), (2100, 1, 1, 0, 0, 0));
        assert_eq!(at(253_402_300_799), (9999, 12, 31, 23, 59, 59));
        assert!(Civil::from_unix(253_402_300_800).is_none());
    }
}
