use std::borrow::Cow;

use crate::admission::JsonRead;

use super::{ALL_CONTAINERS, Finding, View};
use crate::policy::ImageRules;

/// `images`: allowed registries, no mutable tags, digests required.
#[derive(Debug)]
pub struct ImageRule {
    rules: ImageRules,
}

/// An image reference split into the parts the rules look at.
#[derive(Debug, PartialEq, Eq)]
pub struct ImageReference<'a> {
    /// The registry host (`docker.io` when the reference names none).
    pub registry: &'a str,
    /// Registry and repository, normalised the way the container runtime resolves them
    /// (`docker.io/library/nginx`).
    pub repository: Cow<'a, str>,
    /// The tag, if any.
    pub tag: Option<&'a str>,
    /// Whether the reference carries a digest.
    pub digest: bool,
}

/// Parses `[registry/]path[:tag][@digest]`, in one pass over the name before the digest.
pub fn parse_image(image: &str) -> ImageReference<'_> {
    let mut name_end = image.len();
    let mut first_slash = None;
    let mut last_slash = None;
    let mut last_colon = None;
    // A `.` or `:` in the first segment makes it a registry host.
    let mut host_like = false;
    for (index, byte) in image.bytes().enumerate() {
        match byte {
            b'@' => {
                name_end = index;
                break;
            }
            b'/' => {
                first_slash.get_or_insert(index);
                last_slash = Some(index);
            }
            b':' => {
                host_like |= first_slash.is_none();
                last_colon = Some(index);
            }
            b'.' => host_like |= first_slash.is_none(),
            _ => {}
        }
    }
    let name = &image[..name_end];
    let (path, tag) = match last_colon {
        Some(colon) if last_slash.is_none_or(|slash| colon > slash) => {
            (&name[..colon], Some(&name[colon + 1..]))
        }
        _ => (name, None),
    };
    // The tag's colon follows the last slash, so the path keeps every slash of the name.
    let registry = first_slash.map(|slash| &name[..slash]);
    let (registry, repository) = match registry {
        Some(first) if host_like || first == "localhost" => (first, Cow::Borrowed(path)),
        Some(_) => ("docker.io", Cow::Owned(format!("docker.io/{path}"))),
        None => ("docker.io", Cow::Owned(format!("docker.io/library/{path}"))),
    };
    ImageReference {
        registry,
        repository,
        tag,
        digest: name_end < image.len(),
    }
}

impl ImageRule {
    /// Wraps the rules.
    pub fn new(rules: &ImageRules) -> Self {
        ImageRule {
            rules: rules.clone(),
        }
    }

    /// Reports each container image that breaks a rule.
    pub fn check<'a, J: JsonRead<'a>>(&self, view: &View<J>, findings: &mut Vec<Finding>) {
        for container in view.containers(&ALL_CONTAINERS) {
            let Some(image) = container.value.get("image").and_then(JsonRead::as_str) else {
                continue;
            };
            let reference = parse_image(image);
            let path = || format!("{}.image", container.path());
            let name = || container.name();
            if !self.rules.allowed_registries.is_empty()
                && !self.rules.allowed_registries.iter().any(|allowed| {
                    let allowed = allowed.trim_end_matches('/');
                    reference.registry == allowed
                        || reference
                            .repository
                            .strip_prefix(allowed)
                            .is_some_and(|rest| rest.starts_with('/'))
                })
            {
                findings.push((
                    path(),
                    format!(
                        "container {:?} image {image:?} is not from an allowed registry ({})",
                        name(),
                        self.rules.allowed_registries.join(", ")
                    ),
                ));
            }
            if self.rules.forbid_latest && !reference.digest {
                let problem = match reference.tag {
                    None => Some("must have a tag (an untagged image means latest)"),
                    Some("latest") => Some("must have a tag other than latest"),
                    Some(_) => None,
                };
                if let Some(problem) = problem {
                    findings.push((
                        path(),
                        format!("container {:?} image {image:?} {problem}", name()),
                    ));
                }
            }
            if self.rules.require_digest && !reference.digest {
                findings.push((
                    path(),
                    format!(
                        "container {:?} image {image:?} must be pinned by digest",
                        name()
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        let cases = [
            ("nginx", "docker.io", "docker.io/library/nginx", None, false),
            (
                "nginx:1.27",
                "docker.io",
                "docker.io/library/nginx",
                Some("1.27"),
                false,
            ),
            (
                "team/app:v1",
                "docker.io",
                "docker.io/team/app",
                Some("v1"),
                false,
            ),
            (
                "registry.example.com:5000/team/app",
                "registry.example.com:5000",
                "registry.example.com:5000/team/app",
                None,
                false,
            ),
            (
                "ghcr.io/org/app:2@sha256:abc",
                "ghcr.io",
                "ghcr.io/org/app",
                Some("2"),
                true,
            ),
            ("localhost/app", "localhost", "localhost/app", None, false),
            // Nothing after `@` counts; a colon before the last slash is not a tag's.
            ("a@b/c:d", "docker.io", "docker.io/library/a", None, true),
            (
                "team/app@sha256:abc",
                "docker.io",
                "docker.io/team/app",
                None,
                true,
            ),
            ("a/b:c/d", "docker.io", "docker.io/a/b:c/d", None, false),
            (
                "a/b.c/d:1",
                "docker.io",
                "docker.io/a/b.c/d",
                Some("1"),
                false,
            ),
        ];
        for (image, registry, repository, tag, digest) in cases {
            let parsed = parse_image(image);
            assert_eq!(
                (
                    parsed.registry,
                    parsed.repository.as_ref(),
                    parsed.tag,
                    parsed.digest
                ),
                (registry, repository, tag, digest),
                "{image}"
            );
        }
    }
}
