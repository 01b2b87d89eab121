//! The crate's layers point one way (docs/architecture.md): every module is in one row of the
//! layer table there and uses only its own layer and those below; the graph of `crate::<module>`
//! references has no cycle; policy documents know nothing of the engine, the server or the
//! commands. `scripts/module-graph.py` prints the same graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(folder: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The unit of the layering a source file belongs to: its top-level module, or for the
/// compatibility modules under `src/kubernetes/`, `kubernetes::<module>` (each its own unit;
/// `kubernetes/mod.rs` only declares them and is none).
fn unit_of(relative: &Path) -> Option<String> {
    let mut parts = relative.iter().map(|part| part.to_str().unwrap());
    let first = parts.next()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    match (module, parts.next()) {
        ("lib" | "main", _) | ("kubernetes", Some("mod.rs")) => None,
        ("kubernetes", Some(inner)) => Some(format!(
            "kubernetes::{}",
            inner.strip_suffix(".rs").unwrap_or(inner)
        )),
        _ => Some(module.to_owned()),
    }
}

/// The unit a `crate::` path at the start of `rest` names.
fn unit_named(rest: &str) -> String {
    let segment = |text: &str| -> String {
        text.chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let first = segment(rest);
    match rest[first.len()..].strip_prefix("::") {
        Some(inner) if first == "kubernetes" && !segment(inner).is_empty() => {
            format!("kubernetes::{}", segment(inner))
        }
        _ => first,
    }
}

/// Unit → the units its code names as `crate::<module>` (or `crate::kubernetes::<module>`).
fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let Some(module) = unit_of(file.strip_prefix(&src).unwrap()) else {
            continue;
        };
        let targets = graph.entry(module.clone()).or_default();
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (at, _) in line.match_indices("crate::") {
                let preceded = line[..at].chars().next_back();
                if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let target = unit_named(&line[at + "crate::".len()..]);
                if !target.is_empty() && target != module {
                    targets.insert(target);
                }
            }
        }
    }
    graph
}

/// The layers of docs/architecture.md's table, top first: each row's modules (the
/// backquoted names of its second column).
fn documented_layers() -> Vec<(String, Vec<String>)> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let table = doc
        .split("## Layers")
        .nth(1)
        .expect("docs/architecture.md has a Layers section");
    table
        .lines()
        .skip_while(|line| !line.starts_with("| layer"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let modules = cells[2]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            (cells[1].to_owned(), modules)
        })
        .collect()
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &Graph, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &Graph,
        node: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(node).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn top_level_modules_have_no_cycle() {
    let graph = module_graph();
    assert!(
        graph.contains_key("engine") && graph.contains_key("policy"),
        "{graph:?}"
    );
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module) {
            panic!("module cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn documents_and_shared_words_know_nothing_above_them() {
    let graph = module_graph();
    let allowed: [(&str, &[&str]); 5] = [
        ("policy", &["admission", "kubernetes::vocabulary"]),
        ("kubernetes::vocabulary", &[]),
        ("kubernetes::names", &[]),
        ("kubernetes::go_text", &[]),
        ("patch", &["kubernetes::go_text"]),
    ];
    for (module, may_use) in allowed {
        let uses: Vec<&String> = graph[module]
            .iter()
            .filter(|target| !may_use.contains(&target.as_str()))
            .collect();
        assert!(uses.is_empty(), "{module} must not use {uses:?}");
    }
}

#[test]
fn every_module_is_in_one_documented_layer_and_uses_none_above_it() {
    let graph = module_graph();
    let layers = documented_layers();
    assert!(
        layers.len() >= 5,
        "the layer table was not read: {layers:?}"
    );
    let mut layer_of = BTreeMap::new();
    for (depth, (layer, modules)) in layers.iter().enumerate() {
        for module in modules {
            let earlier = layer_of.insert(module.clone(), (depth, layer.clone()));
            assert!(
                earlier.is_none(),
                "{module} is in two layers of docs/architecture.md"
            );
        }
    }
    for module in graph.keys() {
        assert!(
            layer_of.contains_key(module),
            "module {module} is missing from the layer table of docs/architecture.md"
        );
    }
    for module in layer_of.keys() {
        assert!(
            graph.contains_key(module),
            "docs/architecture.md names {module}, which is not a module"
        );
    }
    // Rows go from the top layer down: a module may use its own layer and those below it.
    for (module, targets) in &graph {
        let (depth, layer) = &layer_of[module];
        for target in targets {
            let (target_depth, target_layer) = &layer_of[target];
            assert!(
                target_depth >= depth,
                "{module} ({layer}) uses {target}, which is in the layer above it ({target_layer})"
            );
        }
    }
}

#[test]
fn the_graph_sees_references() {
    // The check above could pass on a graph that reads nothing: the engine compiles policy
    // documents, so that edge must be seen.
    let graph = module_graph();
    assert!(graph["engine"].contains("policy"));
    assert!(graph["engine"].contains("kubernetes::schema"), "{graph:?}");
}
