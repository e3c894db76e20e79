//! `lynx shortlist`: a buyer's ranking from published results.

use crate::args::ShortlistArgs;

pub fn run(args: ShortlistArgs) -> anyhow::Result<()> {
    let trusted = super::trusted_keys(args.trust)?;
    let request = lynx_schema::shortlist::Request {
        model: args.workload.model,
        isl: args.workload.isl,
        osl: args.workload.osl,
        ttft_p99_s: args.ttft_p99,
        tpot_p99_s: args.tpot_p99,
        prices: args.price,
        utilisation: args.utilisation,
        precision: args.precision,
    };
    let listed: Vec<_> = super::listed(&args.dirs, &trusted)?
        .into_iter()
        .map(|(file, verdict)| (file.display().to_string(), verdict.map(|(result, signers)| (result, signers.key_id))))
        .collect();
    unmeasured_model(&request.model, &listed)?;
    let list = lynx_analysis::shortlist::rank(listed, &request);
    // A price that names no ranked device (a typo, say) would leave that device unpriced and
    // ranked by throughput instead, with nothing to say why.
    for (device, usd) in &request.prices {
        let slug = lynx_schema::device::slug(device);
        if !list.ranked.iter().any(|entry| entry.device_slug == slug) {
            let mut ranked: Vec<&str> = list.ranked.iter().map(|entry| entry.device_slug.as_str()).collect();
            ranked.sort_unstable();
            ranked.dedup();
            let among =
                if ranked.is_empty() { "none is ranked".to_owned() } else { format!("they are {}", ranked.join(", ")) };
            esayln!(
                "lynx: warning: --price {}={usd} names no device among the ranked results ({among})",
                lynx_report::escape::terminal_text(device, 100)
            );
        }
    }
    say!("{}", lynx_report::listing::shortlist(&list, args.format.into())?);
    Ok(())
}

/// A model that none of the results here measured, where every one verified and some measured
/// others, is a name the buyer got wrong (a typo, a catalogue name where the results carry an
/// imported one): one line naming the models they did measure, not an empty ranking that exits
/// 0. Where a result did not verify, it may be of that model: the listing says why it is not
/// ranked.
fn unmeasured_model(model: &str, listed: &[lynx_analysis::shortlist::Listed]) -> Result<(), crate::BadInput> {
    let mut measured: Vec<&str> = listed
        .iter()
        .filter_map(|(_, verdict)| verdict.as_ref().ok())
        .map(|(r, _)| r.config.model.name.as_str())
        .collect();
    if measured.is_empty() || measured.contains(&model) || listed.iter().any(|(_, verdict)| verdict.is_err()) {
        return Ok(());
    }
    measured.sort_unstable();
    measured.dedup();
    let shown: Vec<String> = measured.iter().take(20).map(|m| lynx_report::escape::terminal_text(m, 100)).collect();
    let more = if measured.len() > shown.len() {
        format!(" and {} more", measured.len() - shown.len())
    } else {
        String::new()
    };
    Err(crate::BadInput(format!(
        "--workload {}: no result here measured that model (they measured {}{more})",
        lynx_report::escape::terminal_text(model, 100),
        shown.join(", ")
    )))
}
