//! Where the time to read a checkpoint's tensor goes: `Checkpoint::get` against the work it is
//! made of.
//!
//! `cargo bench -p lynx-models --bench checkpoint_read` writes a safetensors checkpoint of one
//! bf16 tensor of 1 GiB into a temporary folder and prints one table, each figure the median of
//! five rounds:
//!
//! - `read`: the file's bytes read a megabyte at a time (as `Checkpoint::get` reads them) into
//!   one buffer, nothing else done;
//! - `sha256`: the same bytes hashed from memory, a megabyte at a time;
//! - `a fresh tensor zeroed`: a new 1 GiB tensor written once (the host's first touch of its
//!   pages, which any read into a new tensor pays);
//! - `Checkpoint::get`: the tensor read as a model asks for it (read, hashed, copied into the
//!   tensor), whole, and as the first of two tensor-parallel devices' column shard (half of each
//!   row kept, so half the bytes hashed and copied);
//! - the same from the disk: `read` and `Checkpoint::get` with the file's pages dropped from the
//!   host's page cache before each round (GNU dd's `nocache`, which asks the kernel to drop a
//!   file's clean pages; no privileges needed).
//!
//! The last line sets `Checkpoint::get` beside the sum of its parts. Hashing on a thread of its
//! own while the next slab is read gained nothing on this project's 2-core host
//! (docs/ARCHITECTURE.md, "Weights by name").

mod common;

use lynx_models::Checkpoint;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use tch::{Device, Kind, Tensor};

const ROUNDS: usize = 5;
const ROWS: i64 = 16_384;
const COLUMNS: i64 = 32_768;
/// As `Checkpoint::get` reads.
const AT_ONCE: usize = 1 << 20;

/// The median time of `work` over the rounds, each round after `before` (not timed).
fn timed(before: impl FnMut(), work: impl FnMut()) -> f64 {
    common::timed(ROUNDS, before, work)
}

/// Drop the file's pages from the host's page cache.
fn evict(path: &Path) {
    let status = std::process::Command::new("dd")
        .args([format!("if={}", path.display()), "iflag=nocache".to_owned(), "count=0".to_owned()])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("dd runs");
    assert!(status.success(), "dd could not drop the pages of {}", path.display());
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("model.safetensors");
    let shape = [ROWS, COLUMNS];
    let tensor = Tensor::ones(shape, (Kind::BFloat16, Device::Cpu));
    Tensor::write_safetensors(&[("w", &tensor)], &path).expect("the checkpoint is written");
    drop(tensor);
    let bytes = (ROWS * COLUMNS * 2) as u64;
    let file = File::open(&path).expect("the checkpoint opens");
    let size = file.metadata().expect("its size").len();
    let mut buffer = vec![0u8; AT_ONCE];
    let mut read_all = || {
        let mut at = 0;
        while at < size {
            let n = AT_ONCE.min((size - at) as usize);
            file.read_exact_at(&mut buffer[..n], at).expect("the file reads");
            at += n as u64;
        }
    };
    let warm = || ();
    let cold = || evict(&path);
    let read = timed(warm, &mut read_all);
    let cold_read = timed(cold, &mut read_all);
    let held = std::fs::read(&path).expect("the file reads");
    let hash = timed(warm, || {
        let mut digest = Sha256::new();
        for chunk in held.chunks(AT_ONCE) {
            digest.update(chunk);
        }
        std::hint::black_box(digest.finalize());
    });
    drop(held);
    let fresh = timed(warm, || drop(Tensor::zeros(shape, (Kind::BFloat16, Device::Cpu))));
    let checkpoint = Checkpoint::open(dir.path()).expect("the checkpoint opens");
    let get = || drop(checkpoint.get("w", &shape).expect("the tensor reads"));
    let whole = timed(warm, get);
    let cold_whole = timed(cold, get);
    let sharded = Checkpoint::open(dir.path()).expect("the checkpoint opens").shard(2);
    let columns = timed(warm, || drop(sharded.get("w", &[ROWS, COLUMNS / 2]).expect("the shard reads")));
    let gbps = |seconds: f64, bytes: u64| bytes as f64 / seconds / 1e9;
    println!("{:<40} {:>9} {:>7}", "1 GiB of bf16", "TIME (s)", "GB/s");
    for (what, seconds, counted) in [
        ("read, from the page cache", read, size),
        ("sha256, from memory", hash, size),
        ("a fresh tensor zeroed", fresh, bytes),
        ("Checkpoint::get, from the page cache", whole, bytes),
        ("Checkpoint::get, a column shard", columns, bytes / 2),
        ("read, from the disk", cold_read, size),
        ("Checkpoint::get, from the disk", cold_whole, bytes),
    ] {
        println!("{what:<40} {seconds:>9.3} {:>7.2}", gbps(seconds, counted));
    }
    println!(
        "Checkpoint::get from the page cache over read + sha256 + a fresh tensor: {:.2}",
        whole / (read + hash + fresh)
    );
}
