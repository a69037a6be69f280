//! Which scenarios a command works on, and on which platform: `faultlab plan` and `run`'s selection
//! ([`targets`]) and provider flags ([`choose`]).

use anyhow::{bail, Context, Result};
use faultlab::provider::kind::Arch;
use faultlab::scenario::{self, Loaded};
use faultlab::suite::{self, ProviderChoice};

use crate::cli::out::indent;
use crate::{ProviderArg, ProviderOpts, Target};

/// The platform the provider flags name (`--provider`, `--cluster`, `--context`, `--kubeconfig`,
/// `--description`, `--arch`, `--node-image`); `keep`: keep a kind cluster faultlab made.
pub fn choose(opts: &ProviderOpts, keep: bool) -> Result<ProviderChoice> {
    let arch = match opts.arch {
        Some(a) => a,
        None => Arch::host().context("this host's architecture has no kind node image; pass --arch")?,
    };
    let target = faultlab::provider::existing::KubeTarget { kubeconfig: opts.kubeconfig.clone(), context: opts.context.clone() };
    if let Some(k) = target.kubeconfig.as_ref().filter(|k| !k.is_file()) {
        usage!("--kubeconfig {}: no such file", k.display());
    }
    // A kind cluster of the user's: --cluster NAME, or --context kind-NAME.
    let named = opts.cluster.clone().or_else(|| opts.context.as_deref().and_then(|c| c.strip_prefix("kind-")).map(String::from));
    let kind = || -> Result<ProviderChoice> {
        if target.kubeconfig.is_some() || (target.context.is_some() && named.is_none()) {
            usage!("on kind, faultlab makes the cluster it runs on, or runs on one of yours named by --cluster NAME (or --context kind-NAME), whose kubeconfig kind gives; --kubeconfig and other contexts are for --provider existing");
        }
        Ok(ProviderChoice::Kind { arch, keep, node_image: opts.node_image.clone(), cluster: named.clone() })
    };
    Ok(match opts.provider {
        ProviderArg::Kind => kind()?,
        ProviderArg::Existing if opts.cluster.is_some() => usage!("--cluster names a kind cluster: --provider kind"),
        ProviderArg::Existing => ProviderChoice::Existing { description: opts.description.clone().unwrap_or_else(faultlab::testbed::path), target },
        ProviderArg::Auto if named.is_some() && opts.description.is_none() => kind()?,
        ProviderArg::Auto => match &opts.description {
            Some(d) => ProviderChoice::Existing { description: d.clone(), target },
            None => match suite::detect() {
                Ok(ProviderChoice::Kind { .. }) => kind()?,
                Ok(ProviderChoice::Existing { description, .. }) => ProviderChoice::Existing { description, target },
                Err(reason) => bail!("{reason}; pass --provider kind or --provider existing --description FILE"),
            },
        },
    })
}

/// The scenarios to plan or run. With --all, the good ones of the set; the broken files are printed
/// (every error) and make the command fail once the good ones are done.
pub fn targets(dir: &std::path::Path, target: &Target, broken: &mut usize) -> Result<Vec<Loaded>> {
    if target.all {
        let set = scenario::load_set(dir)?;
        for (path, e) in &set.broken {
            eprintln!("error: {} is broken and is left out:\n{}", path.display(), indent(&e.to_string()));
        }
        *broken = set.broken.len();
        if set.good.is_empty() && *broken == 0 {
            usage!("{}: no scenario files (*.yaml, *.yml) in this directory", dir.display());
        }
        if set.good.is_empty() && *broken > 0 {
            usage!("no scenario of {} loads", dir.display());
        }
        for name in &target.skip {
            if !set.good.contains_key(name) && !set.broken.iter().any(|(p, _)| p.file_stem().is_some_and(|s| s == name.as_str())) {
                usage!("--skip {name}: no scenario of {} has that name (see `faultlab list`)", dir.display());
            }
        }
        let kept: Vec<Loaded> = set.good.into_iter().filter(|(name, _)| !target.skip.contains(name)).map(|(_, l)| l).collect();
        let mut chosen = match target.shard {
            Some(shard) => shard.take(kept),
            None => kept,
        };
        if let (Some(k), false) = (target.rotate, chosen.is_empty()) {
            let k = k % chosen.len();
            chosen.rotate_left(k);
        }
        return Ok(chosen);
    }
    if target.names.is_empty() {
        usage!("name a scenario or pass --all (see `faultlab list`)");
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut chosen = Vec::new();
    for name in &target.names {
        if seen.insert(name.as_str()) {
            chosen.push(scenario::find(dir, name)?);
        }
    }
    Ok(chosen)
}
