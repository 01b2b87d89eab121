//! The tag of a container image reference, as the kubelet's `ParseImageName` finds it, and the
//! `imagePullPolicy` the apiserver defaults from it.

/// The tag of `image`: what follows the last `:` of the last path component, before any
/// `@digest`; `latest` for a reference with neither tag nor digest; `""` for a digest-only
/// reference and for a reference that does not parse (the apiserver ignores the parse error
/// and so defaults such an image to `IfNotPresent`).
pub fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    if name.is_empty() || !is_reference_name(name) || !digest.is_none_or(is_digest) {
        return "";
    }
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(colon) => &name[last_slash + colon + 1..],
        None if digest.is_some() => "",
        None => "latest",
    }
}

/// `Always` for an image tagged (or defaulting to) `latest`, else `IfNotPresent`.
pub fn pull_policy_for(image: &str) -> &'static str {
    if image_tag(image) == "latest" {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// `ALGORITHM:HEX` as the docker reference grammar has it: sha256 and sha512 need their exact
/// length; other algorithms at least 32 hex digits.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let algorithm_ok = !algorithm.is_empty()
        && algorithm.split(['+', '.', '_', '-']).all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    let length_ok = match algorithm {
        "sha256" => hex.len() == 64,
        "sha512" => hex.len() == 128,
        _ => hex.len() >= 32,
    };
    algorithm_ok && length_ok && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A loose form of the docker reference grammar: an optional domain (the first component, when
/// it has a `.` or `:` or is `localhost`), then lower-case path components of
/// `[a-z0-9._-]`, then an optional tag of `[A-Za-z0-9_.-]` up to 128 characters.
fn is_reference_name(name: &str) -> bool {
    let mut components: Vec<&str> = name.split('/').collect();
    if components.len() > 1 {
        let first = components[0];
        if first.contains(['.', ':'])
            || first == "localhost"
            || first.chars().any(|c| c.is_ascii_uppercase())
        {
            let ok = !first.is_empty()
                && first
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
            if !ok {
                return false;
            }
            components.remove(0);
        }
    }
    let Some(last) = components.pop() else {
        return false;
    };
    let (last, tag) = match last.split_once(':') {
        Some((last, tag)) => (last, Some(tag)),
        None => (last, None),
    };
    if let Some(tag) = tag {
        let valid = !tag.is_empty()
            && tag.len() <= 128
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            && !tag.starts_with(['.', '-']);
        if !valid {
            return false;
        }
    }
    components.push(last);
    components.iter().all(|component| {
        !component.is_empty()
            && component.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            })
            && component.starts_with(|c: char| c.is_ascii_alphanumeric())
            && component.ends_with(|c: char| c.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_found_as_the_kubelet_finds_them() {
        for (image, tag) in [
            ("nginx", "latest"),
            ("nginx:latest", "latest"),
            ("nginx:1.27", "1.27"),
            ("registry.example.com:5000/team/app", "latest"),
            ("registry.example.com:5000/team/app:v2", "v2"),
            ("localhost/app:latest", "latest"),
            ("nginx@sha256:0123", ""),
            ("nginx:latest@sha256:0123", ""),
            (
                "nginx:latest@sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1",
                "latest",
            ),
            ("Nginx", ""),
            ("", ""),
            ("nginx:", ""),
        ] {
            assert_eq!(image_tag(image), tag, "{image}");
        }
        assert_eq!(pull_policy_for("busybox"), "Always");
        assert_eq!(pull_policy_for("busybox:1.36"), "IfNotPresent");
    }
}
