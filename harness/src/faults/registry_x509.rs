//! registry-x509: the registry's certificate is signed by a CA the node does not trust.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1 and "Check Item 5: Whether the Remote Image Repository
//! Uses an Unknown or Insecure Certificate": `Failed to pull image "xxx": rpc error: code = Unknown desc
//! = error pulling image configuration: xxx x509: certificate signed by unknown authority`. Fix: load
//! the server's certificates into the node's trust store (`openssl s_client -showcerts -connect
//! {server_url}:{server_port} < /dev/null | sed -ne '/-BEGIN CERTIFICATE-/,/-END CERTIFICATE-/p' >
//! /usr/local/share/ca-certificates/tmp_ca.crt`, then the store's update) and restart the container
//! engine (`systemctl restart containerd`).
//!
//! How: `prepare` starts the run's registry (see [`super::registry`]) with a certificate from the run's
//! CA, which the node trusts through containerd's hosts.toml, and pushes the node's busybox image; the
//! workload pulls it (`imagePullPolicy: Always`) and runs. The fault then renews the registry's
//! certificate from another CA, as a registry whose certificate is re-issued by a new authority is, and
//! replaces the workload's pod, whose pull then fails the TLS handshake. The fix runs the document's
//! commands on the node (Debian's store: `update-ca-certificates`; the file is named for the run rather
//! than `tmp_ca.crt`, so that the undo, journalled first, removes exactly it) and restarts containerd,
//! which reads the system's CAs once. The undo removes the file, updates the store and restarts
//! containerd again, so that it forgets the run's CA too.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{self, Registry, Spec};
use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe};
use crate::check::Problem;
use crate::cmd::{Ask, Cmd, Output};
use crate::node::NodeProfile;

/// Where Debian and Ubuntu take local CAs from (the document's Ubuntu path).
pub const LOCAL_CA_DIR: &str = "/usr/local/share/ca-certificates";

/// The node's CA bundle, as `update-ca-certificates` writes it (Debian, Ubuntu).
pub const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The CA that signs the renewed certificate (its files in the registry's directory).
pub const RENEWED_CA: &str = "ca-renewed";

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryX509 {
    /// The Deployment that pulls from the registry; it must be part of the workload, pull `Always`,
    /// and replace its pods by `Recreate`.
    pub deployment: String,
}

impl Default for RegistryX509 {
    fn default() -> Self {
        RegistryX509 { deployment: "web".into() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Load the registry's certificates into the node's trust store.
    InstallCa,
    /// Restart the container engine.
    RestartContainerEngine,
}

/// The file the fix writes into the node's local CAs for the run in `namespace`.
pub fn ca_file(namespace: &str) -> String {
    format!("{LOCAL_CA_DIR}/faultlab-{namespace}.crt")
}

/// The document's commands on the node: the certificates the server at `endpoint` shows, into `file`,
/// then Debian's update of the store.
pub fn install_ca(endpoint: &str, file: &str) -> Cmd {
    Cmd::new([
        "sh",
        "-c",
        "openssl s_client -showcerts -connect \"$1\" </dev/null 2>/dev/null | sed -ne '/-BEGIN CERTIFICATE-/,/-END CERTIFICATE-/p' >\"$2\" \
         && grep -q 'BEGIN CERTIFICATE' \"$2\" && update-ca-certificates",
        "install-ca",
        endpoint,
        file,
    ])
    .timeout(UPDATE_TIMEOUT)
}

/// How long an update of the node's CA store may take: update-ca-certificates rehashes every CA, which
/// took over a minute on the emulated arm64 node (QEMU TCG).
// What the fault reads (a plan answers these): the renewed CA, and whether the node's bundle has it.
const RENEWED_CA_PEM: Ask = Ask("renewed-ca");
const TRUSTED: Ask = Ask("bundle-has-ca");

const UPDATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Remove the file and the link update-ca-certificates made to it from the store, and update the store
/// again (the undo; idempotent). Not `--fresh`, which makes every link again: the update removes the
/// file's hash link and rewrites the bundle, and leaves every other link as it was.
pub fn remove_ca(file: &str) -> Cmd {
    Cmd::new([
        "sh",
        "-c",
        "rm -f \"$1\" \"/etc/ssl/certs/$(basename \"$1\" .crt).pem\" && update-ca-certificates >/dev/null",
        "remove-ca",
        file,
    ])
    .timeout(UPDATE_TIMEOUT)
}

/// A line of a PEM certificate that only it has (the last full line of its base64 text).
pub fn fingerprint_line(pem: &str) -> Option<String> {
    let body: Vec<&str> = pem.lines().skip_while(|l| !l.starts_with("-----BEGIN")).skip(1).take_while(|l| !l.starts_with("-----END")).collect();
    body.iter().rev().find(|l| l.len() == 64).or(body.first()).map(|l| l.to_string())
}

#[async_trait]
impl Fault for RegistryX509 {
    // Reach: the node. The fix writes the node's CA store: on kind the node container's; on the test
    // bed, whose node shares this machine's files, this machine's, and the undo puts it back.
    registry::pulling!(deployment, behind_nginx: None);

    fn check(&self) -> Vec<Problem> {
        registry::check(&self.deployment)
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        // The last answer whose needle a command holds is its answer: the registry's (`cat -- ` of
        // containerd's config) after the CA's `cat `.
        let mut answers = vec![
            (RENEWED_CA_PEM, Output::ok("-----BEGIN CERTIFICATE-----\n<the renewed CA>\n-----END CERTIFICATE-----\n")),
            (TRUSTED, Output::ok("0\n")),
        ];
        answers.extend(registry::plan_answers(node));
        answers
    }

    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new("local CAs", format!("ls {LOCAL_CA_DIR} 2>/dev/null; sha256sum {BUNDLE} 2>/dev/null | cut -c1-64"))]
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::serve(ctx, Spec::main(false)).await.map(drop)
    }

    /// Renew the registry's certificate from another CA, then replace the workload's pod.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        registry::pulling_deployment(ctx, &self.deployment).await?;
        let reg = Registry::of(ctx, Spec::main(false))?;
        ctx.note(format!("the registry {} gets a certificate from another CA, which the node does not trust", reg.endpoint()));
        reg.renew(ctx, "renew-certificate", RENEWED_CA).await?;
        ctx.restart_target("restart-workload").await
    }

    /// In place while the node's CA bundle lacks the CA that signed the registry's certificate.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let reg = Registry::of(ctx, Spec::main(false))?;
        let pem = ctx.run_on_host("read-ca", Cmd::new(["cat", &reg.dir.join(format!("{RENEWED_CA}.crt")).display().to_string()]).asks(RENEWED_CA_PEM)).await?.stdout;
        let Some(line) = fingerprint_line(&pem) else {
            return Ok(Presence::Unknown);
        };
        let out = ctx.probe("check-trust", Cmd::new(["grep", "-c", "-F", &line, BUNDLE]).asks(TRUSTED)).await?;
        Ok(if out.stdout.trim().parse::<u32>().unwrap_or(0) == 0 {
            Presence::Present(format!("the node's CA bundle {BUNDLE} lacks the CA that signed {}'s certificate", reg.endpoint()))
        } else {
            Presence::Absent(format!("the node's CA bundle {BUNDLE} has the CA that signed {}'s certificate", reg.endpoint()))
        })
    }
}

#[async_trait]
impl Fix for RegistryX509 {
    type Step = Step;

    /// Writing the same file and updating the store again, and restarting containerd again, succeed.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::InstallCa => {
                let reg = Registry::of(ctx, Spec::main(false))?;
                let file = ca_file(&ctx.namespace);
                // Undone newest first: the file leaves the store, then containerd forgets it.
                ctx.undo_on_node("restart containerd, which read the node's CAs with the run's in them", ctx.node.profile.restart_containerd())?;
                ctx.undo_on_node(&format!("remove {file} from the node's CAs"), remove_ca(&file))?;
                ctx.note(format!("load the certificates {} shows into the node's CAs ({file}), as the document's commands do", reg.endpoint()));
                ctx.run(step, install_ca(&reg.endpoint(), &file)).await.map(drop)
            }
            Step::RestartContainerEngine => {
                ctx.note("restart containerd: it reads the system's CAs once");
                ctx.run(step, ctx.node.profile.restart_containerd()).await.map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;

    #[tokio::test]
    async fn plan_renews_the_certificate_and_the_fix_trusts_it_on_the_node() {
        let fault = RegistryX509::default();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        assert!(matches!(fault.present(&ctx).await.unwrap(), Presence::Present(_)));
        fault.fix(Step::InstallCa, &ctx).await.unwrap();
        fault.fix(Step::RestartContainerEngine, &ctx).await.unwrap();
        let node = fake.lines().join("\n");
        assert!(node.contains("openssl s_client -showcerts -connect"), "{node}");
        assert!(node.contains("/usr/local/share/ca-certificates/faultlab-fl-test.crt"), "{node}");
        assert!(node.contains("restart containerd"), "{node}");
        let undo: Vec<String> = ctx.journal.snapshot().entries.iter().map(|e| e.what.clone()).collect();
        assert!(undo.contains(&"remove /usr/local/share/ca-certificates/faultlab-fl-test.crt from the node's CAs".to_string()), "{undo:?}");
    }

    #[test]
    fn the_document_commands_run_through_a_real_shell() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.crt").display().to_string();
        // Without a server the pipeline writes nothing, and the store is not updated.
        let cmd = install_ca("127.0.0.1:9", &file);
        let status = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).status().unwrap();
        assert!(!status.success(), "nothing to install is a failure");
    }

    #[test]
    fn a_certificates_own_line() {
        let pem = format!("-----BEGIN CERTIFICATE-----\n{}\n{}\nabc=\n-----END CERTIFICATE-----\n", "A".repeat(64), "B".repeat(64));
        assert_eq!(fingerprint_line(&pem).unwrap(), "B".repeat(64));
        assert_eq!(fingerprint_line("no pem"), None);
    }
}
