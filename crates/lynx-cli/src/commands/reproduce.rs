//! `lynx reproduce`: a published result's configuration run on this node, and the ratio of
//! every figure.

use crate::args::ReproduceArgs;
use crate::{output, BadInput};
use lynx_runner::binding::{self, CpuChoice};
use lynx_runner::{devices, libtorch, Plan};
use lynx_schema::derived::PriceInputs;
use lynx_schema::result::{CpuBinding, Reproduces, WeightsRecord};
use lynx_schema::value::Finite;

pub fn run(args: ReproduceArgs) -> anyhow::Result<()> {
    let trusted = super::trusted_keys(args.trust)?;
    let published = &args.published;
    let verified = super::verified(published, &trusted)?;
    let (original, digest, publisher) = (verified.result, verified.envelope_sha256, verified.key_id);
    // A signed suite is held to exactly the checks a suite file is: a signature says who
    // published it, not that it can be run.
    let origin = format!("the suite of {}", published.display());
    original.config.suite.validate(&origin).map_err(|e| BadInput(e.to_string()))?;
    original
        .config
        .model
        .validate(&format!("the model of {}", published.display()))
        .map_err(|e| BadInput(e.to_string()))?;
    // A plan reads no key: it signs nothing.
    let signing_key = if args.plan { None } else { super::signing_key(&args.signing)? };
    let host = lynx_runner::host_record();
    let device = match args.device {
        Some(name) => devices::find(name, &host)?,
        None => devices::find(original.device.device, &host).unwrap_or_else(|_| devices::best(&host)),
    };
    if let WeightsRecord::Checkpoint { dir, .. } = &original.config.weights {
        if args.weights.is_none() {
            return Err(BadInput(format!(
                "the published run read its weights from a checkpoint ({dir}); give the same checkpoint with --weights"
            ))
            .into());
        }
    }
    // Bound before anything is measured or said: this process starts again there. A published
    // GPU-local binding is taken to this node's GPU (a CPU here has none to take it to).
    let asked = original.harness.cpu_binding.as_ref().map(|b| b.asked.as_str());
    let gpu_here = device.record.device != lynx_schema::device::DeviceName::Cpu;
    let choice =
        args.cpus.clone().or((asked == Some(CpuBinding::GPU_LOCAL) && gpu_here).then_some(CpuChoice::GpuLocal));
    let cpus = binding::resolve(choice.as_ref(), &device)?;
    if !args.plan {
        binding::bind_self(&cpus, &mut |line| esayln!("lynx: {line}"))?;
    }
    if let (Some(CpuBinding::LIST), None) = (asked, &args.cpus) {
        esayln!(
            "lynx: warning: the published run was bound to {} on its node; this one binds none (give --cpus to bind it)",
            lynx_schema::result::cpu_binding_words(original.harness.cpu_binding.as_ref())
        );
    }
    let local_files = args.weights.as_deref().map(lynx_runner::checkpoint_files).transpose()?;
    let weights = output::weights_warning(&original.config.weights, local_files.as_deref());
    for warning in output::reproduction_warnings(&original, &host, &device, libtorch::load_gpu_backends())
        .into_iter()
        .chain(weights)
    {
        esayln!("lynx: warning: {warning}");
    }
    let plan = Plan {
        suite: original.config.suite.clone(),
        model: original.config.model.clone(),
        device,
        results_dir: args.out,
        weights: args.weights,
        cpus,
        runs_at_once: 1,
    };
    if args.plan {
        say!("{}", super::plan::plan_text(&lynx_runner::forecast(&plan)?));
        // What the plan cannot check before the model is built: the contents of the weights.
        if let Some(read) = original.config.weights.read() {
            sayln!(
                "weights read: the published run's model read {}, sha256 {}; this node's model is held to that once \
                 it is built, before warm-up (other weights are a warning there, and a difference in the comparison)",
                lynx_report::text::tensors_words(read),
                lynx_report::escape::terminal_text(&read.sha256, 64)
            );
        }
        return Ok(());
    }
    super::warn_of_test_hooks();
    let reproduces = Reproduces {
        envelope: published.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        envelope_sha256: digest,
        run_id: original.run_id.clone(),
        device: original.device.name_or_kind(),
        weights_read: original.config.weights.read().cloned(),
    };
    let run = lynx_runner::start_reproduction(&plan, reproduces)?;
    let price = PriceInputs {
        usd_per_device_hour: original.derived.as_ref().and_then(|d| d.price.usd_per_device_hour),
        utilisation: original
            .derived
            .as_ref()
            .map_or(Finite::new(1.0, "utilisation").expect("finite"), |d| d.price.utilisation),
    };
    let outcome = super::run::execute(&run, false, signing_key.as_ref(), price);
    let local = match &outcome {
        Ok(outcome) => outcome.result.clone(),
        Err(_) => lynx_runner::journal::read_json(&run.result_path(), "result")?,
    };
    let mut comparison = lynx_analysis::compare::compare(
        &published.display().to_string(),
        &original,
        &run.result_path().display().to_string(),
        &local,
    );
    // Who vouches for each: the publisher's key, and this node's where it signed the local result.
    if let (Ok(_), Some(key)) = (&outcome, &signing_key) {
        comparison.signers = Some([publisher, lynx_attest::key_id(key.verifying_key())]);
    }
    say!("\n{}", lynx_report::text::comparison(&comparison, "published", "local"));
    outcome.map(|_| ())
}
