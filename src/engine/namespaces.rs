use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// Labels of a namespace, as `namespaceSelector`s and Pod Security namespace labels need them.
pub type Labels = BTreeMap<String, String>;

/// Where the labels of namespaces come from: a watch cache of the cluster's Namespaces when
/// `serve` has a cluster, the Namespace objects among the input files for `check`, or nothing.
/// Reviews do not carry namespace labels.
pub trait NamespaceLookup: Send + Sync {
    /// The labels of namespace `name`, or `None` when it is not known.
    fn labels(&self, name: &str) -> Option<Labels>;

    /// The labels of namespace `name`; an unknown namespace has only the label every
    /// namespace has, `kubernetes.io/metadata.name`.
    fn labels_or_default(&self, name: &str) -> Labels {
        self.labels(name).unwrap_or_else(|| {
            Labels::from([("kubernetes.io/metadata.name".to_owned(), name.to_owned())])
        })
    }
}

/// No namespace is known.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNamespaces;

impl NamespaceLookup for NoNamespaces {
    fn labels(&self, _: &str) -> Option<Labels> {
        None
    }
}

/// A fixed set of namespaces, e.g. the Namespace objects given to `check`.
#[derive(Debug, Default, Clone)]
pub struct StaticNamespaces {
    namespaces: HashMap<String, Labels>,
}

impl StaticNamespaces {
    /// Adds a namespace by name and labels.
    pub fn insert(&mut self, name: impl Into<String>, labels: Labels) {
        self.namespaces.insert(name.into(), labels);
    }

    /// Adds a `v1` Namespace object; returns false (and adds nothing) for any other object.
    pub fn insert_object(&mut self, object: &Value) -> bool {
        if object.get("kind").and_then(Value::as_str) != Some("Namespace") {
            return false;
        }
        let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
            return false;
        };
        let mut labels: Labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        // The apiserver sets this label on every namespace.
        labels.insert("kubernetes.io/metadata.name".into(), name.to_owned());
        self.insert(name, labels);
        true
    }
}

impl NamespaceLookup for StaticNamespaces {
    fn labels(&self, name: &str) -> Option<Labels> {
        self.namespaces.get(name).cloned()
    }
}
