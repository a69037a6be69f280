//! Whether an image archive on a node is whole: what `ctr images import` would read back all of.
//!
//! A fault that deletes an image and restores it from an archive (pause-missing: the node package)
//! must know the archive holds the image, whole, before it deletes anything. A node is a thing commands
//! run on, so the node lists what it holds ([`LIST_TAR_SH`], glue) and faultlab judges the listing here
//! ([`check_listing`], tested logic).
//!
//! Why it is needed: `ctr image export` of containerd 2.x goes through the transfer API by default, and
//! its client copies the stream into the file in a goroutine nothing waits for, so the command can exit
//! 0 with the file cut short (containerd 2.1.9 here: 7 of 100 exports; issue 33's CI, stop 48). `tar`
//! then packs the short file without complaint, and the import that should restore the image fails
//! with `short read: expected N bytes but got M`.

use std::collections::BTreeSet;

use thiserror::Error;

/// A shell function, `fl_list_tar FILE`, run in a private directory: prints `== FILE`, `tar-status N`
/// (GNU tar's status extracting it: 2 when it ends inside an entry), tar's messages as `tar-error`
/// lines, `manifest.json` and `index.json` on one line each (their first 64 KiB), and `sha256sum` of
/// every regular file it holds (`<hex>  ./<path>`, by path). Extraction, not `tar -t`: a listing reads
/// only headers where the file can seek, so it passes a file cut inside its last entry's data.
pub const LIST_TAR_SH: &str = "fl_list_tar() { echo \"== $1\"; rm -rf .fl-x .fl-err && mkdir .fl-x && \
     { tar -xf \"$1\" -C .fl-x 2>.fl-err; echo \"tar-status $?\"; }; sed 's/^/tar-error /' .fl-err; \
     for j in manifest index; do if [ -f .fl-x/$j.json ]; then printf '%s ' $j; head -c 65536 .fl-x/$j.json | tr -d '\\n'; echo; fi; done; \
     (cd .fl-x && find . -type f -exec sha256sum {} + | sort -k 2); rm -rf .fl-x .fl-err; }";

/// What went wrong, by archive: each says why the archive cannot be imported whole.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ArchiveError {
    #[error("{path:?}: tar could not read it to its end (status {status}){}", tar_says(.message))]
    Unreadable { path: String, status: i32, message: String },
    #[error("{path:?}: it has neither manifest.json nor index.json, so it ends before its index: cut short")]
    NoIndex { path: String },
    #[error("{path:?}: it has index.json but not oci-layout, which `ctr image export` writes last: cut short")]
    NoLayout { path: String },
    #[error("{path:?}: its manifest.json names {file:?}, which it does not hold: cut short")]
    Missing { path: String, file: String },
    #[error("{path:?}: {file} is named by the digest sha256:{named} but holds sha256:{actual}: cut short or changed")]
    Digest { path: String, file: String, named: String, actual: String },
    #[error("{path:?}: its {file} is not JSON ({message})")]
    Json { path: String, file: &'static str, message: String },
    #[error("it holds no image archive (no *.tar)")]
    Empty,
    #[error("the listing's line {line:?} is none of `== FILE`, `tar-status N`, `tar-error ...`, `manifest ...`, `index ...`, `<sha256>  ./<path>`")]
    Listing { line: String },
}

fn tar_says(message: &str) -> String {
    if message.is_empty() { String::new() } else { format!(": {message}") }
}

/// One archive that is whole: its path, the images it names (`RepoTags` of manifest.json, and the
/// `io.containerd.image.name` annotations of index.json) and how many files' digests were checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Archive {
    pub path: String,
    pub images: Vec<String>,
    pub digests_checked: usize,
}

impl Archive {
    /// Whether it holds `image`, by name (`docker.io/library/` and `docker.io/` are how a short name
    /// reads in full, so both forms match).
    pub fn holds(&self, image: &str) -> bool {
        let full = |name: &str| {
            let name = name.strip_prefix("docker.io/library/").or_else(|| name.strip_prefix("docker.io/")).unwrap_or(name);
            name.strip_prefix("library/").unwrap_or(name).to_string()
        };
        self.images.iter().any(|i| full(i) == full(image))
    }
}

/// One `== FILE` section of a listing, as read.
#[derive(Default)]
struct Section {
    path: String,
    status: Option<i32>,
    errors: Vec<String>,
    manifest: Option<String>,
    index: Option<String>,
    files: Vec<(String, String)>,
}

/// Judge a listing of one or more archives ([`LIST_TAR_SH`]'s output, one section each): every archive
/// whole, or the first reason one is not.
pub fn check_listing(listing: &str) -> Result<Vec<Archive>, ArchiveError> {
    let mut sections: Vec<Section> = Vec::new();
    for line in listing.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(path) = line.strip_prefix("== ") {
            sections.push(Section { path: path.to_string(), ..Default::default() });
            continue;
        }
        let bad = || ArchiveError::Listing { line: line.chars().take(200).collect() };
        let s = sections.last_mut().ok_or_else(bad)?;
        if let Some(n) = line.strip_prefix("tar-status ") {
            s.status = Some(n.trim().parse().map_err(|_| bad())?);
        } else if let Some(m) = line.strip_prefix("tar-error ") {
            s.errors.push(m.trim().to_string());
        } else if let Some(j) = line.strip_prefix("manifest ") {
            s.manifest = Some(j.to_string());
        } else if let Some(j) = line.strip_prefix("index ") {
            s.index = Some(j.to_string());
        } else {
            let (hash, path) = line.split_once("  ./").ok_or_else(bad)?;
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            s.files.push((path.to_string(), hash.to_ascii_lowercase()));
        }
    }
    if sections.is_empty() {
        return Err(ArchiveError::Empty);
    }
    sections.into_iter().map(check_section).collect()
}

fn check_section(s: Section) -> Result<Archive, ArchiveError> {
    let path = s.path.clone();
    // tar's "A lone zero block" is a warning (status 0): only the status says the archive is cut.
    match s.status {
        Some(0) => {}
        status => return Err(ArchiveError::Unreadable { path, status: status.unwrap_or(-1), message: s.errors.join("; ") }),
    }
    let names: BTreeSet<&str> = s.files.iter().map(|(p, _)| p.as_str()).collect();
    let mut checked = 0;
    for (file, actual) in &s.files {
        // Blobs of an OCI layout, and a docker-save archive's config, are named by their digest.
        let named = file.strip_prefix("blobs/sha256/").or_else(|| file.strip_suffix(".json").filter(|n| !n.contains('/')));
        let Some(named) = named.filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit())) else { continue };
        if !named.eq_ignore_ascii_case(actual) {
            return Err(ArchiveError::Digest { path, file: file.clone(), named: named.to_string(), actual: actual.clone() });
        }
        checked += 1;
    }
    let json = |file: &'static str, text: &str| serde_json::from_str::<serde_json::Value>(text).map_err(|e| ArchiveError::Json { path: path.clone(), file, message: e.to_string() });
    let mut images = Vec::new();
    match (&s.manifest, &s.index) {
        (None, None) => return Err(ArchiveError::NoIndex { path }),
        // An OCI layout (ctr export writes index.json, manifest.json, then oci-layout, by name).
        (_, Some(_)) if !names.contains("oci-layout") => return Err(ArchiveError::NoLayout { path }),
        _ => {}
    }
    if let Some(text) = &s.manifest {
        for entry in json("manifest.json", text)?.as_array().into_iter().flatten() {
            images.extend(entry["RepoTags"].as_array().into_iter().flatten().filter_map(|t| t.as_str().map(String::from)));
            let named = entry["Layers"].as_array().into_iter().flatten().chain(std::iter::once(&entry["Config"]));
            for file in named.filter_map(|f| f.as_str()) {
                if !names.contains(file) {
                    return Err(ArchiveError::Missing { path, file: file.to_string() });
                }
            }
        }
    }
    if let Some(text) = &s.index {
        for m in json("index.json", text)?["manifests"].as_array().into_iter().flatten() {
            if let Some(name) = m["annotations"]["io.containerd.image.name"].as_str().filter(|n| !images.iter().any(|i| i == n)) {
                images.push(name.to_string());
            }
        }
    }
    Ok(Archive { path, images, digests_checked: checked })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use std::io::Write;

    fn hex(bytes: &[u8]) -> String {
        Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    /// An archive laid out as `ctr image export` writes one (its entries sorted by name, index.json,
    /// manifest.json, then oci-layout), holding `name` with one layer of `layer_len` bytes.
    fn oci_archive(name: &str, layer_len: usize) -> Vec<u8> {
        let layer: Vec<u8> = (0..layer_len).map(|i| (i * 7 % 251) as u8).collect();
        let config = br#"{"architecture":"amd64","os":"linux"}"#.to_vec();
        let manifest = format!(
            r#"{{"schemaVersion":2,"config":{{"digest":"sha256:{}","size":{}}},"layers":[{{"digest":"sha256:{}","size":{}}}]}}"#,
            hex(&config),
            config.len(),
            hex(&layer),
            layer.len()
        )
        .into_bytes();
        let index = format!(r#"{{"schemaVersion":2,"manifests":[{{"digest":"sha256:{}","size":{},"annotations":{{"io.containerd.image.name":"{name}"}}}}]}}"#, hex(&manifest), manifest.len());
        let docker = format!(r#"[{{"Config":"blobs/sha256/{}","RepoTags":["{name}"],"Layers":["blobs/sha256/{}"]}}]"#, hex(&config), hex(&layer));
        let mut blobs = vec![(format!("blobs/sha256/{}", hex(&layer)), layer.clone()), (format!("blobs/sha256/{}", hex(&config)), config), (format!("blobs/sha256/{}", hex(&manifest)), manifest)];
        blobs.sort();
        blobs.extend([("index.json".into(), index.into_bytes()), ("manifest.json".into(), docker.into_bytes()), ("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec())]);
        let mut b = tar::Builder::new(Vec::new());
        for (path, bytes) in blobs {
            let mut h = tar::Header::new_ustar();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o444);
            b.append_data(&mut h, path, bytes.as_slice()).unwrap();
        }
        b.into_inner().unwrap()
    }

    /// Where an archive's content ends: the end of its last entry's data, padded (the rest is tar's
    /// end-of-archive blocks, which a reader does not need).
    fn content_end(archive: &[u8]) -> usize {
        let mut a = tar::Archive::new(archive);
        let last = a.entries().unwrap().map(|e| e.unwrap()).map(|e| e.raw_file_position() + e.size()).max().unwrap();
        (last as usize).div_ceil(512) * 512
    }

    /// [`LIST_TAR_SH`] run for real with `sh` on each file, in a directory of its own.
    fn listing(files: &[(&str, &[u8])]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut script = format!("{LIST_TAR_SH}; cd {} &&", dir.path().display());
        for (name, bytes) in files {
            std::fs::File::create(dir.path().join(name)).unwrap().write_all(bytes).unwrap();
            script.push_str(&format!(" fl_list_tar ./{name};"));
        }
        let out = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn a_whole_export_passes_and_names_its_image() {
        let archive = oci_archive("faultlab.invalid/cce-pause:3.1", 686_080);
        let got = check_listing(&listing(&[("pause.tar", &archive)])).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].path.as_str(), got[0].digests_checked), ("./pause.tar", 3));
        assert_eq!(got[0].images, ["faultlab.invalid/cce-pause:3.1"]);
        assert!(got[0].holds("faultlab.invalid/cce-pause:3.1") && !got[0].holds("registry.k8s.io/pause:3.10"));
    }

    #[test]
    fn a_docker_save_archive_passes() {
        let config = crate::image::ImageConfig { reference: "faultlab.invalid/cce-pause:3.1".into(), arch: "amd64".into(), created_by: "t".into(), ..Default::default() };
        let s = crate::image::ImageStream { config, path: "pause".into(), size: 4000 };
        let mut bytes = Vec::new();
        s.write(&mut bytes).unwrap();
        let got = check_listing(&listing(&[("cce-pause-3.1.tar", &bytes)])).unwrap();
        assert_eq!((got[0].digests_checked, got[0].images.clone()), (1, vec!["faultlab.invalid/cce-pause:3.1".to_string()]));
    }

    /// The export that failed stop 48's CI, cut 33,280 bytes before its layer's end, and every other
    /// cut: an archive cut anywhere before its content ends fails, one cut after passes. Run with the
    /// node's own tools (sh, GNU tar, sha256sum).
    #[test]
    fn an_archive_cut_short_anywhere_fails() {
        let archive = oci_archive("faultlab.invalid/cce-pause:3.1", 70_000);
        let end = content_end(&archive);
        let mut cuts: Vec<usize> = (0..archive.len()).step_by(512).collect();
        cuts.extend((0..40).map(|_| fastrand::usize(0..archive.len())));
        cuts.extend([end - 1, end, end + 512]);
        for cut in cuts {
            let result = check_listing(&listing(&[("pause.tar", &archive[..cut])]));
            assert_eq!(result.is_ok(), cut >= end, "cut at {cut} of {} (content ends at {end}): {result:?}", archive.len());
        }
        let cut = archive.len() - 4096;
        let err = check_listing(&listing(&[("pause.tar", &archive[..cut])])).unwrap_err().to_string();
        assert!(err.starts_with("\"./pause.tar\": "), "{err}");
    }

    #[test]
    fn each_reason_reads_as_one() {
        let h = "a".repeat(64);
        let cases = [
            ("== ./p.tar\ntar-status 2\ntar-error tar: Unexpected EOF in archive\n", "\"./p.tar\": tar could not read it to its end (status 2): tar: Unexpected EOF in archive"),
            ("== ./p.tar\ntar-status 0\n", "\"./p.tar\": it has neither manifest.json nor index.json, so it ends before its index: cut short"),
            ("== ./p.tar\ntar-status 0\nindex {\"manifests\":[]}\n", "\"./p.tar\": it has index.json but not oci-layout, which `ctr image export` writes last: cut short"),
            (&format!("== ./p.tar\ntar-status 0\nmanifest [{{\"Config\":\"c.json\",\"Layers\":[\"l/layer.tar\"]}}]\n{h}  ./c.json\n"), "\"./p.tar\": its manifest.json names \"l/layer.tar\", which it does not hold: cut short"),
            (&format!("== ./p.tar\ntar-status 0\n{}  ./blobs/sha256/{h}\n", "b".repeat(64)), &format!("\"./p.tar\": blobs/sha256/{h} is named by the digest sha256:{h} but holds sha256:{}: cut short or changed", "b".repeat(64))),
            ("== ./p.tar\ntar-status 0\nmanifest [{\n", "\"./p.tar\": its manifest.json is not JSON (EOF while parsing an object at line 1 column 2)"),
            ("", "it holds no image archive (no *.tar)"),
            ("tar-status 0\n", "the listing's line \"tar-status 0\" is none of `== FILE`, `tar-status N`, `tar-error ...`, `manifest ...`, `index ...`, `<sha256>  ./<path>`"),
            ("== ./p.tar\nsomething else\n", "the listing's line \"something else\" is none of `== FILE`, `tar-status N`, `tar-error ...`, `manifest ...`, `index ...`, `<sha256>  ./<path>`"),
        ];
        for (listing, want) in cases {
            assert_eq!(check_listing(listing).unwrap_err().to_string(), want, "{listing}");
        }
        // A short name and its full form are one image.
        let a = Archive { path: "p".into(), images: vec!["busybox:1.36".into()], digests_checked: 0 };
        assert!(a.holds("docker.io/library/busybox:1.36") && !a.holds("busybox:1.35"));
    }
}
