//! `faultlab plan`: every command and API call a run would make, run against scripted answers.

use std::path::Path;

use anyhow::Result;
use faultlab::suite;

use crate::cli::out::emit;
use crate::cli::select::{choose, targets};
use crate::{Output, ProviderOpts, Target};

pub async fn plan(dir: &Path, target: &Target, provider: &ProviderOpts, output: Output) -> Result<()> {
    let mut broken = 0;
    let chosen = targets(dir, target, &mut broken)?;
    let choice = choose(provider, false)?;
    let mut plans = Vec::new();
    for s in chosen {
        let plan = suite::plan(&s, &choice).await?;
        match output {
            Output::Text => out!("{plan}"),
            _ => plans.push(serde_json::json!({"scenario": s.name(), "provider": choice.name(), "lines": plan.lines().collect::<Vec<_>>()})),
        }
    }
    emit(output, &plans)?;
    if broken > 0 {
        usage!("{broken} scenario file(s) of {} are broken (above) and were not planned", dir.display());
    }
    Ok(())
}
