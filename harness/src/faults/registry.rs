//! A real image registry for the scenarios of 001's table of pull failures (not a fault: what those
//! faults share).
//!
//! The registry is Debian's distribution (`docker-registry serve`), over TLS with a certificate from a
//! CA made for the run, with htpasswd logins where the scenario needs them, and with Debian's nginx in
//! front where the document's registry behaves in a way distribution does not (a used-up pull limit:
//! 429 `toomanyrequests`). It runs on this machine (`ctx.host`) on the address the node's profile gives
//! (`registry.listen`; the node reaches it at `registry.address`), and its stop and removal are in the
//! run's journal before it starts, so teardown and `faultlab cleanup` stop it whatever happened.
//!
//! The node trusts it as containerd's CRI plugin reads per-registry settings: a `hosts.toml` and the CA
//! in the registry hosts directory (`registry.hosts_dir`, containerd's `config_path`), journalled too.
//! Images are pushed from the node's own containerd (`ctr images push`), so the registry holds the
//! node's architecture of the node's busybox image as [`REPOSITORY`].
//!
//! Every registry has the run's login, and nothing is pushed or pulled without it: the password is
//! random, made once per run and kept in the run's journal (a file only root reads: `statefile`), and
//! it is never in a command line, record, report or plan. faultlab's own requests read it from a netrc
//! file of the registry's (0600); the node's pushes from a hosts directory of the push's own (made
//! fresh in [`super::api::WORK_PARENT`], removed after); the node's pulls from a registry the scenario calls
//! open (no pull secret) from the registry's `hosts.toml` (an `Authorization` header), and from a
//! registry with a login only through the workload's pull secret, as the documents have it. So a local
//! user of this machine can neither push an image the node would then run, nor pull one.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::api::{Ctx, FaultError};
use crate::cmd::{Ask, Cmd, Output};
use crate::journal::Undo;
use crate::node::{ContainerdConfig, RegistryProfile, Setting};

/// Where the node's busybox image is pushed in every registry of a run: scenarios name it
/// `${registry}/faultlab/busybox:1`.
pub const REPOSITORY: &str = "faultlab/busybox:1";

/// [`REPOSITORY`] without its tag.
pub const REPOSITORY_NAME: &str = "faultlab/busybox";

/// Docker's image manifest (what `ctr images push` sends for an image imported from `docker save`).
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// The OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// The user of a registry's login.
pub const USER: &str = "faultlab";

/// The port on 127.0.0.1 where a registry behind nginx listens (image-pull-slow's).
pub const BACKEND_PORT: u16 = 5446;
/// registry-rate-limited's: a port of its own, so that the two scenarios behind nginx can run side by
/// side on two nodes of the test bed (each node's registry listens on its own address).
pub const RATE_LIMITED_BACKEND_PORT: u16 = 5447;

// What the registry's commands read (a plan answers these): the status of `GET /v2/` (is it up?), and
// an image's manifest and config read back from the registry.
const PING: Ask = Ask("registry-ping");
const MANIFEST: Ask = Ask("registry-manifest");
const IMAGE_CONFIG: Ask = Ask("registry-image-config");

/// The lines of `ss -Htln` output whose listener takes `listen` (`address:port`): one on that address,
/// or on every address (`0.0.0.0`, `*`, `[::]`). Another node's registry on the same port at its own
/// address is not in the way.
fn listeners_in_the_way(ss: &str, listen: &str) -> String {
    let (addr, port) = listen.rsplit_once(':').unwrap_or(("", listen));
    ss.lines()
        .filter(|l| {
            let Some(local) = l.split_whitespace().nth(3) else { return false };
            let Some((a, p)) = local.rsplit_once(':') else { return false };
            p == port && (a == addr || matches!(a, "0.0.0.0" | "*" | "[::]" | "::"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a fault that serves its workload's image from a run's registry needs: the ports that registry
/// and the private one listen on at the node's registry address, and with `behind_nginx` (the public
/// registry behind nginx) the port the registry itself listens on at 127.0.0.1, for that run alone.
pub fn needs(behind_nginx: Option<u16>) -> crate::needs::Needs {
    use crate::schedule::HostPort;
    let on_node = |port| HostPort { port, on_node_address: true };
    let mut host_ports = vec![on_node(RegistryProfile::PORT), on_node(RegistryProfile::PRIVATE_PORT)];
    if let Some(port) = behind_nginx {
        host_ports.push(HostPort { port, on_node_address: false });
    }
    crate::needs::Needs { host_ports, ..Default::default() }
}

/// Which of a run's registries, and how it behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Its name within the run (its directory): `registry`, `private`.
    pub name: &'static str,
    /// Where the node reaches it (`RegistryProfile::PORT` or `PRIVATE_PORT`).
    pub port: u16,
    /// The node pulls only with the workload's pull secret (the scenario's login); without it, the
    /// registry is open to the node (its `hosts.toml` carries the login). Pushes, and pulls by
    /// anyone else, always need the login.
    pub login: bool,
    /// nginx in front of it, limiting requests.
    pub proxy: bool,
    /// Where the registry itself listens on 127.0.0.1 when nginx is in front of it.
    pub backend_port: u16,
}

impl Spec {
    /// The scenario's registry (`${registry}`).
    pub fn main(login: bool) -> Spec {
        Spec { name: "registry", port: RegistryProfile::PORT, login, proxy: false, backend_port: BACKEND_PORT }
    }

    /// A second, private registry (`${registry.private}`), open to the node.
    pub fn private() -> Spec {
        Spec { name: "private", port: RegistryProfile::PRIVATE_PORT, login: false, proxy: false, backend_port: BACKEND_PORT }
    }
}

/// How nginx in front of a registry answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Every request passed to the registry.
    All,
    /// Every manifest request 429 `TOOMANYREQUESTS` (a used-up pull limit).
    TooManyRequests,
    /// Blobs sent at most this fast (nginx's `limit_rate`, bytes a second, `16k`): a slow download.
    Slowly(String),
}

impl Answer {
    /// Its name, as nginx answers `GET /faultlab/answer` once the configuration is in effect.
    pub fn tag(&self) -> String {
        match self {
            Answer::All => "all".into(),
            Answer::TooManyRequests => "too-many-requests".into(),
            Answer::Slowly(rate) => format!("slowly {rate}"),
        }
    }
}

/// A registry of the run: its files on this machine and its addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    pub spec: Spec,
    /// Its directory on this machine: CA, certificate, logins, configuration, data, logs.
    pub dir: PathBuf,
    pub profile: RegistryProfile,
}

/// The key of the run's registry password in its journal's fault state.
const PASSWORD_KEY: &str = "registry-password";

/// The password of the run's login: random (24 hex digits from the kernel's random source), made at
/// its first use and kept in the run's journal, so that every step and every process of the run (a
/// training `check`, `solution --apply`) reads the same one.
pub fn password(ctx: &Ctx) -> Result<String, FaultError> {
    if let Some(p) = ctx.journal.state(PASSWORD_KEY).and_then(|v| v.as_str().map(str::to_owned)) {
        return Ok(p);
    }
    let p = random_hex(12).map_err(|e| FaultError::Check { step: "make-login".into(), message: format!("reading /dev/urandom for the registry's password: {e}") })?;
    ctx.journal.set_state(PASSWORD_KEY, json!(p))?;
    Ok(p)
}

/// `n` random bytes from /dev/urandom, in hex.
fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `Basic <base64 of USER:password>`, the header a request with the login carries.
pub fn basic_auth(password: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}")))
}

/// Why the node's containerd (its config, `config`) would not read the registry settings faultlab
/// writes under `hosts_dir`, if it would not: no registry hosts directory at all (kind's stock config
/// and containerd's default set none, and then every pull from the run's registry fails x509), or
/// others than `hosts_dir` (`config_path` is a `:`-separated list).
pub fn hosts_dir_problem(node: &str, config: &ContainerdConfig, hosts_dir: &str) -> Option<String> {
    let field = config.field(Setting::RegistryConfigPath);
    let file = config.file();
    let wanted = hosts_dir.trim_end_matches('/');
    match config.registry_config_path() {
        None => Some(format!(
            "containerd on node {node} reads no registry hosts directory ({field} is not set in {file}), so it would ignore the \
             hosts.toml and CA of the run's registry and every pull from it would fail x509; set {field} = \"{wanted}\" and restart \
             containerd (on kind, a containerdConfigPatches entry: faultlab's kind clusters have it)"
        )),
        Some(path) if !path.split(':').any(|d| d.trim_end_matches('/') == wanted) => Some(format!(
            "containerd on node {node} reads registry settings from {path} ({field} in {file}), not from {wanted}, where the node's \
             profile says faultlab writes them; make the two agree (the profile's registry.hostsDir, or {field})"
        )),
        Some(_) => None,
    }
}

/// A node command that makes sure the node's containerd holds every blob of its busybox image, so
/// that `ctr images push` can send it: an image the CRI pulled where `discard_unpacked_layers` is on
/// (kind's stock nodes) keeps its manifest but not its layers, and a node image may not hold busybox
/// at all. `ctr images check` says `complete` or not; if not, `ctr content fetch` fetches the missing
/// blobs from where the image comes from (its registry), for ctr's own platform: the node's.
pub fn complete_content(node: &crate::node::NodeProfile) -> Cmd {
    let image = &node.images.busybox;
    let check = crate::cmd::shell_join(&node.ctr(["images", "check", &format!("name=={image}")]).argv);
    let fetch = crate::cmd::shell_join(&node.ctr(["content", "fetch", image.as_str()]).argv);
    let quoted = shell_words::quote(image);
    let script = format!(
        "status=$({check} | awk 'NR > 1 {{ print $4 }}'); [ \"$status\" = complete ] && exit 0; \
         echo {quoted}\": ${{status:-not on the node}}; fetching its content\" >&2; {fetch}"
    );
    Cmd::shell(script).timeout(Duration::from_secs(300))
}

/// Programs the registry needs on this machine, with the Debian package of each.
pub fn programs(spec: &Spec) -> Vec<(&'static str, &'static str)> {
    let mut p = vec![("docker-registry", "docker-registry"), ("openssl", "openssl"), ("curl", "curl"), ("ss", "iproute2"), ("htpasswd", "apache2-utils")];
    if spec.proxy {
        p.push(("nginx", "nginx-light"));
    }
    p
}

impl Registry {
    /// The registry `spec` of the run in `namespace`, on the node's registry address; `None` when the
    /// node's platform says of no registry.
    pub fn of(ctx: &Ctx, spec: Spec) -> Result<Registry, FaultError> {
        let Some(profile) = ctx.node.profile.registry.clone() else {
            return Err(FaultError::Check {
                step: "find-registry-address".into(),
                message: format!(
                    "node {} has no registry address in its description (`registry:` with listen, address and hostsDir): \
                     this platform cannot run a scenario's registry",
                    ctx.node.name()
                ),
            });
        };
        let base = if ctx.journal.path().is_some() { crate::journal::state_dir().join("registries") } else { PathBuf::from("<state-dir>/registries") };
        Ok(Registry { dir: base.join(format!("{}-{}", ctx.namespace, spec.name)), spec, profile })
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `address:port`, as image references name it.
    pub fn endpoint(&self) -> String {
        self.profile.endpoint(self.spec.port)
    }

    /// The reference of the node's busybox image in this registry.
    pub fn image(&self) -> String {
        format!("{}/{REPOSITORY}", self.endpoint())
    }

    /// The host address and port the registry itself listens on (behind nginx: 127.0.0.1).
    fn registry_listen(&self) -> String {
        if self.spec.proxy { format!("127.0.0.1:{}", self.spec.backend_port) } else { format!("{}:{}", self.profile.listen, self.spec.port) }
    }

    /// Where the node's requests arrive on this machine.
    fn front_listen(&self) -> String {
        format!("{}:{}", self.profile.listen, self.spec.port)
    }

    /// distribution's configuration.
    pub fn config_yml(&self) -> String {
        let mut text = format!(
            "# faultlab: a registry of one run (harness/src/faults/registry.rs).\n\
             version: 0.1\n\
             log:\n  level: info\n\
             storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n\
             http:\n  addr: {addr}\n  secret: faultlab-{name}\n  tls:\n    certificate: {crt}\n    key: {key}\n",
            data = self.file("data"),
            addr = self.registry_listen(),
            name = self.spec.name,
            crt = self.file("server.crt"),
            key = self.file("server.key"),
        );
        // Every registry has the login: a push, or a pull by anyone but the node, needs it.
        text.push_str(&format!("auth:\n  htpasswd:\n    realm: faultlab\n    path: {}\n", self.file("htpasswd")));
        text
    }

    /// nginx in front: TLS with the registry's certificate and every request to the registry; with
    /// [`Answer::TooManyRequests`], every manifest request (each pull asks for one first) answered as
    /// Docker Hub answers a client whose pull limit is used up: 429 with `TOOMANYREQUESTS`, until the
    /// window ends (here: until the run's end); with [`Answer::Slowly`], blobs passed on at that rate
    /// (nginx reads the registry's answer at once and sends it on slowly).
    pub fn nginx_conf(&self, answer: &Answer) -> String {
        let d = |f: &str| self.file(f);
        let pass = format!(
            "\x20           proxy_pass https://{back};\n\
             \x20           proxy_set_header Host $http_host;\n\
             \x20           proxy_set_header X-Forwarded-Proto https;\n",
            back = self.registry_listen()
        );
        let limit = match answer {
            Answer::All => String::new(),
            Answer::TooManyRequests => "\x20       location ~ ^/v2/.+/manifests/ {\n\
             \x20           default_type application/json;\n\
             \x20           return 429 '{\"errors\":[{\"code\":\"TOOMANYREQUESTS\",\"message\":\"Too Many Requests. You have reached your pull rate limit.\"}]}';\n\
             \x20       }\n"
                .to_string(),
            Answer::Slowly(rate) => format!("\x20       location ~ ^/v2/.+/blobs/ {{\n{pass}\x20           limit_rate {rate};\n\x20       }}\n"),
        };
        format!(
            "# faultlab: nginx in front of a registry of one run (harness/src/faults/registry.rs).\n\
             daemon on;\n\
             pid {pid};\n\
             error_log {err} info;\n\
             worker_processes 1;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n\
             \x20   access_log {access};\n\
             \x20   client_body_temp_path {tmp}/body;\n\
             \x20   proxy_temp_path {tmp}/proxy;\n\
             \x20   fastcgi_temp_path {tmp}/fastcgi;\n\
             \x20   uwsgi_temp_path {tmp}/uwsgi;\n\
             \x20   scgi_temp_path {tmp}/scgi;\n\
             \x20   # Nothing through a temporary file: nginx's workers run as an unprivileged user, who\n\
             \x20   # may not reach the run's directory (a state directory under a home of mode 0700 or\n\
             \x20   # 0750, as a CI runner's), and a push through them failed 500 on its first layer.\n\
             \x20   proxy_http_version 1.1;\n\
             \x20   proxy_request_buffering off;\n\
             \x20   proxy_max_temp_file_size 0;\n\
             \x20   server {{\n\
             \x20       listen {front} ssl;\n\
             \x20       ssl_certificate {crt};\n\
             \x20       ssl_certificate_key {key};\n\
             \x20       client_max_body_size 0;\n\
             {limit}\
             \x20       location = /faultlab/answer {{\n\
             \x20           default_type text/plain;\n\
             \x20           return 200 '{tag}';\n\
             \x20       }}\n\
             \x20       location /v2/ {{\n\
             {pass}\
             \x20       }}\n\
             \x20   }}\n\
             }}\n",
            pid = d("nginx.pid"),
            err = d("nginx-error.log"),
            access = d("nginx-access.log"),
            tmp = d("nginx-tmp"),
            front = self.front_listen(),
            tag = answer.tag(),
            crt = d("server.crt"),
            key = d("server.key"),
        )
    }

    /// `openssl` making a CA (`<ca>.crt`), then the registry's certificate signed by it for the node's
    /// address of the registry (and 127.0.0.1, where nginx reaches it), the CA after it in the same
    /// file: the registry sends the chain, as `openssl s_client -showcerts` shows it.
    /// The CA's name is the run's (its namespace is in the directory's name): a node whose containerd
    /// still holds another run's CA in memory must not find a CA of the same name.
    pub fn make_certificates(&self, ca: &str) -> Vec<Cmd> {
        let run = self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let d = |f: &str| self.file(f);
        let mut sans = vec![format!("IP:{}", self.profile.address), "IP:127.0.0.1".to_string()];
        if self.profile.listen != self.profile.address && self.profile.listen != "127.0.0.1" {
            sans.push(format!("IP:{}", self.profile.listen));
        }
        vec![
            Cmd::new(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj"])
                .arg(format!("/CN={}", common_name(&format!("{ca} {run}"))))
                .args(["-keyout", &d(&format!("{ca}.key")), "-out", &d(&format!("{ca}.crt"))]),
            Cmd::new(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=faultlab registry"])
                .args(["-addext", &format!("subjectAltName={}", sans.join(",")), "-addext", "basicConstraints=critical,CA:FALSE"])
                .args(["-CA", &d(&format!("{ca}.crt")), "-CAkey", &d(&format!("{ca}.key")), "-keyout", &d("server.key"), "-out", &d("server.crt")]),
            Cmd::new(["sh", "-c", "cat \"$2\" >>\"$1\"", "chain", &d("server.crt"), &d(&format!("{ca}.crt"))]),
        ]
    }

    /// A shell line that stops what runs in the directory (by its PID files) and removes it: the undo.
    /// A PID is signalled only while its process is still one of the run's (its command line names the
    /// run's directory: `docker-registry serve DIR/config.yml`, `nginx: master process nginx -c
    /// DIR/nginx.conf`): a PID file outliving its process (a crash, then `faultlab cleanup` much later)
    /// must not kill whatever process has the number since.
    pub fn stop(&self) -> Cmd {
        Cmd::new([
            "sh",
            "-c",
            &format!(
                "{OURS} for f in \"$1\"/*.pid; do ours \"$f\" && kill \"$(cat \"$f\")\" 2>/dev/null; done; \
                 for i in $(seq 50); do alive=; for f in \"$1\"/*.pid; do ours \"$f\" && alive=1; done; \
                 [ -z \"$alive\" ] && break; sleep 0.1; done; rm -rf \"$1\""
            ),
            "stop-registry",
            &self.dir.display().to_string(),
        ])
    }

    /// Stop distribution (by its PID file, if its process is still the run's) and wait until it is
    /// gone: it reads its certificate once.
    pub fn stop_registry(&self) -> Cmd {
        Cmd::new([
            "sh",
            "-c",
            &format!(
                "{OURS} ours \"$1/registry.pid\" || {{ echo \"$1/registry.pid names no process of this registry's\" >&2; exit 1; }}; \
                 p=$(cat \"$1/registry.pid\") && kill \"$p\" && for i in $(seq 50); do kill -0 \"$p\" 2>/dev/null || exit 0; sleep 0.1; done; exit 1"
            ),
            "stop-registry",
            &self.dir.display().to_string(),
        ])
    }

    /// A new certificate from a new CA (`ca`), as when a registry's certificate is renewed by another
    /// authority, and distribution started again to serve it.
    pub async fn renew(&self, ctx: &Ctx, step: &str, ca: &str) -> Result<(), FaultError> {
        for cmd in self.make_certificates(ca) {
            ctx.run_on_host(step, cmd).await?;
        }
        ctx.run_on_host(step, self.stop_registry()).await?;
        ctx.run_on_host(step, self.start_registry()).await?;
        self.wait_ready(ctx, step, ca).await
    }

    /// Start distribution in the background, in a session of its own (a Ctrl-C to faultlab does not
    /// reach it), its PID in `registry.pid`.
    pub fn start_registry(&self) -> Cmd {
        Cmd::new([
            "setsid",
            "sh",
            "-c",
            "docker-registry serve \"$1/config.yml\" >\"$1/registry.log\" 2>&1 </dev/null & echo $! >\"$1/registry.pid\"",
            "start-registry",
            &self.dir.display().to_string(),
        ])
    }

    /// What answers on the node's side (`curl` prints the status of `GET /v2/`: 200, or 401 with a
    /// login), trusting the CA `ca`.
    pub fn ping(&self, ca: &str) -> Cmd {
        Cmd::new(["curl", "-sS", "--max-time", "3", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .args([self.file(&format!("{ca}.crt")), format!("https://{}/v2/", self.front_listen())])
            .timeout(Duration::from_secs(10))
            .asks(PING)
    }

    /// Write `text` to `name` in the registry's directory.
    fn write(&self, name: &str, text: String) -> Cmd {
        Cmd::new(["sh", "-c", "umask 077 && cat >\"$1\"", "write", &self.file(name)]).stdin(text)
    }

    /// curl's netrc file of the login, for faultlab's own requests to the registry (never on a command line).
    fn netrc(&self, password: &str) -> String {
        let mut hosts = vec!["127.0.0.1".to_string(), self.profile.listen.clone()];
        hosts.dedup();
        hosts.iter().map(|h| format!("machine {h} login {USER} password {password}\n")).collect()
    }

    /// Make, start and wait for the registry (and its nginx), having journalled their stop first, then
    /// make the node trust it (it holds no image until [`Registry::push`]).
    pub async fn start(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let step = "start-registry";
        self.require_programs(ctx).await?;
        self.require_port_free(ctx, &self.front_listen()).await?;
        if self.spec.proxy {
            self.require_port_free(ctx, &self.registry_listen()).await?;
        }
        ctx.journal.record(format!("stop the registry {} and remove {}", self.endpoint(), self.dir.display()), Undo::Host { cmd: self.stop() })?;
        ctx.note(format!("start a registry (Debian's docker-registry) at {} for the node, in {}", self.endpoint(), self.dir.display()));
        ctx.run_on_host(step, Cmd::new(["mkdir", "-p", "-m", "0700", &self.dir.display().to_string()])).await?;
        ctx.run_on_host(step, Cmd::new(["mkdir", "-p"]).args([self.file("data"), self.file("nginx-tmp")])).await?;
        for cmd in self.make_certificates("ca") {
            ctx.run_on_host("make-certificates", cmd).await?;
        }
        let password = password(ctx)?;
        ctx.run_on_host("make-login", Cmd::new(["sh", "-c", "umask 077 && htpasswd -Bic \"$1\" \"$2\"", "make-login", &self.file("htpasswd"), USER]).stdin(password.clone())).await?;
        ctx.run_on_host("make-login", self.write("netrc", self.netrc(&password))).await?;
        ctx.run_on_host(step, self.write("config.yml", self.config_yml())).await?;
        ctx.run_on_host(step, self.start_registry()).await?;
        if self.spec.proxy {
            ctx.run_on_host(step, self.write("nginx.conf", self.nginx_conf(&Answer::All))).await?;
            ctx.run_on_host(step, self.nginx(&[])).await?;
        }
        self.wait_ready(ctx, step, "ca").await?;
        self.trust_on_node(ctx).await?;
        // What the node pulls from it stays in its containerd unless removed, journalled before any push
        // or pull: every name of the registry's (the CRI keeps a digest name beside the tag), and the
        // CRI's ID names (`sha256:<config>`) the node did not have before (an image made for the run).
        let ctr = ctx.node.profile.ctr(["images", "ls", "-q"]);
        let before = ctx.run("list-node-images", ctr.clone()).await?.stdout;
        let keep: Vec<&str> = before.split_whitespace().filter(|r| r.starts_with("sha256:")).collect();
        let ctr = crate::cmd::shell_join(&ctx.node.profile.ctr(Vec::<String>::new()).argv);
        let rm = format!(
            "for r in $({ctr} images ls -q); do case $r in \"$1\"/*) {ctr} images rm \"$r\" >/dev/null 2>&1;; \
             sha256:*) case \" $2 \" in *\" $r \"*) ;; *) {ctr} images rm \"$r\" >/dev/null 2>&1;; esac;; esac; done; true"
        );
        ctx.undo_on_node(
            &format!("remove the images named {}/... and the image IDs the node did not have from the node", self.endpoint()),
            Cmd::new(["sh", "-c", &rm, "remove-images", &self.endpoint(), &keep.join(" ")]),
        )?;
        Ok(())
    }

    /// `nginx -c <conf> -e <log> ARGS` (`-s reload` to read the configuration again).
    pub fn nginx(&self, args: &[&str]) -> Cmd {
        Cmd::new(["nginx", "-c", &self.file("nginx.conf"), "-e", &self.file("nginx-error.log")]).args(args.iter().copied())
    }

    /// Answer as `answer` says from now on: nginx reads its configuration again, and the call returns
    /// once nginx answers by it (`-s reload` only signals nginx: for a moment after it, the old workers
    /// still take new connections).
    pub async fn answer(&self, ctx: &Ctx, step: &str, answer: &Answer) -> Result<(), FaultError> {
        ctx.run_on_host(step, self.write("nginx.conf", self.nginx_conf(answer))).await?;
        ctx.run_on_host(step, self.nginx(&["-s", "reload"])).await?;
        ctx.run_on_host(step, self.await_answer(&answer.tag())).await?;
        Ok(())
    }

    /// Ask nginx which answer it gives (`GET /faultlab/answer`) until it is `tag` three times in a row,
    /// for up to 10 s.
    pub fn await_answer(&self, tag: &str) -> Cmd {
        // Three answers in a row: the first may come from the new worker while the old one, not yet
        // told to quit, still accepts on the same socket with the old answer (seen on the test bed:
        // registry_push's slowed blob came back at full speed right after the reload, 2026-11-26).
        let script = "ok=0; for i in $(seq 100); do if [ \"$(curl -sS --max-time 2 --cacert \"$1\" \"$2\" 2>/dev/null)\" = \"$3\" ]; then ok=$((ok + 1)); [ \"$ok\" -ge 3 ] && exit 0; else ok=0; fi; sleep 0.1; done; \
                      echo \"nginx at $2 does not answer $3 three times in a row 10 s after its reload: $(curl -sS --max-time 2 --cacert \"$1\" \"$2\" 2>&1)\" >&2; exit 1";
        Cmd::new(["sh", "-c", script, "await-answer", &self.file("ca.crt"), &format!("https://{}/faultlab/answer", self.front_listen()), tag]).timeout(Duration::from_secs(30))
    }

    async fn require_programs(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let wanted = programs(&self.spec);
        let names: Vec<&str> = wanted.iter().map(|(p, _)| *p).collect();
        let script = format!("for p in {}; do command -v \"$p\" >/dev/null || echo \"$p\"; done", names.join(" "));
        let out = ctx.run_on_host("find-registry-programs", Cmd::new(["sh", "-c", &script])).await?;
        let missing: Vec<String> = out
            .stdout
            .split_whitespace()
            .map(|p| match wanted.iter().find(|(name, _)| *name == p) {
                Some((name, package)) => format!("{name} (Debian package {package})"),
                None => p.to_string(),
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(FaultError::Check {
            step: "find-registry-programs".into(),
            message: format!("this machine lacks what the scenario's registry runs on: {}; install it (ci/testbed/up and ci/kind/up do)", missing.join(", ")),
        })
    }

    async fn require_port_free(&self, ctx: &Ctx, listen: &str) -> Result<(), FaultError> {
        let port = listen.rsplit(':').next().unwrap_or_default();
        let out = ctx.run_on_host("check-registry-port", Cmd::new(["ss", "-Htlnp", &format!("sport = :{port}")])).await?;
        let taken = listeners_in_the_way(&out.stdout, listen);
        if taken.is_empty() {
            return Ok(());
        }
        Err(FaultError::Check {
            step: "check-registry-port".into(),
            message: format!("port {port} of this machine, where the scenario's registry would listen ({listen}), is taken: {taken}"),
        })
    }

    async fn wait_ready(&self, ctx: &Ctx, step: &str, ca: &str) -> Result<(), FaultError> {
        let mut last = String::new();
        for _ in 0..40 {
            let ping = self.ping(ca);
            let out = ctx.host.run(&ping.argv, &ping, true).await;
            match out {
                Ok(o) if matches!(o.stdout.trim(), "200" | "401") => {
                    ctx.rec().push(crate::record::Channel::Host, format!("{}  # answered {}", ping.shell_line(), o.stdout.trim()));
                    return Ok(());
                }
                Ok(o) => last = format!("{} {}", o.stdout.trim(), o.stderr.trim()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let tail = |file: &str| Cmd::new(["tail", "-n", "20", &self.file(file)]).timeout(Duration::from_secs(5));
        let mut log = String::new();
        for file in if self.spec.proxy { vec!["registry.log", "nginx-error.log"] } else { vec!["registry.log"] } {
            let cmd = tail(file);
            log.push_str(&ctx.host.run(&cmd.argv, &cmd, true).await.map(|o| o.stdout).unwrap_or_default());
        }
        Err(FaultError::Check {
            step: step.into(),
            message: format!("the registry at {} did not answer in 10 s (last: {last}); its log:\n{log}", self.front_listen()),
        })
    }

    /// The node's directory of this registry's settings in containerd's registry hosts directory.
    pub fn hosts_dir(&self) -> String {
        format!("{}/{}", self.profile.hosts_dir.trim_end_matches('/'), self.endpoint())
    }

    /// containerd's `hosts.toml` for this registry: HTTPS, this CA; with `auth` (the login's `Basic`
    /// header), every request to it carries the login.
    pub fn hosts_toml(&self, auth: Option<&str>) -> String {
        let server = format!("https://{}", self.endpoint());
        let mut text = format!(
            "# faultlab: the registry of one run (removed at its end).\nserver = \"{server}\"\n\n[host.\"{server}\"]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n  ca = \"{}/ca.crt\"\n",
            self.hosts_dir()
        );
        if let Some(auth) = auth {
            text.push_str(&format!("  [host.\"{server}\".header]\n    Authorization = [\"{auth}\"]\n"));
        }
        text
    }

    /// Journal the removal of the node's settings for this registry, then write them: its CA and
    /// `hosts.toml` (containerd reads them at each pull). First, that the node's containerd reads that
    /// directory at all: its config is read from the node, not assumed (see [`hosts_dir_problem`]).
    pub async fn trust_on_node(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let config = ctx.containerd_config("read-containerd-config").await?;
        if let Some(message) = hosts_dir_problem(ctx.node.name(), &config, &self.profile.hosts_dir) {
            return Err(FaultError::Check { step: "trust-registry".into(), message });
        }
        let dir = self.hosts_dir();
        ctx.undo_on_node(&format!("remove the node's settings for registry {}", self.endpoint()), Cmd::new(["rm", "-rf", &dir]))?;
        let ca = ctx.run_on_host("read-ca", Cmd::new(["cat", &self.file("ca.crt")])).await?.stdout;
        let write = |name: &str, text: String| Cmd::new(["sh", "-c", "umask 077 && mkdir -p \"$1\" && cat >\"$1/$2\"", "write", &dir, name]).stdin(text);
        ctx.run("trust-registry", write("ca.crt", ca)).await?;
        // An open registry (the scenario gives no pull secret): the node pulls with the login, which
        // nobody else on this machine has.
        let auth = if self.spec.login { None } else { Some(basic_auth(&password(ctx)?)) };
        ctx.run("trust-registry", write("hosts.toml", self.hosts_toml(auth.as_deref()))).await?;
        Ok(())
    }

    /// Push the node's busybox image to the registry with the node's containerd, as step `step`, once
    /// the node holds all of its content ([`complete_content`]).
    pub async fn push(&self, ctx: &Ctx, step: &str) -> Result<(), FaultError> {
        ctx.run(step, complete_content(&ctx.node.profile)).await?;
        // The login in a hosts directory of the push's own (fresh, root's, removed after), never on
        // ctr's command line: a `hosts.toml` whose requests carry it, trusting the registry's CA.
        let dir = format!("{}/push.{}-{}", super::api::WORK_PARENT, ctx.namespace, self.spec.name);
        let server = format!("https://{}", self.endpoint());
        let hosts = format!(
            "server = \"{server}\"\n\n[host.\"{server}\"]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n  ca = \"{}/ca.crt\"\n  [host.\"{server}\".header]\n    Authorization = [\"{}\"]\n",
            self.hosts_dir(),
            basic_auth(&password(ctx)?)
        );
        let ctr = ctx.node.profile.ctr(["images".to_string(), "push".into(), "--hosts-dir".into(), dir.clone(), self.image(), ctx.node.profile.images.busybox.clone()]);
        let script = format!(
            "{} && umask 077 && mkdir {dir}/{endpoint} && cat >{dir}/{endpoint}/hosts.toml && {{ {ctr}; s=$?; rm -rf {dir}; exit $s; }}",
            super::api::fresh_private_dir(super::api::WORK_PARENT, &dir),
            endpoint = self.endpoint(),
            ctr = crate::cmd::shell_join(&ctr.argv),
        );
        ctx.note(format!("push the node's busybox image to {}", self.image()));
        ctx.run(step, Cmd::shell(script).stdin(hosts).timeout(Duration::from_secs(120))).await.map(drop)
    }

    /// The reference of the busybox image tagged `tag` in this registry (`address:port/faultlab/busybox:TAG`).
    pub fn image_tagged(&self, tag: &str) -> String {
        format!("{}/{REPOSITORY_NAME}:{tag}", self.endpoint())
    }

    /// `curl` to the registry itself (behind nginx: its own listener, which no answer of nginx's slows or
    /// refuses), trusting the run's CA: `GET`/`POST`/`PUT` of `path` (under `/v2/faultlab/busybox/`).
    pub fn curl(&self, method: &str, path: &str, extra: &[&str]) -> Cmd {
        Cmd::new(["curl", "-sS", "-f", "--max-time", "60", "-X", method, "--netrc-file", &self.file("netrc"), "--cacert", &self.file("ca.crt")])
            .args(extra.iter().copied())
            .arg(format!("https://{}/v2/{REPOSITORY_NAME}/{path}", self.registry_listen()))
            .timeout(Duration::from_secs(90))
    }

    /// Upload the file `name` of the registry's directory as the blob `digest`, as distribution 2.8
    /// takes it: `POST .../blobs/uploads/` opens an upload and answers where it is (`Location`, absolute
    /// or not), `PUT <location>&digest=` sends the whole blob and closes it (distribution checks the
    /// digest). curl on this machine, to the registry itself.
    pub fn upload(&self, name: &str, digest: &str) -> Cmd {
        Cmd::new(["sh", "-c", UPLOAD, "upload-blob", &self.file("ca.crt"), &format!("https://{}", self.registry_listen()), REPOSITORY_NAME, &self.file(name), digest, &self.file("netrc")])
            .timeout(Duration::from_secs(150))
    }

    /// Push `tag`: the registry's busybox image ([`REPOSITORY`], pushed by [`Registry::push`]) with one
    /// more layer, [`filler_layer`] of `size` bytes made from `seed`, as a new release of the image would
    /// add one. The registry's API is spoken with curl from this machine: the manifest and configuration
    /// read, the layer and the new configuration uploaded ([`Registry::upload`]), the manifest put under
    /// `tag`. A node that holds busybox must still download the new layer, whose
    /// content (and so digest) is the run's own. Returns the new image's reference.
    pub async fn push_with_filler(&self, ctx: &Ctx, step: &str, tag: &str, seed: &str, size: usize) -> Result<String, FaultError> {
        let accept = format!("Accept: {DOCKER_MANIFEST}, {OCI_MANIFEST}");
        let tag_of = REPOSITORY.rsplit(':').next().unwrap_or("1");
        let read = ctx.run_on_host(step, self.curl("GET", &format!("manifests/{tag_of}"), &["-H", &accept]).asks(MANIFEST)).await?;
        let bad = |what: &str, e: String| FaultError::Check { step: step.into(), message: format!("the registry's {what} of {}: {e}", self.image()) };
        let manifest: serde_json::Value = serde_json::from_str(&read.stdout).map_err(|e| bad("manifest", e.to_string()))?;
        let config_digest = manifest["config"]["digest"].as_str().ok_or_else(|| bad("manifest", format!("no config digest (is it an index of several platforms?): {}", read.stdout)))?;
        let read = ctx.run_on_host(step, self.curl("GET", &format!("blobs/{config_digest}"), &["-L"]).asks(IMAGE_CONFIG)).await?;
        let config: serde_json::Value = serde_json::from_str(&read.stdout).map_err(|e| bad("configuration", e.to_string()))?;
        let filler = filler_layer(seed, size);
        let larger = larger_image(&manifest, &config, &filler).map_err(|e| bad("manifest", e))?;
        ctx.note(format!("push {} to the registry: its busybox image and a layer of {} KiB of the run's own", self.image_tagged(tag), size / 1024));
        for (name, text, digest) in [("filler.tar", filler.tar, &filler.digest), ("config.json", larger.config, &larger.config_digest)] {
            ctx.run_on_host(step, self.write(name, text)).await?;
            ctx.run_on_host(step, self.upload(name, digest)).await?;
        }
        let media = larger.manifest["mediaType"].as_str().unwrap_or(DOCKER_MANIFEST).to_string();
        ctx.run_on_host(step, self.write("manifest.json", larger.manifest.to_string())).await?;
        let body = format!("@{}", self.file("manifest.json"));
        let content = format!("Content-Type: {media}");
        ctx.run_on_host(step, self.curl("PUT", &format!("manifests/{tag}"), &["-H", &content, "--data-binary", &body])).await?;
        Ok(self.image_tagged(tag))
    }

    /// An image pull secret (`kubernetes.io/dockerconfigjson`) named `name` in the run's namespace for
    /// this registry with `password`.
    pub fn pull_secret(&self, name: &str, password: &str) -> serde_json::Value {
        let config = json!({"auths": {self.endpoint(): {"username": USER, "password": password}}});
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "faultlab"}},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": config.to_string()},
        })
    }
}

/// A registry fault's parameter problems: the Deployment's name.
pub fn check(deployment: &str) -> Vec<crate::check::Problem> {
    crate::check::dns_subdomain("deployment", deployment).into_iter().collect()
}

/// What a registry fault needs of the workload: its Deployment.
pub fn workload(deployment: &str) -> Vec<super::api::WorkloadRef> {
    vec![super::api::WorkloadRef { field: "deployment", kind: "Deployment", name: deployment.to_string() }]
}

/// What a plan's API answers a registry fault: its Deployment ([`plan_deployment`]).
pub fn plan_api(deployment: &str, secret: Option<&str>) -> Vec<(String, serde_json::Value)> {
    vec![(format!("/deployments/{deployment}"), plan_deployment(deployment, secret))]
}

/// The [`Fault`](super::api::Fault) methods that every fault whose workload pulls from the run's
/// registries has alike, written once: what it needs ([`needs`]: both registries' ports, and nginx's
/// backend port when the public registry is `behind_nginx`), the Deployment the workload must have
/// ([`workload`]), and what a plan's API holds ([`plan_api`]: the Deployment, with the pull Secret the
/// fault names, if any). Inside `impl Fault for X`, with X's field names:
/// `registry::pulling!(deployment, behind_nginx: None);` or
/// `registry::pulling!(deployment, behind_nginx: None, secret: secret);` (`Some(port)`: nginx in front,
/// the registry on that port of 127.0.0.1). Their reach is the default,
/// the node: the registries are this run's own processes on this machine, the settings the node's.
macro_rules! pulling {
    ($deployment:ident, behind_nginx: $nginx:expr) => {
        $crate::faults::registry::pulling!(@both $deployment, $nginx);

        fn plan_api_answers(&self, _target: &$crate::gates::Target) -> Vec<(String, serde_json::Value)> {
            $crate::faults::registry::plan_api(&self.$deployment, None)
        }
    };
    ($deployment:ident, behind_nginx: $nginx:expr, secret: $secret:ident) => {
        $crate::faults::registry::pulling!(@both $deployment, $nginx);

        fn plan_api_answers(&self, _target: &$crate::gates::Target) -> Vec<(String, serde_json::Value)> {
            $crate::faults::registry::plan_api(&self.$deployment, Some(&self.$secret))
        }
    };
    (@both $deployment:ident, $nginx:expr) => {
        fn needs(&self) -> $crate::needs::Needs {
            $crate::faults::registry::needs($nginx)
        }

        fn workload_refs(&self) -> Vec<$crate::faults::api::WorkloadRef> {
            $crate::faults::registry::workload(&self.$deployment)
        }
    };
}
pub(crate) use pulling;

/// The run's registry of `spec`, started, with the node's busybox image pushed to it as
/// [`REPOSITORY`]: what the pulling faults' `prepare` makes before the workload starts.
pub async fn serve(ctx: &Ctx, spec: Spec) -> Result<Registry, FaultError> {
    let reg = Registry::of(ctx, spec)?;
    reg.start(ctx).await?;
    reg.push(ctx, "push-image").await?;
    Ok(reg)
}

/// Roll Deployment `name` (read as `deployment`) out to `image`: every container's image set to it.
pub async fn roll_out(ctx: &Ctx, name: &str, deployment: &serde_json::Value, image: &str, step: &str) -> Result<(), FaultError> {
    let containers: Vec<serde_json::Value> = containers(deployment).iter().map(|c| json!({"name": c["name"], "image": image})).collect();
    ctx.note(format!("roll Deployment {name} out to the new version {image}"));
    let patch = json!({"spec": {"template": {"spec": {"containers": containers}}}});
    ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), name, &patch).await.map_err(Ctx::api_err(step))
}

/// The Deployment `name`, checked to pull again when its pod is replaced ([`check_pulls_again`]).
pub async fn pulling_deployment(ctx: &Ctx, name: &str) -> Result<serde_json::Value, FaultError> {
    let d = deployment(ctx, name, "read-deployment").await?;
    check_pulls_again(&d, name).map_err(|message| FaultError::Check { step: "read-deployment".into(), message })?;
    Ok(d)
}

/// The fix of the faults whose registry the node cannot use (rate-limited, unreachable): the
/// document's "push the image to SWR and pull it from SWR", with the run's private registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToPrivate {
    /// Push the image to the private registry (from the node's containerd).
    PushToPrivateRegistry,
    /// Pull it from there: the Deployment's image names the private registry.
    PullFromPrivateRegistry,
}

/// Apply one step of [`ToPrivate`] to `deployment`. A push of what the registry holds already, and the
/// same patch again, succeed: idempotent.
pub async fn to_private(which: ToPrivate, ctx: &Ctx, deployment: &str) -> Result<(), FaultError> {
    let step = super::steps::Steps::name(which);
    let private = Registry::of(ctx, Spec::private())?;
    match which {
        ToPrivate::PushToPrivateRegistry => private.push(ctx, step).await,
        ToPrivate::PullFromPrivateRegistry => pull_from(ctx, deployment, step, &private).await,
    }
}

/// Start the run's registry with a login, push the node's image, and create the pull secret `secret`
/// with the login (image-pull-secret-missing and -wrong).
pub async fn start_with_login(ctx: &Ctx, secret: &str) -> Result<Registry, FaultError> {
    let reg = Registry::of(ctx, Spec::main(true))?;
    reg.start(ctx).await?;
    reg.push(ctx, "push-image").await?;
    ctx.note(format!("create the pull secret {secret} with the registry's login"));
    ctx.kube.create_object(Some(&ctx.namespace), reg.pull_secret(secret, &password(ctx)?)).await.map_err(Ctx::api_err("create-pull-secret"))?;
    Ok(reg)
}

/// The Deployment `name` of the run's namespace, or an error of `step` saying the workload lacks it.
pub async fn deployment(ctx: &Ctx, name: &str, step: &str) -> Result<serde_json::Value, FaultError> {
    match ctx.kube.get_object("apps/v1", "Deployment", Some(&ctx.namespace), name).await.map_err(Ctx::api_err(step))? {
        Some(d) => Ok(d),
        None => Err(FaultError::Check {
            step: step.into(),
            message: format!("Deployment {name} is not in namespace {}; the workload must create it", ctx.namespace),
        }),
    }
}

/// The pull secrets a Deployment's pods name.
pub fn pull_secrets(deployment: &serde_json::Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["imagePullSecrets"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// A Deployment's containers (none where it has no list).
pub fn containers(deployment: &serde_json::Value) -> &[serde_json::Value] {
    deployment["spec"]["template"]["spec"]["containers"].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The images of a Deployment's containers.
pub fn images(deployment: &serde_json::Value) -> Vec<String> {
    containers(deployment).iter().filter_map(|c| c["image"].as_str().map(str::to_owned)).collect()
}

/// Why a change to a Deployment would show no pull failure, if it would not: its new pod must pull
/// again (`imagePullPolicy: Always`: the node has the image since setup) and be the only one (`Recreate`:
/// with a rolling update the old pod goes on running and hides the symptom).
pub fn check_pulls_again(deployment: &serde_json::Value, name: &str) -> Result<(), String> {
    let strategy = deployment["spec"]["strategy"]["type"].as_str().unwrap_or("RollingUpdate");
    if strategy != "Recreate" {
        return Err(format!(
            "Deployment {name} replaces its pods by {strategy}: its old pod would keep running beside the one that cannot pull, \
             so give it `strategy: {{type: Recreate}}`"
        ));
    }
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
    if containers.is_empty() {
        return Err(format!("Deployment {name} has no container"));
    }
    for c in &containers {
        if c["imagePullPolicy"].as_str() != Some("Always") {
            return Err(format!(
                "container {} of Deployment {name} has imagePullPolicy {}: the node holds the image since setup, so only `Always` pulls it again",
                c["name"].as_str().unwrap_or_default(),
                c["imagePullPolicy"].as_str().unwrap_or("(unset)")
            ));
        }
    }
    Ok(())
}

/// A plan's Deployment: Recreate, one container pulling `${registry}`'s image always, with `secret`.
pub fn plan_deployment(name: &str, secret: Option<&str>) -> serde_json::Value {
    let mut d = json!({
        "metadata": {"name": name},
        "spec": {"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": [
            {"name": "app", "image": format!("<registry-address>:{}/{REPOSITORY}", RegistryProfile::PORT), "imagePullPolicy": "Always"}
        ]}}}
    });
    if let Some(secret) = secret {
        d["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": secret}]);
    }
    d
}

/// The Deployment's containers whose image is not pulled from `endpoint` yet, each with its image's
/// registry host replaced by it (a strategic merge patch's list: by name).
pub fn to_registry(deployment: &serde_json::Value, endpoint: &str) -> Vec<serde_json::Value> {
    containers(deployment)
        .iter()
        .filter_map(|c| {
            let image = c["image"].as_str()?;
            let (host, path) = image.split_once('/')?;
            (host != endpoint).then(|| json!({"name": c["name"], "image": format!("{endpoint}/{path}")}))
        })
        .collect()
}

/// Point the Deployment's containers at `registry` (those not pulling from it yet): a fix's "pull the
/// image from there". The same patch again changes nothing: idempotent.
pub async fn pull_from(ctx: &Ctx, deployment: &str, step: &str, registry: &Registry) -> Result<(), FaultError> {
    let d = self::deployment(ctx, deployment, step).await?;
    let containers = to_registry(&d, &registry.endpoint());
    if containers.is_empty() {
        return Ok(());
    }
    ctx.note(format!("the Deployment's image from the registry {}", registry.endpoint()));
    let patch = json!({"spec": {"template": {"spec": {"containers": containers}}}});
    ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), deployment, &patch).await.map_err(Ctx::api_err(step))
}

/// One more image layer: an uncompressed tar holding `faultlab-filler`, `size` bytes of text made from
/// `seed` (hexadecimal SHA-256 of a counter: every byte ASCII, so the tar is text, and a seed of its own
/// gives a digest no node holds yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filler {
    pub tar: String,
    /// `sha256:...` of the tar: the blob's digest and, uncompressed, its diff ID too.
    pub digest: String,
    pub size: usize,
}

pub fn filler_layer(seed: &str, size: usize) -> Filler {
    use sha2::{Digest, Sha256};
    let mut content = String::with_capacity(size + 64);
    let mut i = 0u64;
    while content.len() < size {
        let block = Sha256::digest(format!("{seed} {i}").as_bytes());
        content.extend(block.iter().map(|b| format!("{b:02x}")));
        i += 1;
    }
    content.truncate(size);
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.set_size(size as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, "faultlab-filler", content.as_bytes()).expect("a tar in memory");
    let bytes = builder.into_inner().expect("a tar in memory");
    let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
    let size = bytes.len();
    Filler { tar: String::from_utf8(bytes).expect("a tar of ASCII names and content is ASCII"), digest, size }
}

/// A manifest and configuration with one more layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Larger {
    pub manifest: serde_json::Value,
    /// The configuration as uploaded (its digest is of these bytes).
    pub config: String,
    pub config_digest: String,
}

/// `manifest` and `config` (an image of one platform) with `filler` as their last layer: the layer
/// appended to the manifest's layers (uncompressed, as `docker save` layers imported into containerd
/// are), its diff ID to the configuration's, a history line for it.
pub fn larger_image(manifest: &serde_json::Value, config: &serde_json::Value, filler: &Filler) -> Result<Larger, String> {
    use sha2::{Digest, Sha256};
    let media = manifest["mediaType"].as_str().unwrap_or(DOCKER_MANIFEST);
    let layer_type = match media {
        DOCKER_MANIFEST => "application/vnd.docker.image.rootfs.diff.tar",
        OCI_MANIFEST => "application/vnd.oci.image.layer.v1.tar",
        other => return Err(format!("a manifest of type {other}, not one image's ({DOCKER_MANIFEST} or {OCI_MANIFEST})")),
    };
    let mut config = config.clone();
    let Some(diff_ids) = config["rootfs"]["diff_ids"].as_array_mut() else {
        return Err("a configuration without rootfs.diff_ids".into());
    };
    diff_ids.push(json!(filler.digest));
    if let Some(history) = config["history"].as_array_mut() {
        history.push(json!({"created": "1970-01-01T00:00:00Z", "created_by": "faultlab: a layer of filler (image-pull-slow)"}));
    }
    let config = config.to_string();
    let config_digest = format!("sha256:{:x}", Sha256::digest(config.as_bytes()));
    let mut manifest = manifest.clone();
    let Some(layers) = manifest["layers"].as_array_mut() else {
        return Err("a manifest without layers".into());
    };
    layers.push(json!({"mediaType": layer_type, "size": filler.size, "digest": filler.digest}));
    manifest["config"]["digest"] = json!(config_digest);
    manifest["config"]["size"] = json!(config.len());
    Ok(Larger { manifest, config, config_digest })
}

/// What a plan's host answers for [`Registry::push_with_filler`]: a manifest of one layer and its
/// configuration, as distribution sends them.
pub fn plan_filler_answers() -> Vec<(Ask, Output)> {
    let config = json!({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", "b".repeat(64))]}});
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 180, "digest": format!("sha256:{}", "c".repeat(64))},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 1_000_000, "digest": format!("sha256:{}", "b".repeat(64))}]
    });
    vec![(MANIFEST, Output::ok(manifest.to_string())), (IMAGE_CONFIG, Output::ok(config.to_string()))]
}

/// The shell of [`Registry::upload`]: `$1` the CA, `$2` `https://host:port`, `$3` the repository, `$4` the
/// file, `$5` its digest.
pub const UPLOAD: &str = r#"set -e
location=$(curl -sS -f --max-time 60 --netrc-file "$6" --cacert "$1" -X POST -D - -o /dev/null "$2/v2/$3/blobs/uploads/" | tr -d '\r' | sed -n 's/^[Ll]ocation: *//p')
[ -n "$location" ] || { echo "the registry answered no Location to POST $2/v2/$3/blobs/uploads/" >&2; exit 1; }
case $location in http*) ;; *) location="$2$location" ;; esac
case $location in *\?*) location="$location&digest=$5" ;; *) location="$location?digest=$5" ;; esac
curl -sS -f --max-time 120 --netrc-file "$6" --cacert "$1" -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$4" "$location"
"#;

/// `ours FILE`: whether the PID in FILE (a run's registry directory, `$1`) is a live process whose
/// command line names that directory.
const OURS: &str = "ours() { p=$(cat \"$1\" 2>/dev/null) && case $p in ''|*[!0-9]*) return 1;; esac && \
                    tr '\\0' ' ' <\"/proc/$p/cmdline\" 2>/dev/null | grep -qF -- \"$DIR/\"; }; DIR=$1;";

/// A certificate's common name: at most 64 characters (X.509's upper bound), the end kept (a run's
/// namespace ends in its random part).
pub fn common_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    chars[chars.len().saturating_sub(64)..].iter().collect()
}

/// What a plan's host answers for a registry: nothing missing, the port free, `GET /v2/` 200, and the
/// node's containerd config reading the hosts directory faultlab writes.
pub fn plan_answers(node: &crate::node::NodeProfile) -> Vec<(Ask, Output)> {
    let config = format!("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"{}\"\n", node.registry.as_ref().map_or("/etc/containerd/certs.d", |r| r.hosts_dir.as_str()));
    vec![(PING, Output::ok("200")), (super::api::CONTAINERD_CONFIG, Output::ok(config))]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(spec: Spec) -> Registry {
        let profile = RegistryProfile { listen: "198.18.213.1".into(), address: "198.18.213.1".into(), hosts_dir: "/etc/containerd/certs.d".into() };
        Registry { spec, dir: PathBuf::from("/var/lib/faultlab/runs/registries/fl-test-registry"), profile }
    }

    /// Random per run, kept in the run's journal: the same for every reader of that journal, another
    /// for another run (it was the namespace's hash before, which anyone could compute).
    #[test]
    fn the_password_is_random_per_run_and_kept_in_its_journal() {
        let (a, _) = crate::faults::testing::ctx();
        let (b, _) = crate::faults::testing::ctx();
        assert_eq!(a.namespace, b.namespace, "the same namespace");
        let pa = password(&a).unwrap();
        assert_eq!(pa.len(), 24);
        assert!(pa.bytes().all(|c| c.is_ascii_hexdigit()), "{pa}");
        assert_eq!(password(&a).unwrap(), pa, "the same for each reader");
        assert_eq!(a.journal.state(PASSWORD_KEY), Some(json!(pa)), "kept in the journal");
        assert_ne!(password(&b).unwrap(), pa, "another run, another password");
        assert_eq!(basic_auth("pw"), "Basic ZmF1bHRsYWI6cHc=");
    }

    /// Nothing of the login on a command line: pushes and faultlab's own requests carry it in files
    /// and standard input only.
    #[tokio::test]
    async fn the_login_is_never_on_a_command_line() {
        let (ctx, fake) = crate::faults::testing::ctx();
        for (ask, output) in plan_answers(&ctx.node.profile) {
            fake.answer(ask, output);
        }
        let reg = Registry::of(&ctx, Spec::main(true)).unwrap();
        reg.push(&ctx, "push-image").await.unwrap();
        let pw = password(&ctx).unwrap();
        let lines = fake.lines();
        assert!(!lines.iter().any(|l| l.contains(&pw) || l.contains(&basic_auth(&pw))), "{lines:#?}");
        let push = lines.iter().find(|l| l.contains("images push")).unwrap();
        assert!(push.contains(&format!("--hosts-dir /var/lib/faultlab-work/push.{}-registry", ctx.namespace)) && push.contains("rm -rf /var/lib/faultlab-work/push."), "{push}");
        assert!(!reg.curl("GET", "manifests/1", &[]).shell_line().contains(&pw));
        assert!(reg.netrc(&pw).contains(&format!("machine 198.18.213.1 login faultlab password {pw}")) || reg.netrc(&pw).contains(&format!("login faultlab password {pw}")));
    }

    #[test]
    fn distribution_listens_where_the_node_reaches_it_or_behind_nginx() {
        let plain = registry(Spec::main(true));
        let yml = plain.config_yml();
        assert!(yml.contains("  addr: 198.18.213.1:5443\n"), "{yml}");
        assert!(yml.contains("auth:\n  htpasswd:\n    realm: faultlab\n    path: /var/lib/faultlab/runs/registries/fl-test-registry/htpasswd\n"), "{yml}");
        let open = registry(Spec::main(false)).config_yml();
        assert!(open.contains("auth:\n  htpasswd:\n"), "an open registry has the login too (for pushes): {open}");
        let proxied = registry(Spec { proxy: true, ..Spec::main(false) });
        assert!(proxied.config_yml().contains("  addr: 127.0.0.1:5446\n"));
        let conf = proxied.nginx_conf(&Answer::TooManyRequests);
        assert!(conf.contains("listen 198.18.213.1:5443 ssl;"), "{conf}");
        assert!(conf.contains("proxy_pass https://127.0.0.1:5446;"), "{conf}");
        assert!(conf.contains("location ~ ^/v2/.+/manifests/ {\n            default_type application/json;\n            return 429 '{\"errors\":[{\"code\":\"TOOMANYREQUESTS\""), "{conf}");
        let unlimited = proxied.nginx_conf(&Answer::All);
        assert!(!unlimited.contains("429") && !unlimited.contains("limit_rate"), "{unlimited}");
        let slow = proxied.nginx_conf(&Answer::Slowly("16k".into()));
        assert!(
            slow.contains("location ~ ^/v2/.+/blobs/ {\n            proxy_pass https://127.0.0.1:5446;\n            proxy_set_header Host $http_host;\n            proxy_set_header X-Forwarded-Proto https;\n            limit_rate 16k;\n        }\n"),
            "{slow}"
        );
        assert!(!slow.contains("429"), "{slow}");
    }

    #[test]
    fn a_run_holds_its_registries_ports_and_the_proxys_backend_only_behind_a_proxy() {
        let ports = |proxy| needs(proxy).host_ports.iter().map(|p| (p.port, p.on_node_address)).collect::<Vec<_>>();
        assert_eq!(ports(None), [(5443, true), (5444, true)]);
        assert_eq!(ports(Some(BACKEND_PORT)), [(5443, true), (5444, true), (5446, false)]);
        // The two scenarios behind nginx hold backends of their own, so they may run side by side.
        let backend = |fault: &dyn crate::faults::Fault| fault.needs().host_ports.into_iter().find(|p| !p.on_node_address).map(|p| p.port);
        assert_eq!(backend(&crate::faults::image_pull_slow::ImagePullSlow::default()), Some(5446));
        assert_eq!(backend(&crate::faults::registry_rate_limited::RegistryRateLimited::default()), Some(5447));
        let limited = registry(Spec { proxy: true, backend_port: RATE_LIMITED_BACKEND_PORT, ..Spec::main(false) });
        assert!(limited.config_yml().contains("  addr: 127.0.0.1:5447\n"));
    }

    #[test]
    fn only_a_listener_on_the_registrys_own_address_or_on_all_is_in_the_way() {
        let ss = "LISTEN 0 4096 198.18.213.5:5443 0.0.0.0:* users:((\"nginx\",pid=9,fd=6))\nLISTEN 0 4096 127.0.0.1:5446 0.0.0.0:*";
        assert_eq!(listeners_in_the_way(ss, "198.18.213.1:5443"), "", "another node's registry");
        assert!(listeners_in_the_way(ss, "198.18.213.5:5443").contains("nginx"));
        assert!(!listeners_in_the_way(ss, "127.0.0.1:5446").is_empty());
        assert!(!listeners_in_the_way("LISTEN 0 128 0.0.0.0:5443 0.0.0.0:*", "198.18.213.1:5443").is_empty(), "all addresses");
        assert!(!listeners_in_the_way("LISTEN 0 128 [::]:5443 [::]:*", "198.18.213.1:5443").is_empty());
    }

    #[test]
    fn the_certificate_names_every_address_the_registry_is_reached_at() {
        let mut vm = registry(Spec::main(false));
        vm.profile = RegistryProfile { listen: "127.0.0.1".into(), address: "198.18.214.2".into(), hosts_dir: "/x".into() };
        let cmds = vm.make_certificates("ca");
        let line = cmds[1].shell_line();
        assert!(line.contains("'subjectAltName=IP:198.18.214.2,IP:127.0.0.1'"), "{line}");
        assert!(line.contains("-CA /var/lib/faultlab/runs/registries/fl-test-registry/ca.crt"), "{line}");
        assert!(cmds[0].shell_line().contains("'/CN=ca fl-test-registry'"), "{}", cmds[0].shell_line());
        let long = common_name(&format!("ca-renewed fl-{}-6ppsr-registry", "x".repeat(60)));
        assert_eq!(long.chars().count(), 64);
        assert!(long.ends_with("-6ppsr-registry"), "{long}");
    }

    #[test]
    fn the_node_trusts_the_registry_by_containerds_hosts_directory() {
        let r = registry(Spec::main(true));
        assert_eq!(r.hosts_dir(), "/etc/containerd/certs.d/198.18.213.1:5443");
        let toml: toml::Table = r.hosts_toml(None).parse().unwrap();
        assert_eq!(toml["server"].as_str(), Some("https://198.18.213.1:5443"));
        assert_eq!(toml["host"]["https://198.18.213.1:5443"]["ca"].as_str(), Some("/etc/containerd/certs.d/198.18.213.1:5443/ca.crt"));
        assert!(toml["host"]["https://198.18.213.1:5443"].get("header").is_none(), "a registry with a login: only the pull secret has it");
        let open: toml::Table = registry(Spec::main(false)).hosts_toml(Some("Basic eA==")).parse().unwrap();
        assert_eq!(open["host"]["https://198.18.213.1:5443"]["header"]["Authorization"][0].as_str(), Some("Basic eA=="));
        assert_eq!(r.image(), "198.18.213.1:5443/faultlab/busybox:1");
    }

    #[rstest::rstest]
    #[case::kinds_stock_config("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  discard_unpacked_layers = true\n", Some("reads no registry hosts directory (plugins.\"io.containerd.grpc.v1.cri\".registry.config_path is not set in /etc/containerd/config.toml)"))]
    #[case::containerds_default_v3("version = 3\n[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = ''\n", Some("reads no registry hosts directory (plugins.\"io.containerd.cri.v1.images\".registry.config_path is not set"))]
    #[case::another_directory("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/docker/certs.d\"\n", Some("reads registry settings from /etc/docker/certs.d"))]
    #[case::faultlabs_kind_patch("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n", None)]
    #[case::one_of_a_list_v3("version = 3\n[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = '/etc/containerd/certs.d/:/etc/docker/certs.d'\n", None)]
    fn the_node_must_read_the_hosts_directory_faultlab_writes(#[case] config: &str, #[case] problem: Option<&str>) {
        let config = ContainerdConfig::parse("/etc/containerd/config.toml", config).unwrap();
        let got = hosts_dir_problem("n1", &config, "/etc/containerd/certs.d");
        match (problem, got) {
            (None, None) => {}
            (Some(want), Some(got)) => assert!(got.contains(want) && got.starts_with("containerd on node n1 "), "{got}"),
            (want, got) => panic!("wanted {want:?}, got {got:?}"),
        }
    }

    #[test]
    fn a_push_first_fetches_what_the_node_lacks_of_its_busybox_image() {
        let mut node = crate::testbed::placeholder_profile();
        assert_eq!(node.containerd.ctr, None, "the fake below stands in for `ctr`");
        node.images.busybox = "docker.io/library/busybox:1.36".into();
        let cmd = complete_content(&node);
        let script = &cmd.argv[2];
        assert!(script.contains("images check 'name==docker.io/library/busybox:1.36' | awk 'NR > 1 { print $4 }'"), "{script}");
        assert!(script.contains("[ \"$status\" = complete ] && exit 0;"), "{script}");
        assert!(script.ends_with("-n k8s.io content fetch docker.io/library/busybox:1.36"), "{script}");
        // The script as a shell runs it: a complete image fetches nothing, an incomplete one is fetched.
        let run = |check: &str| {
            let fake = format!("ctr() {{ case \"$*\" in *'images check'*) printf 'REF TYPE DIGEST STATUS SIZE UNPACKED\\nb t d {check} (1/2) 1/2 true\\n';; *'content fetch'*) echo fetched;; esac; }}; ");
            std::process::Command::new("sh").arg("-c").arg(format!("{fake}{script}")).output().unwrap()
        };
        let complete = run("complete");
        assert_eq!((complete.status.success(), String::from_utf8_lossy(&complete.stdout).trim()), (true, ""));
        let incomplete = run("incomplete");
        assert_eq!(String::from_utf8_lossy(&incomplete.stdout).trim(), "fetched");
        assert!(String::from_utf8_lossy(&incomplete.stderr).contains("docker.io/library/busybox:1.36: incomplete; fetching its content"));
    }

    #[test]
    fn the_pull_secret_holds_the_login_for_the_registry() {
        let s = registry(Spec::main(true)).pull_secret("registry-login", "pw");
        assert_eq!(s["type"], "kubernetes.io/dockerconfigjson");
        let config: serde_json::Value = serde_json::from_str(s["stringData"][".dockerconfigjson"].as_str().unwrap()).unwrap();
        assert_eq!(config, json!({"auths": {"198.18.213.1:5443": {"username": "faultlab", "password": "pw"}}}));
    }

    #[rstest::rstest]
    #[case::rolling(json!({"strategy": {"type": "RollingUpdate"}}), "replaces its pods by RollingUpdate")]
    #[case::default_rolling(json!({}), "replaces its pods by RollingUpdate")]
    #[case::no_container(json!({"strategy": {"type": "Recreate"}}), "has no container")]
    #[case::if_not_present(json!({"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": [{"name": "app", "imagePullPolicy": "IfNotPresent"}]}}}), "container app of Deployment web has imagePullPolicy IfNotPresent")]
    #[case::unset(json!({"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": [{"name": "app"}]}}}), "imagePullPolicy (unset)")]
    fn a_deployment_that_would_not_pull_again_is_refused(#[case] spec: serde_json::Value, #[case] why: &str) {
        let err = check_pulls_again(&json!({"spec": spec}), "web").unwrap_err();
        assert!(err.contains(why), "{err}");
        assert_eq!(check_pulls_again(&plan_deployment("web", None), "web"), Ok(()));
    }

    #[test]
    fn a_deployments_secrets_and_images() {
        let d = plan_deployment("web", Some("login"));
        assert_eq!(pull_secrets(&d), ["login"]);
        assert_eq!(images(&d), ["<registry-address>:5443/faultlab/busybox:1"]);
        assert!(pull_secrets(&plan_deployment("web", None)).is_empty());
    }

    #[test]
    fn programs_name_their_packages() {
        let all = programs(&Spec { proxy: true, ..Spec::main(true) });
        assert!(all.contains(&("htpasswd", "apache2-utils")) && all.contains(&("nginx", "nginx-light")));
        assert!(!programs(&Spec::private()).iter().any(|(p, _)| *p == "nginx"));
        assert!(programs(&Spec::private()).contains(&("htpasswd", "apache2-utils")), "every registry has the login");
    }

    #[test]
    fn the_filler_is_a_tar_of_the_seeds_own_text() {
        let a = filler_layer("run a", 4096);
        assert_eq!(a, filler_layer("run a", 4096), "the same seed, the same layer");
        assert_ne!(a.digest, filler_layer("run b", 4096).digest);
        assert_eq!(a.size, a.tar.len());
        let mut archive = tar::Archive::new(a.tar.as_bytes());
        let entries: Vec<(String, u64)> =
            archive.entries().unwrap().map(|e| e.unwrap()).map(|e| (e.path().unwrap().display().to_string(), e.header().size().unwrap())).collect();
        assert_eq!(entries, [("faultlab-filler".to_string(), 4096)]);
        use sha2::{Digest, Sha256};
        assert_eq!(a.digest, format!("sha256:{:x}", Sha256::digest(a.tar.as_bytes())));
    }

    #[test]
    fn the_larger_image_has_the_filler_as_its_last_layer() {
        let filler = filler_layer("x", 1024);
        let answers = plan_filler_answers();
        let manifest: serde_json::Value = serde_json::from_str(&answers[0].1.stdout).unwrap();
        let config: serde_json::Value = serde_json::from_str(&answers[1].1.stdout).unwrap();
        let larger = larger_image(&manifest, &config, &filler).unwrap();
        let layers = larger.manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 2);
        assert_eq!(layers[1], json!({"mediaType": "application/vnd.docker.image.rootfs.diff.tar", "size": filler.size, "digest": filler.digest}));
        let new_config: serde_json::Value = serde_json::from_str(&larger.config).unwrap();
        assert_eq!(new_config["rootfs"]["diff_ids"][1], json!(filler.digest));
        use sha2::{Digest, Sha256};
        assert_eq!(larger.config_digest, format!("sha256:{:x}", Sha256::digest(larger.config.as_bytes())));
        assert_eq!(larger.manifest["config"]["digest"], json!(larger.config_digest));
        assert_eq!(larger.manifest["config"]["size"], json!(larger.config.len()));
        let mut oci = manifest.clone();
        oci["mediaType"] = json!(OCI_MANIFEST);
        assert_eq!(larger_image(&oci, &config, &filler).unwrap().manifest["layers"][1]["mediaType"], "application/vnd.oci.image.layer.v1.tar");
        let index = json!({"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []});
        assert!(larger_image(&index, &config, &filler).unwrap_err().contains("not one image's"));
        assert!(larger_image(&manifest, &json!({}), &filler).unwrap_err().contains("diff_ids"));
    }

    #[test]
    fn curl_speaks_to_the_registry_itself_with_the_runs_ca() {
        let proxied = registry(Spec { proxy: true, ..Spec::main(false) });
        let line = proxied.curl("GET", "manifests/1", &["-H", "Accept: x"]).shell_line();
        assert_eq!(
            line,
            "curl -sS -f --max-time 60 -X GET --netrc-file /var/lib/faultlab/runs/registries/fl-test-registry/netrc --cacert /var/lib/faultlab/runs/registries/fl-test-registry/ca.crt -H 'Accept: x' https://127.0.0.1:5446/v2/faultlab/busybox/manifests/1"
        );
        assert_eq!(proxied.image_tagged("2"), "198.18.213.1:5443/faultlab/busybox:2");
    }

    /// The undo is a real shell line: it stops what a PID file names and removes the directory.
    #[test]
    fn stop_kills_by_pid_file_and_removes_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("registry");
        std::fs::create_dir(&run).unwrap();
        // The run's process (its command line names the directory) and one that is not (a PID file
        // that outlived its process, the number taken since).
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30; : \"$0\"", &format!("{}/config.yml", run.display())]).spawn().unwrap();
        let mut stranger = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(run.join("registry.pid"), child.id().to_string()).unwrap();
        std::fs::write(run.join("nginx.pid"), stranger.id().to_string()).unwrap();
        let mut r = registry(Spec::main(false));
        r.dir = run.clone();
        let cmd = r.stop_registry();
        std::fs::write(run.join("registry.pid"), stranger.id().to_string()).unwrap();
        let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
        assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("names no process of this registry's"), "{out:?}");
        std::fs::write(run.join("registry.pid"), child.id().to_string()).unwrap();
        let cmd = r.stop();
        let status = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).status().unwrap();
        assert!(status.success());
        assert!(!run.exists());
        assert!(child.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(stranger.try_wait().unwrap().is_none(), "a process that is not the run's is never signalled");
        stranger.kill().unwrap();
        stranger.wait().unwrap();
    }
}
