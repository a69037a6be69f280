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
