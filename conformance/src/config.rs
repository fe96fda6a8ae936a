//! What a backend author configures about a run of the suite, and where the suite finds the
//! author's files: [`Conformance`], the builder next to the one-line [`crate::main`].
//!
//! Two kinds of files, found two ways:
//! - The suite's own data (op cases, golden cases, the tolerance table, the ONNX node-test
//!   list, the expectations of Concord's own executors) is packaged with this crate and
//!   found through this crate's directory, wherever cargo keeps it: a checkout, a git
//!   checkout or the registry cache ([`SuiteConfig::from_env`]).
//! - The author's files (expectations, tolerance overrides, reports) belong to the author's
//!   crate. Relative paths are resolved against [`author_dir`], the directory of the crate
//!   whose test binary is running, so `conformance/myexec.toml` means the file beside the
//!   author's Cargo.toml. By default the expectations are read from there; an executor with
//!   no expectations file is told so before the first trial, and under `CI` the run fails.
//!   Seeds of failing property cases are persisted in the author's
//!   `conformance/regressions/` (and replayed after the ones the suite ships), so the suite
//!   never writes into its own directory for an author's executor.

use crate::error::SuiteError;
use crate::expectations::Expectations;
use crate::suite::{Suite, SuiteConfig};
use crate::tolerance::ToleranceTable;
use concord::{Executor, Target};
use libtest_mimic::Arguments;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The suite for one executor, as a test binary's `main`, with the author's configuration:
///
/// ```no_run
/// # use concord::CpuExecutor as MyExecutor;
/// // tests/conformance.rs, with `[[test]] name = "conformance"` and `harness = false`
/// fn main() {
///     concord_conformance::Conformance::new(MyExecutor::new)
///         .expectations("conformance/myexec.toml") // the default is conformance/<executor>.toml
///         .tolerances("conformance/tolerances.toml")
///         .report_dir("target/conformance-report")
///         .run()
/// }
/// ```
///
/// Every setting is optional; with none, this is [`crate::main`].
pub struct Conformance<F> {
    make: F,
    settings: Settings,
}

/// Where an executor's expectations file is looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectationsSource {
    /// `<dir>/conformance/<executor>.toml`, where `dir` is the author's crate: the default
    /// of the harness. A missing file means no expectations (said at the start of the run).
    AuthorCrate(PathBuf),
    /// `expectations/<executor>.toml` in the suite's own data: the files of Concord's own
    /// executors, read by `concord conform` and by their test binaries. A missing file
    /// means no expectations.
    Shipped,
    /// This file, which must exist.
    File(PathBuf),
}

/// The builder's settings, before they are resolved against the author's crate.
#[derive(Clone, Debug, Default)]
struct Settings {
    expectations: Option<Choice>,
    tolerances: Option<PathBuf>,
    report_dir: Option<PathBuf>,
    min_executed: Option<usize>,
}

/// Which expectations file the builder was told to read.
#[derive(Clone, Debug)]
enum Choice {
    File(PathBuf),
    Shipped,
}

/// A run's configuration, resolved: the suite's data, the author's files and where the
/// reports go.
#[derive(Clone, Debug)]
pub(crate) struct HarnessConfig {
    pub suite: SuiteConfig,
    pub report_dir: Option<PathBuf>,
}

/// What the harness says before the first trial, and whether the run may start.
#[derive(Debug, Default)]
pub(crate) struct Preamble {
    pub lines: Vec<String>,
    /// Why the run must not start (no expectations file while `CI` is set).
    pub refusal: Option<SuiteError>,
}

impl<F> std::fmt::Debug for Conformance<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conformance")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<F> Conformance<F> {
    /// The suite for the executor `make` builds, with every setting at its default.
    pub fn new(make: F) -> Conformance<F> {
        Conformance {
            make,
            settings: Settings::default(),
        }
    }

    /// Reads the executor's expectations from `path` (relative to the author's crate),
    /// which must exist. Without this, `conformance/<executor>.toml` in the author's crate
    /// is read if it is there.
    pub fn expectations(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.expectations = Some(Choice::File(path.into()));
        self
    }

    /// Reads the expectations file this crate ships for the executor
    /// (`expectations/<executor>.toml` in the suite's data), and persists failing property
    /// seeds in the suite's own `regressions/`: what Concord's own executors use. A backend
    /// author keeps both in their own crate instead (by default `conformance/<executor>.toml`
    /// and `conformance/regressions/<op>.txt`).
    pub fn concord_expectations(mut self) -> Self {
        self.settings.expectations = Some(Choice::Shipped);
        self
    }

    /// Adds the author's tolerance levels and overrides from `path` (relative to the
    /// author's crate), in the format of the suite's tolerances.toml: `[levels.<name>]`
    /// tables and `[[override]]` entries for the executor's own targets, each with a reason.
    pub fn tolerances(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.tolerances = Some(path.into());
        self
    }

    /// Writes conformance.json, junit.xml, matrix.md and matrix.html into `dir` (relative
    /// to the author's crate) after the run. Without this, `CONCORD_REPORT_DIR` decides,
    /// and with neither no report is written.
    pub fn report_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.report_dir = Some(dir.into());
        self
    }

    /// The floor on executed trials of an unfiltered run, given here instead of as
    /// `min_executed` in the expectations file (giving both is an error).
    pub fn min_executed(mut self, floor: usize) -> Self {
        self.settings.min_executed = Some(floor);
        self
    }
}

impl<F, E> Conformance<F>
where
    F: FnOnce() -> E,
    E: Executor + 'static,
{
    /// Runs the suite under libtest-mimic with the process's arguments (filters, `--list`,
    /// `--test-threads`, …) and exits with its status.
    pub fn run(self) -> ! {
        let args = Arguments::from_args();
        let code = self.run_with(&args);
        std::process::exit(code);
    }

    /// Runs the suite with `args`; returns the process exit code.
    pub fn run_with(self, args: &Arguments) -> i32 {
        let config = self.settings.resolve(&author_dir());
        crate::harness::run_configured(Arc::new((self.make)()), args, &config)
    }
}

impl Settings {
    /// The settings with relative paths resolved against `author`, and the defaults filled
    /// in: expectations from the author's crate, reports where `CONCORD_REPORT_DIR` says.
    fn resolve(&self, author: &Path) -> HarnessConfig {
        let mut suite = SuiteConfig::from_env();
        suite.expectations = match &self.expectations {
            None => ExpectationsSource::AuthorCrate(author.to_path_buf()),
            Some(Choice::Shipped) => ExpectationsSource::Shipped,
            Some(Choice::File(p)) => ExpectationsSource::File(author.join(p)),
        };
        // Concord's own executors keep their property seeds with the suite's data; an
        // author's go beside their expectations file, never into the dependency's copy.
        suite.author_regressions = match &self.expectations {
            Some(Choice::Shipped) => None,
            _ => Some(author.join("conformance").join("regressions")),
        };
        suite.tolerance_overrides = self.tolerances.as_ref().map(|p| author.join(p));
        suite.min_executed = self.min_executed;
        let report_dir = match &self.report_dir {
            Some(dir) => Some(author.join(dir)),
            None => std::env::var_os("CONCORD_REPORT_DIR").map(PathBuf::from),
        };
        HarnessConfig { suite, report_dir }
    }
}

impl HarnessConfig {
    /// What [`crate::main`] runs with: every setting at its default.
    pub fn defaults() -> HarnessConfig {
        Settings::default().resolve(&author_dir())
    }
}

impl ExpectationsSource {
    /// The file this source names for `executor`, and whether it must exist.
    pub fn path_for(&self, conformance_dir: &Path, executor: &str) -> (PathBuf, bool) {
        let file = format!("{executor}.toml");
        match self {
            ExpectationsSource::AuthorCrate(dir) => (dir.join("conformance").join(file), false),
            ExpectationsSource::Shipped => (conformance_dir.join("expectations").join(file), false),
            ExpectationsSource::File(path) => (path.clone(), true),
        }
    }
}

/// The directory of the crate whose test binary is running: `CARGO_MANIFEST_DIR` as cargo
/// sets it in the environment of a test it runs (read at run time: `env!` would give this
/// crate's own directory), else the current directory (a test binary run by hand or from a
/// bundle, where cargo is not there to say).
pub fn author_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Loads the expectations `config` names for `executor`, whose declared targets are
/// `targets`. A file that may be absent and is gives empty expectations, with the floor
/// given in code if there is one.
pub(crate) fn load_expectations(
    config: &SuiteConfig,
    executor: &str,
    targets: &[Target],
) -> Result<Expectations, SuiteError> {
    let (path, required) = config
        .expectations
        .path_for(&config.conformance_dir, executor);
    match std::fs::read_to_string(&path) {
        Ok(text) if config.recording_floors => {
            Expectations::parse_for_recording(&text, path, targets, config.min_executed)
        }
        Ok(text) => Expectations::parse_with_floor(&text, path, targets, config.min_executed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => Ok(Expectations {
            min_executed: config.min_executed.unwrap_or(0),
            ..Expectations::default()
        }),
        Err(e) => Err(SuiteError::Expectations {
            path,
            detail: if e.kind() == std::io::ErrorKind::NotFound {
                "it does not exist (relative paths given to Conformance::expectations are \
                 resolved against the directory of the crate whose test is running)"
                    .to_string()
            } else {
                e.to_string()
            },
        }),
    }
}

/// The shipped tolerance table, with the author's file added when `config` names one.
pub(crate) fn load_tolerances(
    config: &SuiteConfig,
    targets: &[Target],
) -> Result<ToleranceTable, SuiteError> {
    let table = ToleranceTable::builtin()?;
    let Some(path) = &config.tolerance_overrides else {
        return Ok(table);
    };
    let text = std::fs::read_to_string(path).map_err(|e| SuiteError::Data {
        path: path.clone(),
        detail: format!("the tolerance overrides cannot be read: {e}"),
    })?;
    table.with_overrides(&text, path.clone(), targets)
}

/// What the harness says before the first trial: which expectations and tolerance files the
/// run reads, or that the executor has none; and, with `CI` set, a refusal to run without
/// an expectations file, since then nothing would catch a suite that shrank.
pub(crate) fn preamble(suite: &Suite) -> Preamble {
    let executor = suite.executor.name();
    let expectations = &suite.expectations;
    let floor = match (suite.config.min_executed, &expectations.path) {
        (Some(n), _) => format!("{n} executed trials, from Conformance::min_executed"),
        (None, Some(_)) => format!("{} executed trials", expectations.min_executed),
        (None, None) => "none".to_string(),
    };
    let mut out = Preamble::default();
    match &expectations.path {
        Some(path) => out.lines.push(format!(
            "conformance: {executor}: expectations from {} (floor: {floor}; {} expected \
             failures, {} skips)",
            path.display(),
            expectations.expected_failures.len(),
            expectations.skips.len()
        )),
        None => {
            let (looked_for, _) = suite
                .config
                .expectations
                .path_for(&suite.config.conformance_dir, executor);
            out.lines.push(format!(
                "conformance: {executor} has no expectations file (looked for {}): no \
                 expected failures or skips are read, and the floor on executed trials is \
                 {floor}. Create it with at least `min_executed = N` (N a little below the \
                 executed count of an unfiltered run), or name another file with \
                 Conformance::expectations. With CI set, a run without one fails.",
                looked_for.display()
            ));
            if crate::node_tests::ci_is_set() {
                out.refusal = Some(SuiteError::NoExpectations {
                    executor: executor.to_string(),
                    looked_for,
                });
            }
        }
    }
    if let Some(path) = &suite.config.tolerance_overrides {
        let added: Vec<String> = suite
            .tolerances
            .overrides
            .iter()
            .filter(|o| {
                suite
                    .executor
                    .targets()
                    .iter()
                    .any(|s| s.target.name() == o.target)
            })
            .map(|o| format!("{} on {} -> {}", o.op, o.target, o.level))
            .collect();
        out.lines.push(format!(
            "conformance: {executor}: tolerance overrides from {}: {}",
            path.display(),
            if added.is_empty() {
                "none".to_string()
            } else {
                added.join(", ")
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory removed when dropped.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("concord-config-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conformance")).expect("scratch dir");
        Scratch(dir)
    }

    fn targets() -> Vec<Target> {
        vec![Target::new("mine"), Target::new("mine-fp16")]
    }

    #[test]
    fn relative_paths_resolve_against_the_authors_crate() {
        let settings = Settings {
            expectations: Some(Choice::File("conformance/x.toml".into())),
            tolerances: Some("tol.toml".into()),
            report_dir: Some("target/reports".into()),
            min_executed: Some(7),
        };
        let config = settings.resolve(Path::new("/author"));
        assert_eq!(
            config.suite.expectations,
            ExpectationsSource::File("/author/conformance/x.toml".into())
        );
        assert_eq!(
            config.suite.tolerance_overrides,
            Some(PathBuf::from("/author/tol.toml"))
        );
        assert_eq!(
            config.report_dir,
            Some(PathBuf::from("/author/target/reports"))
        );
        assert_eq!(config.suite.min_executed, Some(7));
        assert_eq!(
            config.suite.author_regressions,
            Some(PathBuf::from("/author/conformance/regressions"))
        );
        // An absolute path stays as it is.
        let absolute = Settings {
            expectations: Some(Choice::File("/elsewhere/x.toml".into())),
            ..Settings::default()
        };
        assert_eq!(
            absolute.resolve(Path::new("/author")).suite.expectations,
            ExpectationsSource::File("/elsewhere/x.toml".into())
        );
    }

    #[test]
    fn the_default_is_conformance_slash_executor_in_the_authors_crate() {
        let config = Settings::default().resolve(Path::new("/author"));
        assert_eq!(
            config.suite.expectations,
            ExpectationsSource::AuthorCrate("/author".into())
        );
        assert_eq!(
            config
                .suite
                .expectations
                .path_for(Path::new("/suite"), "myexec"),
            (PathBuf::from("/author/conformance/myexec.toml"), false)
        );
        assert_eq!(
            ExpectationsSource::Shipped.path_for(Path::new("/suite"), "cpu"),
            (PathBuf::from("/suite/expectations/cpu.toml"), false)
        );
        // Property seeds go to the author's crate too; Concord's own executors
        // (`concord_expectations`) keep theirs in the suite's regressions/.
        assert_eq!(
            config.suite.author_regressions,
            Some(PathBuf::from("/author/conformance/regressions"))
        );
        let own = Settings {
            expectations: Some(Choice::Shipped),
            ..Settings::default()
        }
        .resolve(Path::new("/author"));
        assert_eq!(own.suite.expectations, ExpectationsSource::Shipped);
        assert_eq!(own.suite.author_regressions, None);
    }

    #[test]
    fn expectations_are_read_from_the_authors_crate_and_checked() {
        let dir = scratch("expectations");
        let mut config = SuiteConfig::from_env();
        config.expectations = ExpectationsSource::AuthorCrate(dir.0.clone());
        // No file: empty expectations, no floor, and no error.
        let none = load_expectations(&config, "mine", &targets()).expect("absent is allowed");
        assert_eq!(none.path, None);
        assert_eq!(none.min_executed, 0);
        // The file beside the author's Cargo.toml is read.
        let file = dir.0.join("conformance").join("mine.toml");
        std::fs::write(
            &file,
            "min_executed = 5\n[[skip]]\ncase = \"mine/*/prop/Conv\"\nreason = \"slow\"\n",
        )
        .expect("write");
        let read = load_expectations(&config, "mine", &targets()).expect("parses");
        assert_eq!(read.path.as_deref(), Some(file.as_path()));
        assert_eq!(read.min_executed, 5);
        assert_eq!(read.skips.len(), 1);
        // An unknown key in it fails, naming the file.
        std::fs::write(&file, "min_executed = 5\nmin_execute = 6\n").expect("write");
        let err = load_expectations(&config, "mine", &targets())
            .expect_err("unknown key")
            .to_string();
        assert!(
            err.contains("mine.toml") && err.contains("min_execute"),
            "{err}"
        );
        // A floor given in code and in the file is refused; in code alone, it holds.
        std::fs::write(&file, "min_executed = 5\n").expect("write");
        config.min_executed = Some(9);
        let twice = load_expectations(&config, "mine", &targets())
            .expect_err("two floors")
            .to_string();
        assert!(twice.contains("the floor is set twice"), "{twice}");
        std::fs::write(&file, "[[skip]]\ncase = \"mine/*\"\nreason = \"r\"\n").expect("write");
        assert_eq!(
            load_expectations(&config, "mine", &targets())
                .expect("floor from code")
                .min_executed,
            9
        );
        // A file named explicitly must exist.
        config.expectations = ExpectationsSource::File(dir.0.join("nope.toml"));
        let missing = load_expectations(&config, "mine", &targets())
            .expect_err("missing explicit file")
            .to_string();
        assert!(
            missing.contains("nope.toml") && missing.contains("does not exist"),
            "{missing}"
        );
    }

    #[test]
    fn tolerance_overrides_are_strict_and_come_first() {
        let dir = scratch("tolerances");
        let path = dir.0.join("tol.toml");
        let mut config = SuiteConfig::from_env();
        config.tolerance_overrides = Some(path.clone());
        let good = "[levels.mine_resize]\nkind = \"fixed\"\nabs = 1e-3\nrel = 1e-3\n\
                    abs_f16 = 1e-2\nrel_f16 = 1e-2\nreason = \"bilinear weights in f16\"\n\
                    [[override]]\nop = \"Resize\"\ntarget = \"mine\"\nlevel = \"mine_resize\"\n\
                    reason = \"the weights are computed in f16\"\n";
        std::fs::write(&path, good).expect("write");
        let table = load_tolerances(&config, &targets()).expect("parses");
        let chosen = table
            .level_for("Resize", &Target::new("mine"))
            .expect("a level");
        assert_eq!(chosen.name, "mine_resize");
        // Other targets keep the shipped level.
        let shipped = ToleranceTable::builtin().expect("builtin");
        assert_eq!(
            table.level_for("Resize", &Target::new("mine-fp16")),
            shipped.level_for("Resize", &Target::new("mine-fp16"))
        );
        for (bad, says) in [
            ("[ops]\nRelu = \"exact\"\n", "unknown field `ops`"),
            (
                "[[override]]\nop = \"Resize\"\ntarget = \"mine\"\nlevel = \"exact\"\nreason = \"\"\n",
                "has no reason",
            ),
            (
                "[[override]]\nop = \"Resize\"\ntarget = \"opencl\"\nlevel = \"exact\"\nreason = \"r\"\n",
                "unknown target `opencl` (the executor declares: mine, mine-fp16)",
            ),
            (
                "[[override]]\nop = \"Resise\"\ntarget = \"mine\"\nlevel = \"exact\"\nreason = \"r\"\n",
                "no op `Resise`",
            ),
            (
                "[[override]]\nop = \"Resize\"\ntarget = \"mine\"\nlevel = \"loose\"\nreason = \"r\"\n",
                "unknown level `loose`",
            ),
            (
                "[levels.exact]\nkind = \"exact\"\nreason = \"r\"\n",
                "already defined",
            ),
            (
                "[[override]]\nop = \"Relu\"\ntarget = \"mine\"\nlevel = \"exact\"\nreason = \"r\"\n\
                 [[override]]\nop = \"Relu\"\ntarget = \"mine\"\nlevel = \"model\"\nreason = \"r\"\n",
                "given twice",
            ),
            (
                "[[override]]\nop = \"Relu\"\ntarget = \"mine\"\nlevel = \"exact\"\nreason = \"r\"\nwhy = 1\n",
                "unknown field `why`",
            ),
        ] {
            std::fs::write(&path, bad).expect("write");
            let err = load_tolerances(&config, &targets())
                .expect_err(bad)
                .to_string();
            assert!(err.contains(says) && err.contains("tol.toml"), "{bad}: {err}");
        }
    }
}
