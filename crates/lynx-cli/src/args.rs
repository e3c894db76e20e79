//! The command line: every subcommand's arguments, parsed and checked by clap (value parsers for
//! devices, durations, workloads, prices and shares), so nothing downstream parses text again.

use clap::{Args, Parser, Subcommand, ValueEnum};
use lynx_report::listing::Format;
use lynx_schema::config::{Length, Lognormal, Precision, Workload};
use lynx_schema::device::DeviceName;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "lynx", version, about = "Benchmark how a device runs the public PyTorch stack")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List the devices libtorch can use, with name, memory, the datasheet lynx holds each to
    /// (a GPU's, where lynx has one) and the libtorch that runs them.
    Devices {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the model catalogue (total and active parameters, weight and KV-cache bytes per
    /// precision), or import a Hugging Face config.json into it.
    Models(ModelsArgs),
    /// Make an ECDSA P-256 signing key pair: DIR/lynx.key (PKCS#8 PEM, mode 0600) and
    /// DIR/lynx.pub (SPKI PEM).
    Keygen {
        /// The key folder; by default $XDG_CONFIG_HOME/lynx (or ~/.config/lynx).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing key.
        #[arg(long)]
        force: bool,
    },
    /// Verify signed results (DSSE envelopes) against pinned public keys, each under the trusted
    /// key its signature names: exit 0 when every one is valid, otherwise 1 naming the first
    /// failed step of each. A valid result's line also names the checks its run failed, and says
    /// where the run stopped early.
    Verify {
        /// The `.intoto.json` envelopes, or folders (every `*.intoto.json` under each is
        /// verified); each envelope's samples file must be beside it.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        trust: TrustArgs,
        /// Print one JSON verdict per file (an array) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Warm the device up to equilibrium, sweep the suite's cells, derive the figures, sign the
    /// result. The run lives in OUT/<device>/<run id>/; a run that was killed resumes with
    /// --resume that folder. SIGINT or SIGTERM finish the current step and sign a partial result;
    /// a hangup (SIGHUP) is ignored.
    Run(RunArgs),
    /// Measure the device's ceilings and print them: memory bandwidth (libtorch copy; STREAM on
    /// the CPU; native CUDA kernels on NVIDIA GPUs) and matmul rates (libtorch in every precision
    /// the device runs; cuBLASLt on NVIDIA GPUs), and how far libtorch is from the native ones.
    Roofline {
        /// cpu, cuda:N or rocm:N; the first GPU if there is one, else the CPU.
        #[arg(long)]
        device: Option<DeviceName>,
        /// Also measure sustained matmul rates, this many seconds each (0: burst only).
        #[arg(long, default_value_t = 0.0, value_parser = seconds_or_zero, allow_negative_numbers = true)]
        sustained_s: f64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Rank devices for a workload from published results: verify each against the trusted keys
    /// (unsigned, untrusted and tampered results are listed with the reason, never ranked),
    /// re-derive latency-bounded throughput at the given p99 bounds from each result's cells,
    /// and rank by cost per million output tokens at the prices given.
    Shortlist(ShortlistArgs),
    /// Two signed results side by side, each verified under the trusted key its signature names
    /// (and named): every figure both have, the second over the first, and whether the second
    /// lies within the first's own spread; and how their devices, software and configurations
    /// differ.
    Compare {
        /// The reference result's `.intoto.json` (its samples file beside it).
        first: PathBuf,
        /// The result set against it (a reproduction of it, say), signed by the same key or
        /// another trusted one.
        second: PathBuf,
        // Each is verified under the trusted key its signature names: a lab's result and a
        // vendor's reproduction of it are signed by two.
        #[command(flatten)]
        trust: TrustArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Re-run a published result's exact configuration on this node: verify it, warn where the
    /// device or software differs, run, sign the local result (which records the published one's
    /// digest), and print published, local and local/published for every figure.
    Reproduce(ReproduceArgs),
    /// Export a signed result as CSV (one row per cell, every figure) or Markdown (the record,
    /// warm-up, cells, roofline, derived figures and checks), after verifying it.
    Export {
        /// The `.intoto.json` envelope (its samples file beside it).
        file: PathBuf,
        #[command(flatten)]
        trust: TrustArgs,
        #[arg(long, value_enum, default_value_t = ExportFormat::Markdown)]
        format: ExportFormat,
    },
    /// Build a self-contained static site of results: SITE/index.html with every result's
    /// verification status, per-workload frontier plots, latency-bounded throughput and cost
    /// tables, roofline bars; a page per verified result with its record, checks, cells and a
    /// telemetry timeline. SVG plots, no network, no scripts.
    Report {
        /// Folders (searched for *.intoto.json) or envelope files.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The site's folder.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        trust: TrustArgs,
    },
    /// Gather results from many nodes into one results folder: verify each envelope against the
    /// trusted keys, copy it with its result and samples into DIR/<device>/<run id>/, refuse
    /// tampered, unsigned and untrusted ones and a second, different copy of a run, and write
    /// DIR/index.json. Exit 1 when anything was refused (the rest is collected).
    Collect {
        /// Folders (searched for *.intoto.json) or envelope files.
        #[arg(required = true)]
        sources: Vec<PathBuf>,
        #[arg(long)]
        into: PathBuf,
        #[command(flatten)]
        trust: TrustArgs,
    },
    /// (internal) The worker process of `lynx run`: device work on one run folder.
    #[command(hide = true)]
    Worker { run_dir: PathBuf },
}

#[derive(Args)]
pub struct ModelsArgs {
    #[command(subcommand)]
    pub action: Option<ModelsAction>,
    /// A folder of model shape files that adds to or overrides the built-in catalogue.
    #[arg(long, env = "LYNX_MODELS_DIR", global = true)]
    pub models: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum ModelsAction {
    /// Write the shape a Hugging Face config.json describes (model types llama, mistral,
    /// mixtral, qwen2, qwen3, qwen3_moe, gpt_oss, deepseek_v3) as models/NAME.toml.
    Import {
        /// The config.json.
        file: PathBuf,
        /// The model's name; by default the config's folder (or file) name in lower case.
        #[arg(long)]
        name: Option<String>,
        /// Where to write; by default models/NAME.toml under the current folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
}

/// How a run is signed: `--key`, `--unsigned`, or the default key.
#[derive(Args, Clone)]
pub struct SigningArgs {
    /// Sign the result with this key (PKCS#8 PEM); by default lynx.key in the default key
    /// folder, made there by the first run that finds none (see `lynx keygen`).
    #[arg(long, conflicts_with = "unsigned")]
    pub key: Option<PathBuf>,
    /// Publish the result unsigned (its envelope has no signature; `lynx verify` says so).
    #[arg(long)]
    pub unsigned: bool,
}

#[derive(Args)]
pub struct RunArgs {
    /// A suite's name (built in, or MODELS/suites/NAME.toml) or a suite file; by default
    /// `standard` on a GPU and `cpu` on the CPU.
    #[arg(long)]
    pub suite: Option<String>,
    /// cpu, cuda:N or rocm:N; the first GPU if there is one, else the CPU.
    #[arg(long)]
    pub device: Option<DeviceName>,
    /// A folder of model shape files and of suites/ that adds to or overrides the built-in
    /// catalogue.
    #[arg(long, env = "LYNX_MODELS_DIR")]
    pub models: Option<PathBuf>,
    /// The run lives in OUT/<device>/<run id>/. Local runs never go into the published record
    /// (`results/`): publishing is `lynx collect OUT --into results`.
    #[arg(long, default_value = "runs")]
    pub out: PathBuf,
    /// Read the weights from this Hugging Face safetensors checkpoint folder instead of
    /// drawing them from the suite's seed.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    #[command(flatten)]
    pub signing: SigningArgs,
    /// Resume the run in this folder: only the cells its journal lacks are run, with the
    /// configuration it was started with (a different --suite, --device, lynx build, libtorch
    /// or number of libtorch threads is refused, and so is a process that could capture decode
    /// graphs where the earlier ones could not, or the reverse; --weights at another path is
    /// taken once the run has recorded what its model read, and held to it).
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// Price of one device-hour in USD, for the cost per million output tokens (no price, no
    /// cost figure).
    #[arg(long, value_name = "USD", value_parser = usd_per_hour, allow_negative_numbers = true)]
    pub price_per_hour: Option<f64>,
    /// Share of hours the device serves at the latency-bounded load, in [0.01, 1].
    #[arg(long, default_value_t = 1.0, value_parser = share, allow_negative_numbers = true)]
    pub utilisation: f64,
    /// Bind the run's processes to these CPUs: `gpu-local` (those local to its GPU, where the
    /// host allows them: the GPU's NUMA node, as `numactl --cpunodebind` would) or a list
    /// (0-15, 0,2,4-7). lynx starts itself again on them, so that libtorch's threads are sized
    /// for them, and the result records the binding. By default it binds nothing; a resumed run
    /// is bound as it started.
    #[arg(long, value_name = "gpu-local|LIST", conflicts_with = "resume")]
    pub cpus: Option<lynx_runner::binding::CpuChoice>,
    #[command(flatten)]
    pub node: NodeArgs,
    /// Plan the run and print the plan, measuring and writing nothing: its inputs checked as a
    /// run checks them, the cells the sweep would measure with their predicted steps and memory
    /// (and those that would not fit), the serving phase, and the estimated wall time.
    #[arg(long)]
    pub plan: bool,
    /// With --plan: print the plan as JSON.
    #[arg(long, requires = "plan")]
    pub json: bool,
    /// With --plan: plan for a device that need not be here, from lynx's datasheet for it (H100
    /// 80GB HBM3, H100 PCIe, H200, B200, MI300X or MI355X; its driver's name or a slug of
    /// either, e.g. nvidia-h200): its memory and rates the datasheet's, graphs captured beside
    /// eager steps; --device names it (by default cuda:0, or rocm:0 for AMD).
    #[arg(long, value_name = "DATASHEET", requires = "plan", value_parser = datasheet,
          conflicts_with_all = ["resume", "all_devices", "devices"])]
    pub plan_as: Option<&'static lynx_analysis::estimate::Datasheet>,
    /// (internal) Write the run's folder to this file once it exists.
    #[arg(long, hide = true)]
    pub report_run_dir: Option<PathBuf>,
}

/// A node's runs: one `lynx run` process per device.
#[derive(Args)]
pub struct NodeArgs {
    /// Run on every GPU of this node (the CPU when it has none): one `lynx run` process per
    /// device, one signed result each, and a node summary in OUT/nodes/.
    #[arg(long, conflicts_with_all = ["device", "resume", "devices"])]
    pub all_devices: bool,
    /// Run on these devices, one process each, as --all-devices does (e.g. cuda:0,cuda:2).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["device", "resume"])]
    pub devices: Vec<DeviceName>,
    /// With --all-devices or --devices: one device after another instead of all at once.
    #[arg(long)]
    pub one_at_a_time: bool,
    /// (internal) This process is the run of this one device of a node's runs: the node starts
    /// each device's `lynx run` with its own command line unchanged and this flag added.
    #[arg(long, hide = true)]
    pub node_device: Option<DeviceName>,
}

impl NodeArgs {
    /// Whether this is a node's run rather than one device's.
    pub fn is_node(&self) -> bool {
        (self.all_devices || !self.devices.is_empty()) && self.node_device.is_none()
    }
}

/// The public keys results are trusted under.
#[derive(Args)]
pub struct TrustArgs {
    /// A trusted public key (SPKI PEM); repeatable.
    #[arg(long)]
    pub pubkey: Vec<PathBuf>,
    /// A folder of trusted public keys (every *.pub in it).
    #[arg(long)]
    pub keys: Option<PathBuf>,
}

#[derive(Args)]
pub struct ShortlistArgs {
    /// Folders (searched for *.intoto.json) or envelope files.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// MODEL:ISL/OSL, e.g. llama-3.1-8b:1024/1024. Each of ISL and OSL is N (fixed), LO-HI
    /// (uniform), RxN (uniform in [R·N, N], InferenceX's range ratio) or
    /// lognormal(MEDIAN,SIGMA,MIN,MAX); or MODEL:@FILE for the `isl,osl` pairs of a lengths file.
    #[arg(long, value_parser = workload)]
    pub workload: WorkloadArg,
    /// p99 time to first token bound, e.g. 2s or 450ms.
    #[arg(long, value_parser = duration_s, allow_negative_numbers = true)]
    pub ttft_p99: f64,
    /// p99 time per output token bound, e.g. 200ms.
    #[arg(long, value_parser = duration_s, allow_negative_numbers = true)]
    pub tpot_p99: f64,
    /// DEVICE=USD_PER_HOUR, comma-separated or repeated; DEVICE is the device's name as in
    /// the result, or its slug (e.g. nvidia-h200; a name holding a comma must be given by slug).
    #[arg(long, value_delimiter = ',', value_parser = price)]
    pub price: Vec<(String, f64)>,
    /// Share of hours the devices serve at that load, in [0.01, 1].
    #[arg(long, default_value_t = 1.0, value_parser = share, allow_negative_numbers = true)]
    pub utilisation: f64,
    /// Rank only results measured at this precision (fp32, bf16, fp16 or fp8); by default every
    /// precision is ranked, each row saying its own.
    #[arg(long, value_parser = precision)]
    pub precision: Option<Precision>,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

#[derive(Args)]
pub struct ReproduceArgs {
    /// The published `.intoto.json` (its samples file beside it).
    pub published: PathBuf,
    // The publisher's public key among the trusted ones.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// cpu, cuda:N or rocm:N; by default the published device's name if this host has it,
    /// else the first GPU, else the CPU.
    #[arg(long)]
    pub device: Option<DeviceName>,
    /// The checkpoint folder, when the published run read its weights from one.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// The local run lives in OUT/<device>/<run id>/.
    #[arg(long, default_value = "runs")]
    pub out: PathBuf,
    #[command(flatten)]
    pub signing: SigningArgs,
    /// Bind the local run's processes to these CPUs, as `lynx run --cpus` does; by default as
    /// the published run was asked where it was bound to its GPU's CPUs (`gpu-local`: this
    /// node's GPU's), and to none otherwise (another node's CPU list means nothing here).
    #[arg(long, value_name = "gpu-local|LIST")]
    pub cpus: Option<lynx_runner::binding::CpuChoice>,
    /// Plan the reproduction and print the plan (as `lynx run --plan`), measuring and writing
    /// nothing.
    #[arg(long)]
    pub plan: bool,
}

/// `lynx shortlist`'s listing formats.
#[derive(Clone, Copy, ValueEnum)]
pub enum ListFormat {
    Table,
    #[value(alias = "md")]
    Markdown,
    Csv,
    Json,
}

/// `lynx export`'s formats.
#[derive(Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    #[value(alias = "md")]
    Markdown,
    Csv,
}

impl From<ListFormat> for Format {
    fn from(format: ListFormat) -> Format {
        match format {
            ListFormat::Table => Format::Table,
            ListFormat::Markdown => Format::Markdown,
            ListFormat::Csv => Format::Csv,
            ListFormat::Json => Format::Json,
        }
    }
}

impl From<ExportFormat> for Format {
    fn from(format: ExportFormat) -> Format {
        match format {
            ExportFormat::Markdown => Format::Markdown,
            ExportFormat::Csv => Format::Csv,
        }
    }
}

/// A buyer's request shape: MODEL:ISL/OSL, each length fixed or a mix, or MODEL:@FILE.
#[derive(Clone)]
pub struct WorkloadArg {
    pub model: String,
    pub isl: Length,
    pub osl: Length,
}

fn workload(text: &str) -> Result<WorkloadArg, String> {
    const EXPECTED: &str = "expected MODEL:ISL/OSL or MODEL:@FILE";
    let (model, shape) = text.split_once(':').ok_or(EXPECTED)?;
    if model.is_empty() {
        return Err(EXPECTED.to_owned());
    }
    let (isl, osl) = match shape.strip_prefix('@') {
        Some(file) => {
            let pairs = lynx_runner::suite::read_length_pairs(std::path::Path::new(file))?;
            let named = |pairs| Length::File { file: file.to_owned(), pairs };
            (named(pairs), named(Vec::new()))
        }
        None => {
            let (isl, osl) = shape.split_once('/').ok_or(EXPECTED)?;
            let length = |text: &str, which: &str| {
                length(text.trim()).ok_or_else(|| {
                    format!(
                        "{which} '{text}' is none of N, LO-HI, RxN or lognormal(MEDIAN,SIGMA,MIN,MAX) (token counts \
                         greater than 0)"
                    )
                })
            };
            (length(isl, "ISL")?, length(osl, "OSL")?)
        }
    };
    let asked = Workload { name: "request".to_owned(), isl, osl };
    asked.check("ISL/OSL").map_err(|e| e.to_string())?;
    Ok(WorkloadArg { model: model.to_owned(), isl: asked.isl, osl: asked.osl })
}

/// One length as `--workload` writes it: `N`, `LO-HI`, `RxN` (or the summary's `R-1×N`), or
/// `lognormal(MEDIAN,SIGMA,MIN,MAX)`; `None` for anything else. Ranges are checked by the
/// schema, as a suite's are.
fn length(text: &str) -> Option<Length> {
    if let Some(inner) = text.strip_prefix("lognormal(").and_then(|t| t.strip_suffix(')')) {
        let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
        let [median, sigma, min, max] = parts[..] else { return None };
        let lognormal = Lognormal {
            median: median.parse().ok()?,
            sigma: sigma.parse().ok()?,
            min: min.parse().ok()?,
            max: max.parse().ok()?,
        };
        return Some(Length::Lognormal { lognormal });
    }
    if let Some((ratio, length)) = text.split_once(['x', '×']) {
        let ratio = ratio.strip_suffix("-1").unwrap_or(ratio);
        return Some(Length::RangeRatio { range_ratio: ratio.parse().ok()?, length: length.parse().ok()? });
    }
    if let Some((lo, hi)) = text.split_once('-') {
        return Some(Length::Uniform { uniform: [lo.parse().ok()?, hi.parse().ok()?] });
    }
    text.parse().ok().map(Length::Fixed)
}

/// Seconds from `2s`, `450ms`, `0.2` (seconds) or `200us`.
pub fn duration_s(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        (text, 1.0)
    };
    // At most a suite's bound may be (a day), so a bound prints as the number it is.
    let most = lynx_schema::config::Suite::MOST_SECONDS;
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale <= most => Ok(v * scale),
        Ok(v) if v.is_finite() && v > 0.0 => Err(format!("{text}: at most {most} s")),
        _ => Err(format!("{text}: expected a positive duration such as 2s, 450ms or 0.2")),
    }
}

fn precision(text: &str) -> Result<Precision, String> {
    Precision::ALL.into_iter().find(|p| p.to_string() == text.trim()).ok_or_else(|| {
        let names: Vec<String> = Precision::ALL.iter().map(ToString::to_string).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn price(text: &str) -> Result<(String, f64), String> {
    let (device, usd) = text.rsplit_once('=').ok_or("expected DEVICE=USD_PER_HOUR")?;
    let usd = usd_per_hour(usd.trim()).map_err(|why| format!("expected DEVICE=USD_PER_HOUR: the price {why}"))?;
    if lynx_schema::device::slug(device).is_empty() {
        return Err("expected DEVICE=USD_PER_HOUR naming a device (its name or slug, e.g. nvidia-h200)".to_owned());
    }
    Ok((device.trim().to_owned(), usd))
}

/// The most a device-hour may be priced at, USD: far above any device's, so that a cost is a
/// figure a table can show.
const MOST_USD_PER_HOUR: f64 = 1e6;

/// The least share of hours a device may be said to serve: below 1%, a cost per token says more
/// about the idle hours than about the device.
const LEAST_UTILISATION: f64 = 0.01;

fn usd_per_hour(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MOST_USD_PER_HOUR => Ok(v),
        _ => Err(format!("must be a positive number of USD, at most {MOST_USD_PER_HOUR}")),
    }
}

fn datasheet(text: &str) -> Result<&'static lynx_analysis::estimate::Datasheet, String> {
    lynx_analysis::estimate::datasheet_named(text).map_err(|meant| {
        let names = |sheets: &[&lynx_analysis::estimate::Datasheet]| {
            sheets.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
        };
        if meant.is_empty() {
            let all: Vec<_> = lynx_analysis::estimate::DATASHEETS.iter().collect();
            format!("lynx has no datasheet named {text:?}; it has {}", names(&all))
        } else {
            format!("{text:?} could mean any of {}: name one", names(&meant))
        }
    })
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && (LEAST_UTILISATION..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("must be in [{LEAST_UTILISATION}, 1]")),
    }
}

/// Seconds of a probe: 0 up to a suite's own bound on a probe ([`lynx_schema::config::Suite::MOST_PROBE_SECONDS`]).
fn seconds_or_zero(text: &str) -> Result<f64, String> {
    let most = lynx_schema::config::Suite::MOST_PROBE_SECONDS;
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=most).contains(&v) => Ok(v),
        _ => Err(format!("must be a number of seconds from 0 to {most}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_workloads_and_prices_parse_or_say_why_not() {
        assert_eq!(duration_s("450ms"), Ok(0.45));
        assert_eq!(duration_s("2s"), Ok(2.0));
        assert_eq!(duration_s("0.2"), Ok(0.2));
        assert!((duration_s("200us").unwrap() - 2e-4).abs() < 1e-15);
        assert!(duration_s("fast").unwrap_err().contains("positive duration"));
        assert!(duration_s("-1s").is_err());
        assert_eq!(duration_s("86400s"), Ok(86400.0));
        assert_eq!(duration_s("1e300s").unwrap_err(), "1e300s: at most 86400 s");
        let w = workload("llama-3.1-8b:1024/128").unwrap();
        assert_eq!((w.model.as_str(), w.isl, w.osl), ("llama-3.1-8b", Length::Fixed(1024), Length::Fixed(128)));
        assert!(workload("m:0/1").is_err() && workload("m").is_err() && workload(":1/1").is_err());
        assert_eq!(price("NVIDIA H200 = 3.5"), Ok(("NVIDIA H200".to_owned(), 3.5)));
        assert!(price("h200=0").is_err() && price("h200").is_err());
        assert!(price("=1").unwrap_err().contains("naming a device") && price(" - =1").is_err());
        assert_eq!(precision("fp8"), Ok(Precision::Fp8));
        assert_eq!(precision("int4").unwrap_err(), "expected one of fp32, bf16, fp16, fp8");
        assert!(share("1").is_ok() && share("0").is_err() && share("1.5").is_err());
        // Figures a table can show: a price of at most a million USD a device-hour, a share of
        // hours of at least 1% (1e300 and 1e-300 printed costs of 300 digits).
        assert_eq!(share("0.01"), Ok(0.01));
        assert_eq!(share("1e-300").unwrap_err(), "must be in [0.01, 1]");
        assert_eq!(price("h200=1000000"), Ok(("h200".to_owned(), 1e6)));
        let why = price("h200=1e300").unwrap_err();
        assert_eq!(why, "expected DEVICE=USD_PER_HOUR: the price must be a positive number of USD, at most 1000000");
        assert_eq!(usd_per_hour("1e7").unwrap_err(), "must be a positive number of USD, at most 1000000");
    }

    /// Each length form `--workload` takes, as the suite's table form of the same length; and
    /// one line naming what is wrong with each that cannot be drawn from.
    #[test]
    fn a_request_shape_may_be_a_length_mix() {
        let w = workload("m:16-64/16").unwrap();
        assert_eq!((w.isl, w.osl), (Length::Uniform { uniform: [16, 64] }, Length::Fixed(16)));
        for ratio in ["0.8x1024", "0.8×1024", "0.8-1×1024"] {
            let w = workload(&format!("m:{ratio}/128")).unwrap();
            assert_eq!(w.isl, Length::RangeRatio { range_ratio: 0.8, length: 1024 }, "{ratio}");
        }
        let w = workload("m:1024/lognormal(200, 0.5, 16, 2048)").unwrap();
        assert_eq!(w.osl, Length::Lognormal { lognormal: Lognormal { median: 200.0, sigma: 0.5, min: 16, max: 2048 } });
        for (bad, needle) in [
            ("m:64-16/16", "workload.isl.uniform [64, 16] must have lo <= hi"),
            ("m:1.5x1024/16", "workload.isl.range_ratio must be in (0, 1]"),
            ("m:16/lognormal(200, -1, 16, 2048)", "workload.osl.lognormal.sigma"),
            ("m:16/lognormal(200, 1)", "OSL 'lognormal(200, 1)' is none of"),
            ("m:abc/16", "ISL 'abc' is none of"),
            ("m:0-16/16", "workload.isl.uniform must be greater than 0"),
            ("m:16", "expected MODEL:ISL/OSL or MODEL:@FILE"),
        ] {
            let error = workload(bad).err().unwrap_or_else(|| panic!("{bad} parsed"));
            assert!(error.contains(needle) && !error.contains('\n'), "{bad}: {error}");
        }
    }

    /// A lengths file's pairs as the request's, read by the suite's own reader: a bad line is
    /// named.
    #[test]
    fn a_request_shape_may_be_a_lengths_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("logs.csv");
        std::fs::write(&file, "isl,osl\n# from last week\n100,20\n\n300,40\n").unwrap();
        let w = workload(&format!("m:@{}", file.display())).unwrap();
        assert_eq!(w.isl, Length::File { file: file.display().to_string(), pairs: vec![[100, 20], [300, 40]] });
        assert_eq!(w.osl, Length::File { file: file.display().to_string(), pairs: Vec::new() });
        std::fs::write(&file, "100,20\n300\n").unwrap();
        let error = workload(&format!("m:@{}", file.display())).err().unwrap();
        assert!(error.contains("logs.csv line 2: expected two token counts"), "{error}");
        let error = workload("m:@/no/such.csv").err().unwrap();
        assert!(error.contains("/no/such.csv: does not exist"), "{error}");
    }
}
