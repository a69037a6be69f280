//! Scenario files from careless or hostile hands (issue 10, item 7): nothing crashes, hangs or
//! exhausts memory, and every mistake is refused with `FILE:LINE:COLUMN: FIELD: MESSAGE` before a
//! cluster is touched.
//!
//! One trial each (libtest-mimic), so a run says which case fails:
//!
//! - `invalid/<stem>`: a fixture under `tests/fixtures/hostile/invalid/`, a real scenario with one
//!   defect, whose `# expect: LINE:FIELD: REGEX` line says where and what the error is (see the
//!   fixtures' README). It must fail to load, within a time limit, with an error line at that line
//!   and field whose message matches, every line located, and no Rust type or parser option named.
//! - `valid/<stem>`: its valid twin (the same file with a legitimate value), which must load.
//! - `special/<what>`: files made at run time in a temporary directory: a FIFO, a directory, a
//!   dangling symbolic link, a loop of links and a 100 MB file named `x.yaml`, and the same as a
//!   manifest a scenario names; manifest paths that leave the scenario's directory.
//! - `cli/<what>`: `faultlab validate` and `faultlab list` over sets of those files.
//! - `property/mutated-scenarios`: the real `scenarios/*.yaml`, mutated (lines deleted, duplicated
//!   and swapped; numbers made extreme; scalars emptied or made long; alias bombs, deep nesting, tabs,
//!   random bytes, truncation). Each mutant loads or fails, within a time limit, without a panic,
//!   and every error line is located. `PROPTEST_CASES` sets the number of mutants (default
//!   [`DEFAULT_CASES`]); `PROPTEST_RNG_SEED` repeats a run.
//!
//! Every load runs in a thread of its own with a time limit, so a hang fails its trial instead of
//! hanging CI.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use faultlab::scenario;
use libtest_mimic::{Arguments, Failed, Trial};
use regex::Regex;

/// How long one load may take: far more than any real file needs, even in a debug build.
const LOAD_LIMIT: Duration = Duration::from_secs(10);
/// How long one `faultlab` command over a set may take.
const CLI_LIMIT: Duration = Duration::from_secs(60);
/// Mutants per run by default: about 10 s in a debug build on two cores.
const DEFAULT_CASES: u32 = 800;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // Two cores: the trials are light, but the property test is not.
    args.test_threads = args.test_threads.or(Some(2));
    let mut trials = Vec::new();
    for path in yaml_files(&fixtures().join("invalid")) {
        let name = format!("invalid/{}", stem(&path));
        trials.push(Trial::test(name, move || invalid_fixture(&path)));
    }
    for path in yaml_files(&fixtures().join("valid")) {
        let name = format!("valid/{}", stem(&path));
        trials.push(Trial::test(name, move || valid_fixture(&path)));
    }
    for (name, f) in SPECIAL {
        trials.push(Trial::test(format!("special/{name}"), *f));
    }
    trials.push(Trial::test("cli/validate-reports-every-broken-file", cli_validate_broken_set));
    trials.push(Trial::test("cli/validate-accepts-the-valid-fixtures", cli_validate_valid_set));
    trials.push(Trial::test("cli/list-shows-good-scenarios-then-broken-files", cli_list));
    trials.push(Trial::test("cli/show-names-a-file-it-cannot-read", cli_show_special));
    trials.push(Trial::test("cli/plan-with-a-huge-duration-does-not-panic", cli_plan_huge_duration));
    trials.push(Trial::test("property/mutated-scenarios", property::mutated_scenarios));
    trials.push(Trial::test("harness/a-hang-or-a-panic-fails-the-check", harness_self_test));
    libtest_mimic::run(&args, trials).exit_code()
}

// ---------------------------------------------------------------------------------------------------
// Running a load with a time limit.

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && p.is_file())
        .collect();
    v.sort();
    v
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// Run `f` in a thread of its own: its value, or a failure if it panicked or took longer than `limit`
/// (the thread is then left behind; the process ends with the test run).
fn bounded<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::Builder::new()
        .name(format!("bounded {what}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(result);
        })
        .map_err(|e| format!("{what}: cannot start a thread: {e}"))?;
    match rx.recv_timeout(limit) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(no message)".into());
            Err(format!("{what} panicked after {:.1?}: {message}", started.elapsed()))
        }
        Err(_) => Err(format!("{what} did not finish within {limit:?} (a hang)")),
    }
}

/// The time limit and the panic catch work: a check that hangs or panics fails instead of hanging.
fn harness_self_test() -> Result<(), Failed> {
    let hang = bounded(Duration::from_millis(100), "a hang", || std::thread::sleep(Duration::from_secs(3)));
    if !hang.as_ref().is_err_and(|e| e.contains("did not finish")) {
        return Err(format!("a hang was not caught: {hang:?}").into());
    }
    // resume_unwind: a panic without the panic hook, so nothing is printed.
    let panic = bounded(LOAD_LIMIT, "a panic", || std::panic::resume_unwind(Box::new("a deliberate panic (the harness checking itself)")));
    if !panic.as_ref().is_err_and(|e| e.contains("panicked") && e.contains("a deliberate panic")) {
        return Err(format!("a panic was not caught: {panic:?}").into());
    }
    let banned = check_all_lines("/x.yaml:3:4: f: invalid u64", &["/x.yaml".into()], "", None);
    let unlocated = check_all_lines("somewhere: wrong", &["/x.yaml".into()], "", None);
    let line_zero = check_all_lines("/x.yaml:0:1: f: m", &["/x.yaml".into()], "", None);
    let fine = check_all_lines("/x.yaml:3:4: f: m\n/x.yaml: is a FIFO", &["/x.yaml".into()], "", Some(3));
    if banned.is_ok() || unlocated.is_ok() || line_zero.is_ok() || fine.is_err() {
        return Err(format!("the error-line check is wrong: {banned:?} {unlocated:?} {line_zero:?} {fine:?}").into());
    }
    Ok(())
}

/// `scenario::load(path)` with a time limit: `Ok(name)` or `Err(the error's text)`; the outer error is
/// a panic or a hang.
fn load(path: &Path) -> Result<Result<String, String>, String> {
    let p = path.to_owned();
    bounded(LOAD_LIMIT, &format!("loading {}", path.display()), move || match scenario::load(&p) {
        Ok(loaded) => Ok(loaded.name().to_string()),
        // A documented cause not reproduced loads as what it is, not as an error.
        Err(scenario::ScenarioError::NotReproducible { gap, .. }) => Ok(gap.metadata.name.clone()),
        Err(e) => Err(e.to_string()),
    })
}

/// The load must fail: its error text.
fn load_err(path: &Path) -> Result<String, Failed> {
    match load(path)? {
        Ok(name) => Err(format!("{} loaded (as scenario {name:?}) but must be refused", path.display()).into()),
        Err(text) => Ok(text),
    }
}

// ---------------------------------------------------------------------------------------------------
// What every error must look like.

/// One line of an error: `PATH:LINE:COLUMN: REST` (about the file's content) or `PATH: REST` (about the
/// file itself).
#[derive(Debug)]
struct ErrLine {
    path: String,
    at: Option<(u64, u64)>,
    rest: String,
}

/// Split `line` into its parts; `paths` are the files the error may name.
fn parse_line(line: &str, paths: &[String]) -> Option<ErrLine> {
    // The longest matching path first (`a/x.yaml` before `a`).
    let mut paths: Vec<&String> = paths.iter().collect();
    paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let located = Regex::new(r"^:(\d+):(\d+): (.*)$").unwrap();
    for path in paths {
        let Some(after) = line.strip_prefix(path.as_str()) else { continue };
        if let Some(rest) = after.strip_prefix(": ") {
            return Some(ErrLine { path: path.clone(), at: None, rest: rest.to_string() });
        }
        if let Some(c) = located.captures(after) {
            let (line, column) = (c[1].parse().ok()?, c[2].parse().ok()?);
            return Some(ErrLine { path: path.clone(), at: Some((line, column)), rest: c[3].to_string() });
        }
    }
    None
}

/// Words that say nothing to a user: Rust types, serde's enum wording, the parser's options, panics.
fn banned() -> Regex {
    Regex::new(
        r"\b(?:u8|u16|u32|u64|u128|usize|i8|i16|i32|i64|i128|isize|f32|f64)\b|\bOptions?\b|\bOption<|\bVec<|\bString\b|enum variant|variant index|externally tagged|DuplicateKeyPolicy|\bstruct [A-Z]\w*|\benum [A-Z]\w*|\btuple struct\b|\bnewtype\b|\b[A-Z][A-Za-z]+ \{ [a-z_]+: |panicked|no cluster is configured|RUST_BACKTRACE",
    )
    .unwrap()
}

/// Every line of `text` located (at one of `paths`, line ≥ 1, not past the end of a file of
/// `lines_in_file` lines), with a message, and none of the banned words unless the input itself has
/// them (`input`, to quote it is fine). Returns the parsed lines.
fn check_all_lines(text: &str, paths: &[String], input: &str, lines_in_file: Option<usize>) -> Result<Vec<ErrLine>, String> {
    if text.trim().is_empty() {
        return Err("the error is empty".into());
    }
    let banned = banned();
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(parsed) = parse_line(line, paths) else {
            return Err(format!("error line not of the form `PATH:LINE:COLUMN: FIELD: MESSAGE` or `PATH: MESSAGE` (PATH one of {paths:?}):\n  {line}\nwhole error:\n{text}"));
        };
        if let Some((l, _)) = parsed.at {
            if l == 0 {
                return Err(format!("line 0 is no line (lines count from 1):\n  {line}"));
            }
            if let Some(n) = lines_in_file {
                if parsed.path == paths[0] && l as usize > n + 1 {
                    return Err(format!("line {l} is past the end of the file ({n} lines):\n  {line}"));
                }
            }
        }
        if parsed.rest.trim().is_empty() {
            return Err(format!("error line with no message:\n  {line}"));
        }
        for m in banned.find_iter(&parsed.rest) {
            if !input.contains(m.as_str()) {
                return Err(format!("message names {:?}, which says nothing to a user:\n  {line}", m.as_str()));
            }
        }
        out.push(parsed);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// The fixture table.

/// A fixture's `# expect: LINE[-LINE]:FIELD: REGEX` line.
#[derive(Debug)]
struct Expect {
    lines: std::ops::RangeInclusive<u64>,
    field: String,
    message: Regex,
    raw: String,
}

fn directives(text: &str, key: &str) -> Vec<String> {
    let prefix = format!("# {key}: ");
    text.lines().filter_map(|l| l.trim_end_matches('\r').strip_prefix(prefix.as_str())).map(str::to_string).collect()
}

fn parse_expect(raw: &str) -> Result<Expect, String> {
    let bad = || format!("bad `# expect:` line {raw:?}: write LINE[-LINE]:FIELD: REGEX");
    let (loc, rest) = raw.split_once(':').ok_or_else(bad)?;
    let (field, regex) = rest.split_once(": ").ok_or_else(bad)?;
    let (a, b) = loc.split_once('-').unwrap_or((loc, loc));
    let lines = a.trim().parse().map_err(|_| bad())?..=b.trim().parse().map_err(|_| bad())?;
    let message = Regex::new(&format!("(?i){regex}")).map_err(|e| format!("{}: {e}", bad()))?;
    Ok(Expect { lines, field: field.trim().to_string(), message, raw: raw.to_string() })
}

/// Does `line` say what `expect` says: at one of its lines, at its field, with its message?
fn matches(expect: &Expect, path: &str, line: &ErrLine) -> bool {
    let Some((l, _)) = line.at else { return false };
    if line.path != path || !expect.lines.contains(&l) {
        return false;
    }
    let message = if expect.field == "*" {
        line.rest.as_str()
    } else {
        // FIELD, then `: ` (or a sub-field: `workload.manifests[0] spec...`, `...[0].kind: ...`).
        let Some(after) = line.rest.strip_prefix(expect.field.as_str()) else { return false };
        if !after.starts_with([':', ' ', '.', '[']) {
            return false;
        }
        after
    };
    expect.message.is_match(message)
}

fn invalid_fixture(path: &Path) -> Result<(), Failed> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let expects: Vec<Expect> = directives(&text, "expect").iter().map(|r| parse_expect(r)).collect::<Result<_, _>>()?;
    if expects.is_empty() {
        return Err(format!("{} has no `# expect: LINE:FIELD: REGEX` line", path.display()).into());
    }
    let rejects = directives(&text, "reject");
    let err = load_err(path)?;
    let shown = path.display().to_string();
    // What the file says, without its directives (which name the words the error must not have).
    let input: String = text.lines().filter(|l| !l.starts_with("# expect: ") && !l.starts_with("# reject: ")).collect::<Vec<_>>().join("\n");
    let lines = check_all_lines(&err, std::slice::from_ref(&shown), &input, Some(text.lines().count())).map_err(|e| format!("{}: {e}", path.display()))?;
    for expect in &expects {
        if !lines.iter().any(|l| matches(expect, &shown, l)) {
            return Err(format!(
                "{}: no error line at line {:?}, field {}, with a message matching /{}/ (`# expect: {}`); the error was:\n{err}",
                path.display(),
                expect.lines,
                expect.field,
                expect.message.as_str().trim_start_matches("(?i)"),
                expect.raw
            )
            .into());
        }
    }
    for r in &rejects {
        if err.contains(r.as_str()) {
            return Err(format!("{}: the error must not contain {r:?} (`# reject:`); it was:\n{err}", path.display()).into());
        }
    }
    Ok(())
}

fn valid_fixture(path: &Path) -> Result<(), Failed> {
    match load(path)? {
        Ok(name) if name == stem(path) => Ok(()),
        Ok(name) => Err(format!("{} loaded with the name {name:?}", path.display()).into()),
        Err(e) => Err(format!("{} must load (a legitimate value), but:\n{e}", path.display()).into()),
    }
}

// ---------------------------------------------------------------------------------------------------
// Special files, made at run time.

type SpecialFn = fn() -> Result<(), Failed>;
/// Makes a special file at a path.
type MakeFn = fn(&Path) -> std::io::Result<()>;
/// Lines an error must be at (`None`: about the file itself).
type Lines = Option<std::ops::RangeInclusive<u64>>;

const SPECIAL: &[(&str, SpecialFn)] = &[
    ("fifo-is-refused-without-blocking", || special_file(make_fifo, r"FIFO|named pipe|pipe")),
    ("directory-is-refused", || special_file(|p| std::fs::create_dir(p), r"directory")),
    ("dangling-symlink-is-refused", || special_file(|p| symlink("nowhere.yaml", p), r"link|nowhere|no such file|does not exist|dangling")),
    ("symlink-loop-is-refused", || special_file(make_loop, r"loop|too many levels")),
    ("file-of-100-mb-is-refused", || special_file(make_big, r"large|big|size|bytes|MB|MiB|limit|more than")),
    ("manifest-fifo-is-refused-without-blocking", || special_manifest(make_fifo, r"FIFO|named pipe|pipe")),
    ("manifest-directory-is-refused", || special_manifest(|p| std::fs::create_dir(p), r"directory")),
    ("manifest-dangling-symlink-is-refused", || special_manifest(|p| symlink("nowhere.yaml", p), r"link|nowhere|no such file|does not exist|dangling|cannot")),
    ("manifest-symlink-loop-is-refused", || special_manifest(make_loop, r"loop|too many levels")),
    ("manifest-of-100-mb-is-refused", || special_manifest(make_big, r"large|big|size|bytes|MB|MiB|limit|more than")),
    ("manifest-path-up-two-directories-is-refused", manifest_up_two),
    ("manifest-symlink-out-of-the-directory-is-refused", manifest_symlink_out),
];

fn symlink(target: &str, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

fn make_fifo(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    match unsafe { libc::mkfifo(c.as_ptr(), 0o600) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn make_loop(path: &Path) -> std::io::Result<()> {
    let other = path.with_file_name(format!("{}-loop", stem(path)));
    std::os::unix::fs::symlink(&other, path)?;
    std::os::unix::fs::symlink(path, &other)
}

/// 100 MB, sparse: it takes no disk, but a reader that does not look at the size reads it all.
fn make_big(path: &Path) -> std::io::Result<()> {
    let f = std::fs::File::create(path)?;
    f.set_len(100 << 20)
}

/// `x.yaml` made by `make` is refused at once with an error naming it (`PATH: ...`) and saying why.
fn special_file(make: MakeFn, why: &str) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("x.yaml");
    make(&path).map_err(|e| format!("cannot make {}: {e}", path.display()))?;
    let err = load_err(&path)?;
    let shown = path.display().to_string();
    let lines = check_all_lines(&err, std::slice::from_ref(&shown), "", None)?;
    let why = Regex::new(&format!("(?i){why}")).unwrap();
    if !lines.iter().any(|l| l.path == shown && l.at.is_none() && why.is_match(&l.rest)) {
        return Err(format!("the error must start with `{shown}: ` and say why (/{why}/); it was:\n{err}").into());
    }
    Ok(())
}

/// A scenario (`valid/manifest-path-outside.yaml`, renamed) whose `path:` manifest is made by `make`:
/// refused at that line, at `workload.manifests[0].path`, without blocking.
fn special_manifest(make: MakeFn, why: &str) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (path, line) = write_path_scenario(dir.path(), "manifest-special", "manifests/web.yaml")?;
    std::fs::create_dir(dir.path().join("manifests")).map_err(|e| e.to_string())?;
    let manifest = dir.path().join("manifests/web.yaml");
    make(&manifest).map_err(|e| format!("cannot make {}: {e}", manifest.display()))?;
    let err = load_err(&path)?;
    let expect = parse_expect(&format!("{line}:workload.manifests[0].path: {why}")).unwrap();
    expect_located(&path, &err, &expect, &[manifest.display().to_string()])
}

/// Write `<dir>/<name>.yaml`: the valid twin of manifest-path-outside with `path: <manifest>`.
/// Returns its path and the line of `path:`.
fn write_path_scenario(dir: &Path, name: &str, manifest: &str) -> Result<(PathBuf, u64), Failed> {
    let twin = fixtures().join("valid/manifest-path-outside.yaml");
    let text = std::fs::read_to_string(&twin).map_err(|e| format!("{}: {e}", twin.display()))?;
    assert!(text.contains("  name: manifest-path-outside\n") && text.contains("    - path: manifests/web.yaml\n"), "{} changed", twin.display());
    let text = text.replace("  name: manifest-path-outside\n", &format!("  name: {name}\n")).replace("    - path: manifests/web.yaml\n", &format!("    - path: {manifest}\n"));
    let line = text.lines().position(|l| l.starts_with("    - path: ")).unwrap() as u64 + 1;
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    Ok((path, line))
}

/// `err` (from loading `path`) has a line that `expect` describes, and every line is located.
fn expect_located(path: &Path, err: &str, expect: &Expect, other_paths: &[String]) -> Result<(), Failed> {
    let shown = path.display().to_string();
    let mut paths = vec![shown.clone()];
    paths.extend(other_paths.iter().cloned());
    let lines = check_all_lines(err, &paths, "", None)?;
    if !lines.iter().any(|l| matches(expect, &shown, l)) {
        return Err(format!("no error line at {shown}:{:?}, field {}, matching /{}/; the error was:\n{err}", expect.lines, expect.field, expect.message).into());
    }
    Ok(())
}

/// `path: ../../outside/leak.yaml` from `<tmp>/sets/mine/`, where `<tmp>/outside/leak.yaml` exists.
fn manifest_up_two() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let set = dir.path().join("sets/mine");
    std::fs::create_dir_all(&set).map_err(|e| e.to_string())?;
    std::fs::create_dir(dir.path().join("outside")).map_err(|e| e.to_string())?;
    std::fs::copy(fixtures().join("outside/leak.yaml"), dir.path().join("outside/leak.yaml")).map_err(|e| e.to_string())?;
    let (path, line) = write_path_scenario(&set, "leak", "../../outside/leak.yaml")?;
    let err = load_err(&path)?;
    let expect = parse_expect(&format!("{line}:workload.manifests[0].path: outside")).unwrap();
    expect_located(&path, &err, &expect, &[])
}

/// `path: manifests/web.yaml`, a symbolic link to a manifest outside the set's directory.
fn manifest_symlink_out() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let set = dir.path().join("sets/mine");
    std::fs::create_dir_all(set.join("manifests")).map_err(|e| e.to_string())?;
    std::fs::create_dir(dir.path().join("outside")).map_err(|e| e.to_string())?;
    std::fs::copy(fixtures().join("outside/leak.yaml"), dir.path().join("outside/leak.yaml")).map_err(|e| e.to_string())?;
    symlink("../../../outside/leak.yaml", &set.join("manifests/web.yaml")).map_err(|e| e.to_string())?;
    let (path, line) = write_path_scenario(&set, "leak", "manifests/web.yaml")?;
    let err = load_err(&path)?;
    let expect = parse_expect(&format!("{line}:workload.manifests[0].path: outside")).unwrap();
    expect_located(&path, &err, &expect, &[])
}

// ---------------------------------------------------------------------------------------------------
// The command line.

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn both(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
    fn describe(&self) -> String {
        format!("exit status {:?}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Run `faultlab ARGS`, killed after [`CLI_LIMIT`] (duct captures both outputs while it runs, so a
/// chatty child cannot block on a full pipe, and its handle can be polled and killed).
fn faultlab(args: &[OsString], state: &Path) -> Result<Run, Failed> {
    let handle = duct::cmd(env!("CARGO_BIN_EXE_faultlab"), args)
        .env_remove("FAULTLAB_SCENARIOS")
        .env_remove("FAULTLAB_LOG")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env("FAULTLAB_STATE_DIR", state)
        .env("NO_COLOR", "1")
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .start()
        .map_err(|e| format!("cannot run faultlab: {e}"))?;
    let deadline = Instant::now() + CLI_LIMIT;
    let output = loop {
        if let Some(output) = handle.try_wait().map_err(|e| e.to_string())? {
            break output;
        }
        if Instant::now() > deadline {
            let _ = handle.kill();
            return Err(format!("faultlab {args:?} did not finish within {CLI_LIMIT:?} (a hang); it was killed").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = output.status;
    let run = Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    if status.code().is_none() || status.code() == Some(101) || run.both().contains("panicked") {
        return Err(format!("faultlab {args:?} crashed:\n{}", run.describe()).into());
    }
    Ok(run)
}

fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_owned()).collect()
}

/// A set of broken files: every invalid fixture (with the directory its `../outside` path names),
/// and the special files. Returns the set's directory and each file with the line its error must
/// be at (`None` for a file-level error).
fn broken_set(root: &Path) -> Result<(PathBuf, Vec<(PathBuf, Lines)>), Failed> {
    let set = root.join("set");
    std::fs::create_dir_all(&set).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(root.join("outside")).map_err(|e| e.to_string())?;
    std::fs::copy(fixtures().join("outside/leak.yaml"), root.join("outside/leak.yaml")).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    for src in yaml_files(&fixtures().join("invalid")) {
        let dst = set.join(src.file_name().unwrap());
        std::fs::copy(&src, &dst).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&std::fs::read(&src).unwrap()).into_owned();
        let expect = parse_expect(&directives(&text, "expect")[0])?;
        files.push((dst, Some(expect.lines)));
    }
    let specials: [(&str, MakeFn); 5] =
        [("fifo", make_fifo), ("directory", |p| std::fs::create_dir(p)), ("dangling", |p| symlink("nowhere.yaml", p)), ("loop", make_loop), ("big", make_big)];
    for (name, make) in specials {
        let p = set.join(format!("{name}.yaml"));
        make(&p).map_err(|e| format!("cannot make {}: {e}", p.display()))?;
        files.push((p, None));
    }
    Ok((set, files))
}

/// The output names `file` (anywhere in a line: `validate` indents, `plan` prints `error: `), at its
/// expected line if it has one, else as `PATH: `.
fn reported(output: &str, file: &Path, lines: &Lines) -> bool {
    let shown = file.display().to_string();
    let located = Regex::new(r"^:(\d+):\d+: ").unwrap();
    output.lines().any(|l| {
        l.match_indices(shown.as_str()).any(|(i, _)| {
            let after = &l[i + shown.len()..];
            match lines {
                None => after.starts_with(": "),
                Some(range) => located.captures(after).is_some_and(|c| c[1].parse().is_ok_and(|n: u64| range.contains(&n))),
            }
        })
    })
}

/// `faultlab validate SET` reports every broken file (each at its line), exits nonzero, and does not
/// hang on the FIFO.
fn cli_validate_broken_set() -> Result<(), Failed> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (set, files) = broken_set(root.path())?;
    let run = faultlab(&os(&[&"validate", &set]), root.path())?;
    if run.code == Some(0) {
        return Err(format!("validate exited 0 over a set of broken files:\n{}", run.describe()).into());
    }
    let missing: Vec<String> = files.iter().filter(|(f, l)| !reported(&run.both(), f, l)).map(|(f, l)| format!("{} (line {l:?})", f.display())).collect();
    if !missing.is_empty() {
        return Err(format!("validate did not report, at their lines, these files:\n  {}\n{}", missing.join("\n  "), run.describe()).into());
    }
    // Several files on the command line: each one's errors.
    let two = [&files[0].0, &files[1].0];
    let run = faultlab(&os(&[&"validate", two[0], two[1]]), root.path())?;
    if run.code == Some(0) || !files[..2].iter().all(|(f, l)| reported(&run.both(), f, l)) {
        return Err(format!("validate FILE FILE must report both files' errors and exit nonzero:\n{}", run.describe()).into());
    }
    Ok(())
}

/// `faultlab validate` over the valid fixtures (and with file arguments) exits 0.
fn cli_validate_valid_set() -> Result<(), Failed> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let set = root.path().join("set");
    std::fs::create_dir_all(set.join("manifests")).map_err(|e| e.to_string())?;
    std::fs::copy(fixtures().join("valid/manifests/web.yaml"), set.join("manifests/web.yaml")).map_err(|e| e.to_string())?;
    for src in yaml_files(&fixtures().join("valid")) {
        std::fs::copy(&src, set.join(src.file_name().unwrap())).map_err(|e| e.to_string())?;
    }
    let run = faultlab(&os(&[&"validate", &set]), root.path())?;
    if run.code != Some(0) {
        return Err(format!("validate over the valid fixtures must exit 0:\n{}", run.describe()).into());
    }
    let file = set.join("within-overflow.yaml");
    let run = faultlab(&os(&[&"validate", &file]), root.path())?;
    if run.code != Some(0) {
        return Err(format!("validate FILE (valid) must exit 0:\n{}", run.describe()).into());
    }
    Ok(())
}

/// `faultlab list` over a set with good scenarios and broken files (a FIFO among them): the good
/// scenarios first, then each broken file with its error.
fn cli_list() -> Result<(), Failed> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (set, files) = broken_set(root.path())?;
    let real = scenario::default_dir();
    for good in ["pause-missing", "configmap-missing"] {
        std::fs::copy(real.join(format!("{good}.yaml")), set.join(format!("{good}.yaml"))).map_err(|e| e.to_string())?;
    }
    let run = faultlab(&os(&[&"--scenarios", &set, &"list"]), root.path())?;
    let out = run.both();
    let lines: Vec<&str> = out.lines().collect();
    let first_broken = lines.iter().position(|l| files.iter().any(|(f, _)| l.contains(&f.display().to_string()))).unwrap_or(lines.len());
    for good in ["pause-missing", "configmap-missing"] {
        match lines.iter().position(|l| l.split_whitespace().next() == Some(good)) {
            Some(i) if i < first_broken => {}
            _ => return Err(format!("list must name the good scenario {good} before the broken files:\n{}", run.describe()).into()),
        }
    }
    let missing: Vec<String> = files.iter().filter(|(f, l)| !reported(&out, f, l)).map(|(f, _)| f.display().to_string()).collect();
    if !missing.is_empty() {
        return Err(format!("list did not name these broken files with their errors:\n  {}\n{}", missing.join("\n  "), run.describe()).into());
    }
    Ok(())
}

/// `faultlab show x`, where `x.yaml` is there but cannot be read, says why, not "no scenario named".
fn cli_show_special() -> Result<(), Failed> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let set = root.path().join("set");
    std::fs::create_dir(&set).map_err(|e| e.to_string())?;
    std::fs::copy(scenario::default_dir().join("pause-missing.yaml"), set.join("pause-missing.yaml")).map_err(|e| e.to_string())?;
    let cases: [(&str, MakeFn); 4] =
        [("fifo", make_fifo), ("directory", |p| std::fs::create_dir(p)), ("dangling", |p| symlink("nowhere.yaml", p)), ("loop", make_loop)];
    let mut wrong = Vec::new();
    for (name, make) in cases {
        let p = set.join(format!("{name}.yaml"));
        make(&p).map_err(|e| format!("cannot make {}: {e}", p.display()))?;
        let run = faultlab(&os(&[&"--scenarios", &set, &"show", &name]), root.path())?;
        if run.code == Some(0) || run.both().contains("no scenario named") || !run.both().contains(&p.display().to_string()) {
            wrong.push(format!("show {name}:\n{}", run.describe()));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("show must name the file it cannot read and say why:\n{}", wrong.join("\n")).into())
    }
}

/// `faultlab plan` of a scenario with `within: 5000000000000000h` (it panicked adding it to an
/// instant): refused with the line, no panic.
fn cli_plan_huge_duration() -> Result<(), Failed> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let set = root.path().join("set");
    std::fs::create_dir(&set).map_err(|e| e.to_string())?;
    let file = set.join("within-instant-overflow.yaml");
    std::fs::copy(fixtures().join("invalid/within-instant-overflow.yaml"), &file).map_err(|e| e.to_string())?;
    let run = faultlab(&os(&[&"--scenarios", &set, &"plan", &"within-instant-overflow", &"--provider", &"kind", &"--arch", &"amd64"]), root.path())?;
    if run.code == Some(0) || !reported(&run.both(), &file, &Some(82..=82)) {
        return Err(format!("plan must refuse the scenario at {}:82:\n{}", file.display(), run.describe()).into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// The property test.

mod property {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

    /// Values that break arithmetic, parsers and allocators.
    const EXTREMES: &[&str] = &[
        "0",
        "-1",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999",
        "9223372036854775808",
        "2147483648",
        "1e308",
        "-1e308",
        ".nan",
        ".inf",
        "0x7fffffffffffffff",
        "5124095576030432",
        "0.0000001",
    ];

    /// What a scalar is replaced with.
    #[derive(Clone, Debug)]
    enum Filler {
        Empty,
        Blank,
        Null,
        Long(usize),
        Extreme(&'static str),
        Alias,
        Anchor,
        Text(String),
    }

    #[derive(Clone, Debug)]
    enum Mutation {
        DeleteLine(Index),
        DuplicateLine(Index),
        SwapLines(Index, Index),
        /// The n-th run of digits in the file, replaced (`2m` → `18446744073709551615m`).
        Number(Index, &'static str),
        /// The value after a line's `key: `, or the whole line's content if it has none.
        Scalar(Index, Filler),
        /// A billion-laughs bomb as a line of its own at that line's indentation (in a manifest it is
        /// decoded; in the scenario it is an unknown key or a type error).
        AliasBomb(Index, usize),
        /// `key: [[[[...]]]]` (closed or not), or `{a: {a: ...}}`.
        Nest(Index, usize, bool, bool),
        Tab(Index, Index),
        Bytes(Index, Index, Vec<u8>),
        Truncate(Index),
    }

    fn filler() -> impl Strategy<Value = Filler> {
        prop_oneof![
            Just(Filler::Empty),
            Just(Filler::Blank),
            Just(Filler::Null),
            prop_oneof![1usize..300, Just(70_000usize), Just(1_100_000usize)].prop_map(Filler::Long),
            proptest::sample::select(EXTREMES).prop_map(Filler::Extreme),
            Just(Filler::Alias),
            Just(Filler::Anchor),
            "[ -~]{0,40}".prop_map(Filler::Text),
        ]
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            3 => any::<Index>().prop_map(Mutation::DeleteLine),
            2 => any::<Index>().prop_map(Mutation::DuplicateLine),
            2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
            4 => (any::<Index>(), proptest::sample::select(EXTREMES)).prop_map(|(i, v)| Mutation::Number(i, v)),
            4 => (any::<Index>(), filler()).prop_map(|(i, f)| Mutation::Scalar(i, f)),
            1 => (any::<Index>(), 2usize..12).prop_map(|(i, n)| Mutation::AliasBomb(i, n)),
            1 => (any::<Index>(), prop_oneof![1usize..100, Just(10_000usize), Just(200_000usize)], any::<bool>(), any::<bool>())
                .prop_map(|(i, n, seq, closed)| Mutation::Nest(i, n, seq, closed)),
            1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Tab(a, b)),
            1 => (any::<Index>(), any::<Index>(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(a, b, v)| Mutation::Bytes(a, b, v)),
            1 => any::<Index>().prop_map(Mutation::Truncate),
        ]
    }

    fn indent_of(line: &[u8]) -> usize {
        line.iter().take_while(|b| **b == b' ').count()
    }

    /// Byte offset where a line's value starts (after `key: ` or `- `), if it has one.
    fn value_start(line: &[u8]) -> Option<usize> {
        let s = String::from_utf8_lossy(line);
        let t = s.trim_start();
        let lead = s.len() - t.len();
        let t2 = t.strip_prefix("- ").map(|r| (r, lead + 2)).unwrap_or((t, lead));
        match t2.0.find(": ") {
            Some(i) if !t2.0[..i].contains(['"', '\'', ' ']) => Some(t2.1 + i + 2),
            _ if t.starts_with("- ") => Some(lead + 2),
            _ => None,
        }
    }

    fn bomb(n: usize) -> String {
        let names: Vec<String> = (0..n).map(|i| format!("l{i}")).collect();
        let mut parts = vec![format!("&{} [lol, lol, lol, lol, lol, lol, lol, lol, lol]", names[0])];
        for i in 1..n {
            parts.push(format!("&{} [{}]", names[i], vec![format!("*{}", names[i - 1]); 9].join(", ")));
        }
        format!("[{}]", parts.join(", "))
    }

    fn apply(lines: &mut Vec<Vec<u8>>, m: &Mutation) {
        if lines.is_empty() {
            lines.push(Vec::new());
        }
        let n = lines.len();
        match m {
            Mutation::DeleteLine(i) => {
                lines.remove(i.index(n));
            }
            Mutation::DuplicateLine(i) => {
                let l = lines[i.index(n)].clone();
                lines.insert(i.index(n), l);
            }
            Mutation::SwapLines(a, b) => lines.swap(a.index(n), b.index(n)),
            Mutation::Number(i, v) => {
                let text = lines.concat_lines();
                let re = regex::bytes::Regex::new(r"\d+").unwrap();
                let found: Vec<_> = re.find_iter(&text).collect();
                if found.is_empty() {
                    return;
                }
                let f = &found[i.index(found.len())];
                let mut out = text[..f.start()].to_vec();
                out.extend_from_slice(v.as_bytes());
                out.extend_from_slice(&text[f.end()..]);
                *lines = split_lines(&out);
            }
            Mutation::Scalar(i, f) => {
                let line = &mut lines[i.index(n)];
                let at = value_start(line).unwrap_or(indent_of(line));
                let value = match f {
                    Filler::Empty => "''".to_string(),
                    Filler::Blank => "'   '".to_string(),
                    Filler::Null => "~".to_string(),
                    Filler::Long(k) => "x".repeat(*k),
                    Filler::Extreme(v) => v.to_string(),
                    Filler::Alias => "*a".to_string(),
                    Filler::Anchor => "&a x".to_string(),
                    Filler::Text(t) => t.clone(),
                };
                line.truncate(at.min(line.len()));
                line.extend_from_slice(value.as_bytes());
            }
            Mutation::AliasBomb(i, k) => {
                let at = i.index(n);
                let indent = indent_of(&lines[at]);
                let bomb = format!("{}lol: {}", " ".repeat(indent), bomb(*k));
                lines.insert(at, bomb.into_bytes());
            }
            Mutation::Nest(i, k, seq, closed) => {
                let line = &mut lines[i.index(n)];
                let at = value_start(line).unwrap_or(indent_of(line));
                line.truncate(at.min(line.len()));
                let (open, close) = if *seq { ("[", "]") } else { ("{a: ", "}") };
                line.extend_from_slice(open.repeat(*k).as_bytes());
                if *closed {
                    line.extend_from_slice(close.repeat(*k).as_bytes());
                }
            }
            Mutation::Tab(i, j) => {
                let line = &mut lines[i.index(n)];
                let at = j.index(line.len() + 1);
                line.insert(at, b'\t');
            }
            Mutation::Bytes(i, j, bytes) => {
                let line = &mut lines[i.index(n)];
                let at = j.index(line.len() + 1);
                line.splice(at..at, bytes.iter().copied());
            }
            Mutation::Truncate(i) => {
                let text = lines.concat_lines();
                let at = i.index(text.len() + 1);
                *lines = split_lines(&text[..at]);
            }
        }
    }

    trait ConcatLines {
        fn concat_lines(&self) -> Vec<u8>;
    }
    impl ConcatLines for Vec<Vec<u8>> {
        fn concat_lines(&self) -> Vec<u8> {
            self.join(&b'\n')
        }
    }

    fn split_lines(text: &[u8]) -> Vec<Vec<u8>> {
        text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
    }

    /// The real scenarios: (file name, bytes).
    fn originals() -> Vec<(String, Vec<u8>)> {
        let dir = scenario::default_dir();
        let files = yaml_files(&dir);
        assert!(files.len() >= 8, "the real scenarios are in {}", dir.display());
        files.iter().map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(p).unwrap())).collect()
    }

    pub fn mutated_scenarios() -> Result<(), Failed> {
        let originals = originals();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
        let config = Config { cases, failure_persistence: None, max_shrink_iters: 2_000, max_shrink_time: 60_000, ..Config::default() };
        let mut runner = TestRunner::new(config);
        let strategy = (0..originals.len(), proptest::collection::vec(mutation(), 1..4));
        let started = Instant::now();
        let count = std::cell::Cell::new(0u32);
        let outcome = runner.run(&strategy, |(which, mutations)| {
            count.set(count.get() + 1);
            let (name, text) = &originals[which];
            let mut lines = split_lines(text);
            for m in &mutations {
                apply(&mut lines, m);
            }
            let mutant = lines.concat_lines();
            let path = dir.path().join(name);
            std::fs::write(&path, &mutant).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let outcome = load(&path).map_err(TestCaseError::fail)?;
            if let Err(err) = outcome {
                let input = String::from_utf8_lossy(&mutant);
                check_all_lines(&err, &[path.display().to_string()], &input, Some(input.lines().count())).map_err(TestCaseError::fail)?;
            }
            Ok(())
        });
        eprintln!("property/mutated-scenarios: {} mutants in {:.1?}", count.get(), started.elapsed());
        match outcome {
            Ok(()) => Ok(()),
            Err(TestError::Abort(why)) => Err(format!("aborted: {why}").into()),
            Err(TestError::Fail(why, (which, mutations))) => {
                let (name, text) = &originals[which];
                let mut lines = split_lines(text);
                for m in &mutations {
                    apply(&mut lines, m);
                }
                let mutant = lines.concat_lines();
                // In a directory of its own, made fresh and kept: a fixed name under /tmp could be a
                // link another user planted.
                let saved = tempfile::Builder::new().prefix("faultlab-hostile-").tempdir().map(|d| d.keep().join(name));
                let saved = match saved.and_then(|p| std::fs::write(&p, &mutant).map(|()| p)) {
                    Ok(p) => p.display().to_string(),
                    Err(e) => format!("(not saved: {e})"),
                };
                Err(format!(
                    "scenarios/{name} with {mutations:?} (the minimal mutant is saved as {saved}; `PROPTEST_RNG_SEED` repeats a run):\n{why}"
                )
                .into())
            }
        }
    }
}
