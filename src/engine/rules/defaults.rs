use std::collections::BTreeMap;

use serde_json::Value;

use crate::patch::{ObjectEditor, PathSegment};

/// One step of a defaulting path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathToken {
    /// An object key.
    Key(String),
    /// A list index.
    Index(usize),
    /// Every item of a list: `[*]`.
    EveryItem,
}

/// Parses `spec.containers[*].imagePullPolicy`, `metadata.labels["example.com/team"]`,
/// `spec.volumes[0].name`.
pub fn parse_field_path(path: &str) -> Result<Vec<PathToken>, String> {
    let mut tokens = Vec::new();
    let mut rest = path;
    let mut expect_key = true;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = if let Some(quoted) = after.strip_prefix('"') {
                quoted
                    .find('"')
                    .map(|i| i + 2)
                    .filter(|i| after[*i..].starts_with(']'))
            } else {
                after.find(']')
            }
            .ok_or_else(|| format!("unclosed [ in {path:?}"))?;
            let inside = &after[..end];
            tokens.push(match inside {
                "*" => PathToken::EveryItem,
                quoted if quoted.starts_with('"') => {
                    PathToken::Key(quoted[1..quoted.len() - 1].to_owned())
                }
                index => PathToken::Index(
                    index
                        .parse()
                        .map_err(|_| format!("invalid index [{index}] in {path:?}"))?,
                ),
            });
            rest = &after[end + 1..];
            expect_key = false;
        } else if let Some(after) = rest.strip_prefix('.') {
            if expect_key {
                return Err(format!("empty segment in {path:?}"));
            }
            rest = after;
            expect_key = true;
        } else {
            if !expect_key {
                return Err(format!("expected . or [ in {path:?}"));
            }
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if rest[..end].contains([']', '"']) {
                return Err(format!(
                    "unexpected ] or \" in {path:?}; quote keys as [\"key\"]"
                ));
            }
            tokens.push(PathToken::Key(rest[..end].to_owned()));
            rest = &rest[end..];
            expect_key = false;
        }
    }
    if tokens.is_empty() || expect_key {
        return Err(format!("incomplete path {path:?}"));
    }
    if !matches!(tokens.last(), Some(PathToken::Key(_))) {
        return Err(format!("{path:?} must end with a field name"));
    }
    Ok(tokens)
}

/// A compiled defaulting rule.
#[derive(Debug)]
pub enum CompiledDefault {
    /// Set a value at a path (with `[*]`) where missing.
    Set {
        /// The path, relative to the view.
        path: Vec<PathToken>,
        /// The value written.
        value: Value,
    },
    /// Add labels or annotations where missing.
    Metadata {
        /// `labels` or `annotations`.
        field: &'static str,
        /// Keys and values.
        entries: BTreeMap<String, String>,
    },
}

fn expand<'p>(
    node: &Value,
    tokens: &'p [PathToken],
    prefix: &mut Vec<PathSegment<'p>>,
    out: &mut Vec<Vec<PathSegment<'p>>>,
) {
    let Some((token, rest)) = tokens.split_first() else {
        out.push(prefix.clone());
        return;
    };
    if rest.is_empty() {
        if let PathToken::Key(key) = token {
            prefix.push(PathSegment::Key(key));
            out.push(prefix.clone());
            prefix.pop();
        }
        return;
    }
    match token {
        PathToken::Key(key) => {
            prefix.push(PathSegment::Key(key));
            // A missing parent is created by set_if_missing, unless a list must be walked.
            match node.get(key) {
                Some(child) => expand(child, rest, prefix, out),
                None if !rest.iter().any(|t| !matches!(t, PathToken::Key(_))) => {
                    let mut path = prefix.clone();
                    path.extend(rest.iter().map(|t| match t {
                        PathToken::Key(k) => PathSegment::Key(k),
                        _ => unreachable!("only keys remain"),
                    }));
                    out.push(path);
                }
                None => {}
            }
            prefix.pop();
        }
        PathToken::Index(index) => {
            if let Some(child) = node.as_array().and_then(|items| items.get(*index)) {
                prefix.push(PathSegment::Index(*index));
                expand(child, rest, prefix, out);
                prefix.pop();
            }
        }
        PathToken::EveryItem => {
            for (index, child) in node.as_array().into_iter().flatten().enumerate() {
                prefix.push(PathSegment::Index(index));
                expand(child, rest, prefix, out);
                prefix.pop();
            }
        }
    }
}

impl CompiledDefault {
    /// Whether the rule writes under `spec`.
    pub fn writes_spec(&self) -> bool {
        matches!(self, CompiledDefault::Set { path, .. } if path.first() == Some(&PathToken::Key("spec".into())))
    }

    /// Applies the default under `base` (the view's path in the object).
    pub fn apply(&self, base: &[PathSegment<'static>], editor: &mut ObjectEditor<'_>) {
        match self {
            CompiledDefault::Set { path, value } => {
                let mut node = editor.current();
                for segment in base {
                    let PathSegment::Key(key) = segment else {
                        return;
                    };
                    match node.get(key) {
                        Some(child) => node = child,
                        None => return,
                    }
                }
                let mut targets = Vec::new();
                let mut prefix: Vec<PathSegment<'_>> = base.to_vec();
                expand(node, path, &mut prefix, &mut targets);
                for target in targets {
                    editor.set_if_missing(&target, value.clone());
                }
            }
            CompiledDefault::Metadata { field, entries } => {
                for (key, value) in entries {
                    let mut path: Vec<PathSegment<'_>> = base.to_vec();
                    path.extend([
                        PathSegment::Key("metadata"),
                        PathSegment::Key(field),
                        PathSegment::Key(key),
                    ]);
                    editor.set_if_missing(&path, Value::String(value.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_parse() {
        assert_eq!(
            parse_field_path("spec.containers[*].imagePullPolicy").unwrap(),
            [
                PathToken::Key("spec".into()),
                PathToken::Key("containers".into()),
                PathToken::EveryItem,
                PathToken::Key("imagePullPolicy".into())
            ]
        );
        assert_eq!(
            parse_field_path(r#"metadata.labels["example.com/team"]"#).unwrap(),
            [
                PathToken::Key("metadata".into()),
                PathToken::Key("labels".into()),
                PathToken::Key("example.com/team".into())
            ]
        );
        for bad in ["", "a..b", "a[", "a[x]", "a.", "a[*]", "a]b"] {
            assert!(parse_field_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wildcards_default_every_item_once() {
        let object = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a"}, {"name": "b", "securityContext": {"runAsNonRoot": false}}
        ]}}}});
        let rule = CompiledDefault::Set {
            path: parse_field_path("spec.containers[*].securityContext.runAsNonRoot").unwrap(),
            value: json!(true),
        };
        let mut editor = ObjectEditor::new(&object);
        rule.apply(
            &[PathSegment::Key("spec"), PathSegment::Key("template")],
            &mut editor,
        );
        let ops = editor.operations();
        assert_eq!(ops.len(), 1);
        assert_eq!(
            ops[0].path,
            "/spec/template/spec/containers/0/securityContext"
        );
        assert_eq!(ops[0].value, json!({"runAsNonRoot": true}));
    }
}
