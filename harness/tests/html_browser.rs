//! The HTML report in a real browser: a page rendered from a recorded run (real JSON of the test bed,
//! `fixtures/reports/`) is loaded in headless Chromium with a probe script appended, which reads the
//! laid-out DOM: the summary's rows, the timeline's marks, their hover texts, and whether every mark
//! lies inside its SVG. A screenshot is saved to `target/html-browser/`.
//!
//! Reported ignored, with the reason, where no Chromium is installed (Debian: `chromium`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use faultlab::report::SuiteReport;
use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let browser = ["chromium", "chromium-browser"].into_iter().find(|b| on_path(b));
    let mut trials = Vec::new();
    for fixture in fixtures() {
        let name = fixture.file_stem().unwrap().to_string_lossy().into_owned();
        let trial = match browser {
            Some(b) => Trial::test(name, move || in_browser(b, &fixture)),
            None => Trial::test(name, || Ok(())).with_kind("no Chromium").with_ignored_flag(true),
        };
        trials.push(trial);
    }
    if browser.is_none() {
        eprintln!("html browser trials ignored: no chromium on PATH (Debian: apt-get install chromium)");
    }
    libtest_mimic::run(&args, trials).exit_code()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    files.sort();
    files
}

/// Appended to the page under test only: what the browser laid out, as JSON in `#faultlab-probe`.
const PROBE: &str = r#"<script>
(() => {
  const inside = (el) => {
    const svg = el.closest('svg').getBoundingClientRect();
    const r = el.getBoundingClientRect();
    return r.width >= 0 && r.left >= svg.left - 0.5 && r.right <= svg.right + 0.5 && r.top >= svg.top - 0.5 && r.bottom <= svg.bottom + 0.5;
  };
  const marks = [...document.querySelectorAll('svg.timeline g.event, svg.timeline g.wait, svg.timeline rect.phase, svg.timeline g.pod-state')];
  const out = {
    rows: [...document.querySelectorAll('tr.scenario')].map(r => [r.dataset.scenario, r.dataset.status, r.dataset.snapshot]),
    sections: document.querySelectorAll('section.run').length,
    svgs: document.querySelectorAll('svg.timeline').length,
    events: [...document.querySelectorAll('svg.timeline g.event')].map(g => [g.dataset.reason, g.querySelector('title').textContent]),
    phases: [...document.querySelectorAll('svg.timeline rect.phase')].map(r => r.dataset.phase),
    pods: document.querySelectorAll('svg.timeline g.pod-state').length,
    outside: marks.filter(m => !inside(m)).map(m => m.outerHTML.slice(0, 120)),
    svgNamespace: [...document.querySelectorAll('svg.timeline')].every(s => s.namespaceURI === 'http://www.w3.org/2000/svg'),
  };
  const pre = document.createElement('pre');
  pre.id = 'faultlab-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

fn chromium(browser: &str, args: &[&str]) -> Result<std::process::Output, Failed> {
    let out = Command::new("timeout")
        .args(["-k", "5", "90", browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"])
        .args(args)
        .output()?;
    if !out.status.success() {
        return Err(format!("{browser} {}: {} {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(out)
}

fn in_browser(browser: &str, fixture: &Path) -> Result<(), Failed> {
    let report: SuiteReport = serde_json::from_str(&std::fs::read_to_string(fixture)?)?;
    let page = faultlab::html::suite_page(&report, "faultlab report (browser test)");
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/html-browser");
    std::fs::create_dir_all(&out_dir)?;
    let stem = fixture.file_stem().unwrap().to_string_lossy().into_owned();
    let html = out_dir.join(format!("{stem}.html"));
    std::fs::write(&html, &page)?;
    let probed = out_dir.join(format!("{stem}-probe.html"));
    std::fs::write(&probed, page.replace("</body>", &format!("{PROBE}</body>")))?;

    let dom = chromium(browser, &["--dump-dom", &format!("file://{}", probed.display())])?;
    let dom = String::from_utf8_lossy(&dom.stdout);
    let start = dom.find("<pre id=\"faultlab-probe\">").ok_or("the probe wrote nothing: did the page load?")? + "<pre id=\"faultlab-probe\">".len();
    let end = dom[start..].find("</pre>").ok_or("the probe's output is cut")? + start;
    let text = dom[start..end].replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    let seen: serde_json::Value = serde_json::from_str(&text)?;

    let expected_rows: Vec<serde_json::Value> =
        report.scenarios.iter().map(|s| serde_json::json!([s.scenario, serde_json::to_value(s.status).unwrap(), s.snapshot.status().map_or("", |x| x.as_str())])).collect();
    check(seen["rows"] == serde_json::Value::from(expected_rows.clone()), format!("summary rows {} (expected {expected_rows:?})", seen["rows"]))?;
    check(seen["sections"] == report.scenarios.len(), format!("sections {}", seen["sections"]))?;
    check(seen["svgNamespace"] == true, "the timelines are SVG elements".into())?;
    let timelines: Vec<_> = report.scenarios.iter().map(|s| &s.timeline).filter(|t| !t.is_empty()).collect();
    check(seen["svgs"] == timelines.len(), format!("{} timelines drawn, {} recorded", seen["svgs"], timelines.len()))?;
    let events: Vec<&faultlab::report::TimedEvent> = timelines.iter().flat_map(|t| &t.events).collect();
    let marks = seen["events"].as_array().cloned().unwrap_or_default();
    check(marks.len() == events.len(), format!("{} event marks for {} recorded events", marks.len(), events.len()))?;
    for (mark, event) in marks.iter().zip(&events) {
        let hover = mark[1].as_str().unwrap_or_default();
        check(mark[0] == event.reason.as_str() && hover.contains(&event.message), format!("event {} {:?}: the mark's hover text is {hover:?}", event.reason, event.message))?;
    }
    let phases = timelines.iter().map(|t| t.phases.len()).sum::<usize>();
    check(seen["phases"].as_array().map_or(0, Vec::len) == phases, format!("phase bands {} for {phases} phases", seen["phases"]))?;
    let pods = timelines.iter().map(|t| t.pods.len()).sum::<usize>();
    check(seen["pods"].as_u64().is_some_and(|n| n > 0 || pods == 0), format!("pod states drawn: {}", seen["pods"]))?;
    check(seen["outside"].as_array().is_some_and(Vec::is_empty), format!("marks drawn outside their timeline: {}", seen["outside"]))?;

    let png = out_dir.join(format!("{stem}.png"));
    chromium(browser, &["--window-size=1200,1400", &format!("--screenshot={}", png.display()), &format!("file://{}", html.display())])?;
    let size = std::fs::metadata(&png)?.len();
    check(size > 10_000, format!("the screenshot {} is {size} bytes: blank?", png.display()))?;
    eprintln!("{stem}: {} rows, {} event marks, {phases} phase bands; screenshot {}", report.scenarios.len(), marks.len(), png.display());
    Ok(())
}

fn check(ok: bool, what: String) -> Result<(), Failed> {
    if ok { Ok(()) } else { Err(what.into()) }
}
