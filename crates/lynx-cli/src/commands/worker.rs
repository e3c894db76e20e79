//! `lynx worker RUN_DIR` (hidden): the device work of a `lynx run`, under its supervisor.

use crate::progress::Progress;
use crate::Exit;
use lynx_runner::supervisor;
use std::path::Path;

pub fn run(run_dir: &Path) -> anyhow::Result<()> {
    if !supervisor::bind_to_supervisor() {
        return Err(anyhow::anyhow!("the supervising lynx run is gone"));
    }
    supervisor::catch_stop_signals();
    let run = lynx_runner::RunDir::open(run_dir)?;
    let mut progress = Progress::new();
    let end = lynx_runner::work(&run, &mut progress, &supervisor::STOP);
    drop(progress);
    let end = match end {
        Err(error) if error.is_disk_full() => return Err(Exit(supervisor::EXIT_DISK_FULL).into()),
        end => end?,
    };
    match end {
        lynx_runner::WorkEnd::Done => Ok(()),
        lynx_runner::WorkEnd::Stopped => Err(Exit(supervisor::EXIT_STOPPED).into()),
        lynx_runner::WorkEnd::Poisoned => Err(Exit(supervisor::EXIT_POISONED).into()),
    }
}
