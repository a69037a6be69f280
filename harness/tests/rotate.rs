//! `--all --rotate K`: the name order, started at the K-th scenario (K modulo their number), wrapped.

fn order(rotate: &str) -> Vec<String> {
    let out = duct::cmd!(env!("CARGO_BIN_EXE_faultlab"), "plan", "--all", "--rotate", rotate, "--provider", "kind").stdout_capture().stderr_null().run().unwrap();
    String::from_utf8(out.stdout).unwrap().lines().filter_map(|l| l.strip_prefix("## ")).map(|l| l.split(' ').next().unwrap().to_string()).collect()
}

#[test]
fn rotate_starts_further_on_and_wraps_around() {
    let names = order("0");
    assert!(names.len() > 3 && names.windows(2).all(|w| w[0] < w[1]), "name order: {names:?}");
    let n = names.len();
    let rotated = order("2");
    assert_eq!(rotated[..n - 2], names[2..]);
    assert_eq!(rotated[n - 2..], names[..2]);
    assert_eq!(order(&(n + 2).to_string()), rotated, "K is taken modulo the number of scenarios");
}

fn plan(args: &[&str]) -> (Vec<String>, String, bool) {
    let out = duct::cmd(env!("CARGO_BIN_EXE_faultlab"), [&["plan"], args, &["--provider", "kind"]].concat()).stdout_capture().stderr_capture().unchecked().run().unwrap();
    let names = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.strip_prefix("## ")).map(|l| l.split(' ').next().unwrap().to_string()).collect();
    (names, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.success())
}

#[test]
fn several_names_run_in_the_order_given_once_each() {
    let (names, _, ok) = plan(&["disk-full", "cpu-count", "disk-full"]);
    assert!(ok);
    assert_eq!(names, ["disk-full", "cpu-count"]);
    let (_, err, ok) = plan(&["cpu-count", "no-such-scenario"]);
    assert!(!ok && err.contains("no-such-scenario"), "{err}");
    let (_, err, ok) = plan(&["cpu-count", "--all"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}
