//! Where faultlab's own files are: its scenarios (`scenarios/`), their snapshots (`expectations/`) and
//! the kind configs (`kind-configs/`).
//!
//! - **In a checkout**: the current directory, or one above it, holds `harness/Cargo.toml` of the
//!   package `faultlab` and those three directories, and belongs to this user (as root: to root or to
//!   the user who ran sudo, as git's `safe.directory` asks; another user's tree could hand root its
//!   scenarios). A developer edits, runs and accepts snapshots there.
//! - **Anywhere else** (`cargo install`, a copied binary): the copy built into the binary, unpacked
//!   into the data directory as `builtin-<version>-<hash>/` (`$FAULTLAB_DATA_DIR`, else
//!   `$XDG_DATA_HOME/faultlab`, else `~/.local/share/faultlab`). The copy on disk is compared with the
//!   built-in bytes on every start and unpacked again if anything differs; the data directory must be
//!   this user's and writable by no one else. Snapshots accepted there stay with that copy (one
//!   per version); `--expectations DIR` keeps them where you choose.
//!
//! Nothing is found through the build machine's paths.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use include_dir::{include_dir, Dir, DirEntry};
use sha2::{Digest, Sha256};
use thiserror::Error;

static SCENARIOS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../scenarios");
static EXPECTATIONS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../expectations");
static KIND_CONFIGS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../kind-configs");

/// faultlab's own scenario file `scenarios/<name>.yaml`, as built into the binary.
pub fn builtin_scenario(name: &str) -> Option<&'static str> {
    SCENARIOS.get_file(format!("{name}.yaml")).and_then(|f| f.contents_utf8())
}

/// The three directories, by the name they have in a checkout and in an unpacked copy.
const PARTS: [(&str, &Dir<'_>); 3] = [("scenarios", &SCENARIOS), ("expectations", &EXPECTATIONS), ("kind-configs", &KIND_CONFIGS)];

#[derive(Debug, Error)]
pub enum HomeError {
    #[error("the data directory {}: {why} (faultlab unpacks its built-in scenarios there; FAULTLAB_DATA_DIR chooses another)", path.display())]
    DataDir { path: PathBuf, why: String },
    #[error("unpacking faultlab's built-in scenarios into {}", path.display())]
    Unpack {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where the files were found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    Checkout(PathBuf),
    Builtin(PathBuf),
}

impl Home {
    pub fn root(&self) -> &Path {
        match self {
            Home::Checkout(p) | Home::Builtin(p) => p,
        }
    }
}

static FOUND: OnceLock<Result<Home, String>> = OnceLock::new();

/// faultlab's own files, found once per process (see the module's documentation).
pub fn find() -> Result<&'static Home, String> {
    FOUND.get_or_init(|| locate().map_err(|e| error_chain(&e))).as_ref().map_err(Clone::clone)
}

/// The root of faultlab's own files; where they cannot be had (the error is [`find`]'s), the data
/// directory's path, whose files then fail to read, naming it.
pub fn root() -> PathBuf {
    match find() {
        Ok(home) => home.root().to_path_buf(),
        Err(_) => data_dir().join(builtin_name()),
    }
}

/// `e` and its causes, `: `-separated.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

fn locate() -> Result<Home, HomeError> {
    if let Some(checkout) = std::env::current_dir().ok().and_then(|cwd| checkout_above(&cwd, effective_uid(), invoking_uid())) {
        return Ok(Home::Checkout(checkout));
    }
    let dir = data_dir();
    unpack(&dir).map(Home::Builtin)
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

/// The user who invoked faultlab: the one who ran sudo (`SUDO_UID`), else the real user. Files read
/// back as root are trusted when they are root's or this user's (here and in the snapshot store).
pub fn invoking_uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok()).unwrap_or_else(|| unsafe { libc::getuid() })
}

/// May a process of effective user `euid`, invoked by `invoking`, use files owned by `owner`?
fn trusted_owner(owner: u32, euid: u32, invoking: u32) -> bool {
    owner == euid || (euid == 0 && owner == invoking)
}

/// The faultlab checkout that `dir` is in, if any, and if its owner may be trusted.
pub fn checkout_above(dir: &Path, euid: u32, invoking: u32) -> Option<PathBuf> {
    for candidate in dir.ancestors() {
        let manifest = candidate.join("harness/Cargo.toml");
        let is_checkout = std::fs::read_to_string(&manifest).is_ok_and(|t| t.lines().any(|l| l.trim() == "name = \"faultlab\""))
            && PARTS.iter().all(|(name, _)| candidate.join(name).is_dir());
        if !is_checkout {
            continue;
        }
        let owner = std::fs::metadata(candidate).map(|m| m.uid()).ok()?;
        if trusted_owner(owner, euid, invoking) {
            return Some(candidate.to_path_buf());
        }
        tracing::warn!("{} looks like a faultlab checkout but belongs to uid {owner}: using the built-in scenarios instead", candidate.display());
        return None;
    }
    None
}

/// `$FAULTLAB_DATA_DIR`, else `$XDG_DATA_HOME/faultlab`, else `~/.local/share/faultlab`.
pub fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("FAULTLAB_DATA_DIR") {
        return d;
    }
    var("XDG_DATA_HOME").or_else(|| var("HOME").map(|h| h.join(".local/share"))).unwrap_or_else(|| PathBuf::from("/nonexistent")).join("faultlab")
}

/// Every built-in file: its path under the copy's root, and its bytes (`.snap.new` files, pending
/// in the tree it was built from, left out).
fn builtin_files() -> Vec<(PathBuf, &'static [u8])> {
    fn walk(prefix: &Path, dir: &'static Dir<'static>, out: &mut Vec<(PathBuf, &'static [u8])>) {
        for entry in dir.entries() {
            match entry {
                DirEntry::Dir(d) => walk(prefix, d, out),
                DirEntry::File(f) if !f.path().to_string_lossy().ends_with(".snap.new") => out.push((prefix.join(f.path()), f.contents())),
                DirEntry::File(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    for (name, dir) in PARTS {
        walk(Path::new(name), dir, &mut out);
    }
    out.sort();
    out
}

/// `builtin-<version>-<first 12 hex digits of the files' SHA-256>`.
fn builtin_name() -> String {
    let mut hash = Sha256::new();
    for (path, bytes) in builtin_files() {
        hash.update(path.to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    let digest = format!("{:x}", hash.finalize());
    format!("builtin-{}-{}", env!("CARGO_PKG_VERSION"), &digest[..12])
}

/// Does `root` hold every built-in file, as a regular file with the built-in bytes?
fn intact(root: &Path) -> bool {
    builtin_files().iter().all(|(path, bytes)| {
        let file = root.join(path);
        std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file()) && std::fs::read(&file).is_ok_and(|b| b == *bytes)
    })
}

/// The built-in copy under `dir`: checked, unpacked (again) where it is not intact.
fn unpack(dir: &Path) -> Result<PathBuf, HomeError> {
    let bad = |why: String| HomeError::DataDir { path: dir.to_path_buf(), why };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| bad(format!("cannot create it: {e}")))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| bad(e.to_string()))?;
    if !meta.is_dir() {
        return Err(bad("not a directory (a symbolic link is refused)".into()));
    }
    if meta.uid() != effective_uid() || meta.mode() & 0o022 != 0 {
        return Err(bad(format!("owned by uid {} with mode {:o}: it must be this user's (uid {}) and writable by no one else", meta.uid(), meta.mode() & 0o7777, effective_uid())));
    }
    let root = dir.join(builtin_name());
    if intact(&root) {
        return Ok(root);
    }
    let failed = |source: std::io::Error| HomeError::Unpack { path: root.clone(), source };
    let tmp = dir.join(format!(".unpacking-{}-{:08x}", std::process::id(), fastrand::u32(..)));
    std::fs::DirBuilder::new().mode(0o700).create(&tmp).map_err(failed)?;
    let result = (|| {
        for (path, bytes) in builtin_files() {
            let file = tmp.join(&path);
            std::fs::DirBuilder::new().recursive(true).mode(0o755).create(file.parent().expect("a file has a parent"))?;
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&file)?.write_all(bytes)?;
        }
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(failed(e));
    }
    // A copy that is there but not intact (changed, or half written by a killed process) goes first.
    if std::fs::symlink_metadata(&root).is_ok() {
        let old = dir.join(format!(".stale-{}-{:08x}", std::process::id(), fastrand::u32(..)));
        if std::fs::rename(&root, &old).is_ok() {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    match std::fs::rename(&tmp, &root) {
        Ok(()) => Ok(root),
        // Another faultlab unpacked it at the same moment.
        Err(_) if intact(&root) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(root)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(failed(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the three directories the binary was built from, bytes and all, and no pending
    /// snapshot (whatever platforms this tree has snapshots for: a first-run clone has fewer).
    #[test]
    fn the_builtin_copy_holds_the_three_directories() {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else if !path.to_string_lossy().ends_with(".snap.new") {
                    out.push((path.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&path).unwrap()));
                }
            }
        }
        let tree = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut on_disk = Vec::new();
        for (name, _) in PARTS {
            walk(tree, &tree.join(name), &mut on_disk);
        }
        on_disk.sort();
        let built: Vec<(PathBuf, Vec<u8>)> = builtin_files().into_iter().map(|(p, b)| (p, b.to_vec())).collect();
        assert_eq!(built.iter().map(|(p, _)| p).collect::<Vec<_>>(), on_disk.iter().map(|(p, _)| p).collect::<Vec<_>>());
        assert!(built == on_disk, "the built-in bytes are the tree's");
        assert!(built.iter().any(|(p, _)| p == Path::new("scenarios/pause-missing.yaml")) && built.iter().any(|(p, _)| p == Path::new("kind-configs/amd64.yaml")));
    }

    #[test]
    fn unpacked_once_checked_each_time_and_mended_when_changed() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("faultlab");
        let root = unpack(&dir).unwrap();
        assert!(root.join("scenarios/pause-missing.yaml").is_file());
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        // Changed by someone: unpacked again.
        std::fs::write(root.join("scenarios/pause-missing.yaml"), "tampered").unwrap();
        assert!(!intact(&root));
        assert_eq!(unpack(&dir).unwrap(), root);
        assert!(intact(&root));
        // A link in place of a file is not intact either.
        std::fs::remove_file(root.join("kind-configs/amd64.yaml")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("kind-configs/amd64.yaml")).unwrap();
        assert!(!intact(&root));
        unpack(&dir).unwrap();
        assert!(std::fs::symlink_metadata(root.join("kind-configs/amd64.yaml")).unwrap().file_type().is_file());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing left beside the copy");
    }

    #[test]
    fn a_data_directory_others_may_write_is_refused() {
        let data = tempfile::tempdir().unwrap();
        std::fs::set_permissions(data.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let err = unpack(data.path()).unwrap_err().to_string();
        assert!(err.contains("writable by no one else"), "{err}");
    }

    #[test]
    fn a_checkout_is_found_from_inside_it_and_only_if_its_owner_is_trusted() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let tree = here.parent().unwrap();
        let owner = std::fs::metadata(tree).unwrap().uid();
        assert_eq!(checkout_above(&here.join("src"), owner, owner).as_deref(), Some(tree));
        assert_eq!(checkout_above(tree, owner, owner).as_deref(), Some(tree));
        let other = owner.wrapping_add(4242);
        assert_eq!(checkout_above(tree, other, other), None, "another user's tree");
        if owner != 0 {
            assert_eq!(checkout_above(tree, 0, owner).as_deref(), Some(tree), "root through sudo, in the invoking user's tree");
        }
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(checkout_above(elsewhere.path(), owner, owner), None);
    }

    #[test]
    fn owners_trusted() {
        assert!(trusted_owner(1000, 1000, 1000));
        assert!(trusted_owner(0, 0, 1000));
        assert!(trusted_owner(1000, 0, 1000));
        assert!(!trusted_owner(1001, 0, 1000));
        assert!(!trusted_owner(0, 1000, 1000));
    }
}
