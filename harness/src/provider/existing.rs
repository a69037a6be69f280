//! `existing`: a kubeconfig context plus a node-access description (the test bed writes one).

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{Cluster, Ownership, Provider, ProviderError};
use crate::node::NodeProfile;
use crate::record::{Channel, Recorder};
use crate::testbed::{TestBed, TestBedKind};

pub struct Existing {
    pub description: PathBuf,
}

impl Existing {
    /// The test bed's description, if it is there.
    pub fn testbed() -> Result<Existing, ProviderError> {
        let path = crate::testbed::path();
        if !path.is_file() {
            return Err(ProviderError::NotConfigured {
                reason: format!("no test-bed description at {} (run ci/testbed/up, or set FAULTLAB_TESTBED)", path.display()),
            });
        }
        Ok(Existing { description: path })
    }

    pub fn read(&self) -> Result<TestBed, ProviderError> {
        Ok(TestBed::read(&self.description)?)
    }
}

#[async_trait]
impl Provider for Existing {
    fn name(&self) -> &'static str {
        "existing"
    }

    async fn provision(&self, rec: &Recorder) -> Result<Cluster, ProviderError> {
        let bed = self.read()?;
        rec.push(Channel::Note, format!("use context {} of {} ({})", bed.context, bed.kubeconfig.display(), self.description.display()));
        Ok(Cluster {
            kubeconfig: bed.kubeconfig.clone(),
            context: bed.context.clone(),
            platform: bed.platform.clone(),
            ownership: match bed.kind {
                TestBedKind::TestBed => Ownership::TestBed,
                TestBedKind::Cluster => Ownership::Foreign,
            },
            nodes: bed.nodes,
        })
    }

    async fn nodes(&self, cluster: &Cluster, _rec: &Recorder) -> Result<Vec<NodeProfile>, ProviderError> {
        Ok(cluster.nodes.clone())
    }

    async fn collect_logs(&self, _cluster: &Cluster, dir: &Path, rec: &Recorder) -> Result<(), ProviderError> {
        rec.push(Channel::Note, format!("test-bed logs stay in /var/log/faultlab/testbed (not copied to {})", dir.display()));
        Ok(())
    }
}
