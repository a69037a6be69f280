//! Every scenario's plan, whole, per provider: what `faultlab plan NAME --provider existing` (on the
//! test bed's layout, from the description fixture) and `--provider kind --arch amd64` print. A plan
//! runs the run's own code against scripted answers (each fault's plan answers), so a change to a
//! fault's commands, its undo or its waits shows here as a reviewed difference, not as a substring
//! check that still passes. Random cluster names and this machine's state directory are replaced by
//! placeholders. One trial per scenario and provider (libtest-mimic); snapshots in
//! `tests/snapshots/plans__<scenario>-<provider>.snap`, reviewed like any insta snapshot.

use std::path::Path;
use std::process::ExitCode;

use faultlab::provider::kind::Arch;
use faultlab::scenario;
use faultlab::suite::{self, ProviderChoice};
use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let all = scenario::load_all(&scenario::default_dir()).unwrap_or_else(|e| panic!("{e}"));
    let mut trials = Vec::new();
    for loaded in all.into_values() {
        for provider in ["existing", "kind"] {
            let loaded = loaded.clone();
            trials.push(Trial::test(format!("{}-{provider}", loaded.name()), move || check(&loaded, provider)));
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}

fn check(loaded: &scenario::Loaded, provider: &str) -> Result<(), Failed> {
    let description = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testbed/valid.yaml");
    let choice = match provider {
        "existing" => ProviderChoice::Existing { description, target: Default::default() },
        _ => ProviderChoice::Kind { arch: Arch::Amd64, keep: false, node_image: None, cluster: None },
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let text = rt.block_on(suite::plan(loaded, &choice)).map_err(|e| e.to_string())?;
    let state = faultlab::journal::state_dir().display().to_string();
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(true);
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.add_filter(&regex_escape(&state), "<state>");
    settings.add_filter(&regex_escape(env!("CARGO_MANIFEST_DIR")), "<harness>");
    settings.add_filter(r"faultlab-([a-z0-9-]+?)-[b-df-hj-np-tv-z2-9]{5}\b", "faultlab-$1-<suffix>");
    settings.add_filter(r"faultlab\\-([a-z0-9\\-]+?)\\-[b-df-hj-np-tv-z2-9]{5}\\-", "faultlab\\-$1\\-<suffix>\\-");
    settings.set_description(format!("faultlab plan {} --provider {provider}", loaded.name()));
    let name = format!("{}-{provider}", loaded.name());
    // insta panics on a difference; the trial reports it.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| settings.bind(|| insta::assert_snapshot!(name.as_str(), &text)))).map_err(|_| Failed::from(format!("the plan of {name} differs from its snapshot (see above)")))
}

fn regex_escape(s: &str) -> String {
    regex::escape(s)
}
