//! [`TensorPool`]: the pool's file, its layout, slot states and handle records.

use super::handle::{Held, Tensor, TensorMut};
use super::{DType, TensorDescriptor, MAX_DIMS, MAX_NAME, MAX_SLOTS, MAX_SLOT_BYTES, RECORDS};
use crate::context::Context;
use crate::error::TensorError;
use crate::sys::files::{check_owner, Mapping, OfdLock};
use crate::transport::doorbell::LOCK_TIMEOUT;
use rustix::fs::{FallocateFlags, Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// File names of pools in /dev/shm: `<domain prefix>tensor_<name>` (see
/// `transport::shm::remove_domain_files`, which removes them with the domain).
const FILE_KIND: &str = "tensor_";

/// The file's first 8 bytes.
const MAGIC: [u8; 8] = *b"NRVTENS\0";
/// The layout version this build reads and writes.
const VERSION: u32 = 1;
/// Bytes of the header (one cache line).
const HEADER: usize = 64;
/// Bytes of a record's head (its state word, then padding) before its counts.
const RECORD_HEAD: usize = 64;
/// Data starts on a page boundary; slots are multiples of a cache line.
const PAGE: usize = 4096;
const LINE: usize = 64;
/// The largest pool file (1 TiB): keeps every offset computation far from overflow.
const MAX_POOL_BYTES: usize = 1 << 40;

/// Byte locked (open-file-description lock) by the live owner of record `i`:
/// `RECORD_LOCK + i`. (Advisory: the byte's contents do not matter.)
const RECORD_LOCK: u64 = 1;
/// `PoolInner::record` before a record is claimed.
const NO_RECORD: usize = usize::MAX;

// The slot state word (one AtomicU64 per slot):
//   bits 63..32  generation: bumped whenever the slot is freed, so descriptors of earlier
//                tensors in the slot never match again
//   bits 31..30  phase: FREE, WRITING (allocated, its TensorMut writes) or READY (frozen)
//   bits 29..0   references held, by every handle in every process together (a
//                TensorMut is one; each Tensor opened or frozen is one, whatever its
//                clones in the process)
const REFS: u64 = (1 << 30) - 1;
const PHASE_SHIFT: u32 = 30;
const GEN_SHIFT: u32 = 32;
pub(crate) const FREE: u64 = 0;
pub(crate) const WRITING: u64 = 1;
pub(crate) const READY: u64 = 2;

fn refs(state: u64) -> u64 {
    state & REFS
}
fn phase(state: u64) -> u64 {
    (state >> PHASE_SHIFT) & 3
}
fn generation(state: u64) -> u32 {
    (state >> GEN_SHIFT) as u32
}
fn pack(generation: u32, phase: u64, refs: u64) -> u64 {
    (u64::from(generation) << GEN_SHIFT) | (phase << PHASE_SHIFT) | refs
}
/// The state after dropping `n` references from `state` (at least one held): the slot
/// is freed, its generation bumped, when none remain.
fn drop_refs(state: u64, n: u64) -> u64 {
    if refs(state) <= n {
        pack(generation(state).wrapping_add(1), FREE, 0)
    } else {
        state - n
    }
}

/// A slot's state word and the lock-free core of a slot's life, the same for every handle
/// in every process: [`grab`](SlotState::grab) (FREE to WRITING, one reference),
/// [`freeze`](SlotState::freeze) (WRITING to READY), [`take_ref`](SlotState::take_ref)
/// (one more reference to a READY slot of a generation), [`release`](SlotState::release)
/// and [`drop_dead`](SlotState::drop_dead) (references given back, the slot freed and its
/// generation bumped at zero). Under `--cfg nerve_loom` the word is loom's (see
/// `crate::loom`) and `loom_models` below run these against each other; the records,
/// their locks and the mapping stay outside the model.
#[repr(transparent)]
pub(crate) struct SlotState(crate::loom::sync::atomic::AtomicU64);

/// Why a reference to a slot was refused ([`SlotState::take_ref`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Freed since (and maybe reused): the slot is at generation `current`.
    Stale { current: u32 },
    /// Still being written.
    Unpublished,
    /// Its reference count is full.
    TooManyReferences,
}

impl SlotState {
    /// A free slot at generation 0 (the models; a pool's words start zeroed in its file).
    #[cfg(all(test, nerve_loom))]
    pub(crate) fn new() -> SlotState {
        SlotState(crate::loom::sync::atomic::AtomicU64::new(0))
    }

    /// The word now: (generation, phase, references).
    pub(crate) fn get(&self) -> (u32, u64, u64) {
        // SYNC: SeqCst: a snapshot for counts and tests.
        let s = self.0.load(Ordering::SeqCst);
        (generation(s), phase(s), refs(s))
    }

    /// Takes the slot for writing if it is free: its generation, with one reference.
    pub(crate) fn grab(&self) -> Option<u32> {
        let cur = self.0.load(Ordering::Relaxed);
        if phase(cur) != FREE || refs(cur) != 0 {
            return None;
        }
        // SYNC: Acquire pairs with the Release of the last holder's drop (or the
        // reaper's): their reads of the old tensor happen before our writes.
        self.0
            .compare_exchange(
                cur,
                pack(generation(cur), WRITING, 1),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .ok()
            .map(|_| generation(cur))
    }

    /// Marks the slot (WRITING, at `generation_held`) readable.
    pub(crate) fn freeze(&self, generation_held: u32) {
        // SYNC: Release publishes the bytes written and the slot's metadata to every
        // opener (their Acquire CAS in `take_ref`). Nothing else changes a WRITING
        // slot but a reaper (which only reaches dead handles), so this succeeds on an
        // intact file; on a damaged one the slot simply stays unopenable.
        let _ = self
            .0
            .fetch_update(Ordering::Release, Ordering::Relaxed, |cur| {
                (generation(cur) == generation_held && phase(cur) == WRITING)
                    .then(|| pack(generation_held, READY, refs(cur)))
            });
    }

    /// One more reference to the READY slot of `generation_wanted`; a freed, reused or
    /// unfrozen slot is refused and left alone.
    pub(crate) fn take_ref(&self, generation_wanted: u32) -> Result<(), Refused> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let stale = Refused::Stale {
                current: generation(cur),
            };
            if generation(cur) != generation_wanted || (phase(cur) == READY && refs(cur) == 0) {
                return Err(stale);
            }
            match phase(cur) {
                READY => {}
                WRITING => return Err(Refused::Unpublished),
                _ => return Err(stale),
            }
            if refs(cur) == REFS {
                return Err(Refused::TooManyReferences);
            }
            // SYNC: Acquire pairs with the Release of the writer's `freeze`: the data and
            // the slot's metadata it wrote are visible from here. The CAS checks
            // generation and phase, so a freed or reused slot is never counted.
            match self
                .0
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Gives back one reference held at `generation_held`, freeing the slot at zero.
    pub(crate) fn release(&self, generation_held: u32) {
        // SYNC: Release: our reads and writes of the slot's bytes happen before the next
        // allocation of it (its Acquire CAS in `grab`).
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |cur| {
                // not ours any more (only a damaged file gets here): leave it alone
                (generation(cur) == generation_held && refs(cur) > 0).then(|| drop_refs(cur, 1))
            });
    }

    /// Gives back `n` references a dead handle held, freeing the slot at zero.
    fn drop_dead(&self, n: u64) {
        // SYNC: Release as in `release`: the dead holder is gone, the next allocation of
        // a freed slot follows this.
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |cur| {
                (refs(cur) > 0).then(|| drop_refs(cur, n))
            });
    }
}

/// Record states (as the doorbell's).
const R_FREE: u32 = 0;
const R_CLAIMED: u32 = 1;
const R_LIVE: u32 = 2;
const R_REAPING: u32 = 3;

/// A slot's shared state and what it holds: the state word, then the tensor's length,
/// type and shape, written by the allocating handle while the slot is WRITING and
/// published by the Release of its freeze (openers compare their descriptor with them).
#[repr(C, align(64))]
struct SlotMeta {
    state: SlotState,
    len: AtomicU64,
    /// `dtype code | ndim << 8`
    kind: AtomicU64,
    _reserved: AtomicU64,
    shape: [AtomicU64; MAX_DIMS],
}

const META: usize = std::mem::size_of::<SlotMeta>();
// (under loom the state is loom's word, larger: no pool is made in the models)
#[cfg(not(nerve_loom))]
const _: () = assert!(META == 128 && HEADER.is_multiple_of(std::mem::align_of::<SlotMeta>()));

/// Where everything lies in a pool file of `slots` slots of `slot_bytes` bytes:
///
/// ```text
/// 0                 header (64 bytes: magic, version, records, slots, slot_bytes, id, size)
/// 64                slots x SlotMeta (128 bytes each: state word, len, kind, shape)
/// records           RECORDS x record: a 64-byte head (state word) + slots x u32 counts,
///                   each rounded up to 64 bytes
/// data (page-aligned) slots x slot_bytes (slot_bytes a multiple of 64)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    slots: usize,
    slot_bytes: usize,
    records: usize,
    record_stride: usize,
    data: usize,
    size: usize,
}

impl Layout {
    /// The layout, if `slots` and `slot_bytes` are in range (`slot_bytes` a multiple of
    /// 64) and the whole file stays within [`MAX_POOL_BYTES`].
    fn new(slots: usize, slot_bytes: usize) -> Result<Layout, String> {
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(format!("{slots} slots: a pool has 1 to {MAX_SLOTS}"));
        }
        if !(1..=MAX_SLOT_BYTES).contains(&slot_bytes) || !slot_bytes.is_multiple_of(LINE) {
            return Err(format!(
                "slots of {slot_bytes} bytes: a slot holds 64 to {MAX_SLOT_BYTES} bytes, a multiple of 64"
            ));
        }
        // small numbers from here on (slots <= 4096): only the data can be large
        let records = HEADER + slots * META;
        let record_stride = (RECORD_HEAD + slots * 4).next_multiple_of(LINE);
        let data = (records + RECORDS * record_stride).next_multiple_of(PAGE);
        let size = slots
            .checked_mul(slot_bytes)
            .and_then(|d| d.checked_add(data))
            .filter(|&s| s <= MAX_POOL_BYTES)
            .ok_or_else(|| {
                format!("{slots} slots of {slot_bytes} bytes: more than a pool's {MAX_POOL_BYTES} bytes")
            })?;
        Ok(Layout {
            slots,
            slot_bytes,
            records,
            record_stride,
            data,
            size,
        })
    }

    fn header(&self, id: u64) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_ne_bytes());
        h[12..16].copy_from_slice(&(RECORDS as u32).to_ne_bytes());
        h[16..20].copy_from_slice(&(self.slots as u32).to_ne_bytes());
        h[24..32].copy_from_slice(&(self.slot_bytes as u64).to_ne_bytes());
        h[32..40].copy_from_slice(&id.to_ne_bytes());
        h[40..48].copy_from_slice(&(self.size as u64).to_ne_bytes());
        h
    }
}

/// Reads a header: the layout and the pool id, or what is wrong with it.
fn parse_header(h: &[u8; HEADER], pool: &str, path: &str) -> Result<(Layout, u64), TensorError> {
    let u32_at = |i: usize| u32::from_ne_bytes(h[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_ne_bytes(h[i..i + 8].try_into().expect("8 bytes"));
    let corrupt = |reason: String| TensorError::Corrupt {
        pool: pool.to_string(),
        path: path.to_string(),
        reason,
    };
    if h[0..8] != MAGIC {
        return Err(corrupt("no tensor pool magic at its start".into()));
    }
    if u32_at(8) != VERSION {
        return Err(TensorError::Version {
            pool: pool.to_string(),
            found: u32_at(8),
            supported: VERSION,
        });
    }
    if u32_at(12) as usize != RECORDS {
        return Err(corrupt(format!(
            "{} handle records, this layout has {RECORDS}",
            u32_at(12)
        )));
    }
    let slot_bytes = usize::try_from(u64_at(24)).unwrap_or(usize::MAX);
    let layout = Layout::new(u32_at(16) as usize, slot_bytes).map_err(corrupt)?;
    let id = u64_at(32);
    if id == 0 {
        return Err(corrupt("pool id 0".into()));
    }
    if u64_at(40) != layout.size as u64 {
        return Err(corrupt(format!(
            "the header says {} bytes, its slots need {}",
            u64_at(40),
            layout.size
        )));
    }
    Ok((layout, id))
}

/// Checks a pool name: 1 to [`MAX_NAME`] characters of `[A-Za-z0-9_-]`.
pub(crate) fn check_name(name: &str) -> Result<(), TensorError> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_NAME {
        "longer than 31 bytes"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        "only letters, digits, '_' and '-' are allowed"
    } else {
        return Ok(());
    };
    Err(TensorError::InvalidName {
        name: name.to_string(),
        reason,
    })
}

/// A pool's file in /dev/shm for `ctx`'s domain.
fn pool_path(ctx: &Context, name: &str) -> String {
    format!(
        "/dev/shm/{}{FILE_KIND}{name}",
        ctx.inner.config.file_prefix()
    )
}

/// Unlinks a file when dropped (a pool being created, until it is linked into place).
struct Unlink(String);
impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = rustix::fs::unlink(&self.0);
    }
}

/// A bounded pool of tensors in one shared-memory file that other processes (and other
/// contexts) open zero-copy. Cheap to clone (one handle); `Send + Sync`.
///
/// Every handle owns a record in the file of the references it holds, locked with an
/// open-file-description lock, so the references of a process that dies are reclaimed
/// (see the [module documentation](super)).
#[derive(Clone)]
pub struct TensorPool {
    pub(crate) inner: Arc<PoolInner>,
}

impl std::fmt::Debug for TensorPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorPool")
            .field("name", &self.inner.name)
            .field("id", &format_args!("{:016x}", self.inner.id))
            .field("slots", &self.inner.layout.slots)
            .field("slot_bytes", &self.inner.layout.slot_bytes)
            .finish()
    }
}

/// One handle: the file, its mapping and this handle's record.
pub(crate) struct PoolInner {
    name: String,
    path: String,
    /// The open file (its description holds this handle's record lock).
    fd: OwnedFd,
    /// `layout.size` bytes: the whole file.
    map: Mapping,
    layout: Layout,
    id: u64,
    /// This handle's record.
    record: usize,
    /// Where the next allocation starts looking.
    next: AtomicUsize,
    /// Keeps the domain alive: its last context removes the pool files (see
    /// `ContextInner::drop`), so none goes while a handle uses it. (Last: dropped after
    /// the file is closed.)
    _ctx: Context,
}

impl TensorPool {
    /// Creates the pool `name` in `ctx`'s domain: `slots` slots (1 to 4096) of
    /// `slot_bytes` bytes each (rounded up to a multiple of 64; at most 4 GiB). The file is
    /// `/dev/shm/<domain prefix>tensor_<name>` (mode 0600); its memory is reserved now
    /// (`fallocate`), so a full /dev/shm is [`TensorError::NoSpace`] here and never a
    /// SIGBUS later. It is built under a temporary name and linked into place, so no
    /// process ever opens a half-made pool. A pool of that name already there is
    /// [`TensorError::Exists`].
    pub fn create(
        ctx: &Context,
        name: &str,
        slots: usize,
        slot_bytes: usize,
    ) -> Result<TensorPool, TensorError> {
        check_name(name)?;
        let layout = Layout::new(slots, round_slot_bytes(slot_bytes)).map_err(|reason| {
            TensorError::InvalidSize {
                pool: name.to_string(),
                reason,
            }
        })?;
        let path = pool_path(ctx, name);
        let id = random_id();
        let tmp = format!("{path}.{}.{id:016x}.tmp", std::process::id());
        let io = |what: &'static str, e: Errno| TensorError::Io {
            pool: name.to_string(),
            path: path.clone(),
            what,
            source: e.into(),
        };
        let fd = rustix::fs::open(
            &tmp,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| io("create", e))?;
        let unlink_tmp = Unlink(tmp.clone());
        match rustix::fs::fallocate(&fd, FallocateFlags::empty(), 0, layout.size as u64) {
            Ok(()) => {}
            Err(Errno::NOSPC) => {
                return Err(TensorError::NoSpace {
                    pool: name.to_string(),
                    bytes: layout.size as u64,
                })
            }
            Err(e) => return Err(io("reserve memory for", e)),
        }
        let header = layout.header(id);
        let written = rustix::io::pwrite(&fd, &header, 0).map_err(|e| io("write", e))?;
        if written != HEADER {
            return Err(io("write", Errno::IO));
        }
        // the file was just sized to layout.size
        let map = Mapping::shared(&fd, layout.size).map_err(|e| TensorError::Io {
            pool: name.to_string(),
            path: path.clone(),
            what: "map",
            source: e,
        })?;
        // nobody else sees the file yet: the first record is ours
        let pool = PoolInner::new(ctx, name, path.clone(), fd, map, layout, id)?;
        match rustix::fs::link(&tmp, &path) {
            Ok(()) => {}
            Err(Errno::EXIST) => {
                return Err(TensorError::Exists {
                    pool: name.to_string(),
                    path,
                })
            }
            Err(e) => return Err(io("link into place", e)),
        }
        drop(unlink_tmp);
        Ok(TensorPool {
            inner: Arc::new(pool),
        })
    }

    /// Opens the pool `name` of `ctx`'s domain: the file must be a regular file of this
    /// user that nobody else may write (a link is not followed), with a valid header whose
    /// layout matches the file's size; anything else is refused by name. Reclaims the
    /// references of handles whose process died, then claims a record for this handle
    /// (at most 64 handles at once: [`TensorError::TooManyHandles`]).
    pub fn open(ctx: &Context, name: &str) -> Result<TensorPool, TensorError> {
        check_name(name)?;
        let path = pool_path(ctx, name);
        let pool = || name.to_string();
        let io = |what: &'static str, e: std::io::Error| TensorError::Io {
            pool: pool(),
            path: path.clone(),
            what,
            source: e,
        };
        let fd = match rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Err(TensorError::NotFound { pool: pool(), path }),
            Err(Errno::LOOP) => {
                return Err(TensorError::NotPrivate {
                    pool: pool(),
                    path,
                    reason: "a symbolic link".into(),
                })
            }
            Err(e) => return Err(io("open", e.into())),
        };
        if let Err(e) = check_owner(&fd) {
            return Err(TensorError::NotPrivate {
                pool: pool(),
                path,
                reason: e.to_string(),
            });
        }
        let size = rustix::fs::fstat(&fd)
            .map_err(|e| io("stat", e.into()))?
            .st_size;
        let mut header = [0u8; HEADER];
        if size < HEADER as i64 {
            return Err(TensorError::Corrupt {
                pool: pool(),
                path,
                reason: format!("{size} bytes, shorter than a header"),
            });
        }
        let read = rustix::io::pread(&fd, &mut header, 0).map_err(|e| io("read", e.into()))?;
        if read != HEADER {
            return Err(io("read", Errno::IO.into()));
        }
        let (layout, id) = parse_header(&header, name, &path)?;
        if size as u64 != layout.size as u64 {
            return Err(TensorError::Corrupt {
                pool: pool(),
                path,
                reason: format!("{size} bytes, its header needs {}", layout.size),
            });
        }
        // the file's size was just checked to be layout.size
        let map = Mapping::shared(&fd, layout.size).map_err(|e| io("map", e))?;
        let pool = PoolInner::new(ctx, name, path, fd, map, layout, id)?;
        Ok(TensorPool {
            inner: Arc::new(pool),
        })
    }

    /// Opens the pool `name`, or creates it (as [`TensorPool::create`]) if there is none.
    /// An existing pool must have exactly these dimensions (`slot_bytes` rounded up as
    /// `create` rounds it): otherwise [`TensorError::Mismatch`].
    pub fn open_or_create(
        ctx: &Context,
        name: &str,
        slots: usize,
        slot_bytes: usize,
    ) -> Result<TensorPool, TensorError> {
        let pool = loop {
            match TensorPool::open(ctx, name) {
                Err(TensorError::NotFound { .. }) => {}
                other => break other?,
            }
            match TensorPool::create(ctx, name, slots, slot_bytes) {
                Err(TensorError::Exists { .. }) => continue, // another process was first
                other => return other,
            }
        };
        let want = round_slot_bytes(slot_bytes);
        if pool.slots() != slots || pool.slot_bytes() != want {
            return Err(TensorError::Mismatch {
                pool: name.to_string(),
                slots: pool.slots(),
                slot_bytes: pool.slot_bytes(),
                want_slots: slots,
                want_slot_bytes: want,
            });
        }
        Ok(pool)
    }

    /// Removes the pool's file name; handles (in any process) that have it open keep
    /// working, new opens find nothing. Returns whether there was a file. (The last context
    /// of a domain removes every pool of the domain anyway, as `nerve clean` does.)
    pub fn remove(ctx: &Context, name: &str) -> Result<bool, TensorError> {
        check_name(name)?;
        let path = pool_path(ctx, name);
        match rustix::fs::unlink(&path) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(TensorError::Io {
                pool: name.to_string(),
                path,
                what: "remove",
                source: e.into(),
            }),
        }
    }

    /// Opens the tensor a descriptor names, opening the pool named in it first (one more
    /// handle, held by the tensor). To open many, keep a pool handle and call
    /// [`TensorPool::open_tensor`].
    pub fn open_descriptor(ctx: &Context, desc: &TensorDescriptor) -> Result<Tensor, TensorError> {
        let Some(name) = desc.pool_name() else {
            return Err(TensorError::InvalidName {
                name: String::from_utf8_lossy(&desc.pool).into_owned(),
                reason: "the descriptor's pool name is not a NUL-padded valid name",
            });
        };
        TensorPool::open(ctx, name)?.open_tensor(desc)
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The pool's file.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The pool's random id (in every descriptor of it).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.inner.layout.slots
    }

    /// Bytes per slot (as created: a multiple of 64).
    pub fn slot_bytes(&self) -> usize {
        self.inner.layout.slot_bytes
    }

    /// Slots holding a tensor now (being written or readable), across all processes: a
    /// snapshot.
    pub fn in_use(&self) -> usize {
        self.inner
            .metas()
            .iter()
            .filter(|m| {
                let (_, phase, refs) = m.state.get();
                phase != FREE || refs != 0
            })
            .count()
    }

    /// Allocates a tensor of `shape` (C order, at most 8 dimensions; none is a scalar) of
    /// `dtype` elements in a free slot, to be written through [`TensorMut::bytes_mut`] and
    /// then [frozen](TensorMut::freeze). Its bytes are what the slot held before (not
    /// zeroed). A pool whose every slot is in use is [`TensorError::Full`] at once (after
    /// reclaiming the slots of dead processes), never a wait.
    pub fn alloc(&self, shape: &[usize], dtype: DType) -> Result<TensorMut, TensorError> {
        let p = &self.inner;
        if shape.len() > MAX_DIMS {
            return Err(TensorError::TooManyDims {
                pool: p.name.clone(),
                ndim: shape.len(),
                max: MAX_DIMS,
            });
        }
        let bytes = shape.iter().try_fold(dtype.size() as u64, |n, &d| {
            n.checked_mul(u64::try_from(d).ok()?)
        });
        let len = match bytes {
            Some(b) if b <= p.layout.slot_bytes as u64 => b as usize,
            _ => {
                return Err(TensorError::TooLarge {
                    pool: p.name.clone(),
                    shape: shape.iter().map(|&d| d as u64).collect(),
                    dtype,
                    bytes,
                    slot_bytes: p.layout.slot_bytes,
                })
            }
        };
        let (slot, generation) = match p.grab() {
            Some(s) => s,
            None => {
                p.reap_dead();
                p.grab().ok_or_else(|| TensorError::Full {
                    pool: p.name.clone(),
                    slots: p.layout.slots,
                })?
            }
        };
        // SYNC: the record is raised after the shared count (see the module docs: a death
        // in between leaves an over-count). The AcqRel CAS in `grab` keeps this after it.
        p.counts(p.record)[slot].fetch_add(1, Ordering::Relaxed);
        let mut dims = [0usize; MAX_DIMS];
        dims[..shape.len()].copy_from_slice(shape);
        let meta = &p.metas()[slot];
        // SYNC: Relaxed: the slot is WRITING and ours alone; the Release of `freeze`
        // publishes these with the data.
        meta.len.store(len as u64, Ordering::Relaxed);
        meta.kind.store(
            u64::from(dtype.code()) | (shape.len() as u64) << 8,
            Ordering::Relaxed,
        );
        for (m, &d) in meta.shape.iter().zip(&dims) {
            m.store(d as u64, Ordering::Relaxed);
        }
        Ok(TensorMut {
            held: Held {
                pool: self.inner.clone(),
                slot,
                generation,
                dtype,
                ndim: shape.len(),
                shape: dims,
                len,
            },
        })
    }

    /// Opens the tensor `desc` names (made by [`Tensor::descriptor`], in this or another
    /// process): one more reference to it, so its slot stays until this one is dropped
    /// too. Everything in the descriptor is checked first, and a tensor freed since (its
    /// slot maybe reused) is [`TensorError::Stale`]; one still being written is
    /// [`TensorError::Unpublished`].
    pub fn open_tensor(&self, desc: &TensorDescriptor) -> Result<Tensor, TensorError> {
        let p = &self.inner;
        let pool = || p.name.clone();
        if desc.pool != super::descriptor::name_field(&p.name) {
            return Err(TensorError::WrongPool {
                pool: pool(),
                reason: format!(
                    "pool {:?}",
                    String::from_utf8_lossy(&desc.pool).trim_end_matches('\0')
                ),
            });
        }
        if desc.pool_id != p.id {
            return Err(TensorError::WrongPool {
                pool: pool(),
                reason: format!(
                    "pool id {:016x}, not this pool's {:016x} (an earlier pool of the name)",
                    desc.pool_id, p.id
                ),
            });
        }
        let slot = desc.slot as usize;
        if slot >= p.layout.slots {
            return Err(TensorError::SlotOutOfRange {
                pool: pool(),
                slot: desc.slot,
                slots: p.layout.slots,
            });
        }
        let dtype = DType::from_code(desc.dtype).ok_or_else(|| TensorError::UnknownDType {
            pool: pool(),
            code: desc.dtype,
        })?;
        let ndim = usize::from(desc.ndim);
        if ndim > MAX_DIMS {
            return Err(TensorError::TooManyDims {
                pool: pool(),
                ndim,
                max: MAX_DIMS,
            });
        }
        let bad = |reason: String| TensorError::BadShape {
            pool: pool(),
            reason,
        };
        if desc.reserved != [0; 6] {
            return Err(bad("reserved bytes are not zero".into()));
        }
        if desc.shape[ndim..].iter().any(|&d| d != 0) {
            return Err(bad(format!("dimensions beyond ndim {ndim} are not zero")));
        }
        let bytes = desc.shape[..ndim]
            .iter()
            .try_fold(dtype.size() as u64, |n, &d| n.checked_mul(d));
        if bytes != Some(desc.len_bytes) {
            return Err(bad(format!(
                "shape {:?} of {dtype} is not {} bytes",
                &desc.shape[..ndim],
                desc.len_bytes
            )));
        }
        if desc.len_bytes > p.layout.slot_bytes as u64 {
            return Err(bad(format!(
                "{} bytes, a slot holds {}",
                desc.len_bytes, p.layout.slot_bytes
            )));
        }
        let meta = &p.metas()[slot];
        meta.state
            .take_ref(desc.generation)
            .map_err(|refused| match refused {
                Refused::Stale { current } => TensorError::Stale {
                    pool: pool(),
                    slot: desc.slot,
                    generation: desc.generation,
                    current,
                },
                Refused::Unpublished => TensorError::Unpublished {
                    pool: pool(),
                    slot: desc.slot,
                },
                Refused::TooManyReferences => TensorError::TooManyReferences {
                    pool: pool(),
                    slot: desc.slot,
                },
            })?;
        // SYNC: record after the shared count (see `alloc`).
        p.counts(p.record)[slot].fetch_add(1, Ordering::Relaxed);
        let held = Held {
            pool: self.inner.clone(),
            slot,
            generation: desc.generation,
            dtype,
            ndim,
            shape: desc.shape.map(|d| d as usize),
            len: desc.len_bytes as usize,
        };
        // the slot must hold what the descriptor says (a forged shape is refused; `held`
        // gives its reference back when dropped). SYNC: Relaxed loads: the Acquire CAS
        // above made the writer's stores visible, and nobody changes them while the slot
        // is READY and counted.
        let kind = u64::from(desc.dtype) | (ndim as u64) << 8;
        let same = meta.len.load(Ordering::Relaxed) == desc.len_bytes
            && meta.kind.load(Ordering::Relaxed) == kind
            && meta
                .shape
                .iter()
                .zip(&desc.shape)
                .all(|(m, &d)| m.load(Ordering::Relaxed) == d);
        if !same {
            return Err(bad(format!(
                "slot {slot} holds another shape or type than {dtype} {:?}",
                &desc.shape[..ndim]
            )));
        }
        Ok(Tensor {
            held: Arc::new(held),
        })
    }

    /// Reclaims the references of handles whose process died (their record's lock is
    /// free): slots nobody else holds are freed. Done by `open` and by `alloc` when the
    /// pool is full; returns how many dead handles were reclaimed.
    pub fn reclaim(&self) -> usize {
        self.inner.reap_dead()
    }
}

/// `slot_bytes` rounded up to a cache line (left alone if that would overflow: the range
/// check refuses it).
fn round_slot_bytes(slot_bytes: usize) -> usize {
    slot_bytes
        .checked_next_multiple_of(LINE)
        .unwrap_or(slot_bytes)
}

/// A random non-zero pool id.
fn random_id() -> u64 {
    let mut b = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match rustix::rand::getrandom(&mut b[got..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => got += n,
            Err(Errno::INTR) => {}
            Err(_) => break, // fall back to the clock below
        }
    }
    let id = u64::from_ne_bytes(b)
        ^ if got < 8 {
            crate::sys::clock::mono_ns()
        } else {
            0
        };
    id.max(1)
}

impl PoolInner {
    fn new(
        ctx: &Context,
        name: &str,
        path: String,
        fd: OwnedFd,
        map: Mapping,
        layout: Layout,
        id: u64,
    ) -> Result<PoolInner, TensorError> {
        assert_eq!(map.len(), layout.size, "the whole file is mapped");
        let mut pool = PoolInner {
            _ctx: ctx.clone(),
            name: name.to_string(),
            path,
            fd,
            map,
            layout,
            id,
            record: NO_RECORD,
            next: AtomicUsize::new(0),
        };
        pool.reap_dead();
        pool.record = pool.claim_record()?;
        Ok(pool)
    }

    /// Every slot's state and metadata.
    fn metas(&self) -> &[SlotMeta] {
        // SAFETY: the mapping holds `layout.size` bytes (asserted in `new`), which
        // `Layout::new` computed to cover HEADER + slots * META; the mapping is page-aligned
        // and HEADER a multiple of SlotMeta's alignment (const assertion). SlotMeta holds
        // only atomics, for which any bytes are valid values, and the memory is shared
        // only through them; the slice lives no longer than &self, which keeps the
        // mapping.
        unsafe {
            std::slice::from_raw_parts(
                self.map.ptr().add(HEADER).cast::<SlotMeta>(),
                self.layout.slots,
            )
        }
    }

    /// Record `i`'s state word.
    fn record_state(&self, i: usize) -> &AtomicU32 {
        assert!(i < RECORDS);
        // SAFETY: record i lies within the mapping (layout.records + RECORDS * stride <=
        // layout.data <= size, i < RECORDS); its offset is a multiple of 64, so aligned
        // for AtomicU32; any bytes are a valid AtomicU32, shared only atomically; the
        // reference lives no longer than &self, which keeps the mapping.
        unsafe {
            &*self
                .map
                .ptr()
                .add(self.layout.records + i * self.layout.record_stride)
                .cast::<AtomicU32>()
        }
    }

    /// Record `i`'s reference counts, one per slot.
    pub(crate) fn counts(&self, i: usize) -> &[AtomicU32] {
        assert!(i < RECORDS);
        // SAFETY: as in `record_state`: the counts follow the record's 64-byte head and
        // take slots * 4 <= stride - 64 bytes, aligned to 4.
        unsafe {
            std::slice::from_raw_parts(
                self.map
                    .ptr()
                    .add(self.layout.records + i * self.layout.record_stride + RECORD_HEAD)
                    .cast::<AtomicU32>(),
                self.layout.slots,
            )
        }
    }

    /// The first byte of `slot`'s data.
    pub(crate) fn data(&self, slot: usize) -> *mut u8 {
        assert!(slot < self.layout.slots);
        // SAFETY: data + slot * slot_bytes + slot_bytes <= size (Layout::new), within
        // the mapping: `add` stays in bounds.
        unsafe {
            self.map
                .ptr()
                .add(self.layout.data + slot * self.layout.slot_bytes)
        }
    }

    /// Takes a free slot for writing: (slot, generation).
    fn grab(&self) -> Option<(usize, u32)> {
        let n = self.layout.slots;
        let start = self.next.load(Ordering::Relaxed);
        let metas = self.metas();
        (0..n).map(|i| (start + i) % n).find_map(|s| {
            let generation = metas[s].state.grab()?;
            self.next.store(s + 1, Ordering::Relaxed);
            Some((s, generation))
        })
    }

    /// Drops one reference of this handle to `slot` at `generation` (a Tensor or an
    /// unfrozen TensorMut going): the record first, then the shared count, freeing the
    /// slot at zero.
    pub(crate) fn release(&self, slot: usize, generation_held: u32) {
        // SYNC: record first (see the module docs: a death in between leaves an
        // over-count); the Release of the update below keeps this before it. Saturating:
        // a count that somebody else zeroed never wraps to a huge one.
        let _ = self.counts(self.record)[slot].fetch_update(
            Ordering::Relaxed,
            Ordering::Relaxed,
            |c| c.checked_sub(1),
        );
        self.metas()[slot].state.release(generation_held);
    }

    /// Marks `slot` (WRITING, ours) readable.
    pub(crate) fn freeze(&self, slot: usize, generation_held: u32) {
        self.metas()[slot].state.freeze(generation_held);
    }

    /// Finds records of handles that died (their lock is free) and subtracts what they
    /// held from the shared counts, freeing slots nobody else holds. Returns how many.
    fn reap_dead(&self) -> usize {
        let mut reaped = 0;
        for i in 0..RECORDS {
            if i == self.record {
                continue; // our own description never conflicts with itself
            }
            let state = self.record_state(i);
            // SYNC: a record's state is written by its owner, its claimer and the one
            // reaper holding its lock.
            if !matches!(state.load(Ordering::Acquire), R_LIVE | R_REAPING) {
                continue;
            }
            let Ok(Some(lock)) = OfdLock::try_take(&self.fd, RECORD_LOCK + i as u64) else {
                continue; // its owner lives
            };
            // SYNC: again under the lock: its owner may have gone cleanly (FREE before its
            // unlock) and a claimer taken it since; only a LIVE or REAPING record whose
            // lock we hold belongs to the dead.
            let now = state.load(Ordering::Acquire);
            if !matches!(now, R_LIVE | R_REAPING)
                || state
                    .compare_exchange(now, R_REAPING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
            {
                continue;
            }
            for (slot, count) in self.counts(i).iter().enumerate() {
                // SYNC: swap then subtract: a reaper killed in between leaves an
                // over-count only.
                let n = count.swap(0, Ordering::AcqRel);
                if n == 0 {
                    continue;
                }
                self.metas()[slot].state.drop_dead(u64::from(n));
            }
            // SYNC: Release publishes the zeroed counts to the next owner. FREE before the
            // unlock: a claimer then waits for the lock.
            state.store(R_FREE, Ordering::Release);
            drop(lock);
            reaped += 1;
        }
        reaped
    }

    /// Claims a free record for this handle and locks it for as long as the handle lives.
    fn claim_record(&self) -> Result<usize, TensorError> {
        for i in 0..RECORDS {
            let state = self.record_state(i);
            // SYNC: the CAS makes the claim exclusive among handles.
            if state
                .compare_exchange(R_FREE, R_CLAIMED, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // held only by a reaper flipping it: a stopped reaper fails this within the
            // deadline, naming it
            let byte = RECORD_LOCK + i as u64;
            let (timeout, what) = (LOCK_TIMEOUT, "a tensor pool record's lock");
            match OfdLock::wait_at_most(&self.fd, byte, timeout, what) {
                Ok(lock) => {
                    // held until Drop releases it explicitly (or death does)
                    std::mem::forget(lock);
                    // a free record holds nothing; counts left in a damaged file become
                    // leaks (over-counts), never subtractions
                    for c in self.counts(i) {
                        c.store(0, Ordering::Relaxed);
                    }
                    // SYNC: LIVE only once the lock is held: reapers test LIVE records
                    state.store(R_LIVE, Ordering::Release);
                    return Ok(i);
                }
                Err(e) => {
                    // SYNC: the claim given back (nothing was written under it)
                    state.store(R_FREE, Ordering::Release);
                    return Err(TensorError::Io {
                        pool: self.name.clone(),
                        path: self.path.clone(),
                        what: "lock a handle record of",
                        source: e,
                    });
                }
            }
        }
        Err(TensorError::TooManyHandles {
            pool: self.name.clone(),
            records: RECORDS,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    #[cfg(test)]
    pub(crate) fn state_of(&self, slot: usize) -> (u32, u64, u64) {
        self.metas()[slot].state.get()
    }

    #[cfg(test)]
    pub(crate) fn context(&self) -> &Context {
        &self._ctx
    }

    #[cfg(test)]
    pub(crate) fn record(&self) -> usize {
        self.record
    }

    #[cfg(test)]
    pub(crate) fn raw_parts(&self) -> (i32, *mut u8, usize) {
        use std::os::fd::AsRawFd;
        (self.fd.as_raw_fd(), self.map.ptr(), self.map.len())
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        if self.record != NO_RECORD {
            // every Tensor and TensorMut holds an Arc of this handle, so its counts are
            // back to zero. SYNC: FREE before the unlock (see `reap_dead`).
            self.record_state(self.record)
                .store(R_FREE, Ordering::Release);
            let _ = OfdLock::release(&self.fd, RECORD_LOCK + self.record as u64);
        }
        // then `map` unmaps and closing `fd` drops any lock left
    }
}

/// Loom models of a slot's state word: the real [`SlotState`] calls of a writer (grab,
/// write, freeze, release), of a handle in another thread opening the tensor from its
/// generation alone and giving it back, and of the next allocation, under every
/// interleaving up to loom's preemption bound. The slot's bytes are a loom cell, so a
/// write that is not ordered after every read of the previous tensor (a slot handed out
/// while still held) fails the model, as does a read not ordered after the write. Run
/// by `scripts/concurrency`.
#[cfg(all(test, nerve_loom))]
mod loom_models {
    use super::*;
    use crate::loom::sync::atomic::AtomicU32;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Generation + 1 of a frozen tensor, 0 before: the descriptor as another process
    /// would get it, with no ordering of its own (the slot's word alone must carry the
    /// data).
    const NONE: u32 = 0;

    #[test]
    fn a_slot_is_never_handed_out_while_held_and_freed_exactly_once() {
        loom::model(|| {
            let state = Arc::new(SlotState::new());
            let data = Arc::new(UnsafeCell::new(0u64));
            let descriptor = Arc::new(AtomicU32::new(NONE));
            let opener = {
                let (state, data, descriptor) = (state.clone(), data.clone(), descriptor.clone());
                thread::spawn(move || loop {
                    // SYNC: Relaxed: a descriptor carries no ordering
                    let g = descriptor.load(Ordering::Relaxed);
                    if g == NONE {
                        thread::yield_now();
                        continue;
                    }
                    match state.take_ref(g - 1) {
                        Ok(()) => {
                            // SAFETY: READY and counted: nobody writes it
                            assert_eq!(data.with(|d| unsafe { *d }), 7, "the frozen data");
                            state.release(g - 1);
                            return true;
                        }
                        // the descriptor came before the freeze (or the allocation)
                        // became visible here (a real one travels by a topic, which
                        // orders it after them)
                        Err(Refused::Unpublished) => thread::yield_now(),
                        Err(Refused::Stale { current }) if current + 1 == g => thread::yield_now(),
                        // freed since: a stale descriptor, refused
                        Err(Refused::Stale { current }) => {
                            assert_eq!(current, g, "freed once: generation bumped by one");
                            return false;
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                })
            };
            // the writer, while the opener already waits for a descriptor
            let generation = state.grab().expect("a free slot");
            // SAFETY: WRITING and ours alone
            data.with_mut(|d| unsafe { *d = 7 });
            state.freeze(generation);
            // SYNC: Relaxed, see `descriptor`
            descriptor.store(generation + 1, Ordering::Relaxed);
            // the writer's tensor dropped: the slot is free once the opener gave its back
            state.release(generation);
            // the next allocation waits for that
            let next = loop {
                if let Some(g) = state.grab() {
                    break g;
                }
                thread::yield_now();
            };
            assert_eq!(next, generation + 1, "freed exactly once");
            // SAFETY: WRITING and ours alone (loom fails the model if a read of
            // the previous tensor is not ordered before this write)
            data.with_mut(|d| unsafe { *d = 9 });
            opener.join().expect("opener");
            assert_eq!(state.get(), (generation + 1, WRITING, 1));
        });
    }

    #[test]
    fn concurrent_releases_free_a_slot_exactly_once() {
        loom::model(|| {
            // a frozen tensor with three references (the writer's and two openers')
            let state = Arc::new(SlotState::new());
            let generation = state.grab().expect("a free slot");
            state.freeze(generation);
            state.take_ref(generation).expect("open");
            state.take_ref(generation).expect("open");
            let releasers: Vec<_> = (0..2)
                .map(|_| {
                    let state = state.clone();
                    thread::spawn(move || state.release(generation))
                })
                .collect();
            state.release(generation);
            releasers
                .into_iter()
                .for_each(|r| r.join().expect("releaser"));
            assert_eq!(state.get(), (generation + 1, FREE, 0), "freed once");
            // a stale descriptor is refused from now on, and the slot is handed out once
            assert_eq!(
                state.take_ref(generation),
                Err(Refused::Stale {
                    current: generation + 1
                })
            );
            assert_eq!(state.grab(), Some(generation + 1));
            assert_eq!(state.grab(), None);
        });
    }
}
