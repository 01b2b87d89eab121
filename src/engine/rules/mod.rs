//! Native policy rule families, one file each, and the view they evaluate: the object itself
//! or the pod template of a workload.

pub mod cel;
mod defaults;
mod host;
mod images;
mod metadata;
mod probes;
mod quantity;
mod resources;

use super::matching::MatchedView;
use super::pod_specs::pod_spec_location;
use super::{CONTAINER_LISTS, Violation, ViolationForm};
use crate::admission::{AdmissionRequest, JsonKind, JsonRead};
use crate::patch::PathSegment;

pub use defaults::{CompiledDefault, parse_field_path};
pub use host::HostRule;
pub use images::ImageRule;
pub use metadata::{CompiledPatterns, RequiredMetadataRule};
pub use probes::ProbeRule;
pub use quantity::parse_quantity;
pub use resources::ResourceRule as ContainerResourceRule;

/// Where a policy looks: the object, or a workload's pod template treated as a Pod; read
/// from a tree or an object view alike ([`JsonRead`]).
#[derive(Debug, Clone)]
pub struct View<J> {
    /// The value at `base` (the object, or the template).
    pub root: J,
    /// Path from the object to `root`.
    pub base: Vec<PathSegment<'static>>,
    /// `base` as users read it, with a trailing dot (`""`, `spec.template.`).
    pub display: String,
    /// The pod spec relative to `root`, and how it reads.
    pub pod_spec: Option<(Vec<PathSegment<'static>>, String)>,
}

impl<'a, J: JsonRead<'a>> View<J> {
    /// The view a match gives on `object`.
    pub fn new(request: &AdmissionRequest, object: J, matched: MatchedView) -> Option<Self> {
        match matched {
            MatchedView::Object => Some(View {
                root: object,
                base: Vec::new(),
                display: String::new(),
                pod_spec: pod_spec_location(request)
                    .map(|location| (location.path.to_vec(), location.display.to_owned())),
            }),
            MatchedView::PodTemplate(location) => {
                let base = &location.path[..location.path.len() - 1];
                let mut root = object;
                for segment in base {
                    let PathSegment::Key(key) = segment else {
                        return None;
                    };
                    root = root.get(key)?;
                }
                let display = location
                    .display
                    .strip_suffix("spec")
                    .unwrap_or(location.display)
                    .to_owned();
                Some(View {
                    root,
                    base: base.to_vec(),
                    display,
                    pod_spec: Some((vec![PathSegment::Key("spec")], "spec".to_owned())),
                })
            }
        }
    }

    /// The pod spec, if this view has one.
    pub fn pod_spec(&self) -> Option<J> {
        let (path, _) = self.pod_spec.as_ref()?;
        let mut node = self.root;
        for segment in path {
            let PathSegment::Key(key) = segment else {
                return None;
            };
            node = node.get(key)?;
        }
        (node.kind() == JsonKind::Object).then_some(node)
    }

    /// The pod spec's display path (`spec`, `spec.template.spec`), written out for findings
    /// only.
    pub fn pod_spec_path(&self) -> String {
        let display = self.pod_spec.as_ref().map_or("", |(_, display)| display);
        format!("{}{display}", self.display)
    }

    /// Every container of the pod spec in `lists`, with its list name and index.
    pub fn containers<'v>(
        &'v self,
        lists: &'static [&'static str],
    ) -> impl Iterator<Item = Container<'v, J>> {
        let spec = self.pod_spec();
        lists.iter().flat_map(move |list| {
            spec.and_then(|spec| spec.get(list))
                .into_iter()
                .flat_map(JsonRead::items)
                .enumerate()
                .map(move |(index, value)| Container {
                    value,
                    view: self,
                    list,
                    index,
                })
        })
    }
}

/// A container in a view.
#[derive(Debug, Clone, Copy)]
pub struct Container<'v, J> {
    /// The container.
    pub value: J,
    /// The view it is in, its list and its index in it (see [`Container::path`]).
    view: &'v View<J>,
    list: &'static str,
    index: usize,
}

impl<'a, J: JsonRead<'a>> Container<'_, J> {
    /// Its name (`""` when unset).
    pub fn name(&self) -> &'a str {
        self.value
            .get("name")
            .and_then(JsonRead::as_str)
            .unwrap_or("")
    }

    /// Its display path, e.g. `spec.template.spec.containers[0]` (written out for findings
    /// only).
    pub fn path(&self) -> String {
        format!(
            "{}.{}[{}]",
            self.view.pod_spec_path(),
            self.list,
            self.index
        )
    }
}

/// All three container lists.
pub const ALL_CONTAINERS: [&str; 3] = CONTAINER_LISTS;
/// Containers that run for the pod's life (probes and resources apply).
pub const APP_CONTAINERS: [&str; 1] = ["containers"];
/// Containers with resources.
pub const RESOURCED_CONTAINERS: [&str; 2] = ["containers", "initContainers"];

/// A compiled validation rule of a native policy.
#[derive(Debug)]
pub enum FamilyValidation {
    /// requiredLabels / requiredAnnotations.
    Metadata(RequiredMetadataRule),
    /// images.
    Images(ImageRule),
    /// resources.
    Resources(ContainerResourceRule),
    /// probes.
    Probes(ProbeRule),
    /// host.
    Host(HostRule),
}

/// What a rule reports before it is attributed to a policy and rule: where and why.
pub type Finding = (String, String);

impl FamilyValidation {
    /// The findings of this rule on a view.
    pub fn check<'a, J: JsonRead<'a>>(&self, view: &View<J>, findings: &mut Vec<Finding>) {
        match self {
            FamilyValidation::Metadata(rule) => rule.check(view, findings),
            FamilyValidation::Images(rule) => rule.check(view, findings),
            FamilyValidation::Resources(rule) => rule.check(view, findings),
            FamilyValidation::Probes(rule) => rule.check(view, findings),
            FamilyValidation::Host(rule) => rule.check(view, findings),
        }
    }
}

/// Turns findings into violations of `policy`/`rule`, with an optional message override.
pub fn attribute(
    policy: &str,
    rule: &str,
    message: Option<&str>,
    findings: impl Iterator<Item = Finding>,
    out: &mut Vec<Violation>,
) {
    for (path, text) in findings {
        out.push(Violation {
            policy: policy.to_owned(),
            rule: rule.to_owned(),
            path,
            message: message.map_or(text, str::to_owned),
            form: ViolationForm::Rule,
        });
    }
}
