//! Reports written from the run's records: JSON now; JUnit XML and the op × executor ×
//! target matrix (markdown and HTML) land with their own change.

use crate::outcome::Record;
use std::path::Path;

/// Writes every report into `dir`.
pub fn write_all(dir: &Path, records: &[Record]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let json = serde_json::to_string_pretty(records).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("conformance.json"), json).map_err(|e| e.to_string())?;
    Ok(())
}
