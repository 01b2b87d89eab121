//! `url()`, `isURL()` and the URL getters, as Go's `url.ParseRequestURI` accepts URLs.

use super::*;

/// A parsed URL, as Go's `url.ParseRequestURI` accepts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Url {
    pub(super) raw: String,
    pub(super) scheme: String,
    pub(super) host: String,
    pub(super) path: String,
    pub(super) query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

pub(super) fn parse_url(s: &str) -> Result<Url, String> {
    let err = |why: String| format!("parse {s:?}: {why}");
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(err("net/url: invalid control character in URL".to_owned()));
    }
    // ParseRequestURI decides validity; the parts come from the text before any fragment.
    let (scheme, rest) = if s.starts_with('/') {
        (String::new(), s)
    } else {
        let colon = s.find(':');
        let slash = s.find('/');
        let Some(colon) = colon.filter(|c| slash.is_none_or(|sl| *c < sl)) else {
            return Err(err("invalid URI for request".to_owned()));
        };
        let scheme = &s[..colon];
        let mut chars = scheme.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !valid {
            return Err(err(if scheme.is_empty() {
                "missing protocol scheme".to_owned()
            } else {
                "first path segment in URL cannot contain colon".to_owned()
            }));
        }
        (scheme.to_ascii_lowercase(), &s[colon + 1..])
    };
    let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, q.to_owned()),
        None => (rest, String::new()),
    };
    let (host, path) = match before_query.strip_prefix("//") {
        Some(authority_and_path) => {
            let (authority, path) = match authority_and_path.find('/') {
                Some(i) => authority_and_path.split_at(i),
                None => (authority_and_path, ""),
            };
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            validate_host(host).map_err(err)?;
            (host.to_owned(), path.to_owned())
        }
        None => (String::new(), before_query.to_owned()),
    };
    Ok(Url {
        raw: s.to_owned(),
        scheme,
        host,
        path,
        query,
    })
}

/// Go's `url` host rules: `[v6]` or a name, then an optional `:digits` port.
pub(super) fn validate_host(host: &str) -> Result<(), String> {
    let port = if let Some(rest) = host.strip_prefix('[') {
        let Some((_, after)) = rest.split_once(']') else {
            return Err("missing ']' in host".to_owned());
        };
        after
    } else {
        if host
            .chars()
            .any(|c| c == ' ' || c == '<' || c == '>' || c == '"')
        {
            return Err(format!("invalid character {:?} in host name", host));
        }
        host.find(':').map_or("", |i| &host[i..])
    };
    match port.strip_prefix(':') {
        None if port.is_empty() => Ok(()),
        Some(digits) if digits.chars().all(|c| c.is_ascii_digit()) => Ok(()),
        _ => Err(format!("invalid port {port:?} after host")),
    }
}

/// The path as Go's `EscapedPath` gives it: reserved and unsafe bytes percent-encoded.
pub(super) fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@!'()*%".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn url(args: &[Value]) -> Fallible {
    let s = str_arg("url", args, 0)?;
    parse_url(s).map(wrap).map_err(|e| {
        fail(
            "url",
            format!("URL parse error during conversion from string: {e}"),
        )
    })
}

pub(super) fn is_url(args: &[Value]) -> Fallible {
    Ok(Value::Bool(parse_url(str_arg("isURL", args, 0)?).is_ok()))
}

pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                Err(_) => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn url_part(function: &str, args: &[Value]) -> Fallible {
    let Some(u) = args.first().and_then(opaque::<Url>) else {
        return Err(no_overload(function, args));
    };
    let (hostname, port) = split_host_port(&u.host);
    let s = |v: &str| Ok(Value::String(Arc::new(v.to_owned())));
    match function {
        "getScheme" => s(&u.scheme),
        "getHost" => s(&u.host),
        "getHostname" => s(hostname),
        "getPort" => s(port),
        "getEscapedPath" => s(&escape_path(&u.path)),
        _ => {
            let mut query: Vec<(Arc<String>, Vec<Value>)> = Vec::new();
            for part in u.query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = part.split_once('=').unwrap_or((part, ""));
                let (k, v) = (percent_decode(k), percent_decode(v));
                match query.iter_mut().find(|(key, _)| **key == k) {
                    Some((_, values)) => values.push(Value::String(Arc::new(v))),
                    None => query.push((Arc::new(k), vec![Value::String(Arc::new(v))])),
                }
            }
            let map = query
                .into_iter()
                .map(|(k, v)| (Key::String(k), Value::List(Arc::new(v))))
                .collect();
            Ok(Value::Map(Map { map: Arc::new(map) }))
        }
    }
}

pub(super) fn split_host_port(host: &str) -> (&str, &str) {
    if let Some(rest) = host.strip_prefix('[') {
        let (h, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (h, after.strip_prefix(':').unwrap_or(""));
    }
    match host.rsplit_once(':') {
        Some((h, p)) => (h, p),
        None => (host, ""),
    }
}
