//! The kernel modules the VM node's initramfs loads to reach its root disk (`ci/testbed/lib/vm.sh`,
//! `fl_vm_initrd`; `faultlab testbed initrd-modules`): each module asked for, found by name in the
//! kernel's `modules.dep`, after the modules it needs, as modprobe would load them; once each; and
//! none that the kernel has built in (`modules.builtin`).

use std::path::{Path, PathBuf};

/// Why the list cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum InitrdError {
    #[error("module {module} not found in {}", dep.display())]
    NotFound { module: String, dep: PathBuf },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A module's name as modprobe compares it: the file's name without `.ko` (and a compression suffix,
/// `.ko.xz`), `-` read as `_`.
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = match file.rsplit_once(".ko") {
        Some((stem, rest)) if rest.is_empty() || rest.strip_prefix('.').is_some_and(|ext| !ext.is_empty() && ext.chars().all(|c| c.is_ascii_lowercase())) => stem,
        _ => file,
    };
    stem.replace('-', "_")
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The module files (paths as `modules.dep` gives them, relative to the kernel's module directory) to
/// load in order for `wanted`: `modules.dep`'s text, `modules.builtin`'s if the kernel has one, and
/// the `modules.dep` path for errors. A module neither in `modules.dep` nor built in is an error naming
/// it and the file.
pub fn load_order(modules_dep: &str, modules_builtin: Option<&str>, dep_path: &Path, wanted: &[String]) -> Result<Vec<String>, InitrdError> {
    // Each line: `path: dependency dependency...`, the dependencies last-loaded first.
    let entries: Vec<(&str, Vec<&str>)> = modules_dep
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(path, deps)| (path.trim(), deps.split(':').next().unwrap_or_default().split_whitespace().collect()))
        .collect();
    let built_in = |module: &str| modules_builtin.is_some_and(|text| text.lines().any(|l| !l.trim().is_empty() && module_name(l.trim()) == module));
    let mut order: Vec<String> = Vec::new();
    for module in wanted {
        let Some((path, deps)) = entries.iter().find(|(path, _)| module_name(path) == *module) else {
            if built_in(module.as_str()) {
                continue;
            }
            return Err(InitrdError::NotFound { module: module.clone(), dep: dep_path.to_owned() });
        };
        for file in deps.iter().rev().chain(std::iter::once(path)) {
            if !order.iter().any(|o| file_name(o) == file_name(file)) {
                order.push(file.to_string());
            }
        }
    }
    Ok(order)
}

/// [`load_order`] for the kernel module directory `dir` (`<root>/lib/modules/<version>`).
pub fn load_order_in(dir: &Path, wanted: &[String]) -> Result<Vec<String>, InitrdError> {
    let read = |path: PathBuf| std::fs::read_to_string(&path).map_err(|source| InitrdError::Read { path, source });
    let dep_path = dir.join("modules.dep");
    let dep = read(dep_path.clone())?;
    let builtin_path = dir.join("modules.builtin");
    let builtin = if builtin_path.exists() { Some(read(builtin_path)?) } else { None };
    load_order(&dep, builtin.as_deref(), &dep_path, wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANTED: [&str; 9] = ["virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci", "virtio_blk", "crc16", "mbcache", "jbd2", "crc32c_generic", "ext4"];

    fn wanted() -> Vec<String> {
        WANTED.map(String::from).to_vec()
    }

    /// A modules.dep with one line a module, named with `-` (as Debian's kernels name them).
    fn plain_dep() -> String {
        WANTED.iter().map(|m| format!("kernel/x/{}.ko:\n", m.replace('_', "-"))).collect()
    }

    #[test]
    fn the_modules_in_order_names_with_dash_or_underscore_alike() {
        let order = load_order(&plain_dep(), None, Path::new("/m/modules.dep"), &wanted()).unwrap();
        let files: Vec<&str> = order.iter().map(|p| file_name(p)).collect();
        assert_eq!(files, ["virtio-pci-legacy-dev.ko", "virtio-pci-modern-dev.ko", "virtio-pci.ko", "virtio-blk.ko", "crc16.ko", "mbcache.ko", "jbd2.ko", "crc32c-generic.ko", "ext4.ko"]);
        assert_eq!(order[0], "kernel/x/virtio-pci-legacy-dev.ko");
    }

    /// A module's dependencies come first, in the order modprobe loads them (modules.dep lists them
    /// last-loaded first), once each; a module the kernel has built in is left out.
    #[test]
    fn dependencies_first_once_each_built_in_modules_left_out() {
        let dep = plain_dep()
            .replace("kernel/x/virtio-pci.ko:\n", "kernel/x/virtio-pci.ko: kernel/x/virtio-ring.ko kernel/x/virtio.ko\n")
            .replace("kernel/x/virtio-blk.ko:\n", "kernel/x/virtio-blk.ko: kernel/x/virtio-ring.ko kernel/x/virtio.ko\n")
            .replace("kernel/x/crc16.ko:\n", "")
            + "kernel/x/virtio.ko:\nkernel/x/virtio-ring.ko: kernel/x/virtio.ko\n";
        let order = load_order(&dep, Some("kernel/lib/crc16.ko\n"), Path::new("/m/modules.dep"), &wanted()).unwrap();
        let files: Vec<&str> = order.iter().map(|p| file_name(p)).collect();
        assert_eq!(files, ["virtio-pci-legacy-dev.ko", "virtio-pci-modern-dev.ko", "virtio.ko", "virtio-ring.ko", "virtio-pci.ko", "virtio-blk.ko", "mbcache.ko", "jbd2.ko", "crc32c-generic.ko", "ext4.ko"]);
    }

    /// Compressed modules (`.ko.xz`) are found by their name too.
    #[test]
    fn compressed_modules_are_found_by_name() {
        let order = load_order("kernel/fs/ext4/ext4.ko.xz: kernel/fs/jbd2/jbd2.ko.xz\nkernel/fs/jbd2/jbd2.ko.xz:\n", None, Path::new("d"), &["ext4".to_string()]).unwrap();
        assert_eq!(order, ["kernel/fs/jbd2/jbd2.ko.xz", "kernel/fs/ext4/ext4.ko.xz"]);
    }

    #[test]
    fn a_module_missing_from_modules_dep_is_an_error_naming_it() {
        let dep = plain_dep().replace("kernel/x/ext4.ko:\n", "");
        let err = load_order(&dep, None, Path::new("/root/lib/modules/6.1.0-test/modules.dep"), &wanted()).unwrap_err();
        assert_eq!(err.to_string(), "module ext4 not found in /root/lib/modules/6.1.0-test/modules.dep");
    }

    /// From a kernel's module directory; one without modules.dep is an error naming the file.
    #[test]
    fn from_a_module_directory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = load_order_in(dir.path(), &wanted()).unwrap_err().to_string();
        assert!(missing.starts_with(&format!("reading {}: ", dir.path().join("modules.dep").display())), "{missing}");
        std::fs::write(dir.path().join("modules.dep"), plain_dep().replace("kernel/x/crc16.ko:\n", "")).unwrap();
        std::fs::write(dir.path().join("modules.builtin"), "kernel/lib/crc16.ko\n").unwrap();
        assert_eq!(load_order_in(dir.path(), &wanted()).unwrap().len(), 8);
    }
}
