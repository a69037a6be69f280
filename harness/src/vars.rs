//! `${...}` variables in scenario manifests and event patterns.
//!
//! Known variables: `namespace`, `node`, `images.<role>` (from the node profile), `sandboxImage`, and
//! where the node reaches a registry a scenario starts, `registry` and `registry.private` (`host:port`).

use std::collections::BTreeMap;

use regex::Regex;

use crate::node::NodeProfile;

/// The image roles every node profile provides (the test bed builds one image per role under
/// `ci/testbed/images/`; kind node images label them `dev.faultlab.image.<role>`).
pub const IMAGE_ROLES: &[&str] = &["pause", "busybox", "inotify"];

/// Every variable a scenario may use, whatever the cluster.
pub fn known_names() -> Vec<String> {
    let mut names: Vec<String> = ["namespace", "node", "sandboxImage", "registry", "registry.private"].iter().map(|s| s.to_string()).collect();
    names.extend(IMAGE_ROLES.iter().map(|r| format!("images.{r}")));
    names
}

/// The variables `input` refers to that no cluster gives a value, with their byte offsets in `input`.
pub fn unknown_names(input: &str) -> Vec<(usize, String)> {
    let known = known_names();
    Vars::pattern()
        .captures_iter(input)
        .filter(|c| !known.iter().any(|k| *k == c[1]))
        .map(|c| (c.get(0).map_or(0, |m| m.start()), c[1].to_string()))
        .collect()
}

#[derive(Clone, Debug, Default)]
pub struct Vars {
    values: BTreeMap<String, String>,
    placeholder: bool,
}

impl Vars {
    pub fn new(namespace: &str, node: &NodeProfile) -> Self {
        let mut values = BTreeMap::new();
        values.insert("namespace".into(), namespace.into());
        values.insert("node".into(), node.name.clone());
        values.insert("sandboxImage".into(), node.containerd.sandbox_image.clone());
        values.insert("images.pause".into(), node.images.pause.clone());
        values.insert("images.busybox".into(), node.images.busybox.clone());
        for (role, image) in &node.images.more {
            values.insert(format!("images.{role}"), image.clone());
        }
        if let Some(r) = &node.registry {
            values.insert("registry".into(), r.endpoint(crate::node::RegistryProfile::PORT));
            values.insert("registry.private".into(), r.endpoint(crate::node::RegistryProfile::PRIVATE_PORT));
        }
        Vars { values, placeholder: false }
    }

    /// Vars that stand every variable for a placeholder (validation, plans without a node).
    pub fn placeholder() -> Self {
        Vars { values: BTreeMap::new(), placeholder: true }
    }

    fn pattern() -> Regex {
        Regex::new(r"\$\{([A-Za-z0-9_.-]+)\}").expect("valid")
    }

    fn value(&self, name: &str) -> String {
        match self.values.get(name) {
            Some(v) => v.clone(),
            None if self.placeholder => format!("<{name}>"),
            None => format!("${{{name}}}"),
        }
    }

    /// Substitute into text (manifests).
    pub fn text(&self, input: &str) -> String {
        Self::pattern().replace_all(input, |c: &regex::Captures| self.value(&c[1])).into_owned()
    }

    /// Substitute into a regular expression, escaping the values.
    pub fn regex(&self, input: &str) -> String {
        Self::pattern().replace_all(input, |c: &regex::Captures| regex::escape(&self.value(&c[1]))).into_owned()
    }

    /// Variables a text refers to that have no value.
    pub fn unknown(&self, input: &str) -> Vec<String> {
        Self::pattern()
            .captures_iter(input)
            .map(|c| c[1].to_string())
            .filter(|n| !self.values.contains_key(n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_text_and_escapes_patterns() {
        let vars = Vars::new("fl-x", &crate::testbed::tests::sample_profile());
        assert_eq!(vars.text("image: ${images.busybox} in ${namespace}"), "image: faultlab.invalid/busybox:1.35 in fl-x");
        assert_eq!(vars.regex("image \"${images.pause}\""), r#"image "faultlab\.invalid/cce\-pause:3\.1""#);
        assert_eq!(vars.unknown("${images.nope} ${namespace}"), vec!["images.nope".to_string()]);
        assert_eq!(unknown_names("a ${sandboxImg} ${images.busybox} ${images.busybx}"), vec![(2, "sandboxImg".to_string()), (34, "images.busybx".to_string())]);
        // (The sample description predates the inotify image role.)
        for name in known_names().into_iter().filter(|n| n != "images.inotify") {
            assert!(!vars.text(&format!("${{{name}}}")).contains('$'), "{name} has a value on the sample node");
        }
    }
}
