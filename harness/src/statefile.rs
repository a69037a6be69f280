//! Files faultlab writes and later reads back as truth: run journals (whose undo commands `faultlab
//! cleanup` runs, as root) and training sessions. Such a file is trusted only if nobody else could have
//! put it there: its directory is this user's own and private, and the file is a regular file (not a
//! symbolic link, FIFO or device), owned by this user, writable by nobody else, and of bounded size.
//! Writes go to a fresh temporary file (never through a link) and are renamed into place.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The largest state file read back (a journal of many steps is tens of kilobytes).
pub const MAX_STATE_BYTES: u64 = 4 << 20;

#[derive(Debug, Error)]
pub enum StateFileError {
    #[error("creating the state directory {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("state directory {}: {why}; faultlab keeps its journals and sessions only in a directory of its user's own (remove it, or set FAULTLAB_STATE_DIR)", path.display())]
    UntrustedDir { path: PathBuf, why: String },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not reading {}: {why}; faultlab reads back only the files it wrote itself", path.display())]
    Untrusted { path: PathBuf, why: String },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: crate::atomic::AtomicError,
    },
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why `meta` (of a directory or file found at a path, not followed) cannot be trusted, if it cannot.
fn distrust(meta: &std::fs::Metadata, want_dir: bool) -> Option<String> {
    let t = meta.file_type();
    if t.is_symlink() {
        return Some("it is a symbolic link".into());
    }
    if want_dir && !t.is_dir() {
        return Some("it is not a directory".into());
    }
    if !want_dir && !t.is_file() {
        let what = if t.is_dir() { "a directory" } else { "not a regular file (a FIFO, socket or device)" };
        return Some(format!("it is {what}"));
    }
    if meta.uid() != euid() {
        return Some(format!("it is owned by uid {}, not by uid {} that runs faultlab", meta.uid(), euid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!("others may write it (mode {:o})", meta.mode() & 0o7777));
    }
    None
}

/// Make `dir` (and its missing parents) and check it is this user's own directory that nobody else
/// can enter: created 0700; an existing one of this user's whose mode lets others in is narrowed to
/// 0700; one that is a symbolic link, another user's, or writable by others is refused.
pub fn private_dir(dir: &Path) -> Result<(), StateFileError> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|source| StateFileError::CreateDir { path: dir.to_owned(), source })?;
    let meta = std::fs::symlink_metadata(dir).map_err(|source| StateFileError::CreateDir { path: dir.to_owned(), source })?;
    if let Some(why) = distrust(&meta, true) {
        return Err(StateFileError::UntrustedDir { path: dir.to_owned(), why });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|source| StateFileError::CreateDir { path: dir.to_owned(), source })?;
    }
    Ok(())
}

/// Read back a state file: opened without following a link and without blocking, then checked on
/// the open file (so it cannot be swapped in between): regular, this user's, writable only by this
/// user, at most [`MAX_STATE_BYTES`].
pub fn read(path: &Path) -> Result<String, StateFileError> {
    let untrusted = |why: String| StateFileError::Untrusted { path: path.to_owned(), why };
    let read_err = |source: std::io::Error| StateFileError::Read { path: path.to_owned(), source };
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(untrusted("it is a symbolic link".into())),
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if let Some(why) = distrust(&meta, false) {
        return Err(untrusted(why));
    }
    if meta.len() > MAX_STATE_BYTES {
        return Err(untrusted(format!("it is {} bytes, more than the {MAX_STATE_BYTES} a state file may be", meta.len())));
    }
    let mut text = String::new();
    file.take(MAX_STATE_BYTES + 1).read_to_string(&mut text).map_err(read_err)?;
    Ok(text)
}

/// Open a state file to append to (a recording), made 0600 if it is not there: opened without
/// following a link and without blocking, then checked on the open file as [`read`] checks.
pub fn open_append(path: &Path) -> Result<std::fs::File, StateFileError> {
    let file = match std::fs::OpenOptions::new().append(true).create(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(StateFileError::Untrusted { path: path.to_owned(), why: "it is a symbolic link".into() }),
        Err(source) => return Err(StateFileError::Read { path: path.to_owned(), source }),
    };
    let meta = file.metadata().map_err(|source| StateFileError::Read { path: path.to_owned(), source })?;
    if let Some(why) = distrust(&meta, false) {
        return Err(StateFileError::Untrusted { path: path.to_owned(), why });
    }
    Ok(file)
}

/// The regular files in `dir` whose names end in `.{ext}`, sorted; symbolic links and other kinds
/// are left out (a directory that is not there lists nothing).
pub fn list(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Write `path` whole ([`crate::atomic::write`]: a new temporary file beside it, 0600 as `tempfile`
/// makes it, synced and renamed over `path`; a link at `path` is refused, never written through).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), StateFileError> {
    crate::atomic::write(path, bytes).map_err(|source| StateFileError::Write { path: path.to_owned(), source })
}

/// Whether `id` may name a file in a state directory: 1 to 128 of `[A-Za-z0-9._-]`, not starting
/// with a dot or a dash.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && !id.starts_with(['.', '-']) && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_directory_is_made_0700_and_an_open_one_of_ours_narrowed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700, "narrowed");
    }

    #[test]
    fn a_directory_that_is_a_link_or_writable_by_others_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = private_dir(&link).unwrap_err().to_string();
        assert!(err.contains("it is a symbolic link"), "{err}");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let err = private_dir(&real).unwrap_err().to_string();
        assert!(err.contains("others may write it (mode 1777)") && err.contains("set FAULTLAB_STATE_DIR"), "{err}");
    }

    #[test]
    fn what_is_read_back_is_a_regular_file_of_ours_that_only_we_write() {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("run.json");
        write(&good, b"{}").unwrap();
        assert_eq!(std::fs::metadata(&good).unwrap().mode() & 0o777, 0o600);
        assert_eq!(read(&good).unwrap(), "{}");

        let link = tmp.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(read(&link).unwrap_err().to_string().contains("it is a symbolic link"));

        let fifo = tmp.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "read without blocking, then refused: {err}");

        let open = tmp.path().join("open.json");
        std::fs::write(&open, "{}").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(read(&open).unwrap_err().to_string().contains("others may write it (mode 666)"));

        let big = tmp.path().join("big.json");
        std::fs::File::create(&big).unwrap().set_len(MAX_STATE_BYTES + 1).unwrap();
        assert!(read(&big).unwrap_err().to_string().contains("more than the"));

        // Another user's file (root can make one here).
        if euid() == 0 {
            let theirs = tmp.path().join("theirs.json");
            std::fs::write(&theirs, "{}").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            assert!(read(&theirs).unwrap_err().to_string().contains("owned by uid 65534"));
        }
        let listed: Vec<String> = list(tmp.path(), "json").iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert!(listed.starts_with(&["big.json".to_string(), "open.json".into(), "run.json".into()]) && !listed.iter().any(|n| n == "link.json" || n == "fifo.json"), "links and FIFOs are not listed: {listed:?}");
    }

    #[test]
    fn a_write_never_goes_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::write(&target, "theirs").unwrap();
        let path = tmp.path().join("run.json");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(write(&path, b"ours").unwrap_err().to_string().contains("it is a symbolic link"));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2, "no temporary file left");
    }

    #[test]
    fn ids_that_could_leave_the_directory_are_not_valid() {
        for good in ["faultlab-pause-missing-ab12c", "run.1_x"] {
            assert!(valid_id(good), "{good}");
        }
        for bad in ["", "../x", "a/b", ".hidden", "-rf", "a b", "x\n", &"a".repeat(129)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }
}
