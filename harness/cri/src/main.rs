//! `faultlab-cri`: crictl's pod-sandbox commands (`version`, `pods`, `runp`, `stopp`, `rmp`), image
//! queries (`images`, `inspecti`) and `pull`, with crictl's flags, config files and output formats, for nodes that
//! have no crictl (the test bed, and faultlab's own kind node image, where it is installed as `crictl`
//! for kind's `crictl images` and `crictl inspecti`). See this crate's library (`faultlab::cri` in faultlab).
//! Also `proxy`: a CRI pass-through from `runtime.v1alpha2` (Kubernetes 1.20's kubelet) to
//! `runtime.v1` (containerd 2.x), see `faultlab_cri::proxy`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};
use faultlab_cri::{self as cri, api, gofmt, ImageColumns, ImageJson, ImageListJson, ImageRef, PodsFilter, RuntimeClient, SandboxJson, SandboxListJson};

#[derive(Parser)]
#[command(name = "faultlab-cri", version, about = "crictl's pod-sandbox and image commands over CRI runtime.v1 (for nodes without crictl)")]
struct Cli {
    /// The runtime's CRI socket.
    #[arg(short = 'r', long, env = "CONTAINER_RUNTIME_ENDPOINT", default_value = "unix:///run/containerd/containerd.sock", global = true)]
    runtime_endpoint: String,
    /// The runtime's image service socket, if not the runtime endpoint.
    #[arg(short = 'i', long, env = "IMAGE_SERVICE_ENDPOINT", global = true)]
    image_endpoint: Option<String>,
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
    /// The runtime's name and versions.
    Version,
    /// List pod sandboxes.
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
        /// ready or notready.
        #[arg(long)]
        state: Option<String>,
        /// Only sandbox IDs, one a line.
        #[arg(short, long)]
        quiet: bool,
        /// table or json.
        #[arg(short, long, default_value = "table")]
        output: String,
    },
    /// Run a pod sandbox from a config file (crictl's JSON format); prints its ID.
    Runp {
        /// Runtime handler (RuntimeClass handler) to use.
        #[arg(long, default_value = "")]
        runtime: String,
        config: PathBuf,
    },
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
    /// List images.
    #[command(visible_aliases = ["image", "img"])]
    Images {
        /// Only shows images of this repository (all its tags), this tag, digest or image ID.
        #[arg(value_name = "REPOSITORY[:TAG]")]
        image: Option<String>,
        /// Only image IDs, one a line.
        #[arg(short, long)]
        quiet: bool,
        /// Each image's fields, a block of lines per image.
        #[arg(short, long)]
        verbose: bool,
        /// A DIGEST column.
        #[arg(long)]
        digests: bool,
        /// Full image IDs and digests.
        #[arg(long)]
        no_trunc: bool,
        /// A PINNED column.
        #[arg(long)]
        pinned: bool,
        /// json, yaml or table.
        #[arg(short, long, default_value = "table")]
        output: String,
    },
    /// Pull an image (no login), waiting for as long as the download takes (up to --pull-timeout);
    /// prints `Image is up to date for <reference>`, as crictl does.
    Pull {
        /// How long the pull may take, in seconds (crictl waits without end; 0 here means an hour).
        #[arg(long, default_value = "0", value_parser = parse_seconds)]
        pull_timeout: Duration,
        #[arg(value_name = "IMAGE")]
        image: String,
    },
    /// The status of one or more images (by name, digest or ID); every listed image when none is named.
    Inspecti {
        /// json, yaml, go-template or table.
        #[arg(short, long, default_value = "json")]
        output: String,
        /// Without the runtime's verbose info.
        #[arg(short, long)]
        quiet: bool,
        /// The Go template for -o go-template.
        #[arg(long, default_value = "")]
        template: String,
        /// With no IMAGE: only the images this names (as the images argument).
        #[arg(long)]
        name: Option<String>,
        #[arg(value_name = "IMAGE")]
        images: Vec<String>,
    },
    /// Serve CRI on a socket for a kubelet that speaks only runtime.v1alpha2, forwarding each call to a
    /// runtime that serves only runtime.v1 (method paths rewritten, all else passed through) until
    /// SIGTERM or SIGINT. Ignores --runtime-endpoint, --image-endpoint and --timeout.
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
        Command::Images { output, .. } if !matches!(output.as_str(), "json" | "yaml" | "table") => {
            return Err(cri::CriError::Output { format: output.clone(), expected: "json, yaml, table" }.into());
        }
        Command::Inspecti { output, .. } if !matches!(output.as_str(), "json" | "yaml" | "go-template" | "table") => {
            return Err(cri::CriError::Output { format: output.clone(), expected: "json, yaml, go-template, table" }.into());
        }
        Command::Inspecti { output, template, .. } if output == "go-template" => {
            cri::template::Template::parse(template).map_err(cri::CriError::Template)?;
        }
        _ => {}
    }
    let endpoint = match &cli.command {
        Command::Images { .. } | Command::Inspecti { .. } | Command::Pull { .. } => cli.image_endpoint.as_deref().unwrap_or(&cli.runtime_endpoint),
        _ => &cli.runtime_endpoint,
    };
    let mut client = RuntimeClient::connect(endpoint, cli.timeout).await?;
    match cli.command {
        Command::Version => {
            let v = client.version().await?;
            println!(
                "Version:  {}\nRuntimeName:  {}\nRuntimeVersion:  {}\nRuntimeApiVersion:  {}",
                v.version, v.runtime_name, v.runtime_version, v.runtime_api_version
            );
        }
        Command::Pods { name, namespace, label, state, quiet, output } => {
            let mut filter = api::PodSandboxFilter::default();
            for l in &label {
                let (k, v) = cri::parse_label(l)?;
                filter.label_selector.insert(k, v);
            }
            if let Some(s) = &state {
                filter.state = Some(api::PodSandboxStateValue { state: cri::parse_state(s)? as i32 });
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
            } else if output == "table" {
                println!("{:<15} {:<16} {:<40} {:<20} {:<8}", "POD ID", "STATE", "NAME", "NAMESPACE", "ATTEMPT");
                for s in items.iter().map(SandboxJson::from_api) {
                    let state = if s.ready() { "Ready" } else { "NotReady" };
                    let short: String = s.id.chars().take(13).collect();
                    println!("{:<15} {:<16} {:<40} {:<20} {:<8}", short, state, s.metadata.name, s.metadata.namespace, s.metadata.attempt);
                }
            } else {
                anyhow::bail!("--output {output:?}: expected table or json");
            }
        }
        Command::Runp { runtime, .. } => {
            let parsed = sandbox_config.expect("read above");
            let id = client.run_pod_sandbox(parsed, &runtime).await?;
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
        Command::Images { image, quiet, verbose, digests, no_trunc, pinned, output } => {
            let images = list_images(&mut client, image.as_deref()).await?;
            match output.as_str() {
                "json" => println!("{}", serde_json::to_string_pretty(&image_list(&images))?),
                "yaml" => println!("{}", gofmt::yaml(&serde_json::to_value(image_list(&images))?)),
                _ if quiet => images.iter().for_each(|i| println!("{}", i.id)),
                _ if verbose => print!("{}", cri::images_verbose(&images)),
                _ => print!("{}", cri::images_table(&images, ImageColumns { digests, pinned, no_trunc })),
            }
        }
        Command::Inspecti { output, quiet, template, name, images } => {
            let verbose = !quiet;
            let ids = if images.is_empty() {
                let ids: Vec<String> = list_images(&mut client, name.as_deref()).await?.into_iter().map(|i| i.id).collect();
                if ids.is_empty() {
                    anyhow::bail!("no IDs provided or nothing found per filter");
                }
                ids
            } else {
                images
            };
            let mut answers = Vec::new();
            for id in &ids {
                let status = client.image_status(id, verbose).await?;
                let Some(image) = status.image else {
                    return Err(cri::CriError::NoSuchImage { image: id.clone() }.into());
                };
                if output == "table" {
                    print!("{}", cri::image_status_table(&image, &status.info, verbose));
                }
                answers.push((image, status.info));
            }
            if output != "table" {
                let value = cri::inspect_value(&answers)?;
                println!("{}", cri::render_status(&value, &output, &template)?);
            }
        }
        Command::Proxy { .. } => unreachable!("served at the top of run"),
    }
    Ok(())
}

/// `ListImages` with crictl's filter, the images the argument names (see `ImageRef`), in crictl's order.
async fn list_images(client: &mut RuntimeClient, name: Option<&str>) -> Result<Vec<api::Image>> {
    let mut images = client.list_images(name.unwrap_or("")).await?;
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        let wanted = ImageRef::parse(name);
        images.retain(|i| wanted.matches(i));
    }
    cri::sort_images(&mut images);
    Ok(images)
}

fn image_list(images: &[api::Image]) -> ImageListJson {
    ImageListJson { images: images.iter().map(ImageJson::from_api).collect() }
}
