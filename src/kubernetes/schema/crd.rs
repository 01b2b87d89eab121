//! Structural schemas of custom resources, from `apiextensions.k8s.io/v1`
//! `CustomResourceDefinition` documents: one [`Schema`] per served version, in the same types
//! as the built-in kinds'.
//!
//! The root gets what the apiserver gives every custom resource: `apiVersion`, `kind` and the
//! built-in `ObjectMeta` as `metadata` (whatever the CRD says of `metadata`). Objects with
//! `x-kubernetes-embedded-resource` get the same. A schema that is not structural (a node
//! without `type` that is not `x-kubernetes-int-or-string` or
//! `x-kubernetes-preserve-unknown-fields`, an array without `items`, `$ref`, a `map` list whose
//! keys are not properties of its items) is refused with the path of the offending field.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{
    Field, IntKind, ListType, Node, NodeKind, ObjectType, Schema, TypeArena, builtin_type,
    schema_from_parts,
};
use crate::admission::GroupVersionKind;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A CustomResourceDefinition that gives no usable schema, with the path of the offending field
/// in the CRD document (`spec.versions[0].schema.openAPIV3Schema.properties.spec.type`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CrdError {
    /// The field of the CRD document at fault.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

fn fail<T>(path: &str, message: impl Into<String>) -> Result<T, CrdError> {
    Err(CrdError {
        path: path.to_owned(),
        message: message.into(),
    })
}

/// The schema of every served version of the `CustomResourceDefinition` `crd` (a whole
/// `apiextensions.k8s.io/v1` document), in the order of `spec.versions`.
pub fn schemas_from_crd(crd: &Value) -> Result<Vec<Schema>, CrdError> {
    let api_version = crd.get("apiVersion").and_then(Value::as_str);
    let kind = crd.get("kind").and_then(Value::as_str);
    if api_version != Some("apiextensions.k8s.io/v1") || kind != Some("CustomResourceDefinition") {
        return fail(
            "",
            format!(
                "not an apiextensions.k8s.io/v1 CustomResourceDefinition (apiVersion {:?}, kind {:?})",
                api_version.unwrap_or_default(),
                kind.unwrap_or_default()
            ),
        );
    }
    let spec = crd
        .get("spec")
        .and_then(Value::as_object)
        .ok_or_else(|| CrdError {
            path: "spec".to_owned(),
            message: "Required value".to_owned(),
        })?;
    let group = required_str(spec, "group", "spec.group")?;
    let names = spec
        .get("names")
        .and_then(Value::as_object)
        .ok_or_else(|| CrdError {
            path: "spec.names".to_owned(),
            message: "Required value".to_owned(),
        })?;
    let kind = required_str(names, "kind", "spec.names.kind")?;
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or_else(|| CrdError {
            path: "spec.versions".to_owned(),
            message: "Required value: must have at least one version".to_owned(),
        })?;
    let mut schemas = Vec::new();
    for (index, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{index}]");
        let Some(version) = version.as_object() else {
            return fail(&path, "must be an object");
        };
        let name = required_str(version, "name", &format!("{path}.name"))?;
        if version.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let schema_path = format!("{path}.schema.openAPIV3Schema");
        let Some(root) = version
            .get("schema")
            .and_then(|schema| schema.get("openAPIV3Schema"))
        else {
            return fail(&schema_path, "Required value: schemas are required");
        };
        let mut builder = Builder::default();
        let root = builder.root(root, &schema_path)?;
        schemas.push(schema_from_parts(
            builder.types,
            root,
            GroupVersionKind {
                group: group.to_owned(),
                version: name.to_owned(),
                kind: kind.to_owned(),
            },
        ));
    }
    Ok(schemas)
}

fn required_str<'v>(
    map: &'v Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'v str, CrdError> {
    match map.get(key).and_then(Value::as_str) {
        Some(value) if !value.is_empty() => Ok(value),
        _ => fail(path, "Required value"),
    }
}

/// The arena of one version's object types.
#[derive(Default)]
struct Builder {
    types: Vec<ObjectType>,
    /// Built-in types copied in, by their index in the built-in arena.
    copied: HashMap<usize, usize>,
}

impl Builder {
    fn root(&mut self, schema: &Value, path: &str) -> Result<usize, CrdError> {
        let Some(map) = schema.as_object() else {
            return fail(path, "must be an object");
        };
        match map.get("type").and_then(Value::as_str) {
            Some("object") => {}
            _ => {
                return fail(
                    &format!("{path}.type"),
                    "Unsupported value: must be object at the root",
                );
            }
        }
        self.object(map, path, true)
    }

    /// An object type from a schema with `properties` (or none); `resource` adds `apiVersion`,
    /// `kind` and `metadata`.
    fn object(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        resource: bool,
    ) -> Result<usize, CrdError> {
        let index = self.types.len();
        self.types.push(ObjectType {
            go_name: String::new(),
            go_type: String::new(),
            atomic: map.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            preserve_unknown_fields: flag(map, "x-kubernetes-preserve-unknown-fields"),
            embedded_resource: resource && flag(map, "x-kubernetes-embedded-resource"),
            fields: Vec::new(),
        });
        let mut fields = Vec::new();
        if resource {
            fields.push(plain_field("apiVersion", Node::untyped(NodeKind::String)));
            fields.push(plain_field("kind", Node::untyped(NodeKind::String)));
            let meta = self.object_meta();
            fields.push(plain_field("metadata", meta));
        }
        if let Some(properties) = map.get("properties") {
            let Some(properties) = properties.as_object() else {
                return fail(&format!("{path}.properties"), "must be an object");
            };
            for (name, property) in properties {
                if resource && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let field_path = format!("{path}.properties[{name}]");
                let Some(property_map) = property.as_object() else {
                    return fail(&field_path, "must be an object");
                };
                let node = self.node(property_map, &field_path)?;
                fields.push(Field {
                    name: name.clone(),
                    node,
                    omit_empty: false,
                    omit_zero: false,
                    pointer: false,
                    enum_values: property_map
                        .get("enum")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    preserve_unknown_fields: flag(
                        property_map,
                        "x-kubernetes-preserve-unknown-fields",
                    ),
                    embedded_resource: flag(property_map, "x-kubernetes-embedded-resource"),
                    default: property_map
                        .get("default")
                        .filter(|d| !d.is_object() && !d.is_array())
                        .cloned(),
                    embedded_in: Vec::new(),
                });
            }
        }
        self.types[index].fields = fields;
        Ok(index)
    }

    fn node(&mut self, map: &Map<String, Value>, path: &str) -> Result<Node, CrdError> {
        if map.contains_key("$ref") {
            return fail(
                &format!("{path}.$ref"),
                "Forbidden: $ref is not allowed in a structural schema",
            );
        }
        if flag(map, "x-kubernetes-int-or-string") {
            return Ok(Node::untyped(NodeKind::IntOrString));
        }
        let embedded = flag(map, "x-kubernetes-embedded-resource");
        let preserve = flag(map, "x-kubernetes-preserve-unknown-fields");
        let kind = match map.get("type") {
            None if embedded => NodeKind::Object(self.object(map, path, true)?),
            None if preserve => NodeKind::Any,
            None => {
                return fail(
                    &format!("{path}.type"),
                    "Required value: must not be empty for specified object fields",
                );
            }
            Some(Value::String(t)) => match t.as_str() {
                "string" => NodeKind::String,
                "integer" => NodeKind::Integer(IntKind::I64),
                "number" => NodeKind::Number,
                "boolean" => NodeKind::Boolean,
                "array" => self.list(map, path)?,
                "object" if embedded => NodeKind::Object(self.object(map, path, true)?),
                "object" => match map.get("additionalProperties") {
                    Some(Value::Object(values)) if !map.contains_key("properties") => {
                        NodeKind::Map {
                            values: Box::new(
                                self.node(values, &format!("{path}.additionalProperties"))?,
                            ),
                            atomic: map.get("x-kubernetes-map-type").and_then(Value::as_str)
                                == Some("atomic"),
                        }
                    }
                    Some(Value::Object(_)) => {
                        return fail(
                            &format!("{path}.additionalProperties"),
                            "Forbidden: additionalProperties and properties are mutually exclusive",
                        );
                    }
                    Some(Value::Bool(true)) if preserve => NodeKind::Any,
                    _ => NodeKind::Object(self.object(map, path, false)?),
                },
                other => {
                    return fail(
                        &format!("{path}.type"),
                        format!(
                            "Unsupported value: {other:?}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
                        ),
                    );
                }
            },
            Some(_) => return fail(&format!("{path}.type"), "must be a string"),
        };
        let mut node = Node::untyped(kind);
        if node.kind == NodeKind::String
            && let Some(format) = map.get("format").and_then(Value::as_str)
        {
            node.format = format.to_owned();
        }
        Ok(node)
    }

    fn list(&mut self, map: &Map<String, Value>, path: &str) -> Result<NodeKind, CrdError> {
        let items_path = format!("{path}.items");
        let Some(items) = map.get("items").and_then(Value::as_object) else {
            return fail(&items_path, "Required value: must be specified for arrays");
        };
        let items = self.node(items, &items_path)?;
        let list_type = match map.get("x-kubernetes-list-type").and_then(Value::as_str) {
            None | Some("atomic") => ListType::Atomic,
            Some("set") => ListType::Set,
            Some("map") => ListType::Map,
            Some(other) => {
                return fail(
                    &format!("{path}.x-kubernetes-list-type"),
                    format!(
                        "Unsupported value: {other:?}: supported values: \"atomic\", \"map\", \"set\""
                    ),
                );
            }
        };
        let keys: Vec<String> = match map.get("x-kubernetes-list-map-keys") {
            None => Vec::new(),
            Some(Value::Array(keys)) => keys
                .iter()
                .map(|k| k.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| CrdError {
                    path: format!("{path}.x-kubernetes-list-map-keys"),
                    message: "must be a list of strings".to_owned(),
                })?,
            Some(_) => {
                return fail(
                    &format!("{path}.x-kubernetes-list-map-keys"),
                    "must be a list of strings",
                );
            }
        };
        match list_type {
            ListType::Map => {
                if keys.is_empty() {
                    return fail(
                        &format!("{path}.x-kubernetes-list-map-keys"),
                        "Required value: must not be empty if x-kubernetes-list-type is map",
                    );
                }
                let NodeKind::Object(index) = items.kind else {
                    return fail(
                        &format!("{items_path}.type"),
                        "Invalid value: must be object if parent array's x-kubernetes-list-type is map",
                    );
                };
                for key in &keys {
                    if self.types[index].field(key).is_none() {
                        return fail(
                            &format!("{path}.x-kubernetes-list-map-keys"),
                            format!(
                                "Invalid value: entries must all be names of item properties: {key:?}"
                            ),
                        );
                    }
                }
            }
            _ if !keys.is_empty() => {
                return fail(
                    &format!("{path}.x-kubernetes-list-type"),
                    "Invalid value: must be map if x-kubernetes-list-map-keys is non-empty",
                );
            }
            ListType::Set
                if matches!(
                    items.kind,
                    NodeKind::Object(_) | NodeKind::List { .. } | NodeKind::Map { .. }
                ) =>
            {
                return fail(
                    &format!("{items_path}.type"),
                    "Invalid value: must be a scalar type if parent array's x-kubernetes-list-type is set",
                );
            }
            _ => {}
        }
        Ok(NodeKind::List {
            items: Box::new(items),
            list_type,
            keys,
        })
    }

    /// The built-in `ObjectMeta`, copied into this arena.
    fn object_meta(&mut self) -> Node {
        match builtin_type(OBJECT_META) {
            Some((types, index)) => {
                let copied = self.copy(types, index);
                Node::untyped(NodeKind::Object(copied))
            }
            None => Node::untyped(NodeKind::Any),
        }
    }

    fn copy(&mut self, from: &TypeArena, index: usize) -> usize {
        if let Some(&done) = self.copied.get(&index) {
            return done;
        }
        let new = self.types.len();
        self.copied.insert(index, new);
        self.types.push(from.get(index).clone());
        let mut fields = std::mem::take(&mut self.types[new].fields);
        for field in &mut fields {
            self.relink(from, &mut field.node);
        }
        self.types[new].fields = fields;
        new
    }

    fn relink(&mut self, from: &TypeArena, node: &mut Node) {
        match &mut node.kind {
            NodeKind::Object(index) => *index = self.copy(from, *index),
            NodeKind::Map { values, .. } => self.relink(from, values),
            NodeKind::List { items, .. } => self.relink(from, items),
            _ => {}
        }
    }
}

fn flag(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key).and_then(Value::as_bool) == Some(true)
}

fn plain_field(name: &str, node: Node) -> Field {
    Field {
        name: name.to_owned(),
        node,
        omit_empty: false,
        omit_zero: false,
        pointer: false,
        enum_values: Vec::new(),
        preserve_unknown_fields: false,
        embedded_resource: false,
        default: None,
        embedded_in: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kubernetes::schema::Origin;

    fn crd(schema: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Widget", "plural": "widgets"},
                "scope": "Namespaced",
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": schema.clone()}},
                    {"name": "v0", "served": false, "storage": false,
                     "schema": {"openAPIV3Schema": schema}}
                ]
            }
        })
    }

    fn widget_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "parts": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "properties": {
                                "name": {"type": "string"}, "count": {"type": "integer"}}}
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                 "items": {"type": "string"}},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                     "properties": {"app": {"type": "string"}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"}
                    }
                }
            }
        })
    }

    #[test]
    fn one_schema_per_served_version() {
        let schemas = schemas_from_crd(&crd(widget_schema())).unwrap();
        assert_eq!(schemas.len(), 1);
        let schema = &schemas[0];
        assert_eq!(schema.gvk().group, "example.com");
        assert_eq!(schema.gvk().version, "v1");
        assert_eq!(schema.gvk().kind, "Widget");
        assert_eq!(schema.origin(), Origin::CustomResource);

        let parts = schema.node_at("spec.parts").unwrap();
        assert!(matches!(
            &parts.kind,
            NodeKind::List { list_type: ListType::Map, keys, .. } if keys == &["name"]
        ));
        assert!(matches!(
            schema.node_at("spec.tags").unwrap().kind,
            NodeKind::List {
                list_type: ListType::Set,
                ..
            }
        ));
        assert_eq!(
            schema.node_at("spec.port").unwrap().kind,
            NodeKind::IntOrString
        );
        assert!(matches!(
            schema.node_at("spec.labels").unwrap().kind,
            NodeKind::Map { atomic: false, .. }
        ));
        let NodeKind::Object(selector) = schema.node_at("spec.selector").unwrap().kind else {
            panic!("selector is an object");
        };
        assert!(schema.object(selector).atomic);
        let NodeKind::Object(config) = schema.node_at("spec.config").unwrap().kind else {
            panic!("config is an object");
        };
        assert!(schema.object(config).preserve_unknown_fields);
        let NodeKind::Object(template) = schema.node_at("spec.template").unwrap().kind else {
            panic!("template is an object");
        };
        assert!(schema.object(template).embedded_resource);
        assert!(schema.node_at("spec.template.metadata.labels").is_some());
        // The root has the built-in ObjectMeta.
        assert!(matches!(
            schema.node_at("metadata.ownerReferences").unwrap().kind,
            NodeKind::List {
                list_type: ListType::Map,
                ..
            }
        ));
        let color = schema
            .object(match schema.node_at("spec").unwrap().kind {
                NodeKind::Object(index) => index,
                _ => unreachable!(),
            })
            .field("color")
            .unwrap();
        assert_eq!(color.enum_values, [json!("red"), json!("blue")]);
        assert_eq!(color.default, Some(json!("red")));
    }

    #[test]
    fn non_structural_schemas_are_refused_with_the_field_path() {
        let cases = [
            (
                json!({"type": "object", "properties": {"spec": {"properties": {}}}}),
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: \
                 must not be empty for specified object fields",
            ),
            (
                json!({"type": "object", "properties": {"spec": {"type": "array"}}}),
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].items: Required \
                 value: must be specified for arrays",
            ),
            (
                json!({"type": "object", "properties": {"spec": {"type": "strin"}}}),
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Unsupported \
                 value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \
                 \"number\", \"object\", \"string\"",
            ),
            (
                json!({"type": "object", "properties": {"parts": {
                    "type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["id"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}),
                "spec.versions[0].schema.openAPIV3Schema.properties[parts].\
                 x-kubernetes-list-map-keys: Invalid value: entries must all be names of item \
                 properties: \"id\"",
            ),
            (
                json!({"type": "string"}),
                "spec.versions[0].schema.openAPIV3Schema.type: Unsupported value: must be \
                 object at the root",
            ),
        ];
        for (schema, expected) in cases {
            assert_eq!(
                schemas_from_crd(&crd(schema)).unwrap_err().to_string(),
                expected
            );
        }
        assert_eq!(
            schemas_from_crd(&json!({"kind": "Pod"})).unwrap_err().path,
            ""
        );
        let mut no_schema = crd(widget_schema());
        no_schema["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        assert_eq!(
            schemas_from_crd(&no_schema).unwrap_err().to_string(),
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
        );
    }
}
