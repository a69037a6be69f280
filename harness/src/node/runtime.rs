//! The node's container runtime as it really is: containerd's version and configuration, the cgroup
//! version, and the kubelet's cgroup driver.
//!
//! containerd's configuration comes in versions whose keys differ: version 2 (containerd 1.6 and 1.7,
//! and 2.x, which migrates it on load) keeps the CRI plugin's settings under
//! `plugins."io.containerd.grpc.v1.cri"`; version 3 (containerd 2.x) splits them between
//! `plugins."io.containerd.cri.v1.images"` and `plugins."io.containerd.cri.v1.runtime"`; version 1 (no
//! `version`, containerd 1.x's oldest form) names the plugin by its short ID, `plugins.cri`, with version
//! 2's keys below it. A key of one version written into a file of another is dropped without an error
//! (containerd 2 logs `Ignoring unknown key`), so a fault that reads or writes the wrong one fails
//! silently: [`ContainerdConfig`] reads each [`Setting`] at the key of the file's own version, with
//! containerd's default where it is unset, and [`patch`] writes one in that version. (Not modelled:
//! containerd 2 also reads version 3 tables written into a version 2 file, merged with what it migrates,
//! and the URI-named table in a version 1 file, which containerd 1.x ignores.)
//!
//! [`RuntimeFacts`] are read from a node with one command ([`RuntimeFacts::command`]), whose output is
//! parsed without the node ([`RuntimeFacts::parse`]), so every reading is unit-tested on real output.

use std::fmt;

use serde::Deserialize;
use thiserror::Error;

use super::{Node, NodeProfile};
use crate::cmd::{Cmd, CmdError};

/// What went wrong reading a node's runtime, by step. Errors about a file name the file and the field.
#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("containerd's config {file} is not TOML: {source}")]
    ParseConfig {
        file: String,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("containerd's config {file}: {field} is {value}, not {want}")]
    ConfigField { file: String, field: String, value: String, want: &'static str },
    #[error("a patch of {setting} ({field}) takes {want}, not {value}")]
    PatchValue { setting: Setting, field: String, want: &'static str, value: String },
    #[error("`containerd --version` printed {output:?}, which does not read as `containerd <module> [v]<major>.<minor>.<patch>...`")]
    ContainerdVersion { output: String },
    #[error("`ctr --version` printed {output:?}, which does not read as `ctr <module> [v]<major>.<minor>.<patch>...`")]
    CtrVersion { output: String },
    #[error(
        "cannot tell the cgroup version: `stat -fc %T /sys/fs/cgroup` printed {fs:?} (cgroup2fs is v2, tmpfs v1) and /proc/self/cgroup holds {proc_cgroup:?} (only a `0::` line is v2)"
    )]
    CgroupVersion { fs: String, proc_cgroup: String },
    #[error("the KubeletConfiguration {file} is not YAML: {message}")]
    ParseKubeletConfig { file: String, message: String },
    #[error("{file}: {field} is {value:?}, not cgroupfs or systemd")]
    CgroupDriver { file: String, field: String, value: String },
    #[error("reading {what} on node {node} failed: {source}")]
    Run {
        node: String,
        what: &'static str,
        #[source]
        source: Box<CmdError>,
    },
    #[error("reading {what} on node {node} failed: {message}")]
    Read { node: String, what: String, message: String },
}

// ------------------------------------------------------------------ containerd's config -----

/// The version of a containerd configuration file (its `version`; none is 1, as containerd takes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigVersion {
    /// No `version` (or 0 or 1): plugins by short ID, the CRI plugin's settings under `plugins.cri`.
    V1,
    /// containerd 1.x's own; containerd 2.x migrates it to version 3 on load.
    V2,
    /// containerd 2.x's own.
    V3,
}

impl ConfigVersion {
    /// The number the file says.
    pub fn number(self) -> u32 {
        match self {
            ConfigVersion::V1 => 1,
            ConfigVersion::V2 => 2,
            ConfigVersion::V3 => 3,
        }
    }
}

impl fmt::Display for ConfigVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

/// A setting of containerd's CRI plugin that faults read or change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The pause image every pod sandbox runs.
    SandboxImage,
    /// Where the CRI plugin loads its CNI configuration from.
    CniConfDir,
    /// The registry hosts directory (`hosts.toml` and CAs per registry).
    RegistryConfigPath,
    /// Whether runc (the `runc` runtime) uses the systemd cgroup driver.
    SystemdCgroup,
    /// Whether unpacked layers are removed from the content store (an image the CRI pulled can then be
    /// neither pushed nor exported).
    DiscardUnpackedLayers,
}

/// What a setting's value must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    AbsolutePath,
    Flag,
}

impl Setting {
    pub const ALL: [Setting; 5] = [Setting::SandboxImage, Setting::CniConfDir, Setting::RegistryConfigPath, Setting::SystemdCgroup, Setting::DiscardUnpackedLayers];

    /// Its key path, table by table, in a file of `version` (checked against containerd's
    /// `internal/cri/config` and the CRI plugins' config migration at v2.1.0, and `pkg/cri/config` at
    /// v1.6 and v1.7).
    pub fn key_path(self, version: ConfigVersion) -> &'static [&'static str] {
        use ConfigVersion::*;
        use Setting::*;
        match (version, self) {
            (V1, SandboxImage) => &["plugins", "cri", "sandbox_image"],
            (V1, CniConfDir) => &["plugins", "cri", "cni", "conf_dir"],
            (V1, RegistryConfigPath) => &["plugins", "cri", "registry", "config_path"],
            (V1, SystemdCgroup) => &["plugins", "cri", "containerd", "runtimes", "runc", "options", "SystemdCgroup"],
            (V1, DiscardUnpackedLayers) => &["plugins", "cri", "containerd", "discard_unpacked_layers"],
            (V2, SandboxImage) => &["plugins", "io.containerd.grpc.v1.cri", "sandbox_image"],
            (V2, CniConfDir) => &["plugins", "io.containerd.grpc.v1.cri", "cni", "conf_dir"],
            (V2, RegistryConfigPath) => &["plugins", "io.containerd.grpc.v1.cri", "registry", "config_path"],
            (V2, SystemdCgroup) => &["plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "runc", "options", "SystemdCgroup"],
            (V2, DiscardUnpackedLayers) => &["plugins", "io.containerd.grpc.v1.cri", "containerd", "discard_unpacked_layers"],
            (V3, SandboxImage) => &["plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"],
            (V3, CniConfDir) => &["plugins", "io.containerd.cri.v1.runtime", "cni", "conf_dir"],
            (V3, RegistryConfigPath) => &["plugins", "io.containerd.cri.v1.images", "registry", "config_path"],
            (V3, SystemdCgroup) => &["plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc", "options", "SystemdCgroup"],
            (V3, DiscardUnpackedLayers) => &["plugins", "io.containerd.cri.v1.images", "discard_unpacked_layers"],
        }
    }

    /// Its key in a file of `version`, as TOML writes it (`plugins."io.containerd.grpc.v1.cri".cni.conf_dir`).
    pub fn field(self, version: ConfigVersion) -> String {
        dotted(self.key_path(version))
    }

    fn kind(self) -> Kind {
        match self {
            Setting::SandboxImage | Setting::RegistryConfigPath => Kind::Text,
            Setting::CniConfDir => Kind::AbsolutePath,
            Setting::SystemdCgroup | Setting::DiscardUnpackedLayers => Kind::Flag,
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Setting::SandboxImage => "the sandbox image",
            Setting::CniConfDir => "the CNI configuration directory",
            Setting::RegistryConfigPath => "the registry hosts directory",
            Setting::SystemdCgroup => "runc's SystemdCgroup",
            Setting::DiscardUnpackedLayers => "discard_unpacked_layers",
        })
    }
}

/// The CNI configuration directory when the config does not set one (every version).
pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
/// containerd's CNI plugin directory when its config names none.
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";

/// The keys of `plugins."io.containerd.grpc.v1.cri"` that containerd 2 still reads from a version 3
/// file (the CRI server's own: streaming); any other key there is ignored.
pub const V3_CRI_SERVER_KEYS: [&str; 6] = ["disable_tcp_service", "stream_server_address", "stream_server_port", "stream_idle_timeout", "enable_tls_streaming", "x509_key_pair_streaming"];

/// containerd's configuration file, read: its version, and the settings of [`Setting`] as checked
/// when it was parsed (each the right type where it is set).
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerdConfig {
    file: String,
    version: ConfigVersion,
    table: toml::Table,
}

impl ContainerdConfig {
    /// The config `file` (named in errors) from its text. Errors name the file and the field: a
    /// `version` containerd does not know, or a setting of the wrong type (each intermediate key must
    /// be a table).
    pub fn parse(file: &str, text: &str) -> Result<ContainerdConfig, RuntimeError> {
        let table: toml::Table = text.parse().map_err(|source| RuntimeError::ParseConfig { file: file.into(), source: Box::new(source) })?;
        let bad = |field: &str, value: &toml::Value, want: &'static str| RuntimeError::ConfigField { file: file.into(), field: field.into(), value: shown(value), want };
        let version = match table.get("version") {
            None => ConfigVersion::V1,
            // containerd: "Version 0 is not defined, treated at version 1".
            Some(toml::Value::Integer(0 | 1)) => ConfigVersion::V1,
            Some(toml::Value::Integer(2)) => ConfigVersion::V2,
            Some(toml::Value::Integer(3)) => ConfigVersion::V3,
            Some(other) => return Err(bad("version", other, "1, 2 or 3 (containerd 2.1 reads up to 3)")),
        };
        let config = ContainerdConfig { file: file.into(), version, table };
        for setting in Setting::ALL {
            let path = setting.key_path(version);
            let mut at = &config.table;
            for (i, key) in path.iter().enumerate() {
                let Some(value) = at.get(*key) else { break };
                if i + 1 < path.len() {
                    match value {
                        toml::Value::Table(t) => at = t,
                        other => return Err(bad(&dotted(&path[..=i]), other, "a table")),
                    }
                    continue;
                }
                let ok = match (setting.kind(), value) {
                    (Kind::Text, toml::Value::String(_)) | (Kind::Flag, toml::Value::Boolean(_)) => true,
                    (Kind::AbsolutePath, toml::Value::String(s)) => s.starts_with('/'),
                    _ => false,
                };
                if !ok {
                    let want = match setting.kind() {
                        Kind::Text => "a string",
                        Kind::AbsolutePath => "an absolute path",
                        Kind::Flag => "true or false",
                    };
                    return Err(bad(&dotted(path), value, want));
                }
            }
        }
        Ok(config)
    }

    /// The file it was read from.
    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn version(&self) -> ConfigVersion {
        self.version
    }

    /// The key path of `setting` in this file's version.
    pub fn key_path(&self, setting: Setting) -> &'static [&'static str] {
        setting.key_path(self.version)
    }

    /// The key of `setting` in this file's version, as TOML writes it.
    pub fn field(&self, setting: Setting) -> String {
        setting.field(self.version)
    }

    /// The value the file sets for `setting`, if it does.
    pub fn get(&self, setting: Setting) -> Option<&toml::Value> {
        let (last, tables) = self.key_path(setting).split_last()?;
        let mut at = &self.table;
        for key in tables {
            at = at.get(*key)?.as_table()?;
        }
        at.get(*last)
    }

    fn text(&self, setting: Setting) -> Option<&str> {
        self.get(setting).and_then(toml::Value::as_str)
    }

    fn flag(&self, setting: Setting) -> bool {
        self.get(setting).and_then(toml::Value::as_bool).unwrap_or(false)
    }

    /// The sandbox image the file sets, if it does.
    pub fn configured_sandbox_image(&self) -> Option<&str> {
        self.text(Setting::SandboxImage)
    }

    /// The sandbox image `containerd` runs pods with: the file's, else that release's default (none for
    /// a release before 1.6, whose default faultlab does not know).
    pub fn sandbox_image<'a>(&'a self, containerd: &ContainerdVersion) -> Option<&'a str> {
        self.configured_sandbox_image().or_else(|| default_sandbox_image(containerd))
    }

    /// Where the CRI plugin loads its CNI configuration from (default `/etc/cni/net.d`).
    pub fn cni_conf_dir(&self) -> &str {
        self.text(Setting::CniConfDir).unwrap_or(DEFAULT_CNI_CONF_DIR)
    }

    /// Where the CRI plugin finds CNI plugins, in its search order: `bin_dirs` (containerd 2.1's list),
    /// else `bin_dir` (1.x and 2.0; deprecated in 2.1), beside `conf_dir` in the file's version's CNI
    /// table; else containerd's default, `/opt/cni/bin`. Empty strings count as unset, as containerd's
    /// own default config writes `bin_dir = ''`.
    pub fn cni_bin_dirs(&self) -> Vec<String> {
        let (_, tables) = self.key_path(Setting::CniConfDir).split_last().expect("a key path has a last key");
        let mut at = Some(&self.table);
        for key in tables {
            at = at.and_then(|t| t.get(*key)).and_then(toml::Value::as_table);
        }
        let text = |v: &toml::Value| v.as_str().filter(|s| !s.is_empty()).map(String::from);
        let listed: Vec<String> = at.and_then(|t| t.get("bin_dirs")).and_then(toml::Value::as_array).map(|a| a.iter().filter_map(text).collect()).unwrap_or_default();
        if !listed.is_empty() {
            return listed;
        }
        match at.and_then(|t| t.get("bin_dir")).and_then(text) {
            Some(dir) => vec![dir],
            None => vec![DEFAULT_CNI_BIN_DIR.to_string()],
        }
    }

    /// The registry hosts directory; none when unset or empty (containerd's default: none).
    pub fn registry_config_path(&self) -> Option<&str> {
        self.text(Setting::RegistryConfigPath).filter(|p| !p.is_empty())
    }

    /// Whether the `runc` runtime uses the systemd cgroup driver (default false). (containerd takes
    /// the driver from the default runtime, `runc` unless `default_runtime_name` says otherwise.)
    pub fn systemd_cgroup(&self) -> bool {
        self.flag(Setting::SystemdCgroup)
    }

    /// The runc binary the `runc` runtime runs (its options' `BinaryName`, beside `SystemdCgroup`), if
    /// the file names one; none (or empty): the shim runs `runc` from its PATH, which is containerd's.
    pub fn runc_binary(&self) -> Option<&str> {
        let (_, tables) = self.key_path(Setting::SystemdCgroup).split_last().expect("a key path has a last key");
        let mut at = Some(&self.table);
        for key in tables {
            at = at.and_then(|t| t.get(*key)).and_then(toml::Value::as_table);
        }
        at.and_then(|t| t.get("BinaryName")).and_then(toml::Value::as_str).filter(|s| !s.is_empty())
    }

    /// Whether unpacked layers are discarded from the content store (default false).
    pub fn discard_unpacked_layers(&self) -> bool {
        self.flag(Setting::DiscardUnpackedLayers)
    }

    /// The TOML that sets `setting` to `value` in this file's version: see [`patch`].
    pub fn patch(&self, setting: Setting, value: &SettingValue) -> Result<String, RuntimeError> {
        patch(self.version, setting, value)
    }

    /// Keys a version 3 file sets under `plugins."io.containerd.grpc.v1.cri"` that containerd 2 ignores
    /// (a version 2 key such as `sandbox_image` or `cni` there: only the CRI server's streaming keys
    /// are read), each as its field. Nothing for a file of another version.
    pub fn ignored_keys(&self) -> Vec<String> {
        if self.version != ConfigVersion::V3 {
            return Vec::new();
        }
        let Some(cri) = self.table.get("plugins").and_then(|p| p.get("io.containerd.grpc.v1.cri")).and_then(toml::Value::as_table) else {
            return Vec::new();
        };
        cri.keys().filter(|k| !V3_CRI_SERVER_KEYS.contains(&k.as_str())).map(|k| dotted(&["plugins", "io.containerd.grpc.v1.cri", k])).collect()
    }
}

/// A value to write into containerd's config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingValue {
    Text(String),
    Flag(bool),
}

/// The TOML that sets `setting` to `value` in a file of `version`: the table header of its key path
/// and the key, as kind's `containerdConfigPatches` take it (kind merges it into the node's config) or
/// as a drop-in file for containerd's `imports` needs it after a `version` line. The value must be of
/// the setting's type (a string, an absolute path, or true/false).
pub fn patch(version: ConfigVersion, setting: Setting, value: &SettingValue) -> Result<String, RuntimeError> {
    let path = setting.key_path(version);
    let bad = |want: &'static str| RuntimeError::PatchValue { setting, field: dotted(path), want, value: format!("{value:?}") };
    let literal = match (setting.kind(), value) {
        (Kind::Text, SettingValue::Text(t)) => toml_string(t),
        (Kind::AbsolutePath, SettingValue::Text(t)) if t.starts_with('/') => toml_string(t),
        (Kind::AbsolutePath, _) => return Err(bad("an absolute path")),
        (Kind::Flag, SettingValue::Flag(b)) => b.to_string(),
        (Kind::Flag, _) => return Err(bad("true or false")),
        (Kind::Text, _) => return Err(bad("a string")),
    };
    let (key, tables) = path.split_last().expect("a key path is never empty");
    Ok(format!("[{}]\n  {} = {literal}\n", dotted(tables), toml_key(key)))
}

/// A key path as TOML writes it: bare keys as they are, others quoted.
fn dotted(path: &[&str]) -> String {
    path.iter().map(|k| toml_key(k)).collect::<Vec<_>>().join(".")
}

fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_string()
    } else {
        toml_string(key)
    }
}

/// A TOML basic string, as the toml crate writes one.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A TOML value in words, for errors.
fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => toml_string(s),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(_) => "an array".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

// ------------------------------------------------------------------ containerd's version -----

/// containerd's release, from `containerd --version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerdVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// The version word as printed (`2.1.9+unknown`, `1.6.20~ds1`, `v2.0.2`).
    pub text: String,
}

impl ContainerdVersion {
    /// From `containerd --version`: `containerd <module> <version> [<revision>...]`, such as
    /// `containerd github.com/containerd/containerd/v2 2.1.9+unknown` (Debian sid),
    /// `containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1` (Debian bookworm),
    /// `containerd containerd.io 1.6.20 2806fc10...` (Docker's packages) or
    /// `containerd github.com/containerd/containerd/v2 v2.0.2 c507a025...` (kind's node image).
    pub fn parse(output: &str) -> Result<ContainerdVersion, RuntimeError> {
        Self::parse_as("containerd ", output).ok_or_else(|| RuntimeError::ContainerdVersion { output: output.trim().to_string() })
    }

    /// From `ctr --version`, which prints its release as containerd does (`ctr github.com/containerd/containerd/v2
    /// 2.1.9+unknown`, `ctr github.com/containerd/containerd 1.6.20~ds1`): the client's release, which
    /// decides its flags and defaults.
    pub fn parse_ctr(output: &str) -> Result<ContainerdVersion, RuntimeError> {
        Self::parse_as("ctr ", output).ok_or_else(|| RuntimeError::CtrVersion { output: output.trim().to_string() })
    }

    fn parse_as(program: &str, output: &str) -> Option<ContainerdVersion> {
        let line = output.lines().map(str::trim).find(|l| l.starts_with(program))?;
        let word = line.split_whitespace().nth(2)?;
        let v = word.strip_prefix('v').unwrap_or(word);
        let numbers: Vec<&str> = v.splitn(4, ['.', '-', '+', '~']).collect();
        let number = |i: usize| numbers.get(i).filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())).and_then(|s| s.parse::<u32>().ok());
        let (major, minor) = (number(0)?, number(1)?);
        // `2.1` alone has no patch; a pre-release (`2.1.0-rc.1`) has one.
        let patch = number(2).unwrap_or(0);
        Some(ContainerdVersion { major, minor, patch, text: word.to_string() })
    }

    /// `major.minor`, as platform names carry it.
    pub fn minor_version(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl fmt::Display for ContainerdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The sandbox image a containerd release runs pods with when its config names none (its CRI
/// config's default: `pkg/cri/config/config_unix.go` in 1.x, `internal/cri/config/config.go` in 2.x);
/// none for a release before 1.6.
pub fn default_sandbox_image(containerd: &ContainerdVersion) -> Option<&'static str> {
    Some(match (containerd.major, containerd.minor, containerd.patch) {
        (0, _, _) | (1, 0..=5, _) => return None,
        (1, 6, 0..=8) => "k8s.gcr.io/pause:3.6",
        (1, 6, _) => "registry.k8s.io/pause:3.6",
        (1, _, _) => "registry.k8s.io/pause:3.8",
        (2, 0 | 1, _) => "registry.k8s.io/pause:3.10",
        (2, 2, _) => "registry.k8s.io/pause:3.10.1",
        _ => "registry.k8s.io/pause:3.10.2",
    })
}

// ------------------------------------------------------------------ cgroups -----

/// The node's cgroup hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Legacy (or hybrid) hierarchies: `/sys/fs/cgroup` is a tmpfs of per-controller mounts.
    V1,
    /// The unified hierarchy: `/sys/fs/cgroup` is cgroup2.
    V2,
}

impl CgroupVersion {
    /// What the platform name carries before the architecture: nothing on v1 (the names of the
    /// expectations recorded there stay as they are), `-cgroup2` on v2.
    pub fn platform_part(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "",
            CgroupVersion::V2 => "-cgroup2",
        }
    }
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        })
    }
}

/// The line between the two parts of [`cgroup_command`]'s output.
const PROC_CGROUP_MARK: &str = "@@faultlab proc-cgroup";

/// The node command that tells the cgroup version: the file system type of `/sys/fs/cgroup`, then
/// the node's `/proc/self/cgroup`. `ip netns exec` (the test bed's nodes) mounts a sysfs of its own on
/// /sys, without the cgroup mounts: there the type reads `sysfs` and the process's own cgroups decide
/// (see [`parse_cgroup`]).
pub fn cgroup_command() -> Cmd {
    Cmd::new(["sh".to_string(), "-c".into(), cgroup_script()]).asks(ASK_CGROUP)
}

/// What [`cgroup_command`] asks (for a plan's answer).
pub const ASK_CGROUP: crate::cmd::Ask = crate::cmd::Ask("cgroup");

fn cgroup_script() -> String {
    format!("stat -fc %T /sys/fs/cgroup 2>&1; echo; echo '{PROC_CGROUP_MARK}'; cat /proc/self/cgroup 2>&1; exit 0")
}

/// The cgroup version from [`cgroup_command`]'s output: `cgroup2fs` is v2 and `tmpfs` v1 (as the
/// kubelet and runc decide, by `/sys/fs/cgroup`'s file system); anything else (`sysfs` under `ip netns
/// exec`) is decided by `/proc/self/cgroup`: only `0::<path>` lines is v2, a line of a v1 hierarchy
/// (`<id>:<controllers>:<path>`, id above 0) v1.
pub fn parse_cgroup(output: &str) -> Result<CgroupVersion, RuntimeError> {
    let (fs, proc_cgroup) = output.split_once(PROC_CGROUP_MARK).unwrap_or((output, ""));
    let (fs, proc_cgroup) = (fs.trim(), proc_cgroup.trim());
    match fs {
        "cgroup2fs" => return Ok(CgroupVersion::V2),
        "tmpfs" => return Ok(CgroupVersion::V1),
        _ => {}
    }
    let lines: Vec<&str> = proc_cgroup.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let hierarchy = |l: &str| l.split_once(':').and_then(|(id, rest)| Some((id.parse::<u32>().ok()?, rest.contains(':'))));
    if !lines.is_empty() && lines.iter().all(|l| hierarchy(l).is_some()) {
        if lines.iter().any(|l| matches!(hierarchy(l), Some((id, true)) if id > 0)) {
            return Ok(CgroupVersion::V1);
        }
        if lines.iter().all(|l| l.starts_with("0::")) {
            return Ok(CgroupVersion::V2);
        }
    }
    Err(RuntimeError::CgroupVersion { fs: fs.into(), proc_cgroup: proc_cgroup.into() })
}

/// The kubelet's cgroup driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupDriver {
    Cgroupfs,
    Systemd,
}

impl CgroupDriver {
    fn from_word(word: &str) -> Option<CgroupDriver> {
        match word {
            "cgroupfs" => Some(CgroupDriver::Cgroupfs),
            "systemd" => Some(CgroupDriver::Systemd),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CgroupDriver::Cgroupfs => "cgroupfs",
            CgroupDriver::Systemd => "systemd",
        }
    }
}

impl fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fields of a KubeletConfiguration read here (the rest is the kubelet's business).
#[derive(Deserialize)]
struct KubeletCgroup {
    #[serde(rename = "cgroupDriver", default)]
    cgroup_driver: Option<String>,
}

/// The kubelet's cgroup driver: `--cgroup-driver` among its extra flags (`flags`, from `flags_file`)
/// if given, since a flag overrides the file, else the KubeletConfiguration's `cgroupDriver` (its
/// `file`), else the kubelet's default, cgroupfs.
pub fn cgroup_driver(file: &str, config: &str, flags: Option<(&str, &str)>) -> Result<CgroupDriver, RuntimeError> {
    if let Some((flags_file, flags)) = flags {
        let words: Vec<&str> = flags.split_whitespace().map(|w| w.trim_matches(['"', '\''])).collect();
        for (i, w) in words.iter().enumerate() {
            let value = match w.strip_prefix("--cgroup-driver=") {
                Some(value) => value,
                None if *w == "--cgroup-driver" => words.get(i + 1).copied().unwrap_or_default(),
                None => continue,
            };
            return CgroupDriver::from_word(value).ok_or_else(|| RuntimeError::CgroupDriver { file: flags_file.into(), field: "--cgroup-driver".into(), value: value.into() });
        }
    }
    if config.trim().is_empty() {
        return Ok(CgroupDriver::Cgroupfs);
    }
    let parsed: KubeletCgroup = serde_saphyr::from_str(config).map_err(|e| RuntimeError::ParseKubeletConfig { file: file.into(), message: e.to_string() })?;
    match parsed.cgroup_driver.as_deref() {
        None | Some("") => Ok(CgroupDriver::Cgroupfs),
        Some(word) => CgroupDriver::from_word(word).ok_or_else(|| RuntimeError::CgroupDriver { file: file.into(), field: "cgroupDriver".into(), value: word.into() }),
    }
}

// ------------------------------------------------------------------ the facts of a node -----

/// What a node's container runtime really is.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeFacts {
    pub containerd: ContainerdVersion,
    pub config: ContainerdConfig,
    pub cgroup: CgroupVersion,
    pub cgroup_driver: CgroupDriver,
}

/// A line of [`RuntimeFacts::command`]'s output that starts a part (`@@faultlab section NAME`) or ends
/// it with its command's status (`@@faultlab status N`).
const MARK: &str = "@@faultlab ";

/// The script of [`RuntimeFacts::command`]: `$1` containerd's config, `$2` the KubeletConfiguration,
/// `$3` the kubelet's extra flags file (empty: none). containerd's version is asked of the containerd
/// that runs with this config (its `/proc/PID/exe`: the test bed's containerd 2 is not on PATH, and
/// Debian's 1.6 may be), else of the only containerd running (a kind node), else of `containerd` on
/// PATH. The process scan reads /proc with shell builtins only: no process per entry.
const FACTS_SCRIPT: &str = r#"end() { echo; echo "@@faultlab status $1"; }
echo "@@faultlab section containerd-version"
(PICK)
if [ -n "$pick" ] && "$pick/exe" --version 2>/dev/null; then end 0; else containerd --version 2>&1; end $?; fi
echo "@@faultlab section cgroup"
(CGROUP); end 0
echo "@@faultlab section containerd-config"
cat -- "$1" 2>&1; end $?
echo "@@faultlab section kubelet-config"
cat -- "$2" 2>&1; end $?
if [ -n "$3" ]; then
  echo "@@faultlab section kubelet-flags"
  if [ -e "$3" ]; then cat -- "$3" 2>&1; end $?; else end 0; fi
fi
exit 0"#;

/// Shell that sets `pick` to the `/proc/PID` of the containerd that runs with the config `$1` (its
/// command line names it), else of the only containerd running (a kind node), else to nothing. It reads
/// /proc with shell builtins only: no process per entry.
pub const PICK_CONTAINERD: &str = r#"pick= only= n=0
for d in /proc/[0-9]*; do
  { read -r comm <"$d/comm"; } 2>/dev/null || continue
  [ "$comm" = containerd ] || continue
  n=$((n+1)); only=$d
  if tr '\0' '\n' <"$d/cmdline" 2>/dev/null | grep -qxF -e "$1" -e "--config=$1"; then pick=$d; break; fi
done
[ -n "$pick" ] || [ "$n" != 1 ] || pick=$only"#;

/// One part of the facts script's output: its command's status and what it printed.
struct Part<'a> {
    status: i32,
    text: &'a str,
}

/// The parts of the facts script's output by name. Each part's text ends with the newline the script
/// adds (so that a file without a last newline does not run into the status line), taken off here.
fn parts(output: &str) -> std::collections::BTreeMap<&str, Part<'_>> {
    let mut out = std::collections::BTreeMap::new();
    let mut open: Option<(&str, usize)> = None;
    let mut at = 0;
    for line in output.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let Some(rest) = line.trim_end_matches('\n').strip_prefix(MARK) else { continue };
        if let Some(name) = rest.strip_prefix("section ") {
            open = Some((name.trim(), at));
        } else if let (Some(status), Some((name, from))) = (rest.strip_prefix("status "), open) {
            let text = &output[from..start];
            let text = text.strip_suffix('\n').unwrap_or(text);
            out.insert(name, Part { status: status.trim().parse().unwrap_or(-1), text });
            open = None;
        }
    }
    out
}

/// The text of part `name` (`what` it holds, for the error), if its command succeeded.
fn part<'a>(parts: &std::collections::BTreeMap<&str, Part<'a>>, output: &str, node: &str, name: &str, what: &str) -> Result<&'a str, RuntimeError> {
    let fail = |message: String| RuntimeError::Read { node: node.into(), what: what.into(), message };
    match parts.get(name) {
        Some(Part { status: 0, text }) => Ok(text),
        Some(Part { status, text }) => Err(fail(format!("exit status {status}: {}", text.trim()))),
        None => Err(fail(format!("the output has no part {name:?} (what the node printed: {:?})", output.chars().take(400).collect::<String>()))),
    }
}

impl RuntimeFacts {
    /// The node command that prints every fact, in parts (see [`RuntimeFacts::parse`]).
    pub fn command(profile: &NodeProfile) -> Cmd {
        let script = FACTS_SCRIPT.replace("(PICK)", PICK_CONTAINERD).replace("(CGROUP)", &format!("( {} )", cgroup_script()));
        Cmd::new([
            "sh".to_string(),
            "-c".into(),
            script,
            "sh".into(),
            profile.containerd.config.clone(),
            profile.kubelet.config.clone(),
            profile.kubelet.extra_flags_file.clone().unwrap_or_default(),
        ])
    }

    /// The facts from [`RuntimeFacts::command`]'s output on node `node` of `profile`.
    pub fn parse(node: &str, profile: &NodeProfile, output: &str) -> Result<RuntimeFacts, RuntimeError> {
        let parts = parts(output);
        let read = |name: &str, what: &str| part(&parts, output, node, name, what);
        let version = read("containerd-version", "containerd's version (`containerd --version`)")?;
        let containerd = ContainerdVersion::parse(version)?;
        let cgroup = parse_cgroup(read("cgroup", "the cgroup version")?)?;
        let file = &profile.containerd.config;
        let config = ContainerdConfig::parse(file, read("containerd-config", &format!("containerd's config {file}"))?)?;
        let kubelet = &profile.kubelet.config;
        let kubelet_text = read("kubelet-config", &format!("the KubeletConfiguration {kubelet}"))?;
        let flags = match &profile.kubelet.extra_flags_file {
            Some(f) => Some((f.as_str(), read("kubelet-flags", &format!("the kubelet's extra flags {f}"))?)),
            None => None,
        };
        let cgroup_driver = cgroup_driver(kubelet, kubelet_text, flags)?;
        Ok(RuntimeFacts { containerd, config, cgroup, cgroup_driver })
    }

    /// Read the facts of `node`, with one command.
    pub async fn read(node: &Node) -> Result<RuntimeFacts, RuntimeError> {
        let out = node.run(&Self::command(&node.profile)).await.map_err(|source| RuntimeError::Run { node: node.name().into(), what: "the runtime's facts", source: Box::new(source) })?;
        Self::parse(node.name(), &node.profile, &out.stdout)
    }

    /// The version of containerd's config file.
    pub fn config_version(&self) -> ConfigVersion {
        self.config.version()
    }

    /// The sandbox image pods run with (see [`ContainerdConfig::sandbox_image`]).
    pub fn sandbox_image(&self) -> Option<&str> {
        self.config.sandbox_image(&self.containerd)
    }
}

/// Read the cgroup version of `node` (see [`cgroup_command`]).
pub async fn read_cgroup(node: &Node) -> Result<CgroupVersion, RuntimeError> {
    let out = node.run(&cgroup_command()).await.map_err(|source| RuntimeError::Run { node: node.name().into(), what: "the cgroup version", source: Box::new(source) })?;
    parse_cgroup(&out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Output;
    use crate::node::FakeExecutor;

    const TESTBED_V2: &str = include_str!("../../tests/fixtures/containerd/testbed-v2.toml");
    const TESTBED_V3: &str = include_str!("../../tests/fixtures/containerd/testbed-v3.toml");
    const KIND_V0_27: &str = include_str!("../../tests/fixtures/containerd/kind-v0.27.0.toml");
    const CONTAINERD_2_1_DEFAULT: &str = include_str!("../../tests/fixtures/containerd/containerd-2.1-default.toml");
    /// This project's kind node (containerd 1.6), where it lives.
    const FAULTLAB_KIND_NODE: &str = include_str!("../../../ci/kind/node/etc/containerd/config.toml");

    fn config(text: &str) -> ContainerdConfig {
        ContainerdConfig::parse("/etc/containerd/config.toml", text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn version(text: &str) -> ContainerdVersion {
        ContainerdVersion::parse(text).unwrap()
    }

    #[test]
    fn the_test_beds_version_2_config() {
        let c = config(TESTBED_V2);
        assert_eq!(c.version(), ConfigVersion::V2);
        assert_eq!(c.configured_sandbox_image(), Some("faultlab.invalid/cce-pause:3.1"));
        assert_eq!(c.sandbox_image(&version("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1")), Some("faultlab.invalid/cce-pause:3.1"));
        assert_eq!(c.cni_conf_dir(), "/var/lib/faultlab/testbed/cni/net.d");
        assert_eq!(c.cni_bin_dirs(), ["/var/lib/faultlab/testbed/cni/bin"], "bin_dir");
        assert_eq!(c.runc_binary(), Some("/var/lib/faultlab/testbed/runtime/runc"));
        assert_eq!(c.registry_config_path(), Some("/var/lib/faultlab/testbed/containerd/certs.d"));
        assert!(!c.systemd_cgroup());
        assert!(!c.discard_unpacked_layers());
        assert!(c.ignored_keys().is_empty());
    }

    #[test]
    fn the_test_beds_version_3_config_has_the_same_settings_under_2x_keys() {
        let c = config(TESTBED_V3);
        assert_eq!(c.version(), ConfigVersion::V3);
        assert_eq!(c.configured_sandbox_image(), Some("faultlab.invalid/cce-pause:3.1"));
        assert_eq!(c.cni_conf_dir(), "/var/lib/faultlab/testbed/cni/net.d");
        assert_eq!(c.cni_bin_dirs(), ["/var/lib/faultlab/testbed/cni/bin"], "bin_dirs");
        assert_eq!(c.runc_binary(), Some("/var/lib/faultlab/testbed/runtime/runc"));
        assert_eq!(c.registry_config_path(), Some("/var/lib/faultlab/testbed/containerd/certs.d"));
        assert!(!c.systemd_cgroup());
        assert!(!c.discard_unpacked_layers());
        // Its `io.containerd.grpc.v1.cri` table holds the CRI server's streaming keys only: all read.
        assert!(c.ignored_keys().is_empty(), "{:?}", c.ignored_keys());
        // Read with version 2's keys, the same text would give only defaults: the trap this module is for.
        let as_v2 = config(&TESTBED_V3.replace("version = 3", "version = 2"));
        assert_eq!((as_v2.configured_sandbox_image(), as_v2.cni_conf_dir(), as_v2.registry_config_path()), (None, "/etc/cni/net.d", None));
    }

    #[test]
    fn kind_v0_27s_stock_config() {
        let c = config(KIND_V0_27);
        assert_eq!(c.version(), ConfigVersion::V2);
        assert_eq!(c.configured_sandbox_image(), Some("registry.k8s.io/pause:3.10"));
        assert_eq!(c.cni_conf_dir(), "/etc/cni/net.d", "kind sets none: the default");
        assert_eq!(c.cni_bin_dirs(), ["/opt/cni/bin"], "kind sets none: the default");
        assert_eq!(c.registry_config_path(), None, "kind v0.27 sets no config_path");
        assert!(c.systemd_cgroup());
        assert!(c.discard_unpacked_layers());
        assert_eq!(c.runc_binary(), None, "runc from containerd's PATH");
    }

    #[test]
    fn this_projects_kind_node_config() {
        let c = config(FAULTLAB_KIND_NODE);
        assert_eq!(c.version(), ConfigVersion::V2);
        assert_eq!(c.configured_sandbox_image(), Some("k8s.gcr.io/pause:3.2"));
        assert_eq!(c.cni_conf_dir(), "/etc/cni/net.d");
        assert_eq!(c.cni_bin_dirs(), ["/usr/lib/cni"]);
        assert_eq!(c.registry_config_path(), Some("/etc/containerd/certs.d"));
        assert!(!c.systemd_cgroup());
        assert!(!c.discard_unpacked_layers());
    }

    #[test]
    fn containerd_2_1s_documented_defaults() {
        let c = config(CONTAINERD_2_1_DEFAULT);
        assert_eq!(c.version(), ConfigVersion::V3);
        assert_eq!(c.configured_sandbox_image(), Some("registry.k8s.io/pause:3.10"));
        assert_eq!(c.cni_conf_dir(), "/etc/cni/net.d");
        assert_eq!(c.cni_bin_dirs(), ["/opt/cni/bin"], "bin_dir = '' is unset; bin_dirs lists the default");
        assert_eq!(c.registry_config_path(), None, "config_path = '' is no hosts directory");
        assert!(!c.systemd_cgroup(), "its runc options leave SystemdCgroup out: false");
        assert_eq!(c.runc_binary(), None, "BinaryName = '' is runc from PATH");
        assert!(!c.discard_unpacked_layers());
        assert!(c.ignored_keys().is_empty(), "{:?}", c.ignored_keys());
    }

    /// A version 3 file with every setting given, and the defaults when none is.
    #[test]
    fn a_version_3_config_with_every_setting_and_the_defaults() {
        let text = r#"version = 3
[plugins.'io.containerd.cri.v1.images']
  discard_unpacked_layers = true
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.example/pause:3.10"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "/etc/containerd/certs.d"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  conf_dir = "/etc/kubernetes/cni/net.d"
"#;
        let c = config(text);
        assert_eq!(c.configured_sandbox_image(), Some("registry.example/pause:3.10"));
        assert_eq!(c.cni_conf_dir(), "/etc/kubernetes/cni/net.d");
        assert_eq!(c.registry_config_path(), Some("/etc/containerd/certs.d"));
        assert!(c.systemd_cgroup() && c.discard_unpacked_layers());
        let empty = config("version = 3\n");
        assert_eq!(empty.sandbox_image(&version("containerd github.com/containerd/containerd/v2 2.1.9+unknown")), Some("registry.k8s.io/pause:3.10"));
        assert_eq!((empty.cni_conf_dir(), empty.registry_config_path(), empty.systemd_cgroup(), empty.discard_unpacked_layers()), ("/etc/cni/net.d", None, false, false));
    }

    #[test]
    fn version_2_keys_in_a_version_3_file_are_named_as_ignored() {
        let text = "version = 3\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"x:1\"\n  stream_server_port = \"0\"\n  [plugins.\"io.containerd.grpc.v1.cri\".cni]\n    conf_dir = \"/x\"\n";
        let c = config(text);
        assert_eq!(c.configured_sandbox_image(), None, "containerd 2 does not read it there");
        assert_eq!(c.cni_conf_dir(), "/etc/cni/net.d");
        assert_eq!(c.ignored_keys(), ["plugins.\"io.containerd.grpc.v1.cri\".cni", "plugins.\"io.containerd.grpc.v1.cri\".sandbox_image"]);
    }

    /// No `version` is version 1 (containerd 1.x, and 2.x's migration): the CRI plugin by its short ID.
    #[test]
    fn a_file_without_a_version_is_version_1() {
        let c = config("[plugins.cri]\n  sandbox_image = \"p:1\"\n[plugins.cri.cni]\n  conf_dir = \"/opt/cni/net.d\"\n[plugins.cri.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n");
        assert_eq!(c.version(), ConfigVersion::V1);
        assert_eq!((c.configured_sandbox_image(), c.cni_conf_dir(), c.systemd_cgroup()), (Some("p:1"), "/opt/cni/net.d", true));
        assert_eq!(config("version = 0\n").version(), ConfigVersion::V1);
        assert_eq!(config("").cni_conf_dir(), "/etc/cni/net.d");
    }

    #[test]
    fn key_paths_per_version() {
        assert_eq!(config(TESTBED_V2).key_path(Setting::CniConfDir), ["plugins", "io.containerd.grpc.v1.cri", "cni", "conf_dir"]);
        assert_eq!(config(TESTBED_V3).key_path(Setting::CniConfDir), ["plugins", "io.containerd.cri.v1.runtime", "cni", "conf_dir"]);
        assert_eq!(Setting::SandboxImage.field(ConfigVersion::V3), "plugins.\"io.containerd.cri.v1.images\".pinned_images.sandbox");
        assert_eq!(Setting::DiscardUnpackedLayers.field(ConfigVersion::V3), "plugins.\"io.containerd.cri.v1.images\".discard_unpacked_layers");
        assert_eq!(Setting::DiscardUnpackedLayers.field(ConfigVersion::V2), "plugins.\"io.containerd.grpc.v1.cri\".containerd.discard_unpacked_layers");
        assert_eq!(Setting::RegistryConfigPath.field(ConfigVersion::V1), "plugins.cri.registry.config_path");
        assert_eq!(
            Setting::SystemdCgroup.field(ConfigVersion::V3),
            "plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options.SystemdCgroup"
        );
    }

    #[rstest::rstest]
    #[case::not_toml("[plugins", "containerd's config /c.toml is not TOML: ")]
    #[case::version_text("version = \"2\"", "containerd's config /c.toml: version is \"2\", not 1, 2 or 3 (containerd 2.1 reads up to 3)")]
    #[case::version_4("version = 4", "containerd's config /c.toml: version is 4, not 1, 2 or 3")]
    #[case::conf_dir_number(
        "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = 3\n",
        "containerd's config /c.toml: plugins.\"io.containerd.cri.v1.runtime\".cni.conf_dir is 3, not an absolute path"
    )]
    #[case::conf_dir_relative(
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"net.d\"\n",
        "containerd's config /c.toml: plugins.\"io.containerd.grpc.v1.cri\".cni.conf_dir is \"net.d\", not an absolute path"
    )]
    #[case::flag_text(
        "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\nSystemdCgroup = \"true\"\n",
        "containerd's config /c.toml: plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options.SystemdCgroup is \"true\", not true or false"
    )]
    #[case::not_a_table(
        "version = 3\n[plugins.\"io.containerd.cri.v1.images\"]\npinned_images = \"pause\"\n",
        "containerd's config /c.toml: plugins.\"io.containerd.cri.v1.images\".pinned_images is \"pause\", not a table"
    )]
    fn bad_configs_name_the_file_and_field(#[case] text: &str, #[case] says: &str) {
        let err = ContainerdConfig::parse("/c.toml", text).unwrap_err().to_string();
        assert!(err.starts_with(says), "{err}");
    }

    #[test]
    fn a_toml_error_says_where() {
        let err = ContainerdConfig::parse("/c.toml", "version = 2\n[plugins\n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn patches_in_the_files_version_read_back() {
        let pause = SettingValue::Text("faultlab.invalid/cce-pause:3.1".into());
        // What kind.rs has always given kind for a version 2 node config.
        assert_eq!(patch(ConfigVersion::V2, Setting::SandboxImage, &pause).unwrap(), "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"faultlab.invalid/cce-pause:3.1\"\n");
        assert_eq!(
            config(TESTBED_V3).patch(Setting::SandboxImage, &pause).unwrap(),
            "[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"faultlab.invalid/cce-pause:3.1\"\n"
        );
        assert_eq!(
            patch(ConfigVersion::V3, Setting::SystemdCgroup, &SettingValue::Flag(true)).unwrap(),
            "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
        );
        let values = [
            (Setting::SandboxImage, SettingValue::Text("reg.example/p\"q\\r:1".into())),
            (Setting::CniConfDir, SettingValue::Text("/etc/kubernetes/cni/net.d".into())),
            (Setting::RegistryConfigPath, SettingValue::Text("/etc/containerd/certs.d".into())),
            (Setting::SystemdCgroup, SettingValue::Flag(true)),
            (Setting::DiscardUnpackedLayers, SettingValue::Flag(true)),
        ];
        for version in [ConfigVersion::V1, ConfigVersion::V2, ConfigVersion::V3] {
            for (setting, value) in &values {
                let text = patch(version, *setting, value).unwrap();
                let read = config(&format!("version = {version}\n{text}"));
                let want = match value {
                    SettingValue::Text(t) => toml::Value::String(t.clone()),
                    SettingValue::Flag(b) => toml::Value::Boolean(*b),
                };
                assert_eq!(read.get(*setting), Some(&want), "{version} {setting}: {text}");
            }
        }
        let err = patch(ConfigVersion::V3, Setting::CniConfDir, &SettingValue::Text("net.d".into())).unwrap_err().to_string();
        assert_eq!(err, "a patch of the CNI configuration directory (plugins.\"io.containerd.cri.v1.runtime\".cni.conf_dir) takes an absolute path, not Text(\"net.d\")");
        assert!(patch(ConfigVersion::V2, Setting::SystemdCgroup, &SettingValue::Text("true".into())).is_err());
        assert!(patch(ConfigVersion::V2, Setting::SandboxImage, &SettingValue::Flag(true)).is_err());
    }

    #[test]
    fn containerd_version_as_each_build_prints_it() {
        let sid = version("containerd github.com/containerd/containerd/v2 2.1.9+unknown\n");
        assert_eq!((sid.major, sid.minor, sid.patch, sid.text.as_str(), sid.minor_version()), (2, 1, 9, "2.1.9+unknown", "2.1".to_string()));
        let bookworm = version("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1\n");
        assert_eq!((bookworm.major, bookworm.minor, bookworm.patch), (1, 6, 20));
        let docker = version("containerd containerd.io 1.6.20 2806fc1057397dbaeefbea0e4e17bddfbd388f38\n");
        assert_eq!(docker.minor_version(), "1.6");
        let kind = version("containerd github.com/containerd/containerd/v2 v2.0.2 c507a0257ea6462fbd6f5ba4f5c74facb04021f4\n");
        assert_eq!((kind.major, kind.minor, kind.patch, kind.text.as_str()), (2, 0, 2, "v2.0.2"));
        let rc = version("WARN[0000] something\ncontainerd github.com/containerd/containerd/v2 v2.1.0-rc.1 abc\n");
        assert_eq!((rc.major, rc.minor, rc.patch), (2, 1, 0));
        let ctr = ContainerdVersion::parse_ctr("ctr github.com/containerd/containerd/v2 2.1.9+unknown\n").unwrap();
        assert_eq!((ctr.major, ctr.minor, ctr.patch), (2, 1, 9));
        assert_eq!(ContainerdVersion::parse_ctr("ctr github.com/containerd/containerd 1.6.20~ds1\n").unwrap().minor_version(), "1.6");
        let err = ContainerdVersion::parse_ctr("containerd github.com/containerd/containerd 1.6.20").unwrap_err().to_string();
        assert!(err.starts_with("`ctr --version` printed"), "{err}");
        for bad in ["", "sh: containerd: not found", "containerd github.com/containerd/containerd", "containerd x vX.1", "containerd x 2"] {
            let err = ContainerdVersion::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("`containerd --version` printed"), "{bad}: {err}");
        }
    }

    #[test]
    fn default_sandbox_images_by_release() {
        let d = |v: &str| default_sandbox_image(&version(&format!("containerd m {v}")));
        assert_eq!(d("1.6.8"), Some("k8s.gcr.io/pause:3.6"));
        assert_eq!(d("1.6.20~ds1"), Some("registry.k8s.io/pause:3.6"));
        assert_eq!(d("1.7.27"), Some("registry.k8s.io/pause:3.8"));
        assert_eq!(d("v2.0.2"), Some("registry.k8s.io/pause:3.10"));
        assert_eq!(d("2.1.9+unknown"), Some("registry.k8s.io/pause:3.10"));
        assert_eq!(d("2.2.0"), Some("registry.k8s.io/pause:3.10.1"));
        assert_eq!(d("2.3.1"), Some("registry.k8s.io/pause:3.10.2"));
        assert_eq!(d("1.5.18"), None);
    }

    #[test]
    fn the_cgroup_version_from_the_file_system_or_the_process() {
        let out = |fs: &str, proc_cgroup: &str| format!("{fs}\n\n{PROC_CGROUP_MARK}\n{proc_cgroup}");
        // This machine's v1 hierarchies, and a cgroup v2 host's (systemd's unified hierarchy).
        let v1 = "12:pids:/\n11:memory:/\n9:name=systemd:/\n0::/\n";
        let v2 = "0::/user.slice/user-0.slice/session-1.scope\n";
        assert_eq!(parse_cgroup(&out("cgroup2fs", v2)).unwrap(), CgroupVersion::V2);
        assert_eq!(parse_cgroup(&out("tmpfs", v1)).unwrap(), CgroupVersion::V1);
        // Under `ip netns exec`, /sys is a sysfs of its own: the process's cgroups decide.
        assert_eq!(parse_cgroup(&out("sysfs", v1)).unwrap(), CgroupVersion::V1);
        assert_eq!(parse_cgroup(&out("sysfs", v2)).unwrap(), CgroupVersion::V2);
        assert_eq!(parse_cgroup("cgroup2fs\n").unwrap(), CgroupVersion::V2, "the file system alone");
        let err = parse_cgroup(&out("stat: cannot read file system information for '/sys/fs/cgroup'", "cat: /proc/self/cgroup: No such file")).unwrap_err().to_string();
        assert!(err.starts_with("cannot tell the cgroup version: `stat -fc %T /sys/fs/cgroup` printed \"stat: cannot read"), "{err}");
        assert!(parse_cgroup("").is_err());
        assert_eq!(CgroupVersion::V1.platform_part(), "");
        assert_eq!(CgroupVersion::V2.platform_part(), "-cgroup2");
    }

    /// The cgroup command, run here for real: this machine's answer, whatever it is, reads.
    #[test]
    fn the_cgroup_command_runs_here() {
        let cmd = cgroup_command();
        let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let want = match std::fs::read_to_string("/proc/self/cgroup").unwrap().trim() {
            t if t.lines().all(|l| l.starts_with("0::")) => CgroupVersion::V2,
            _ => CgroupVersion::V1,
        };
        assert_eq!(parse_cgroup(&text).unwrap(), want, "{text}");
    }

    #[test]
    fn the_kubelets_cgroup_driver() {
        let tb = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: cgroupfs\nfailSwapOn: false\n";
        assert_eq!(cgroup_driver("/k.yaml", tb, None).unwrap(), CgroupDriver::Cgroupfs);
        // kubeadm's (kind's) file, and one that leaves it out: the kubelet's default.
        assert_eq!(cgroup_driver("/k.yaml", "kind: KubeletConfiguration\ncgroupDriver: systemd\n", None).unwrap(), CgroupDriver::Systemd);
        assert_eq!(cgroup_driver("/k.yaml", "kind: KubeletConfiguration\nport: 10250\n", None).unwrap(), CgroupDriver::Cgroupfs);
        assert_eq!(cgroup_driver("/k.yaml", "{\"kind\": \"KubeletConfiguration\", \"cgroupDriver\": \"systemd\"}", None).unwrap(), CgroupDriver::Systemd);
        // A flag overrides the file.
        assert_eq!(cgroup_driver("/k.yaml", tb, Some(("/flags", "--v=2\n--cgroup-driver=systemd\n"))).unwrap(), CgroupDriver::Systemd);
        assert_eq!(cgroup_driver("/k.yaml", tb, Some(("/flags", "--cgroup-driver systemd"))).unwrap(), CgroupDriver::Systemd);
        assert_eq!(cgroup_driver("/k.yaml", tb, Some(("/flags", "--v=2\n"))).unwrap(), CgroupDriver::Cgroupfs);
        let err = cgroup_driver("/k.yaml", "cgroupDriver: system\n", None).unwrap_err().to_string();
        assert_eq!(err, "/k.yaml: cgroupDriver is \"system\", not cgroupfs or systemd");
        let err = cgroup_driver("/k.yaml", tb, Some(("/flags", "--cgroup-driver=x"))).unwrap_err().to_string();
        assert_eq!(err, "/flags: --cgroup-driver is \"x\", not cgroupfs or systemd");
        let err = cgroup_driver("/k.yaml", "cgroupDriver: [a\n", None).unwrap_err().to_string();
        assert!(err.starts_with("the KubeletConfiguration /k.yaml is not YAML: "), "{err}");
    }

    /// The facts command's output as a test-bed node of containerd 2 prints it: the config file ends
    /// without a newline, the flags file is there.
    fn facts_output(version: &str, cgroup: &str, config: &str, kubelet: &str) -> String {
        format!(
            "@@faultlab section containerd-version\n{version}\n\n@@faultlab status 0\n@@faultlab section cgroup\n{cgroup}\n\n@@faultlab status 0\n\
             @@faultlab section containerd-config\n{config}\n@@faultlab status 0\n@@faultlab section kubelet-config\n{kubelet}\n@@faultlab status 0\n\
             @@faultlab section kubelet-flags\n--v=2\n\n@@faultlab status 0\n"
        )
    }

    #[test]
    fn facts_from_a_nodes_output() {
        let profile = crate::testbed::tests::sample_profile();
        let cgroup = format!("tmpfs\n\n{PROC_CGROUP_MARK}\n9:name=systemd:/\n");
        let text = facts_output("containerd github.com/containerd/containerd/v2 2.1.9+unknown", &cgroup, TESTBED_V3.trim_end(), "kind: KubeletConfiguration\ncgroupDriver: cgroupfs\n");
        let facts = RuntimeFacts::parse("faultlab-node", &profile, &text).unwrap();
        assert_eq!(facts.containerd.minor_version(), "2.1");
        assert_eq!(facts.config_version(), ConfigVersion::V3);
        assert_eq!(facts.config.file(), profile.containerd.config);
        assert_eq!(facts.config, config(TESTBED_V3).with_file(&profile.containerd.config), "the file's text, whole, without the line the script adds");
        assert_eq!((facts.cgroup, facts.cgroup_driver), (CgroupVersion::V1, CgroupDriver::Cgroupfs));
        assert_eq!(facts.sandbox_image(), Some("faultlab.invalid/cce-pause:3.1"));
        // A part whose command failed names the node, the file and what the command said.
        let missing = text.replace("kind: KubeletConfiguration\ncgroupDriver: cgroupfs\n\n@@faultlab status 0", "cat: /var/lib/faultlab/testbed/kubelet-config.yaml: No such file or directory\n\n@@faultlab status 1");
        let err = RuntimeFacts::parse("faultlab-node", &profile, &missing).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("reading the KubeletConfiguration {} on node faultlab-node failed: exit status 1: cat: /var/lib/faultlab/testbed/kubelet-config.yaml: No such file or directory", profile.kubelet.config)
        );
        let err = RuntimeFacts::parse("faultlab-node", &profile, "sh: 1: Syntax error").unwrap_err().to_string();
        assert!(err.starts_with("reading containerd's version (`containerd --version`) on node faultlab-node failed: the output has no part \"containerd-version\""), "{err}");
    }

    impl ContainerdConfig {
        fn with_file(mut self, file: &str) -> Self {
            self.file = file.into();
            self
        }
    }

    /// The facts script, run by a real shell on files of this machine: every part is there and reads,
    /// whatever containerd this machine has (none: the version part says so).
    #[test]
    fn the_facts_script_runs_here() {
        let dir = tempfile::tempdir().unwrap();
        let mut profile = crate::testbed::tests::sample_profile();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        };
        profile.containerd.config = write("config.toml", TESTBED_V2.trim_end());
        profile.kubelet.config = write("kubelet.yaml", "kind: KubeletConfiguration\ncgroupDriver: systemd\n");
        profile.kubelet.extra_flags_file = Some(dir.path().join("no-flags").display().to_string());
        let cmd = RuntimeFacts::command(&profile);
        assert_eq!(cmd.argv[..2], ["sh", "-c"]);
        assert_eq!(cmd.argv[3..], ["sh".to_string(), profile.containerd.config.clone(), profile.kubelet.config.clone(), dir.path().join("no-flags").display().to_string()]);
        let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let parts = parts(&text);
        assert_eq!(parts.keys().copied().collect::<Vec<_>>(), ["cgroup", "containerd-config", "containerd-version", "kubelet-config", "kubelet-flags"], "{text}");
        assert_eq!(parts["containerd-config"].text, TESTBED_V2.trim_end());
        assert_eq!(parts["kubelet-flags"].text, "", "an absent flags file is no flags");
        assert!(parse_cgroup(parts["cgroup"].text).is_ok(), "{text}");
        match RuntimeFacts::parse("here", &profile, &text) {
            Ok(facts) => assert_eq!((facts.config_version(), facts.cgroup_driver), (ConfigVersion::V2, CgroupDriver::Systemd)),
            Err(e) => assert!(e.to_string().contains("containerd"), "only containerd's version may be missing here: {e}"),
        }
    }

    /// Through the node executor: one command, its argv as data.
    #[tokio::test]
    async fn read_runs_one_command_on_the_node() {
        let fake = FakeExecutor::new();
        let profile = crate::testbed::tests::sample_profile();
        let cgroup = format!("sysfs\n\n{PROC_CGROUP_MARK}\n0::/\n");
        fake.respond("@@faultlab section", Output::ok(facts_output("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1", &cgroup, TESTBED_V2, "cgroupDriver: systemd\n")));
        let node = Node::new(profile.clone(), profile.access().unwrap(), fake.clone());
        let facts = RuntimeFacts::read(&node).await.unwrap();
        assert_eq!((facts.containerd.minor_version().as_str(), facts.config_version(), facts.cgroup, facts.cgroup_driver), ("1.6", ConfigVersion::V2, CgroupVersion::V2, CgroupDriver::Systemd));
        let lines = fake.lines();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("ip netns exec faultlab-node timeout -k 5 60 sh -c "), "{}", lines[0]);
        fake.respond("proc-cgroup", Output::ok("cgroup2fs\n"));
        assert_eq!(read_cgroup(&node).await.unwrap(), CgroupVersion::V2);
        fake.respond("proc-cgroup", Output { status: 255, stdout: String::new(), stderr: "ssh: connect to host".into() });
        let err = read_cgroup(&node).await.unwrap_err().to_string();
        assert!(err.starts_with("reading the cgroup version on node faultlab-node failed: `ip netns exec faultlab-node timeout"), "{err}");
    }
}
