//! Strict decoding of faultlab's versioned data files (`apiVersion: faultlab.dev/v1alpha1`).
//!
//! Unknown fields are errors, and every error names the file, line and column.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The only data-file version this build reads.
pub const API_VERSION: &str = "faultlab.dev/v1alpha1";

/// `apiVersion: faultlab.dev/v1alpha1`, and nothing else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    #[default]
    #[serde(rename = "faultlab.dev/v1alpha1")]
    V1alpha1,
}

#[derive(Debug, Error)]
pub enum DataFileError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Decode { path: PathBuf, line: u64, column: u64, message: String },
    #[error("{}: {message}", path.display())]
    DecodeUnplaced { path: PathBuf, message: String },
    #[error("{}: {field}: {message}", path.display())]
    Invalid { path: PathBuf, field: String, message: String },
}

/// Read and strictly decode a data file.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<T, DataFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| DataFileError::Read { path: path.to_owned(), source })?;
    decode(path, &text)
}

/// Strictly decode `text`, naming `path` in errors.
pub fn decode<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, DataFileError> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options::<T>(text, options).map_err(|e| {
        let message = strip_location(&e.to_string());
        match e.location() {
            Some(loc) if loc.line() > 0 => {
                DataFileError::Decode { path: path.to_owned(), line: loc.line(), column: loc.column(), message }
            }
            _ => DataFileError::DecodeUnplaced { path: path.to_owned(), message },
        }
    })
}

/// serde-saphyr appends ` at line L, column C`; we print the location ourselves, in front.
fn strip_location(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}
