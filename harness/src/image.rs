//! Image tarballs in `docker save` form, as `ctr images import` and `docker load` read them: one
//! layer, written deterministically (entries sorted, owner 0:0, time 0, no extended attributes), so
//! the same input makes the same bytes. The test bed's images (`faultlab image pack`, from a root file
//! system `ci/testbed/lib/images.sh` assembles) and disk-full's filler images (streamed into the node's
//! `ctr images import -`, see [`ImageStream`]) are both written here.

use std::io::{self, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What an image's config says of it, besides its one layer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// Its name, as `RepoTags` gives it (`faultlab.invalid/busybox:1.35`).
    pub reference: String,
    /// Its CPU architecture in Go's names (`amd64`, `arm64`).
    pub arch: String,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub workdir: Option<String>,
    /// What made it, for the image's history.
    pub created_by: String,
}

/// This machine's architecture in Go's names, as images name theirs.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

const EPOCH: &str = "1970-01-01T00:00:00Z";
const BLOCK: u64 = 512;

fn padded(len: u64) -> u64 {
    len.div_ceil(BLOCK) * BLOCK
}

/// A header of a deterministic entry: owner 0:0, time 0.
fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h
}

/// Counts and hashes what goes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Write the layer of the tree at `root` (directories, regular files, symbolic links; sorted by path)
/// as a tar to `out`.
pub fn write_tree_layer(root: &Path, out: impl Write) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut paths = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.symlink_metadata()?.is_dir() {
                stack.push(path.clone());
            }
            paths.push(path);
        }
    }
    paths.sort();
    let mut b = tar::Builder::new(out);
    for path in paths {
        let rel = path.strip_prefix(root).expect("below the root");
        let meta = path.symlink_metadata()?;
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let mut h = header(tar::EntryType::Symlink, 0o777, 0);
            b.append_link(&mut h, rel, std::fs::read_link(&path)?)?;
        } else if meta.is_dir() {
            let mut h = header(tar::EntryType::Directory, mode, 0);
            b.append_data(&mut h, rel, io::empty())?;
        } else if meta.is_file() {
            let mut h = header(tar::EntryType::Regular, mode, meta.len());
            b.append_data(&mut h, rel, std::fs::File::open(&path)?)?;
        } else {
            return Err(io::Error::other(format!("{}: only directories, files and links go into a layer", path.display())));
        }
    }
    b.into_inner()?.flush()
}

/// Write the image tarball to `out`: the layer (`layer_len` bytes that `layer` writes), its config
/// (with the layer's digest, computed as it goes by) and `manifest.json`.
pub fn write_image<W: Write>(out: W, config: &ImageConfig, layer_len: u64, layer: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<W> {
    let mut b = tar::Builder::new(out);
    b.get_mut().write_all(header_block("layer.tar", layer_len)?.as_bytes())?;
    let mut hashing = Hashing { inner: b.get_mut(), hash: Sha256::new(), len: 0 };
    layer(&mut hashing)?;
    let (diff_id, written) = (hex(&hashing.hash.finalize()), hashing.len);
    if written != layer_len {
        return Err(io::Error::other(format!("the layer is {written} bytes, not the {layer_len} its entry says")));
    }
    b.get_mut().write_all(&vec![0; (padded(layer_len) - layer_len) as usize])?;
    let config_json = config_json(config, &diff_id);
    let config_name = format!("{}.json", hex(&Sha256::digest(&config_json)));
    let manifest = serde_json::to_vec(&serde_json::json!([{"Config": config_name, "RepoTags": [config.reference], "Layers": ["layer.tar"]}]))?;
    for (name, bytes) in [(config_name.as_str(), &config_json), ("manifest.json", &manifest)] {
        let mut h = header(tar::EntryType::Regular, 0o644, bytes.len() as u64);
        b.append_data(&mut h, name, bytes.as_slice())?;
    }
    b.into_inner()
}

/// The 512-byte header of a regular entry `name` of `len` bytes.
fn header_block(name: &str, len: u64) -> io::Result<tar::Header> {
    let mut h = header(tar::EntryType::Regular, 0o644, len);
    h.set_path(name)?;
    h.set_cksum();
    Ok(h)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn config_json(c: &ImageConfig, diff_id: &str) -> Vec<u8> {
    let mut inner = serde_json::Map::new();
    inner.insert("Env".into(), c.env.clone().into());
    if !c.entrypoint.is_empty() {
        inner.insert("Entrypoint".into(), c.entrypoint.clone().into());
    }
    if !c.cmd.is_empty() {
        inner.insert("Cmd".into(), c.cmd.clone().into());
    }
    inner.insert("WorkingDir".into(), c.workdir.clone().unwrap_or_else(|| "/".into()).into());
    serde_json::to_vec(&serde_json::json!({
        "architecture": c.arch,
        "os": "linux",
        "created": EPOCH,
        "config": inner,
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]},
        "history": [{"created": EPOCH, "created_by": c.created_by}],
    }))
    .expect("an image config serialises")
}

/// Pack the tree at `rootfs` into the image tarball `out` (the layer goes through a file beside it).
pub fn pack(rootfs: &Path, config: &ImageConfig, out: &Path) -> io::Result<()> {
    let dir = out.parent().unwrap_or(Path::new("."));
    let layer_path = dir.join(format!(".{}.layer", crate::names::random_suffix(8)));
    let result = (|| {
        write_tree_layer(rootfs, io::BufWriter::new(std::fs::File::create(&layer_path)?))?;
        let len = std::fs::metadata(&layer_path)?.len();
        let tmp = dir.join(format!(".{}.tar", crate::names::random_suffix(8)));
        let file = io::BufWriter::new(std::fs::File::create(&tmp)?);
        let written = write_image(file, config, len, |w| io::copy(&mut std::fs::File::open(&layer_path)?, w).map(drop));
        match written.and_then(|mut f| f.flush()) {
            Ok(()) => std::fs::rename(&tmp, out),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    })();
    let _ = std::fs::remove_file(&layer_path);
    result
}

/// An image made as it is written, never stored: one layer holding one file of `size` random bytes at
/// `path` (disk-full's filler images, streamed into the node's `ctr images import -`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageStream {
    pub config: ImageConfig,
    /// The file's path in the image, relative (`srv/release.bin`), one directory deep at most.
    pub path: String,
    pub size: u64,
}

impl ImageStream {
    /// The layer: the file's directory (if any), the file, and the tar's end.
    fn layer_len(&self) -> u64 {
        let dir = if self.path.contains('/') { BLOCK } else { 0 };
        dir + BLOCK + padded(self.size) + 2 * BLOCK
    }

    /// Write the image tarball to `out`.
    pub fn write(&self, out: impl Write) -> io::Result<()> {
        let mut out = write_image(out, &self.config, self.layer_len(), |w| {
            let mut b = tar::Builder::new(w);
            if let Some((dir, _)) = self.path.rsplit_once('/') {
                let mut h = header(tar::EntryType::Directory, 0o755, 0);
                b.append_data(&mut h, format!("{dir}/"), io::empty())?;
            }
            let mut h = header(tar::EntryType::Regular, 0o644, self.size);
            b.append_data(&mut h, &self.path, Random.take(self.size))?;
            b.finish()
        })?;
        out.flush()
    }

    /// In words, for records and plans.
    pub fn describe(&self) -> String {
        format!("an image {} of one layer: {} of {} MiB random bytes", self.config.reference, self.path, self.size >> 20)
    }
}

/// Endless random bytes (not for secrets: filler that does not compress).
struct Random;

impl Read for Random {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        fastrand::fill(buf);
        Ok(buf.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ImageConfig {
        ImageConfig { reference: "faultlab.invalid/t:1".into(), arch: "amd64".into(), cmd: vec!["/bin/sh".into()], created_by: "test".into(), ..Default::default() }
    }

    /// The entries of a tarball: (path, bytes).
    fn entries(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut a = tar::Archive::new(bytes);
        a.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let mut v = Vec::new();
                e.read_to_end(&mut v).unwrap();
                (e.path().unwrap().display().to_string(), v)
            })
            .collect()
    }

    #[test]
    fn a_packed_tree_is_a_docker_save_tarball_and_the_same_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/busybox"), b"#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/bin/busybox", root.join("bin/sh")).unwrap();
        pack(&root, &config(), &dir.path().join("a.tar")).unwrap();
        pack(&root, &config(), &dir.path().join("b.tar")).unwrap();
        let (a, b) = (std::fs::read(dir.path().join("a.tar")).unwrap(), std::fs::read(dir.path().join("b.tar")).unwrap());
        assert_eq!(a, b, "deterministic");
        let e = entries(&a);
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "layer.tar");
        assert!(names[1].ends_with(".json") && names[2] == "manifest.json", "{names:?}");
        let layer: Vec<String> = entries(&e[0].1).into_iter().map(|(n, _)| n).collect();
        assert_eq!(layer, ["bin", "bin/busybox", "bin/sh"]);
        let manifest: serde_json::Value = serde_json::from_slice(&e[2].1).unwrap();
        assert_eq!(manifest[0]["RepoTags"][0], "faultlab.invalid/t:1");
        assert_eq!(manifest[0]["Config"], names[1]);
        let config: serde_json::Value = serde_json::from_slice(&e[1].1).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], format!("sha256:{}", hex(&Sha256::digest(&e[0].1))));
        assert_eq!(format!("{}.json", hex(&Sha256::digest(&e[1].1))), names[1], "the config is named by its digest");
        assert_eq!((config["architecture"].clone(), config["config"]["Cmd"][0].clone()), (serde_json::json!("amd64"), serde_json::json!("/bin/sh")));
        assert!(dir.path().read_dir().unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().starts_with('.')), "no temporary file is left");
    }

    #[test]
    fn a_streamed_image_says_its_layer_size_up_front() {
        let s = ImageStream { config: config(), path: "srv/release.bin".into(), size: 1000 };
        let mut out = Vec::new();
        s.write(&mut out).unwrap();
        let e = entries(&out);
        assert_eq!(e[0].1.len() as u64, s.layer_len());
        let layer = entries(&e[0].1);
        assert_eq!((layer[0].0.as_str(), layer[1].0.as_str(), layer[1].1.len()), ("srv/", "srv/release.bin", 1000));
        let written: serde_json::Value = serde_json::from_slice(&e[1].1).unwrap();
        assert_eq!(written["rootfs"]["diff_ids"][0], format!("sha256:{}", hex(&Sha256::digest(&e[0].1))));
        // A layer that is not the size its entry says is an error, not a corrupt tarball.
        let err = write_image(Vec::new(), &config(), 10, |w| w.write_all(b"short")).unwrap_err();
        assert!(err.to_string().contains("the layer is 5 bytes, not the 10"), "{err}");
    }
}
