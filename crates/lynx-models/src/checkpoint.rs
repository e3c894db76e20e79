//! A Hugging Face safetensors checkpoint, read as the model asks for it.
//!
//! Opening one reads the header of every `*.safetensors` file in its folder (each tensor's name,
//! element type, shape and place in its file) and checks it; nothing else is read until the
//! model asks for a tensor, and then only that tensor's bytes, a megabyte at a time. A
//! tensor-parallel shard reads only the part of each tensor that the first of its `tp` devices
//! holds. So a layer subset or a shard of a checkpoint larger than the host's memory is read in
//! the memory the model needs, and no run holds the checkpoint itself.
//!
//! Every tensor read is hashed as it is read (sha256 of the bytes kept), so a run can record
//! which weights it measured ([`Checkpoint::reading`]) and a tensor that reads differently the
//! second time (a file rewritten while lynx reads it) is refused.
//!
//! The format: an 8-byte little-endian header length, a JSON header, then the tensors' bytes,
//! row-major and little-endian (the hosts lynx runs on are little-endian).

use crate::ModelError;
use lynx_schema::result::WeightsRead;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use tch::{Device, Kind, Tensor};

/// The largest header read, safetensors' own limit.
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Most bytes read at once: a buffer that stays in the host's cache between its read and its
/// copy into the tensor (on this project's 2-core host, the two layers, embedding and head of
/// Llama 3.1 8B, 2.97 GB of bf16, read in 1.4 s a MiB at a time, 1.6 s at 4 MiB, 3.1 s at 64 MiB,
/// before each part read was hashed).
const READ_AT_ONCE: u64 = 1 << 20;

/// The tensors of a safetensors checkpoint (every `*.safetensors` file of a folder, as Hugging
/// Face shards them), indexed by name and read on demand.
pub struct Checkpoint {
    tensors: HashMap<String, Stored>,
    /// The files read, by name, with their sizes in bytes.
    pub files: Vec<(String, u64)>,
    pub dir: PathBuf,
    /// One open handle a file, in the order of `files`.
    handles: Vec<File>,
    /// The tensor-parallel degree of the shard read (1: the whole model).
    tp: u32,
    reads: Mutex<Reads>,
}

/// What has been read: each tensor (or part of one) once, with its digest.
#[derive(Default)]
struct Reads {
    /// By `name dtype [shape]` (a stacked tensor's entry named `name[index]`, a shard's part
    /// by its own shape): the sha256 of its bytes, and how many there are.
    seen: HashMap<String, ([u8; 32], u64)>,
    /// The keys of `seen` in the order read, repeats included.
    log: Vec<String>,
    /// The stored tensors read from, by name (a stacked tensor once, whichever entries).
    names: BTreeSet<String>,
}

/// Where one tensor lies.
struct Stored {
    /// Its file, an index into `files` and `handles`.
    file: usize,
    /// The element type as the header names it (`BF16`, `F8_E4M3`, …).
    dtype: String,
    shape: Vec<i64>,
    /// Its first byte, from the start of the file.
    start: u64,
}

/// The libtorch kind of the element types lynx reads.
fn element(dtype: &str) -> Option<Kind> {
    match dtype {
        "F64" => Some(Kind::Double),
        "F32" => Some(Kind::Float),
        "F16" => Some(Kind::Half),
        "BF16" => Some(Kind::BFloat16),
        _ => None,
    }
}

impl Checkpoint {
    /// Index every `*.safetensors` file in `dir` from its header.
    pub fn open(dir: &Path) -> Result<Checkpoint, ModelError> {
        let unreadable = |e: &dyn std::fmt::Display| ModelError::Weights(format!("{}: {e}", dir.display()));
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| unreadable(&e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(ModelError::Weights(format!("{}: no *.safetensors files", dir.display())));
        }
        let mut checkpoint = Checkpoint {
            tensors: HashMap::new(),
            files: Vec::new(),
            dir: dir.to_path_buf(),
            handles: Vec::new(),
            tp: 1,
            reads: Mutex::default(),
        };
        for path in &paths {
            let index = checkpoint.files.len();
            let Indexed { handle, size, tensors } = index_file(path, index)?;
            let file_name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            for (name, stored) in tensors {
                if let Some(earlier) = checkpoint.tensors.get(&name) {
                    return Err(ModelError::Weights(format!(
                        "{}: tensor {name} is in both {} and {file_name}",
                        dir.display(),
                        checkpoint.files[earlier.file].0
                    )));
                }
                checkpoint.tensors.insert(name, stored);
            }
            checkpoint.files.push((file_name, size));
            checkpoint.handles.push(handle);
        }
        checkpoint.check_index()?;
        Ok(checkpoint)
    }

    /// Where the folder has Hugging Face's `model.safetensors.index.json`, hold the files to it:
    /// a checkpoint sharded over files one of which did not download is refused here, naming
    /// what is missing, instead of when the model asks for a tensor the missing file held.
    fn check_index(&self) -> Result<(), ModelError> {
        let path = self.dir.join(INDEX);
        let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
        let bad = |what: String| ModelError::Weights(format!("{}: {what}", path.display()));
        let index: Index = serde_json::from_str(&text).map_err(|e| bad(format!("not a safetensors index: {e}")))?;
        // How many of `names` there are, and the first (with an ellipsis where there are more).
        let counted = |names: BTreeSet<&str>| {
            names.first().map(|first| (names.len(), format!("{first}{}", if names.len() > 1 { ", …" } else { "" })))
        };
        let have: BTreeSet<&str> = self.files.iter().map(|(name, _)| name.as_str()).collect();
        let missing = index.weight_map.values().map(String::as_str).filter(|file| !have.contains(file)).collect();
        if let Some((n, first)) = counted(missing) {
            return Err(bad(format!("it names {n} file(s) the folder lacks ({first}): the checkpoint is incomplete")));
        }
        let absent = index.weight_map.keys().map(String::as_str).filter(|name| !self.contains(name)).collect();
        match counted(absent) {
            Some((n, first)) => Err(bad(format!("it names {n} tensor(s) no file holds ({first})"))),
            None => Ok(()),
        }
    }

    /// The same checkpoint read as the shard the first of `tp` tensor-parallel devices holds:
    /// where the model asks for a tensor smaller than the one stored along one dimension, by
    /// the share `tp` gives (divided, the vocabulary padded up to a multiple of `tp`, or key/value
    /// heads fewer than `tp` replicated to one a device), it reads the first part along that
    /// dimension, as Megatron-LM and vLLM give rank 0 (its heads, its columns of a row-parallel
    /// projection, its experts' widths, the first rows of the vocabulary).
    pub fn shard(self, tp: u32) -> Checkpoint {
        Checkpoint { tp: tp.max(1), ..self }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// `build`'s value (a model built from this checkpoint), with what it read: each distinct
    /// tensor it asked for, and one digest of them all ([`WeightsRead`]). Two builds that read
    /// the same tensors with the same bytes give the same digest, in whatever order they read
    /// them and whatever else was read before.
    pub fn reading<T>(&self, build: impl FnOnce() -> T) -> (T, WeightsRead) {
        let from = self.reads().log.len();
        let value = build();
        let reads = self.reads();
        let keys: BTreeSet<&String> = reads.log[from..].iter().collect();
        let mut digest = Sha256::new();
        let mut bytes = 0;
        for key in &keys {
            let (sha256, size) = &reads.seen[*key];
            digest.update(format!("{key} {}\n", lynx_schema::result::hex(sha256)));
            bytes += size;
        }
        let read =
            WeightsRead { tensors: keys.len() as u64, bytes, sha256: lynx_schema::result::hex(&digest.finalize()) };
        (value, read)
    }

    /// The stored tensors read from so far, by name, in name order.
    pub fn names_read(&self) -> Vec<String> {
        self.reads().names.iter().cloned().collect()
    }

    /// Refuse `name` unless it is stored as `like` is (the same element type and shape): a tensor
    /// a model will ask for, checked from the header alone against one it has read, its
    /// counterpart in another layer.
    pub fn stored_like(&self, name: &str, like: &str) -> Result<(), ModelError> {
        let model = self.stored(like)?;
        let stored = self.tensors.get(name).ok_or_else(|| {
            ModelError::Weights(format!(
                "{}: no tensor {name} (the model reads it as it read {like})",
                self.dir.display()
            ))
        })?;
        if (&stored.dtype, &stored.shape) != (&model.dtype, &model.shape) {
            return Err(ModelError::Weights(format!(
                "{}: tensor {name} is {} {:?}, where {like}, which the model read as it will read it, is {} {:?}",
                self.dir.display(),
                stored.dtype,
                stored.shape,
                model.dtype,
                model.shape
            )));
        }
        Ok(())
    }

    fn reads(&self) -> MutexGuard<'_, Reads> {
        // A panic while the lock was held left no half-made entry: each is inserted whole.
        self.reads.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Note that `name` (`wanted` of `dtype`) was read with `sha256` over its `bytes`, or refuse
    /// it where an earlier read of it gave other bytes.
    fn note(&self, name: &str, dtype: &str, wanted: &[i64], sha256: [u8; 32], bytes: u64) -> Result<(), ModelError> {
        let key = format!("{name} {dtype} {wanted:?}");
        let mut reads = self.reads();
        match reads.seen.get(&key) {
            Some((earlier, _)) if *earlier != sha256 => {
                return Err(ModelError::Weights(format!(
                    "{}: tensor {name} read again is not what was read before: the checkpoint changed while lynx \
                     read it",
                    self.dir.display()
                )))
            }
            Some(_) => {}
            None => {
                reads.seen.insert(key.clone(), (sha256, bytes));
            }
        }
        reads.log.push(key);
        Ok(())
    }

    /// The tensor `name`, which must have `shape` (in a shard, its part of that shape), on the
    /// CPU at its stored element type.
    pub fn get(&self, name: &str, shape: &[i64]) -> Result<Tensor, ModelError> {
        let stored = self.stored(name)?;
        let tensor = self.read(name, stored, &stored.shape, stored.start, shape)?;
        self.reads().names.insert(name.to_owned());
        Ok(tensor)
    }

    /// `name[index]`: the tensor's `index`th entry along its first dimension (one expert of a
    /// stacked `[experts, …]` tensor), which must have `shape` (in a shard, its part of it),
    /// read alone.
    pub fn get_at(&self, name: &str, index: i64, shape: &[i64]) -> Result<Tensor, ModelError> {
        let stored = self.stored(name)?;
        let (first, rest) = match stored.shape.split_first() {
            Some((&first, rest)) if (0..first).contains(&index) => (first, rest),
            _ => {
                return Err(ModelError::Weights(format!(
                    "{}: tensor {name} has shape {:?}, with no entry {index} along its first dimension",
                    self.dir.display(),
                    stored.shape
                )))
            }
        };
        let entry_bytes = (stored.bytes()? / first as u64) * index as u64;
        let tensor = self.read(&format!("{name}[{index}]"), stored, rest, stored.start + entry_bytes, shape)?;
        self.reads().names.insert(name.to_owned());
        Ok(tensor)
    }

    fn stored(&self, name: &str) -> Result<&Stored, ModelError> {
        self.tensors.get(name).ok_or_else(|| ModelError::Weights(format!("{}: no tensor {name}", self.dir.display())))
    }

    /// The part of the tensor `name` (`shape` stored from byte `start`) that `wanted` asks for.
    fn read(
        &self,
        name: &str,
        stored: &Stored,
        shape: &[i64],
        start: u64,
        wanted: &[i64],
    ) -> Result<Tensor, ModelError> {
        let Some(kind) = element(&stored.dtype) else {
            return Err(ModelError::Weights(format!(
                "{}: tensor {name} is {}; lynx reads fp32, bf16 and fp16 checkpoints (quantised ones, such as \
                 block-scaled fp8 or MXFP4, are not supported)",
                self.dir.display(),
                stored.dtype
            )));
        };
        let split = self.part(name, shape, wanted)?;
        let file = &self.handles[stored.file];
        let from = |offset: u64, buffer: &mut [u8]| {
            file.read_exact_at(buffer, start + offset).map_err(|e| {
                ModelError::Weights(format!(
                    "{}: reading {name}: {e}",
                    self.dir.join(&self.files[stored.file].0).display()
                ))
            })
        };
        let mut digest = Sha256::new();
        let part = read_part(&from, shape, wanted, split, kind, READ_AT_ONCE, &mut digest)?;
        let bytes = part.numel() as u64 * kind.elt_size_in_bytes() as u64;
        self.note(name, &stored.dtype, wanted, digest.finalize().into(), bytes)?;
        Ok(part)
    }

    /// Along which dimension `wanted` is the first part of the stored `shape` (none: all of it),
    /// or why the tensor cannot serve the model.
    fn part(&self, name: &str, shape: &[i64], wanted: &[i64]) -> Result<Option<usize>, ModelError> {
        let differ: Vec<usize> =
            (0..shape.len().max(wanted.len())).filter(|&i| shape.get(i) != wanted.get(i)).collect();
        let tp = i64::from(self.tp);
        let a_share = |d: usize| {
            let (whole, part) = (shape[d], wanted[d]);
            part > 0
                && part < whole
                && (part == (whole + tp - 1) / tp || (whole % part == 0 && tp % (whole / part) == 0))
        };
        match differ[..] {
            [] => Ok(None),
            [d] if tp > 1 && shape.len() == wanted.len() && a_share(d) => Ok(Some(d)),
            _ => Err(ModelError::Weights(format!(
                "{}: tensor {name} has shape {shape:?}; the model needs {wanted:?}{}",
                self.dir.display(),
                match tp {
                    1 => String::new(),
                    _ => format!(" (the first device's part of it, under {tp}-way tensor parallelism)"),
                }
            ))),
        }
    }
}

impl Stored {
    /// Its size in bytes, from its shape and element type.
    fn bytes(&self) -> Result<u64, ModelError> {
        let size = element(&self.dtype).map_or(1, |kind| kind.elt_size_in_bytes() as u64);
        self.shape
            .iter()
            .try_fold(size, |bytes, &d| bytes.checked_mul(d as u64))
            .ok_or_else(|| ModelError::Weights(format!("a tensor of shape {:?} overflows", self.shape)))
    }
}

/// Open `path` and index its tensors (numbered `file`), checking its header against the file:
/// every tensor lies within the file, and one of a type lynx reads holds exactly its shape's bytes.
fn index_file(path: &Path, file: usize) -> Result<Indexed, ModelError> {
    let bad = |what: String| ModelError::Weights(format!("{}: {what}", path.display()));
    // Only a regular file (or a link to one) is opened: opening a FIFO would wait for a writer.
    if !std::fs::metadata(path).map_err(|e| bad(e.to_string()))?.is_file() {
        return Err(bad("not a regular file".to_owned()));
    }
    let handle = File::open(path).map_err(|e| bad(e.to_string()))?;
    let size = handle.metadata().map_err(|e| bad(e.to_string()))?.len();
    let mut length = [0u8; 8];
    handle.read_exact_at(&mut length, 0).map_err(|_| bad(format!("not a safetensors file ({size} bytes)")))?;
    let header_bytes = u64::from_le_bytes(length);
    if header_bytes > MAX_HEADER_BYTES || 8 + header_bytes > size {
        return Err(bad(format!("not a safetensors file: a header of {header_bytes} bytes in a file of {size}")));
    }
    let mut header = vec![0u8; header_bytes as usize];
    handle.read_exact_at(&mut header, 8).map_err(|e| bad(e.to_string()))?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad(format!("its header is not a safetensors header: {e}")))?;
    let data = 8 + header_bytes;
    let mut tensors = Vec::with_capacity(header.len());
    for (name, entry) in header {
        if name == "__metadata__" {
            continue;
        }
        let entry: Entry = serde_json::from_value(entry).map_err(|e| bad(format!("tensor {name}: {e}")))?;
        let [begin, end] = entry.data_offsets;
        let shape = entry
            .shape
            .iter()
            .map(|&d| i64::try_from(d).ok().filter(|&d| d <= i64::from(u32::MAX)))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| bad(format!("tensor {name} has shape {:?}", entry.shape)))?;
        let stored = Stored { file, dtype: entry.dtype, shape, start: data.saturating_add(begin) };
        if end < begin || data.checked_add(end).is_none_or(|last| last > size) {
            return Err(bad(format!(
                "tensor {name} lies at bytes {begin}..{end} of a data section of {}",
                size - data
            )));
        }
        if element(&stored.dtype).is_some() && stored.bytes().ok() != Some(end - begin) {
            return Err(bad(format!(
                "tensor {name} of {} {:?} holds {} bytes",
                stored.dtype,
                stored.shape,
                end - begin
            )));
        }
        tensors.push((name, stored));
    }
    Ok(Indexed { handle, size, tensors })
}

/// One file, opened and indexed.
struct Indexed {
    handle: File,
    /// Its size in bytes.
    size: u64,
    tensors: Vec<(String, Stored)>,
}

/// Hugging Face's index of a checkpoint sharded over files.
const INDEX: &str = "model.safetensors.index.json";

/// The part of that index lynx reads: which file holds each tensor.
#[derive(serde::Deserialize)]
struct Index {
    weight_map: std::collections::BTreeMap<String, String>,
}

/// One tensor's entry in a safetensors header.
#[derive(serde::Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// Fills a buffer with a tensor's bytes from an offset into them.
pub(crate) type ReadAt<'a> = &'a dyn Fn(u64, &mut [u8]) -> Result<(), ModelError>;

/// The `wanted` part of a row-major tensor of `shape` and `kind`: all of it (`split` none), or
/// the first `wanted[d]` along dimension `d` (`split` `Some(d)`, every other dimension whole), read
/// through `from(offset, buffer)` at most `at_once` bytes at a time (at least one row of the
/// dimensions from `d` on) into a CPU tensor; `digest` is fed the part's bytes, in order.
pub(crate) fn read_part(
    from: ReadAt,
    shape: &[i64],
    wanted: &[i64],
    split: Option<usize>,
    kind: Kind,
    at_once: u64,
    digest: &mut Sha256,
) -> Result<Tensor, ModelError> {
    let size = kind.elt_size_in_bytes() as u64;
    let d = split.unwrap_or(0);
    // Rows of `row` elements, of which each keeps its first `keep`.
    let outer: i64 = shape[..d].iter().product();
    let row: i64 = shape[d..].iter().product();
    let keep: i64 = wanted[d..].iter().product();
    // A part that is one contiguous run of elements from the start (a whole tensor, or the first
    // rows) is read as rows of one element.
    let (outer, row, keep) = if outer == 1 || keep == row { (outer * keep, 1, 1) } else { (outer, row, keep) };
    let part = Tensor::f_empty(wanted, (kind, Device::Cpu))?;
    let rows = part.f_view([outer, keep])?;
    // Slabs of whole stored rows, each keeping its rows' first `keep` elements, through one buffer.
    let step = (at_once / (row as u64 * size)).max(1) as i64;
    let mut buffer = Vec::new();
    let mut first = 0;
    while first < outer {
        let n = step.min(outer - first);
        buffer.resize((n * row) as usize * size as usize, 0);
        from(first as u64 * row as u64 * size, &mut buffer)?;
        if keep == row {
            digest.update(&buffer);
        } else {
            for kept in buffer.chunks_exact((row as u64 * size) as usize) {
                digest.update(&kept[..(keep as u64 * size) as usize]);
            }
        }
        let slab = Tensor::f_from_data_size(&buffer, &[n, row], kind)?;
        rows.f_narrow(0, first, n)?.f_copy_(&slab.f_narrow(1, 0, keep)?)?;
        first += n;
    }
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored tensor of `shape` whose element i is i, as f32 little-endian bytes.
    fn counting(shape: &[i64]) -> (Tensor, Vec<u8>) {
        let n: i64 = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
        (Tensor::from_slice(&values).view(shape), values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    /// Every way a part is read gives the stored tensor's slice, whole or in slabs of a few
    /// bytes: all of it, the first rows, the first columns of each row, a middle dimension's first
    /// part (a stacked expert's), and a slab smaller than one row.
    #[test]
    fn a_part_read_in_slabs_is_the_stored_tensors_slice() {
        for (shape, wanted, split) in [
            (vec![6i64, 4], vec![6i64, 4], None),
            (vec![6, 4], vec![3, 4], Some(0)),
            (vec![6, 4], vec![6, 2], Some(1)),
            (vec![3, 5, 4], vec![3, 2, 4], Some(1)),
            (vec![3, 5, 4], vec![3, 5, 1], Some(2)),
            (vec![7], vec![4], Some(0)),
        ] {
            let (whole, bytes) = counting(&shape);
            let from = |offset: u64, buffer: &mut [u8]| {
                buffer.copy_from_slice(&bytes[offset as usize..offset as usize + buffer.len()]);
                Ok(())
            };
            let mut expected = whole.shallow_clone();
            if let Some(d) = split {
                expected = expected.narrow(d as i64, 0, wanted[d]);
            }
            // The digest is fed the part's bytes alone, row-major.
            let kept: Vec<f32> = Vec::try_from(expected.contiguous().flatten(0, -1)).unwrap();
            let kept: Vec<u8> = kept.iter().flat_map(|v| v.to_le_bytes()).collect();
            for at_once in [4, 12, 40, u64::MAX] {
                let mut digest = Sha256::new();
                let part = read_part(&from, &shape, &wanted, split, Kind::Float, at_once, &mut digest).unwrap();
                assert!(part.equal(&expected), "{shape:?} → {wanted:?} in slabs of {at_once} bytes: {part}");
                assert_eq!(digest.finalize(), Sha256::digest(&kept), "{shape:?} → {wanted:?} in slabs of {at_once}");
            }
        }
    }
}
