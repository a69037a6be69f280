//! `${...}` variables in scenario manifests and event patterns.
//!
//! Known variables: `namespace`, `node`, `images.<role>` (from the node profile), `sandboxImage`.

use std::collections::BTreeMap;

use regex::Regex;

use crate::node::NodeProfile;

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
    }
}
