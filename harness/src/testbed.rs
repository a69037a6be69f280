//! The test bed's description file: how the harness reaches the project's own single-node cluster.
//!
//! `ci/testbed/up` writes it (default `/var/lib/faultlab/testbed/testbed.yaml`, or `$FAULTLAB_TESTBED`).
//! Its presence declares that the context it names belongs to the test bed, so faults may be injected.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::datafile::{self, ApiVersion, DataFileError};
use crate::node::NodeProfile;

pub const DEFAULT_PATH: &str = "/var/lib/faultlab/testbed/testbed.yaml";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TestBedKind {
    /// Written by `ci/testbed/up`: the context belongs to the test bed, faults may be injected.
    TestBed,
    /// Written by a user for a cluster of their own: faults need `--allow-existing <context>`.
    Cluster,
}

/// The test bed's description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestBed {
    pub api_version: ApiVersion,
    pub kind: TestBedKind,
    /// Platform name used for expectations, e.g. `k8s-1.20-containerd-1.6`.
    pub platform: String,
    pub kubeconfig: PathBuf,
    pub context: String,
    pub nodes: Vec<NodeProfile>,
}

/// Where the description is looked for: `$FAULTLAB_TESTBED`, else the default path.
pub fn path() -> PathBuf {
    std::env::var_os("FAULTLAB_TESTBED").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

impl TestBed {
    pub fn read(path: &Path) -> Result<TestBed, DataFileError> {
        let bed: TestBed = datafile::read(path)?;
        if bed.nodes.is_empty() {
            return Err(DataFileError::Invalid {
                path: path.to_owned(),
                field: "nodes".into(),
                message: "the test bed lists no node".into(),
            });
        }
        for (i, node) in bed.nodes.iter().enumerate() {
            if node.access().is_none() {
                return Err(DataFileError::Invalid {
                    path: path.to_owned(),
                    field: format!("nodes[{i}]"),
                    message: "a node needs `netns` or `container` so commands can reach it".into(),
                });
            }
        }
        Ok(bed)
    }
}

/// A node profile with placeholders, for plans that have no test bed to read.
pub fn placeholder_profile() -> NodeProfile {
    crate::datafile::decode::<TestBed>(Path::new("placeholder"), PLACEHOLDER).expect("static").nodes.remove(0)
}

const PLACEHOLDER: &str = include_str!("../tests/fixtures/testbed/valid.yaml");

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const SAMPLE: &str = include_str!("../tests/fixtures/testbed/valid.yaml");

    pub fn sample() -> TestBed {
        datafile::decode(Path::new("valid.yaml"), SAMPLE).unwrap()
    }

    pub fn sample_profile() -> NodeProfile {
        sample().nodes.remove(0)
    }

    #[test]
    fn valid_description_decodes() {
        let bed = sample();
        assert_eq!(bed.platform, "k8s-1.20-containerd-1.6");
        assert_eq!(bed.nodes[0].netns.as_deref(), Some("faultlab-node"));
        assert_eq!(bed.nodes[0].images.more.get("tools").map(String::as_str), Some("faultlab.invalid/tools:1"));
    }

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let text = SAMPLE.replace("    netns: faultlab-node\n", "    netns: faultlab-node\n    netnss: typo\n");
        let err = datafile::decode::<TestBed>(Path::new("bed.yaml"), &text).unwrap_err().to_string();
        assert!(err.starts_with("bed.yaml:"), "{err}");
        assert!(err.contains("netnss"), "{err}");
    }
}

