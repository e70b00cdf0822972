//! Test support: temporary directories, running the real binary, and
//! assertions that print readable diffs.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// Worked examples 4 (recursion) and 5 (four repaired lines) of
/// `schemas/semantics.md`, shared with the engine's tests.
pub use mtanalyze_testkit::worked_examples::{RECURSION, REPAIRS};

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A fresh, empty directory whose name includes `label`.
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mtanalyze-e2e-{}-{n}-{label}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` to `name` in the directory and returns its path.
    pub fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path.join(name);
        std::fs::write(&p, bytes).expect("write test input");
        p
    }

    /// `name` in the directory (not created).
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The finished run of the binary.
pub struct Run {
    /// The arguments, for messages.
    pub args: String,
    /// Exit status (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    fn from_output(args: String, out: Output) -> Run {
        Run {
            args,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn context(&self) -> String {
        format!(
            "mtanalyze {}\n--- exit: {:?}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.args, self.code, self.stdout, self.stderr
        )
    }

    /// Asserts exit status 0 and returns self.
    #[track_caller]
    pub fn success(self) -> Run {
        assert_eq!(self.code, Some(0), "expected success\n{}", self.context());
        no_panic(&self);
        self
    }

    /// Asserts a failure with status 2 and exactly one line on stderr,
    /// `mtanalyze: ...`, and returns that line.
    #[track_caller]
    pub fn fails_with_one_line(self) -> String {
        assert_eq!(
            self.code,
            Some(2),
            "expected exit status 2\n{}",
            self.context()
        );
        no_panic(&self);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one line on stderr\n{}",
            self.context()
        );
        assert!(lines[0].starts_with("mtanalyze: "), "{}", self.context());
        assert!(
            self.stdout.is_empty(),
            "expected no output\n{}",
            self.context()
        );
        lines[0].to_owned()
    }

    /// Parses stdout as one JSON value.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.context()))
    }

    /// Asserts that stdout contains `needle`.
    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.context()
        );
        self
    }

    /// Asserts that stdout does not contain `needle`.
    #[track_caller]
    pub fn stdout_lacks(&self, needle: &str) -> &Run {
        assert!(
            !self.stdout.contains(needle),
            "stdout has {needle:?}\n{}",
            self.context()
        );
        self
    }
}

#[track_caller]
fn no_panic(run: &Run) {
    for bad in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
        assert!(
            !run.stderr.contains(bad),
            "stderr mentions {bad:?}\n{}",
            run.context()
        );
    }
}

/// The command for the binary under test.
pub fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mtanalyze"));
    c.env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE");
    c
}

/// Runs the binary with `args` (in `cwd`, if given) and waits for it.
pub fn mtanalyze_in<I, S>(cwd: Option<&Path>, args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let shown = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let mut c = command();
    c.args(&args);
    if let Some(dir) = cwd {
        c.current_dir(dir);
    }
    Run::from_output(shown, c.output().expect("run mtanalyze"))
}

/// Runs the binary with `args` and waits for it.
pub fn mtanalyze<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    mtanalyze_in(None, args)
}

/// A shared test vector in `tests/e2e/vectors/`.
pub fn vector(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/vectors")
        .join(name)
}

/// Test vector `name` converted to a binary trace in `dir` (named after
/// it, `.bin`), with its bytes.
pub fn converted_vector(dir: &TempDir, name: &str) -> (PathBuf, Vec<u8>) {
    let stem = name.split('.').next().unwrap_or(name);
    let bin = dir.join(&format!("{stem}.bin"));
    mtanalyze([
        "convert".as_ref(),
        vector(name).as_os_str(),
        bin.as_os_str(),
    ])
    .success();
    let bytes = std::fs::read(&bin).expect("converted trace");
    (bin, bytes)
}

/// A file of the repository, from its root.
pub fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Asserts two texts are equal, showing a line diff when they are not.
#[track_caller]
pub fn assert_text_eq(expected: &str, actual: &str) {
    if expected != actual {
        panic!(
            "text differs (- expected, + actual):\n{}",
            line_diff(expected, actual)
        );
    }
}

/// Asserts two JSON values are equal, showing a line diff of their pretty forms.
#[track_caller]
pub fn assert_json_eq(what: &str, expected: &serde_json::Value, actual: &serde_json::Value) {
    if expected != actual {
        let e = serde_json::to_string_pretty(expected).unwrap_or_default();
        let a = serde_json::to_string_pretty(actual).unwrap_or_default();
        panic!(
            "{what} differs (- expected, + actual):\n{}",
            line_diff(&e, &a)
        );
    }
}

/// A minimal line diff (longest common subsequence), enough for test output.
pub fn line_diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            let _ = writeln!(out, "  {}", a[i]);
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "+ {}", b[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "- {}", a[i]);
            i += 1;
        }
    }
    out
}

/// Worked example 1 of `schemas/semantics.md` (a task handed from thread 1
/// to thread 2), with definition sites on the enters.
pub const HANDOFF: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main", "file": "src/main.rs", "line": 1}
{"ts": 10, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "handler", "file": "src/h.rs", "line": 5}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "query", "file": "src/db.rs", "line": 42}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 40, "tid": 1, "ev": "exit", "fn": "main"}
{"ts": 60, "tid": 2, "ev": "switch", "stack": "task-1"}
{"ts": 75, "tid": 2, "ev": "exit", "fn": "query"}
{"ts": 80, "tid": 2, "ev": "exit", "fn": "handler"}
{"ts": 90, "tid": 2, "ev": "switch", "stack": null}
{"ev": "thread", "tid": 1, "name": "main-thread"}
{"ev": "thread", "tid": 2, "name": "worker-1"}
"#;

/// A trace with `n` distinct functions, big enough that its report does
/// not fit a pipe's buffer.
pub fn many_functions(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let _ = writeln!(
            s,
            r#"{{"ts": {}, "tid": 1, "ev": "enter", "fn": "function_number_{i}"}}"#,
            2 * i
        );
        let _ = writeln!(
            s,
            r#"{{"ts": {}, "tid": 1, "ev": "exit", "fn": "function_number_{i}"}}"#,
            2 * i + 1
        );
    }
    s
}

/// The `--format json` report of `trace` under `clock`.
/// The numbers `keys` of function `function`'s row in a JSON report
/// (`u64::MAX` for a missing one); panics if it has no row.
pub fn function_numbers<const N: usize>(
    report: &serde_json::Value,
    function: &str,
    keys: [&str; N],
) -> [u64; N] {
    let f = report["functions"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["function"] == function))
        .unwrap_or_else(|| panic!("no row for {function}"));
    keys.map(|k| f[k].as_u64().unwrap_or(u64::MAX))
}

pub fn json_report(trace: &Path, clock: &str) -> serde_json::Value {
    json_report_run(trace, clock).json()
}

/// The successful run of `mtanalyze TRACE --format json --clock CLOCK`
/// (its text, where a test compares it byte for byte).
pub fn json_report_run(trace: &Path, clock: &str) -> Run {
    mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--clock".as_ref(),
        clock.as_ref(),
    ])
    .success()
}

/// The Python of a virtual environment `target/VENV` holding PyPI's
/// `package` (importable as `module`), made and installed on first use,
/// or why it cannot be had (no python3, no venv module, no registry).
pub fn python_with(venv: &str, package: &str, module: &str) -> Result<PathBuf, String> {
    // target/debug/mtanalyze -> target/
    let target = Path::new(env!("CARGO_BIN_EXE_mtanalyze"))
        .ancestors()
        .nth(2)
        .ok_or("no target directory")?;
    let venv = target.join(venv);
    let python = venv.join("bin/python");
    let has = || {
        Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has() {
        return Ok(python);
    }
    let run = |c: &mut Command, what: &str| match c.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{what}: {e}")),
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            package,
        ]),
        &format!("pip install {package}"),
    )?;
    match has() {
        true => Ok(python),
        false => Err(format!(
            "{package} installed but {module} cannot be imported"
        )),
    }
}
