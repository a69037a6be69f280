//! What faultlab prints about itself and writes from reports, touching no cluster: `faultlab schema`,
//! `completions`, `man`, `report`; and the hidden tools the test bed's scripts call (`image pack`,
//! `testbed describe`, `nodes`, `config`, `platform`, `initrd-modules`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use faultlab::report::SuiteReport;
use faultlab::scenario;

use crate::cli::out::Usage;
use crate::{Cli, ImageCommand, TestbedCommand};

/// `faultlab schema [--report]`: the scenario format's JSON Schema, or the report's.
pub fn schema(report: bool) -> Result<()> {
    match report {
        false => outp!("{}", scenario::json_schema()),
        true => outp!("{}", SuiteReport::json_schema()),
    }
    Ok(())
}

/// `faultlab completions SHELL`.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "faultlab", &mut buf);
    outp!("{}", String::from_utf8_lossy(&buf));
    Ok(())
}

/// `faultlab man`: the manual page (roff).
pub fn man() -> Result<()> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut buf).context("rendering the manual page")?;
    outp!("{}", String::from_utf8_lossy(&buf));
    Ok(())
}

/// `faultlab report --html DIR JSON...`: one HTML page of several JSON reports.
pub fn report(inputs: &[PathBuf], html: &Path, title: &str) -> Result<()> {
    let mut suite = SuiteReport::new(0.0, Vec::new());
    for path in inputs {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let part: SuiteReport = serde_json::from_str(&text).with_context(|| format!("{}: not a faultlab JSON report (`faultlab run --output json`)", path.display()))?;
        suite.wall_seconds += part.wall_seconds;
        suite.scenarios.extend(part.scenarios);
    }
    let page = write_html(html, &suite, title)?;
    eprintln!("wrote {}", page.display());
    Ok(())
}

/// Write `suite`'s HTML report to DIR/index.html; its path.
pub fn write_html(dir: &Path, suite: &SuiteReport, title: &str) -> Result<PathBuf> {
    let page = dir.join("index.html");
    faultlab::atomic::write(&page, faultlab::html::suite_page(suite, title).as_bytes()).context("--html")?;
    Ok(page)
}

/// `faultlab image pack`: a root file system as a docker-save tarball (internal).
pub fn image(command: ImageCommand) -> Result<()> {
    let ImageCommand::Pack { rootfs, reference, arch, env, entrypoint, cmd, workdir, created_by, out } = command;
    let arch = arch.unwrap_or_else(|| faultlab::image::host_arch().to_string());
    let config = faultlab::image::ImageConfig { reference, arch, env, entrypoint, cmd, workdir, created_by };
    faultlab::image::pack(&rootfs, &config, &out).with_context(|| format!("packing {} into {}", rootfs.display(), out.display()))?;
    Ok(())
}

/// `faultlab testbed ...`: what the test bed's scripts have faultlab write or compute (internal).
pub fn testbed(command: TestbedCommand) -> Result<()> {
    use faultlab::testbed::{initrd, nodes};
    match command {
        TestbedCommand::Describe { facts, out } => describe(&facts, out)?,
        TestbedCommand::Nodes { index: None } => outp!("{}", nodes::table()),
        TestbedCommand::Nodes { index: Some(k) } => out!("{}", nodes::TestbedNode::of(k).map_err(|e| Usage(e.to_string()))?.line()),
        TestbedCommand::Config { file, node } => outp!("{}", node.render(file).map_err(|e| Usage(e.to_string()))?),
        TestbedCommand::Platform { facts } => out!("{}", facts.name().map_err(|e| Usage(e.to_string()))?),
        TestbedCommand::CpuProfile { every, json, command } => {
            if !(every > 0.0 && every <= 60.0) {
                usage!("--every {every}: the seconds between two samples are more than 0 and at most 60");
            }
            let (status, profile) = faultlab::testbed::cpu::profile_command(&command, std::time::Duration::from_secs_f64(every)).with_context(|| format!("running {}", faultlab::cmd::shell_join(&command)))?;
            eprint!("{}", profile.render());
            if let Some(path) = json {
                faultlab::atomic::write(&path, format!("{:#}\n", profile.json()).as_bytes()).with_context(|| format!("writing {}", path.display()))?;
            }
            use std::os::unix::process::ExitStatusExt;
            let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            crate::cli::out::exit_verdict(code.clamp(0, 255) as u8);
        }
        TestbedCommand::InitrdModules { dir, modules } => {
            for path in initrd::load_order_in(&dir, &modules).context("testbed initrd-modules")? {
                out!("{path}");
            }
        }
    }
    Ok(())
}

/// `faultlab testbed describe`: the test bed's description, from what `ci/testbed/up` made.
fn describe(facts: &faultlab::testbed::Facts, out: Option<PathBuf>) -> Result<()> {
    let text = facts.testbed().context("testbed describe")?.to_yaml();
    match out {
        None => outp!("{text}"),
        Some(path) if std::fs::read_to_string(&path).is_ok_and(|old| old == text) => {}
        Some(path) => {
            faultlab::atomic::write(&path, text.as_bytes()).context("testbed describe --out")?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
