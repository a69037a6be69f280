//! Files written whole or not at all, and never through a link.
//!
//! Reports and snapshots are written into directories others may write to too (a shared checkout, a CI
//! workspace). Opening the destination to write it would follow a symbolic link someone left there and
//! overwrite whatever it names, and a reader could see a half-written file. So the text goes to a new
//! temporary file in the same directory (`tempfile` creates it exclusively, with a random name), is
//! synced, and is renamed over the destination; a destination that is a symbolic link is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum AtomicError {
    #[error("refusing to write {}: it is a symbolic link; remove it, or name the file it points to", path.display())]
    Symlink { path: PathBuf },
    #[error("creating the directory of {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating a temporary file beside {}: {source}", path.display())]
    CreateTemp {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("putting {} in place: {source}", path.display())]
    Persist {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Write `bytes` to `path` (its directory made if missing) atomically; refuse a `path` that is a
/// symbolic link.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), AtomicError> {
    write_with(path, |file| file.write_all(bytes))
}

/// [`write`], with the contents written by `fill` (a tarball made as it is written, for one).
pub fn write_with(path: &Path, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> Result<(), AtomicError> {
    refuse_link(path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| AtomicError::CreateDir { path: path.to_owned(), source })?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|source| AtomicError::CreateTemp { path: path.to_owned(), source })?;
    fill(tmp.as_file_mut()).and_then(|()| tmp.as_file().sync_all()).map_err(|source| AtomicError::Write { path: path.to_owned(), source })?;
    // Checked again just before the rename: rename(2) replaces a link rather than following it, so a
    // link put there in between is not written through either way.
    refuse_link(path)?;
    tmp.persist(path).map_err(|e| AtomicError::Persist { path: path.to_owned(), source: e.error })?;
    Ok(())
}

fn refuse_link(path: &Path) -> Result<(), AtomicError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(AtomicError::Symlink { path: path.to_owned() }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_written_whole_in_a_directory_made_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("report/index.html");
        write(&path, b"first").unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        assert_eq!(files(&tmp.path().join("report")), ["index.html"], "no temporary file left");
    }

    #[test]
    fn a_link_is_refused_and_what_it_names_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep me").unwrap();
        let path = tmp.path().join("junit.xml");
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let err = write(&path, b"<testsuites/>").unwrap_err();
        assert!(matches!(&err, AtomicError::Symlink { .. }), "{err:?}");
        assert_eq!(err.to_string(), format!("refusing to write {}: it is a symbolic link; remove it, or name the file it points to", path.display()));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink(), "the link is left as it was");
        assert_eq!(files(tmp.path()), ["junit.xml", "outside"], "no temporary file left");
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_temporary_one() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("image.tar");
        std::fs::write(&path, "old").unwrap();
        let err = write_with(&path, |_| Err(std::io::Error::other("disk full"))).unwrap_err();
        assert_eq!(err.to_string(), format!("writing {}: disk full", path.display()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(files(tmp.path()), ["image.tar"]);
    }
}
