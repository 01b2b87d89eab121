//! A constraint's `spec.parameters` against its template's `openAPIV3Schema`, as the
//! constraint's CRD validates them: types, `items`, `properties`, `additionalProperties`,
//! `enum` and `required`, worded as apiextensions words a type error
//! (`<path>: Invalid value: "<type>": <path> in body must be of type <expected>: "<type>"`).
//! Unknown fields are neither refused nor pruned.

use serde_json::Value;

/// The JSON Schema type name of `value`, as apiextensions reports it.
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `value` is of schema type `expected`.
fn is_type(value: &Value, expected: &str) -> bool {
    let actual = type_of(value);
    actual == expected || (expected == "number" && actual == "integer")
}

/// Checks `value` at `path` against `schema`; the first error found.
pub(crate) fn check(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        && schema.get("type").is_none()
    {
        return Ok(());
    }
    if value.is_null() && schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        return Ok(());
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str)
        && !is_type(value, expected)
    {
        let actual = type_of(value);
        return Err(format!(
            "{path}: Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
        ));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            listed.join(", ")
        ));
    }
    match value {
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{index}]"))?;
                }
            }
        }
        Value::Object(fields) => {
            for required in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !fields.contains_key(required) {
                    return Err(format!("{path}.{required}: Required value"));
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, field) in fields {
                let field_path = format!("{path}.{name}");
                match properties.and_then(|p| p.get(name)) {
                    Some(field_schema) => check(field_schema, field, &field_path)?,
                    None => {
                        if let Some(additional) = additional {
                            check(additional, field, &field_path)?;
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parameters_are_checked_against_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "labels": {"type": "array", "items": {"type": "object", "required": ["key"],
                "properties": {"key": {"type": "string"}}}},
            "limit": {"type": "number"},
            "mode": {"type": "string", "enum": ["a", "b"]},
        }});
        let path = "spec.parameters";
        assert!(
            check(
                &schema,
                &json!({"labels": [{"key": "owner"}], "limit": 3}),
                path
            )
            .is_ok()
        );
        assert_eq!(
            check(&schema, &json!({"labels": "owner"}), path).unwrap_err(),
            "spec.parameters.labels: Invalid value: \"string\": spec.parameters.labels in body \
             must be of type array: \"string\""
        );
        assert_eq!(
            check(&schema, &json!({"labels": [{}]}), path).unwrap_err(),
            "spec.parameters.labels[0].key: Required value"
        );
        assert!(check(&schema, &json!({"mode": "c"}), path).is_err());
        assert!(check(&schema, &json!({"unknown": 1}), path).is_ok());
    }
}
