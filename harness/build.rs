//! The binary carries faultlab's own scenarios, snapshots and kind configs (src/home.rs, include_dir),
//! so it is rebuilt whenever one of them changes.

fn main() {
    for dir in ["../scenarios", "../expectations", "../kind-configs"] {
        println!("cargo:rerun-if-changed={dir}");
    }
}
