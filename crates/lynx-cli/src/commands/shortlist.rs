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
    };
    let listed = super::listed(&args.dirs, &trusted)?
        .into_iter()
        .map(|(file, verdict)| (file.display().to_string(), verdict.map(|(result, signers)| (result, signers.key_id))))
        .collect();
    let list = lynx_analysis::shortlist::rank(listed, &request);
    print!("{}", lynx_report::listing::shortlist(&list, args.format.into())?);
    Ok(())
}
