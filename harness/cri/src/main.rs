//! `faultlab-cri`: the crictl sub-commands, flags and output formats that faultlab's faults, its
//! scripts and kind run (`version`, `pods`, `runp`, `stopp`, `rmp`, `pull`, `images`, `inspecti`), for
//! nodes that have no crictl (the test bed, and faultlab's own kind node image, where it is installed
//! as `crictl`). The library's documentation lists each with its caller (`faultlab::cri` in faultlab).
//! Also `proxy`: a CRI pass-through from `runtime.v1alpha2` (Kubernetes 1.20's kubelet) to
//! `runtime.v1` (containerd 2.x), see `faultlab_cri::proxy`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};
use faultlab_cri::{self as cri, api, PodsFilter, RuntimeClient, SandboxJson, SandboxListJson};

#[derive(Parser)]
#[command(name = "faultlab-cri", version, about = "The crictl commands faultlab and kind run, over CRI runtime.v1 (for nodes without crictl)")]
struct Cli {
    /// The runtime's CRI socket (its image service too).
    #[arg(short = 'r', long, env = "CONTAINER_RUNTIME_ENDPOINT", default_value = "unix:///run/containerd/containerd.sock", global = true)]
    runtime_endpoint: String,
    /// Timeout of each call, in seconds (crictl: --timeout 2s).
    #[arg(short = 't', long, default_value = "10", global = true, value_parser = parse_seconds)]
    timeout: Duration,
    #[command(subcommand)]
    command: Command,
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let number = text.strip_suffix('s').unwrap_or(text);
    number.parse::<u64>().map(Duration::from_secs).map_err(|_| format!("{text:?} is not a number of seconds"))
}

#[derive(Subcommand)]
enum Command {
    // Who calls each: the table in the library's documentation (src/lib.rs).
    /// The runtime's name and versions.
    // Only ci/testbed's checks that the client (and the VM's proxy) reach containerd.
    Version,
    /// List pod sandboxes.
    // -q: cni-broken; --name/--namespace -o json and -q --label: duplicate-container; the table: a
    // trainee following the scenarios' hints.
    Pods {
        /// Only sandboxes whose name matches this regular expression.
        #[arg(long)]
        name: Option<String>,
        /// Only sandboxes whose namespace matches this regular expression.
        #[arg(long)]
        namespace: Option<String>,
        /// Only sandboxes with this label (key=value); may be repeated.
        #[arg(long)]
        label: Vec<String>,
        /// Only sandbox IDs, one a line.
        #[arg(short, long)]
        quiet: bool,
        /// table or json.
        #[arg(short, long, default_value = "table")]
        output: String,
    },
    /// Run a pod sandbox from a config file (crictl's JSON format); prints its ID.
    // runp, stopp and rmp: only the duplicate-container fault (and its hint, `rmp -f`).
    Runp { config: PathBuf },
    /// Stop pod sandboxes.
    Stopp {
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Remove pod sandboxes.
    Rmp {
        /// Stop each one first if it is running.
        #[arg(short, long)]
        force: bool,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// List images, as a table (kind's `images.log`).
    // Only kind: `kind export logs`.
    Images {
        /// table (crictl's other formats have no caller).
        #[arg(short, long, default_value = "table")]
        output: String,
    },
    /// Pull an image (no login), waiting for as long as the download takes (up to --pull-timeout);
    /// prints `Image is up to date for <reference>`, as crictl does.
    // Only the image-pull-slow fault's fix (`--pull-timeout`: its own wait, see there).
    Pull {
        /// How long the pull may take, in seconds (crictl waits without end; 0 here means an hour).
        #[arg(long, default_value = "0", value_parser = parse_seconds)]
        pull_timeout: Duration,
        #[arg(value_name = "IMAGE")]
        image: String,
    },
    /// The status of an image (by name, digest or ID) and the runtime's info about it, as JSON (what
    /// `kind load` reads).
    // Only kind: `kind load docker-image`, by name and by image ID.
    Inspecti {
        /// json (crictl's other formats have no caller).
        #[arg(short, long, default_value = "json")]
        output: String,
        #[arg(value_name = "IMAGE")]
        image: String,
    },
    /// Serve CRI on a socket for a kubelet that speaks only runtime.v1alpha2, forwarding each call to a
    /// runtime that serves only runtime.v1 (method paths rewritten, all else passed through) until
    /// SIGTERM or SIGINT. Ignores --runtime-endpoint and --timeout.
    Proxy {
        /// The socket to serve on (unix:///path or a path), made mode 0600; a stale socket there is
        /// replaced, anything else there refused.
        #[arg(long, value_name = "ENDPOINT")]
        listen: String,
        /// The runtime's socket (unix:///path or a path).
        #[arg(long, value_name = "ENDPOINT")]
        upstream: String,
        /// One line per call on stderr: `<original path> -> <forwarded path> <grpc-status> <ms>ms`.
        #[arg(long)]
        log_calls: bool,
    },
    /// Serve the node half of faultlab's CSI driver to this node's kubelet (its plugin registration,
    /// CSI's Identity and Node services) until SIGTERM or SIGINT. Ignores --runtime-endpoint and
    /// --timeout. Not crictl's: see the library's `csi` module.
    CsiNode {
        /// The driver's name (the CSIDriver object's and the PersistentVolumes' spec.csi.driver).
        #[arg(long, default_value = "disk.faultlab.dev")]
        driver: String,
        /// This node's ID: its Node object's name.
        #[arg(long)]
        node_id: String,
        /// The kubelet's --root-dir.
        #[arg(long, default_value = "/var/lib/kubelet")]
        kubelet_root: PathBuf,
        /// Where the volumes' directories are (one per volume ID).
        #[arg(long)]
        disks: PathBuf,
        /// One line per call on stderr.
        #[arg(long)]
        log_calls: bool,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Each cause once: tonic repeats its cause in its own text.
            let mut text = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !text.contains(&c) {
                    text = format!("{text}: {c}");
                }
            }
            eprintln!("faultlab-cri: {text}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    if let Command::Proxy { listen, upstream, log_calls } = &cli.command {
        let listen = cri::socket_path(listen)?;
        let upstream = cri::socket_path(upstream)?;
        let proxy = cri::proxy::Proxy::bind(&listen, &upstream)?.log_calls(*log_calls);
        eprintln!("faultlab-cri proxy: listening on {}, forwarding to {} (runtime.v1alpha2 -> runtime.v1)", listen.display(), upstream.display());
        proxy.serve_until_signal().await?;
        return Ok(());
    }
    if let Command::CsiNode { driver, node_id, kubelet_root, disks, log_calls } = &cli.command {
        let options = cri::csi::NodeOptions { driver: driver.clone(), node_id: node_id.clone(), kubelet_root: kubelet_root.clone(), disks: disks.clone() };
        let (reg, sock) = (options.registration_socket(), options.csi_socket());
        let plugin = cri::csi::NodePlugin::bind(options)?.log_calls(*log_calls);
        eprintln!("faultlab-cri csi-node: {driver} for node {node_id}: registration {}, CSI {}", reg.display(), sock.display());
        plugin.serve_until_signal().await?;
        return Ok(());
    }
    // Read a config before connecting: a bad file is the user's error, whatever the runtime.
    let sandbox_config = match &cli.command {
        Command::Runp { config, .. } => {
            let text = std::fs::read_to_string(config).map_err(|source| cri::CriError::ReadConfig { path: config.clone(), source })?;
            Some(cri::parse_sandbox_config(config, &text)?)
        }
        _ => None,
    };
    // A wrong --output too is the user's error, whatever the runtime.
    match &cli.command {
        Command::Pods { output, .. } => cri::check_output("pods", output, &["table", "json"])?,
        Command::Images { output } => cri::check_output("images", output, &["table"])?,
        Command::Inspecti { output, .. } => cri::check_output("inspecti", output, &["json"])?,
        _ => {}
    }
    let mut client = RuntimeClient::connect(&cli.runtime_endpoint, cli.timeout).await?;
    match cli.command {
        Command::Version => {
            let v = client.version().await?;
            println!(
                "Version:  {}\nRuntimeName:  {}\nRuntimeVersion:  {}\nRuntimeApiVersion:  {}",
                v.version, v.runtime_name, v.runtime_version, v.runtime_api_version
            );
        }
        Command::Pods { name, namespace, label, quiet, output } => {
            let mut filter = api::PodSandboxFilter::default();
            for l in &label {
                let (k, v) = cri::parse_label(l)?;
                filter.label_selector.insert(k, v);
            }
            let keep = PodsFilter::new(name.as_deref(), namespace.as_deref())?;
            let mut items: Vec<api::PodSandbox> = client.list_pod_sandbox(filter).await?.into_iter().filter(|s| keep.keeps(s)).collect();
            // Newest first, as crictl sorts them.
            items.sort_by_key(|s| std::cmp::Reverse(s.created_at));
            if quiet {
                for s in &items {
                    println!("{}", s.id);
                }
            } else if output == "json" {
                let list = SandboxListJson { items: items.iter().map(SandboxJson::from_api).collect() };
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                println!("{:<15} {:<16} {:<40} {:<20} {:<8}", "POD ID", "STATE", "NAME", "NAMESPACE", "ATTEMPT");
                for s in items.iter().map(SandboxJson::from_api) {
                    let state = if s.ready() { "Ready" } else { "NotReady" };
                    let short: String = s.id.chars().take(13).collect();
                    println!("{:<15} {:<16} {:<40} {:<20} {:<8}", short, state, s.metadata.name, s.metadata.namespace, s.metadata.attempt);
                }
            }
        }
        Command::Runp { .. } => {
            let parsed = sandbox_config.expect("read above");
            let id = client.run_pod_sandbox(parsed).await?;
            println!("{id}");
        }
        Command::Stopp { ids } => {
            for id in ids {
                client.stop_pod_sandbox(&id).await?;
                println!("Stopped sandbox {id}");
            }
        }
        Command::Rmp { force, ids } => {
            for id in ids {
                if force {
                    client.stop_pod_sandbox(&id).await?;
                }
                client.remove_pod_sandbox(&id).await?;
                println!("Removed sandbox {id}");
            }
        }
        Command::Pull { pull_timeout, image } => {
            let within = if pull_timeout.is_zero() { Duration::from_secs(3600) } else { pull_timeout };
            let reference = client.pull_image(&image, within).await?;
            println!("Image is up to date for {reference}");
        }
        Command::Images { .. } => {
            let mut images = client.list_images().await?;
            cri::sort_images(&mut images);
            print!("{}", cri::images_table(&images));
        }
        Command::Inspecti { image, .. } => {
            // Verbose, as crictl asks by default: the runtime's info beside the status.
            let status = client.image_status(&image, true).await?;
            let Some(found) = status.image else {
                return Err(cri::CriError::NoSuchImage { image }.into());
            };
            println!("{}", cri::inspect_json(&found, &status.info)?);
        }
        Command::Proxy { .. } | Command::CsiNode { .. } => unreachable!("served at the top of run"),
    }
    Ok(())
}
