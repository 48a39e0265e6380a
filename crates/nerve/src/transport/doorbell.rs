//! Wake-ups between processes through futexes in one shared-memory file per domain.
//!
//! The doorbell is a table of slots, each a sequence word (the futex), a waiter count and
//! a binding on a cache line of its own. Every key (a topic, a service, a client's reply
//! channel) is bound to a slot of its own while anyone uses it, so a ring wakes only the
//! waiters of that key (no herd of unrelated waiters). A publisher rings after sending only
//! when someone waits, so an un-watched topic pays one fence and one load per publish and
//! no system call.
//!
//! Crash safety: every handle (one per context) also owns a record of what it added to
//! the shared counts (bindings and waiters per slot) and holds an open-file-description
//! lock on that record's byte. A process killed at any point releases its locks with its
//! death; the next handle to open the doorbell finds such records and subtracts their
//! counts, so neither stale waiter counts (a system call on every publish) nor slots held
//! by the dead stay behind while other processes live. Every count is raised in the shared
//! slot before the record and lowered in the record first, so a death in between leaves
//! at most an over-count (a spare wake-up), never an under-count (a lost one).
//!
//! Lifetime: every process holds a shared `flock` on the file; the last one to close it
//! takes the exclusive lock and unlinks it. A process that finds itself alone in the
//! domain clears the whole file. `nerve clean` removes a stale file.

use crate::config::Config;
use crate::sys::files::{check_owner, same_inode, Mapping, OfdLock};
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::io;
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// Under `--cfg nerve_loom` the words of the wake-up handshake (a slot's sequence, waiter
// count and flag) are loom's atomics, the futex is loom's condition variable and both
// sides of `membarrier` are loom's SeqCst fences (see `crate::loom`), so the models
// (`loom_models` below, `scripts/concurrency`) run the real `ring`, `register` and
// `wait`. Only they run in such a build: a slot in the shared file cannot hold loom's
// atomics.
use crate::loom::futex::{futex_wait, futex_wake};
use crate::loom::membarrier;
use crate::loom::sync::atomic::{fence, AtomicU32 as HandshakeWord};

/// Number of slots: the most keys (topics, services, clients) bound at once in a domain.
pub(crate) const SLOTS: usize = 4096;
/// Number of handle records: the most contexts whose counts are reclaimed after a crash
/// (more may open the doorbell; theirs are then reclaimed only when the domain empties).
/// With [`ENTRIES`] and [`SLOTS`] the file is about 650 KiB (pages untouched stay
/// unallocated).
const RECORDS: usize = 256;

/// Bits of a slot binding that count its users; the bits above hold the key's tag.
const USER_BITS: u32 = 24;
const USERS: u64 = (1 << USER_BITS) - 1;

/// One wake-up slot: a sequence word (the futex), a waiter count, an ack count, the
/// "someone sleeps" flag and the binding (key tag and user count) on a cache line of its
/// own. (Public only as the target
/// of [`SlotRef`]; unreachable outside the crate, and all its methods are crate-private.)
#[repr(C, align(64))]
pub struct Slot {
    seq: HandshakeWord,
    waiters: HandshakeWord,
    acks: AtomicU32,
    /// Set by every waiter as it announces itself, cleared by the first ring after it: the
    /// rings that follow while the woken waiter has not yet looked make no system call.
    armed: HandshakeWord,
    /// 1 while the key bound is a service's (requests, replies): every ringer of the slot
    /// then pays a full fence, so its waiters need no `membarrier` before they sleep (see
    /// [`Doorbell::bind_fenced`]).
    fenced: AtomicU32,
    binding: AtomicU64,
}

/// What one handle added to the shared counts: an entry per slot it has bound.
#[repr(C)]
struct Record {
    /// [`FREE`], [`CLAIMED`], [`LIVE`] or [`REAPING`].
    state: AtomicU32,
    entries: [Entry; ENTRIES],
}

/// A slot bound by one handle: written only by that handle while it lives (entries are
/// claimed and freed under its bind lock), read by the reaper after its death.
#[repr(C)]
struct Entry {
    /// The slot's index + 1; 0 while the entry is free.
    slot: AtomicU32,
    /// Bindings of the slot by this handle.
    users: AtomicU32,
    /// Waiters of this handle on the slot.
    waiters: AtomicU32,
}

/// Slots one handle's record tracks; bindings beyond them are reclaimed only when the
/// domain empties.
const ENTRIES: usize = 128;

const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const LIVE: u32 = 2;
const REAPING: u32 = 3;

/// The file's layout.
#[repr(C)]
struct Table {
    slots: [Slot; SLOTS],
    records: [Record; RECORDS],
}

const SIZE: usize = std::mem::size_of::<Table>();
/// Byte locked (open-file-description lock) while binding keys to slots.
const BIND_LOCK: u64 = 0;
/// Longest a domain-wide lock (the bind lock, a record's lock, a ring's claim lock) is
/// waited for when creating an entity: a process stopped while holding one (SIGSTOP, a
/// debugger) makes creations fail with an error naming it instead of stalling them.
pub(crate) const LOCK_TIMEOUT: Duration = Duration::from_secs(2);
/// Byte locked by the live owner of record `i`: `RECORD_LOCK + i`.
const RECORD_LOCK: u64 = 1;

/// A key's tag in a slot's binding word and the slot its search starts at: 40 bits of
/// the key's hash, never zero (zero marks a free slot). Two keys with the same tag share a
/// slot, which costs spurious wake-ups only.
fn key_tag(key: &str) -> (u64, usize) {
    let h = crate::message::layout::hash_str(crate::message::layout::FNV_OFFSET, key);
    (
        ((h >> USER_BITS) | (1 << 39)) << USER_BITS,
        (h % SLOTS as u64) as usize,
    )
}

/// A mapped doorbell file.
pub(crate) struct Doorbell {
    path: String,
    fd: OwnedFd,
    /// SIZE bytes of the file, viewed as a [`Table`].
    map: Mapping,
    /// This handle's record, if one was free.
    record: Option<usize>,
    /// Threads of this handle share its file description (and so its locks): binding is
    /// serialized among them here.
    bind: Mutex<()>,
}

/// Errors of the doorbell beyond the operating system's.
fn full() -> io::Error {
    io::Error::other(format!(
        "the domain's doorbell is full: {SLOTS} topics, services and clients are in use at once"
    ))
}

/// The name of a domain's doorbell in /dev/shm (versioned: a file of another layout is
/// never mapped as this one).
pub(crate) fn file_name(config: &Config) -> String {
    format!("{}doorbell4", config.file_prefix())
}

/// The path of a domain's doorbell.
pub(crate) fn path(config: &Config) -> String {
    format!("/dev/shm/{}", file_name(config))
}

/// Whether live contexts use a domain: each holds a lock on the domain's doorbell, which
/// the kernel's lock table (`/proc/locks`) lists. Found without opening or locking the
/// file, so a context joining or leaving the domain meanwhile is not disturbed. No
/// doorbell: not in use; a table that cannot be read: in use (the cautious answer). The
/// table shows only the locks of this PID namespace's processes.
pub(crate) fn in_use(config: &Config) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(path(config)) {
        Ok(m) => m,
        Err(e) => return e.kind() != io::ErrorKind::NotFound,
    };
    let id = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev()),
        meta.ino()
    );
    std::fs::read_to_string("/proc/locks").map_or(true, |table| {
        table.lines().any(|l| l.split_whitespace().any(|w| w == id))
    })
}

impl Doorbell {
    /// Opens (or creates) the doorbell at `/dev/shm/<name>` with the given file mode.
    pub(crate) fn open(name: &str, mode: u32) -> io::Result<Doorbell> {
        Self::open_first(name, mode, || {})
    }

    /// [`Doorbell::open`], running `on_first` when this handle is the domain's only user,
    /// while it still holds the lock exclusively: no other process can join before it
    /// returns (they wait for the lock).
    pub(crate) fn open_first(
        name: &str,
        mode: u32,
        on_first: impl FnOnce(),
    ) -> io::Result<Doorbell> {
        let mut on_first = Some(on_first);
        let path = format!("/dev/shm/{name}");
        loop {
            let fd = rustix::fs::open(
                &path,
                OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::from_raw_mode(mode),
            )?;
            check_owner(&fd)?;
            // First user of the domain (no one else holds a lock)? Then everything in the
            // file is left over from processes that are gone: it is cleared below.
            let alone = rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok();
            if !alone {
                rustix::fs::flock(&fd, FlockOperation::LockShared)?;
            }
            // The last user may have unlinked the file between our open and our lock:
            // then the path names another inode (or none) and we start over.
            if !same_inode(&fd, &path) {
                continue;
            }
            if alone {
                // truncating to nothing and back zeroes every byte
                rustix::fs::ftruncate(&fd, 0)?;
            }
            rustix::fs::ftruncate(&fd, SIZE as u64)?;
            // the file was just sized to SIZE
            let map = Mapping::shared(&fd, SIZE)?;
            let mut bell = Doorbell {
                path,
                fd,
                map,
                record: None,
                bind: Mutex::new(()),
            };
            if alone {
                if let Some(f) = on_first.take() {
                    f();
                }
                // downgrade to the shared lock every user holds
                rustix::fs::flock(&bell.fd, FlockOperation::LockShared)?;
            }
            bell.reap_dead();
            bell.record = bell.claim_record();
            return Ok(bell);
        }
    }

    fn table(&self) -> &Table {
        // SAFETY: `map` is a live shared mapping of SIZE bytes (page-aligned, so aligned
        // for Table) until `self` is dropped, and Table holds only atomics and padding,
        // for which any bytes are valid values: a shared reference tied to &self is sound.
        unsafe { &*(self.map.ptr() as *const Table) }
    }

    /// The slot at `index` (taken modulo the slot count: indices may come from other
    /// processes; a stale one costs a spurious wake-up only).
    pub(crate) fn slot_at(&self, index: u32) -> &Slot {
        &self.table().slots[index as usize % SLOTS]
    }

    fn record(&self) -> Option<&Record> {
        self.record.map(|i| &self.table().records[i])
    }

    /// Binds `key` to its slot (the one it already has in the domain, or a free one) for
    /// as long as the returned reference or a clone of it lives.
    pub(crate) fn bind(self: &Arc<Self>, key: &str) -> io::Result<SlotRef> {
        self.bind_as(key, false)
    }

    /// [`Doorbell::bind`] for a key rung once per call (a service's requests, a client's
    /// replies): the slot is marked fenced, so every ringer pays a full fence (a few ns,
    /// nothing beside a call) and its waiters sleep after a plain fence instead of a
    /// `membarrier` system call. That call interrupts every core running a registered
    /// process and serializes on a kernel-wide mutex: two of them per blocking call made
    /// up about a third of both processes' CPU in the service suite's block mode.
    pub(crate) fn bind_fenced(self: &Arc<Self>, key: &str) -> io::Result<SlotRef> {
        self.bind_as(key, true)
    }

    fn bind_as(self: &Arc<Self>, key: &str, fenced: bool) -> io::Result<SlotRef> {
        let (tag, home) = key_tag(key);
        let _in_process = self.bind.lock().unwrap_or_else(|e| e.into_inner());
        // one binder at a time in the domain, so a key never gets two slots; the lock
        // dies with its holder
        let _in_domain =
            OfdLock::wait_at_most(&self.fd, BIND_LOCK, LOCK_TIMEOUT, "the domain's bind lock")?;
        let slots = &self.table().slots;
        let order = || (0..SLOTS).map(|i| (home + i) % SLOTS);
        let joined = order().find(|&i| {
            let b = &slots[i].binding;
            let mut cur = b.load(Ordering::Acquire);
            // SYNC: the CAS keeps tag and count consistent against concurrent unbinds
            // (which need no lock); a failed one re-reads.
            while cur & !USERS == tag && cur & USERS < USERS {
                match b.compare_exchange(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return true,
                    Err(now) => cur = now,
                }
            }
            false
        });
        let index = match joined {
            Some(i) => i,
            None => {
                let i = order()
                    .find(|&i| {
                        // SYNC: claims a free slot; binders are serialized by the lock,
                        // unbinds only ever free slots.
                        slots[i]
                            .binding
                            .compare_exchange(0, tag | 1, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                    })
                    .ok_or_else(full)?;
                // a freed slot has no waiter left to rely on its former mark
                // SYNC: Relaxed: read by ringers (see `Slot::ring`); nobody waits on the
                // slot before this bind returns.
                slots[i].fenced.store(0, Ordering::Relaxed);
                i
            }
        };
        if fenced && slots[index].fenced.load(Ordering::Relaxed) == 0 {
            // SYNC: sticky while the slot is bound. The heavy fence after the store makes
            // every ringer either see the mark (and fence fully from then on) or have its
            // sample visible before this bind returns, so no later waiter that skips the
            // heavy fence can miss it.
            slots[index].fenced.store(1, Ordering::SeqCst);
            fence_for_waiters(false);
        }
        let entry = self.record().and_then(|r| {
            let key = index as u32 + 1;
            // SYNC: entries are written only by this handle, under its bind lock (held
            // here); the reaper reads them after this handle's death.
            let at = r
                .entries
                .iter()
                .position(|e| e.slot.load(Ordering::Relaxed) == key)
                .or_else(|| {
                    let free = r
                        .entries
                        .iter()
                        .position(|e| e.slot.load(Ordering::Relaxed) == 0)?;
                    r.entries[free].slot.store(key, Ordering::Release);
                    Some(free)
                })?;
            r.entries[at].users.fetch_add(1, Ordering::Release);
            Some(at as u16)
        });
        Ok(SlotRef(Arc::new(Binding {
            bell: self.clone(),
            index: index as u32,
            entry,
        })))
    }

    /// Rings the slot bound to `key` even if nobody waits, if anyone has bound it.
    pub(crate) fn ring_key(&self, key: &str) {
        let (tag, _) = key_tag(key);
        if let Some(s) = self
            .table()
            .slots
            .iter()
            .find(|s| s.binding.load(Ordering::Acquire) & !USERS == tag)
        {
            s.ring_always();
        }
    }

    /// Lowers the user count of slot `index` by `n`, freeing the slot at zero.
    fn unbind(&self, index: usize, n: u32) {
        let b = &self.table().slots[index].binding;
        let mut cur = b.load(Ordering::Acquire);
        loop {
            let users = cur & USERS;
            let next = if users <= u64::from(n) {
                0
            } else {
                cur - u64::from(n)
            };
            // SYNC: see `bind`.
            match b.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Finds records of handles that died (their lock is free) and subtracts what they
    /// added to the shared counts.
    fn reap_dead(&self) {
        let t = self.table();
        for (i, r) in t.records.iter().enumerate() {
            // SYNC: a record's state is written only by its owner and by the one reaper
            // holding its lock.
            if !matches!(r.state.load(Ordering::Acquire), LIVE | REAPING) {
                continue;
            }
            let Ok(Some(lock)) = OfdLock::try_take(&self.fd, RECORD_LOCK + i as u64) else {
                continue; // its owner lives
            };
            // Again under the lock: its owner may have gone cleanly since the look above
            // (FREE before its unlock) and a claimer taken the record (CLAIMED, waiting
            // for this lock). Overwriting that claim would let a second claimer in, to
            // wait for the lock as long as the first lives. Only a LIVE or REAPING record
            // whose lock we hold belongs to the dead.
            if !matches!(r.state.load(Ordering::Acquire), LIVE | REAPING) {
                continue;
            }
            r.state.store(REAPING, Ordering::Release);
            for e in &r.entries {
                let Some(s) = (e.slot.load(Ordering::Acquire) as usize).checked_sub(1) else {
                    continue;
                };
                let Some(slot) = t.slots.get(s) else {
                    continue; // not a slot index: written by no Nerve handle
                };
                // SYNC: swap then subtract: a reaper killed in between leaves an
                // over-count only.
                let w = e.waiters.swap(0, Ordering::AcqRel);
                if w > 0 {
                    // saturating: a count cleared meanwhile never wraps to "always waited"
                    let _ = slot
                        .waiters
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                            Some(n.saturating_sub(w))
                        });
                }
                let u = e.users.swap(0, Ordering::AcqRel);
                if u > 0 {
                    self.unbind(s, u);
                }
                e.slot.store(0, Ordering::Release);
            }
            // SYNC: Release publishes the zeroed counts to the next owner. FREE before the
            // unlock: a claimer then waits for the lock, and no other reaper (they look
            // only at LIVE and REAPING records) can overwrite its claim.
            r.state.store(FREE, Ordering::Release);
            drop(lock);
        }
    }

    /// Claims a free record for this handle and locks it for as long as the handle lives.
    fn claim_record(&self) -> Option<usize> {
        self.table().records.iter().enumerate().find_map(|(i, r)| {
            // SYNC: the CAS makes the claim exclusive among handles.
            r.state
                .compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
                .ok()?;
            // held only by a reaper flipping it (see `reap_dead`): past the deadline
            // (a stopped reaper), the next free record is tried
            let what = "a handle record's lock";
            match OfdLock::wait_at_most(&self.fd, RECORD_LOCK + i as u64, LOCK_TIMEOUT, what) {
                Ok(lock) => {
                    // held until Drop releases it explicitly (or death does)
                    std::mem::forget(lock);
                    // SYNC: LIVE only once the lock is held: reapers test LIVE records
                    r.state.store(LIVE, Ordering::Release);
                    Some(i)
                }
                Err(_) => {
                    r.state.store(FREE, Ordering::Release);
                    None
                }
            }
        })
    }

    /// Tries to turn this process's shared lock into an exclusive one: succeeds only if no
    /// other context in the domain is alive. (The conversion is not atomic: on failure
    /// this handle may hold no lock at all, which lets another exiting context find itself
    /// last and clean up; so call it only when about to drop or clean, never on a handle
    /// that stays in use.)
    pub(crate) fn try_exclusive(&self) -> bool {
        rustix::fs::flock(&self.fd, FlockOperation::NonBlockingLockExclusive).is_ok()
    }

    /// Removes the file name; processes that still map it keep their mapping.
    pub(crate) fn unlink(&self) {
        let _ = rustix::fs::unlink(&self.path);
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        if let Some(i) = self.record {
            // every SlotRef holds the doorbell, so this handle's counts are back to zero.
            // SYNC: FREE before the unlock (see `reap_dead`): a claimer waits for the lock,
            // and no reaper takes a FREE record for a dead one.
            self.table().records[i].state.store(FREE, Ordering::Release);
            let _ = OfdLock::release(&self.fd, RECORD_LOCK + i as u64);
        }
        // then `map` unmaps (no reference into it outlives self: every one is tied to
        // &self or holds an Arc of self) and closing `fd` releases the locks
    }
}

/// A key bound to a slot; unbinds on drop.
struct Binding {
    bell: Arc<Doorbell>,
    index: u32,
    /// This binding's entry in the handle's record (none if the record is full).
    entry: Option<u16>,
}

impl Binding {
    fn entry(&self) -> Option<&Entry> {
        let r = self.bell.record()?;
        Some(&r.entries[usize::from(self.entry?)])
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        if let Some(e) = self.entry() {
            // record first, then the shared count (see the module docs); an entry is
            // freed under the bind lock, so no bind reuses it meanwhile
            let _in_process = self.bell.bind.lock().unwrap_or_else(|e| e.into_inner());
            // SYNC: see `Doorbell::bind`.
            if e.users.fetch_sub(1, Ordering::AcqRel) == 1 {
                e.slot.store(0, Ordering::Release);
            }
        }
        self.bell.unbind(self.index as usize, 1);
    }
}

/// A key's slot, holding the mapping alive and the key bound: safe to keep in any entity
/// for as long as it lives, wherever the context that opened the doorbell has gone.
/// (Public only to name it in the sealed [`crate::Waitable`]; nothing outside the crate
/// can reach it.)
#[derive(Clone)]
pub struct SlotRef(Arc<Binding>);

impl SlotRef {
    /// Whether both refer to the same slot of the same mapping.
    pub(crate) fn same(&self, other: &SlotRef) -> bool {
        std::ptr::eq::<Slot>(&**self, &**other)
    }

    /// The slot's index (what a client tells a server to ring).
    pub(crate) fn index(&self) -> u32 {
        self.0.index
    }

    /// [`Slot::register`], counted in this handle's record too.
    pub(crate) fn register(&self) -> u32 {
        let seen = (**self).register();
        self.count_in_record();
        seen
    }

    /// [`Slot::announce`], counted in this handle's record too.
    pub(crate) fn announce(&self) {
        (**self).announce();
        self.count_in_record();
    }

    /// The record's half of announcing: raised after the slot's count (see the module
    /// docs).
    fn count_in_record(&self) {
        if let Some(e) = self.0.entry() {
            // SYNC: Relaxed: read only by a reaper after this handle died.
            e.waiters.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Withdraws a waiter announced by `register` or `announce`.
    pub(crate) fn unregister(&self) {
        if let Some(e) = self.0.entry() {
            // SYNC: record first, then the shared count (see the module docs).
            e.waiters.fetch_sub(1, Ordering::Relaxed);
        }
        (**self).unregister();
    }
}

/// What a wait on several slots does to each: [`Slot`] itself (the loom models) and
/// [`SlotRef`] (which also counts its waiters in its handle's record).
pub(crate) trait Armable {
    /// Raises the waiter count and arms the slot ([`Slot::announce`]).
    fn announce(&self);
    /// The slot ([`Slot::seq`], [`Slot::is_armed`]).
    fn slot(&self) -> &Slot;
    /// Withdraws the waiter ([`Slot::unregister`]).
    fn unregister(&self);
}

impl Armable for Slot {
    fn announce(&self) {
        Slot::announce(self);
    }
    fn slot(&self) -> &Slot {
        self
    }
    fn unregister(&self) {
        Slot::unregister(self);
    }
}

impl Armable for SlotRef {
    fn announce(&self) {
        SlotRef::announce(self);
    }
    fn slot(&self) -> &Slot {
        self
    }
    fn unregister(&self) {
        SlotRef::unregister(self);
    }
}

impl<A: Armable> Armable for &A {
    fn announce(&self) {
        (**self).announce();
    }
    fn slot(&self) -> &Slot {
        (**self).slot()
    }
    fn unregister(&self) {
        (**self).unregister();
    }
}

/// One round of a wait on several slots: the wake-up handshake, written once for the
/// executor, wait sets and the loom models. Announces a waiter on every slot, fences once
/// ([`fence_for_waiters`]), reads every sequence, then calls `look` with them: it checks
/// the caller's queues and returns its result and, if nothing is ready, what to sleep
/// with. The round sleeps (`sleep`) only if every slot is still armed (a ring that
/// cleared a flag meanwhile may have found nothing for this waiter, and later rings
/// would not wake it: look again instead), then withdraws the waiters. `seen` is the
/// caller's buffer for the sequences (kept between rounds: no allocation).
pub(crate) fn wait_round<A: Armable, T, P>(
    slots: &[A],
    seen: &mut Vec<u32>,
    look: impl FnOnce(&[u32]) -> (T, Option<P>),
    sleep: impl FnOnce(P),
) -> T {
    slots.iter().for_each(Armable::announce);
    if !slots.is_empty() {
        fence_for_waiters(slots.iter().all(|s| s.slot().is_fenced()));
    }
    seen.clear();
    seen.extend(slots.iter().map(|s| s.slot().seq()));
    let (result, idle) = look(seen);
    if let Some(p) = idle {
        if slots.iter().all(|s| s.slot().is_armed()) {
            sleep(p);
        }
    }
    slots.iter().for_each(Armable::unregister);
    result
}

impl Deref for SlotRef {
    type Target = Slot;
    #[inline]
    fn deref(&self) -> &Slot {
        self.0.bell.slot_at(self.0.index)
    }
}

/// The waiter's side of the wake-up handshake, after announcing on every slot waited on
/// and before checking queues: the heavy fence orders the announcements before the queue
/// checks on this thread and before the light fence of every publisher's thread (see
/// `Slot::ring`), so either a publisher sees this waiter or this waiter sees the sample.
/// Where every slot waited on is fenced (`all_fenced`), their ringers fence fully and a
/// full fence here pairs with theirs.
pub(crate) fn fence_for_waiters(all_fenced: bool) {
    if all_fenced {
        // SYNC: pairs with the full fence of every ringer of a fenced slot (`Slot::ring`).
        fence(Ordering::SeqCst);
        return;
    }
    if !membarrier::heavy() {
        // SYNC: Relaxed: a flag that only shortens sleeps.
        UNFENCED.store(true, Ordering::Relaxed);
    }
}

/// The publisher's side of the handshake: a full fence on a fenced slot, else a compiler
/// fence in a process registered for `membarrier` (and a full fence elsewhere).
#[inline]
fn fence_for_ringers(fenced: bool) {
    if fenced {
        // SYNC: pairs with the waiter's full fence on a fenced slot (`fence_for_waiters`).
        fence(Ordering::SeqCst);
    } else {
        membarrier::light();
    }
}

/// Set once a waiter's heavy fence failed: from then on sleeps are capped (see
/// `sys::membarrier`).
static UNFENCED: AtomicBool = AtomicBool::new(false);

/// `timeout`, capped at [`UNFENCED_SLEEP`](crate::sys::membarrier::UNFENCED_SLEEP) once a
/// heavy fence failed in this process.
pub(crate) fn sleep_limit(timeout: Duration) -> Duration {
    // SYNC: Relaxed: a flag that only shortens sleeps.
    if UNFENCED.load(Ordering::Relaxed) {
        timeout.min(crate::sys::membarrier::UNFENCED_SLEEP)
    } else {
        timeout
    }
}

impl Slot {
    /// A slot of no file, for the loom models.
    #[cfg(all(test, nerve_loom))]
    pub(crate) fn new() -> Slot {
        Slot {
            seq: HandshakeWord::new(0),
            waiters: HandshakeWord::new(0),
            acks: AtomicU32::new(0),
            armed: HandshakeWord::new(0),
            fenced: AtomicU32::new(0),
            binding: AtomicU64::new(0),
        }
    }

    /// Announces a waiter; returns the sequence value to wait on. Check the queue after
    /// this and before `wait`, and `unregister` after it. (Waits on several slots call
    /// [`Slot::announce`] on each, then [`fence_for_waiters`] once, then [`Slot::seq`]
    /// of each.)
    pub(crate) fn register(&self) -> u32 {
        self.announce();
        fence_for_waiters(self.is_fenced());
        self.seq()
    }

    /// Whether every ringer of this slot fences fully (see [`Doorbell::bind_fenced`]).
    #[inline]
    pub(crate) fn is_fenced(&self) -> bool {
        // SYNC: Relaxed: the mark is set before the binder's heavy fence and stays while
        // the slot is bound (see `Doorbell::bind_fenced`).
        self.fenced.load(Ordering::Relaxed) != 0
    }

    /// Raises the slot's waiter count and arms it: the first half of `register`, for
    /// waits on several slots.
    pub(crate) fn announce(&self) {
        // SYNC: see `Slot::ring`; `fence_for_waiters` orders the count and the flag
        // before the queue check.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.armed.store(1, Ordering::Relaxed);
    }

    /// Withdraws a waiter announced by `register` or `announce`.
    pub(crate) fn unregister(&self) {
        // SYNC: SeqCst as the raise; a ringer that still sees it rings once too often.
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Rings the slot if anyone waits. Call after the sample is visible in its queue.
    #[inline]
    pub(crate) fn ring(&self) {
        // SYNC: the light fence (a compiler fence in a process registered for membarrier,
        // else a full fence) orders our queue write before the waiter-count load; it pairs
        // with the heavy fence in `Slot::register`, so either the waiter sees the sample
        // or we see the waiter. On a fenced slot it is a full fence, pairing with the
        // waiters' full fence.
        fence_for_ringers(self.is_fenced());
        // only the first ring after a waiter armed the slot wakes: later ones find it
        // cleared until a waiter announces itself again (every waiter re-arms before it
        // checks its queue, so none sleeps on a cleared flag unseen)
        if self.waiters.load(Ordering::Relaxed) > 0
            && self.armed.load(Ordering::Relaxed) != 0
            // SYNC: SeqCst: one ringer wins the flag and bumps the sequence after it;
            // a waiter that still finds the flag set after reading the sequence (see
            // `wait`) is sure the bump is still to come.
            && self.armed.swap(0, Ordering::SeqCst) != 0
        {
            // SYNC: the new sequence value publishes "something changed" to waiters.
            self.seq.fetch_add(1, Ordering::SeqCst);
            futex_wake(&self.seq);
        }
    }

    /// Rings even if nobody waits: tells every subscriber of the topic to look (a new
    /// publisher appeared and needs them to attach).
    pub(crate) fn ring_always(&self) {
        // SYNC: see `ring`.
        self.seq.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.seq);
    }

    /// Current sequence value (changes on every effective ring).
    pub(crate) fn seq(&self) -> u32 {
        // SYNC: SeqCst (a plain load on x86): a waiter reads it between arming the slot
        // and checking the flag again (see `is_armed`); Acquire pairs with the ringer's
        // bump, so what was sent before it is visible.
        self.seq.load(Ordering::SeqCst)
    }

    /// A subscriber confirms it looked after a ring (and so attached to new publishers).
    pub(crate) fn ack(&self) {
        self.acks.fetch_add(1, Ordering::AcqRel);
    }

    /// Number of confirmations so far (wrapping).
    pub(crate) fn acks(&self) -> u32 {
        self.acks.load(Ordering::Acquire)
    }

    /// The futex word waiters sleep on (for [`wait_any`](crate::sys::futex::wait_any)).
    #[cfg(not(nerve_loom))]
    pub(crate) fn word(&self) -> &AtomicU32 {
        &self.seq
    }

    /// (Under loom the word is loom's: waits on several slots go through
    /// `crate::loom::futex::wait_any` in the models.)
    #[cfg(nerve_loom)]
    pub(crate) fn word(&self) -> &AtomicU32 {
        unreachable!("loom models wait on several slots through crate::loom::futex::wait_any")
    }

    /// Sleeps while the sequence still equals `seen`, at most `timeout`; returns at once
    /// if a ring cleared the slot's flag since the waiter armed it (that ring's sample may
    /// have been for someone else: the caller looks again and re-arms).
    pub(crate) fn wait(&self, seen: u32, timeout: Duration) {
        if self.is_armed() {
            futex_wait(&self.seq, seen, sleep_limit(timeout));
        }
    }

    /// Whether the slot is still armed. Waiters ask after reading the sequence and
    /// checking their queues, just before they sleep: a flag cleared meanwhile means a
    /// ring came that may have found nothing for them, and its successors would not wake
    /// them (the flag is down), so they must not sleep on it.
    pub(crate) fn is_armed(&self) -> bool {
        // SYNC: SeqCst, after the SeqCst read of the sequence: see `ring`.
        self.armed.load(Ordering::SeqCst) != 0
    }
}

/// Loom models of the wake-up handshake: a waiter must never sleep through the ring of a
/// sample it has not seen, whatever rings of other keys sharing its slot clear the flag
/// in between. Each runs the real `register`/`announce`, `is_armed`, `wait` and `ring`;
/// the waiter's loop is that of a subscriber's blocking receive (`transport::wait`), and
/// the executor's and wait sets' round on several slots is theirs, `wait_round`. Run by
/// `scripts/concurrency`.
#[cfg(all(test, nerve_loom))]
mod loom_models {
    use super::*;
    use crate::loom::futex::wait_any;
    use loom::sync::atomic::AtomicU32 as Queue;
    use loom::sync::Arc;
    use loom::thread;

    /// A publisher's send: the sample into its queue, then the ring.
    fn publish(queue: &Queue, slot: &Slot) {
        // SYNC: Release, as a queue's publishing store.
        queue.fetch_add(1, Ordering::Release);
        slot.ring();
    }

    #[test]
    fn a_blocking_receive_never_sleeps_through_its_sample() {
        // a publisher of the waiter's topic and a ringer of another key on the same slot
        loom::model(|| {
            let slot = Arc::new(Slot::new());
            let queue = Arc::new(Queue::new(0));
            let publisher = {
                let (slot, queue) = (slot.clone(), queue.clone());
                thread::spawn(move || publish(&queue, &slot))
            };
            let other = {
                let slot = slot.clone();
                thread::spawn(move || slot.ring())
            };
            // the loop of `transport::wait::wait_for` without its timeouts
            loop {
                let seen = slot.register();
                if queue.load(Ordering::Acquire) > 0 {
                    slot.unregister();
                    break;
                }
                slot.wait(seen, Duration::MAX);
                slot.unregister();
            }
            publisher.join().expect("publisher");
            other.join().expect("other ringer");
        });
    }

    #[test]
    fn an_executor_waiting_on_two_slots_never_sleeps_through_either() {
        loom::model(|| {
            let slots = Arc::new([Slot::new(), Slot::new()]);
            let queues = Arc::new([Queue::new(0), Queue::new(0)]);
            let publishers: Vec<_> = (0..2)
                .map(|i| {
                    let (slots, queues) = (slots.clone(), queues.clone());
                    thread::spawn(move || publish(&queues[i], &slots[i]))
                })
                .collect();
            // the executor's and the wait sets' round (`wait_round`, the real one), taking
            // both samples
            let mut taken = [false; 2];
            let mut seen = Vec::new();
            while taken != [true; 2] {
                wait_round(
                    &slots[..],
                    &mut seen,
                    |seen| {
                        let mut idle = true;
                        for (i, q) in queues.iter().enumerate() {
                            if !taken[i] && q.load(Ordering::Acquire) > 0 {
                                taken[i] = true;
                                idle = false;
                            }
                        }
                        ((), idle.then(|| [seen[0], seen[1]]))
                    },
                    |seen| wait_any(&[(&slots[0].seq, seen[0]), (&slots[1].seq, seen[1])]),
                );
            }
            publishers
                .into_iter()
                .for_each(|p| p.join().expect("publisher"));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn name(what: &str) -> String {
        format!("nerve_test_doorbell_{what}_{}", std::process::id())
    }

    #[test]
    fn ring_wakes_a_waiter_and_exclusive_lock_means_last_user() {
        let name = name("ring");
        let bell = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        let b2 = bell.clone();
        let t = std::thread::spawn(move || {
            let slot = b2.bind("/t").unwrap();
            let seen = slot.register();
            slot.wait(seen, Duration::from_secs(10));
            slot.unregister();
        });
        // ring until the waiter has gone (it may not have registered yet)
        let slot = bell.bind("/t").unwrap();
        while !t.is_finished() {
            slot.ring();
            std::thread::sleep(Duration::from_millis(1));
        }
        t.join().unwrap();
        drop(slot);
        let path = format!("/dev/shm/{name}");
        let other = Doorbell::open(&name, 0o600).unwrap();
        assert!(!other.try_exclusive(), "another handle holds it");
        drop(other);
        assert!(bell.try_exclusive(), "the last handle");
        bell.unlink();
        drop(bell);
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn a_fenced_slot_wakes_every_waiter_and_loses_its_mark_when_freed() {
        let name = name("fenced");
        let bell = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        bell.unlink();
        let (ping, pong) = (
            bell.bind_fenced("srv:/ping").unwrap(),
            bell.bind_fenced("client:/pong").unwrap(),
        );
        // a plain binding of the same key joins the slot and keeps its mark
        let joined = bell.bind("srv:/ping").unwrap();
        assert!(ping.is_fenced() && pong.is_fenced() && joined.is_fenced());
        assert_eq!(joined.index(), ping.index());
        // ping-pong through the two slots: every wait must end by a ring, never by the
        // timeout (a lost wake-up), with both sides on plain fences
        const ROUNDS: u64 = 2000;
        const PATIENCE: Duration = Duration::from_secs(20);
        let turn = Arc::new(AtomicU64::new(0));
        let wait_for = |slot: &SlotRef, turn: &AtomicU64, want: u64| -> bool {
            let start = std::time::Instant::now();
            loop {
                let seen = slot.register();
                let done = turn.load(Ordering::SeqCst) >= want;
                if !done {
                    slot.wait(seen, PATIENCE);
                }
                slot.unregister();
                if done {
                    return true;
                }
                if start.elapsed() >= PATIENCE {
                    return false;
                }
            }
        };
        let (p2, q2, t2) = (ping.clone(), pong.clone(), turn.clone());
        let other = std::thread::spawn(move || {
            for r in 0..ROUNDS {
                if !wait_for(&p2, &t2, 2 * r + 1) {
                    return Err(r);
                }
                t2.store(2 * r + 2, Ordering::SeqCst);
                q2.ring();
            }
            Ok(())
        });
        for r in 0..ROUNDS {
            turn.store(2 * r + 1, Ordering::SeqCst);
            ping.ring();
            assert!(wait_for(&pong, &turn, 2 * r + 2), "round {r}: reply lost");
        }
        assert_eq!(
            other.join().unwrap(),
            Ok(()),
            "a request's wake-up was lost"
        );
        // freed, the slot is claimed again unmarked by a plain binding of the key
        let index = ping.index();
        drop((ping, joined));
        let plain = bell.bind("srv:/ping").unwrap();
        assert_eq!(plain.index(), index);
        assert!(!plain.is_fenced());
    }

    #[test]
    fn each_key_has_a_slot_of_its_own_shared_by_every_handle() {
        let name = name("keys");
        let a = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        let b = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        a.unlink();
        // many keys, no two on one slot (a ring wakes only the waiters of its key)
        let refs: Vec<SlotRef> = (0..2000)
            .map(|i| a.bind(&format!("/k{i}")).unwrap())
            .collect();
        let mut seen: Vec<u32> = refs.iter().map(SlotRef::index).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 2000);
        // another handle (another process, as far as the file is concerned) finds them
        for (i, r) in refs.iter().enumerate().step_by(97) {
            assert_eq!(b.bind(&format!("/k{i}")).unwrap().index(), r.index());
        }
        // unbound keys free their slots: the table never fills with the dead
        drop(refs);
        let live = |bell: &Doorbell| {
            bell.table()
                .slots
                .iter()
                .filter(|s| s.binding.load(Ordering::Relaxed) != 0)
                .count()
        };
        assert_eq!(live(&a), 0);
        let many: Vec<SlotRef> = (0..SLOTS)
            .map(|i| b.bind(&format!("/m{i}")).unwrap())
            .collect();
        let e = b.bind("/one-too-many").err().expect("full");
        assert!(e.to_string().contains("doorbell is full"), "{e}");
        drop(many);
        assert_eq!(live(&b), 0);
    }

    #[test]
    fn counts_of_a_dead_handle_are_reclaimed_while_others_live() {
        use std::os::fd::{AsRawFd, FromRawFd};
        let name = name("reap");
        let live = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        let keep = live.bind("/t").unwrap();
        let dying = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        let record = dying.record.expect("a record");
        let slot = dying.bind("/t").unwrap();
        assert_eq!(slot.index(), keep.index());
        let _seen = slot.register();
        let own = dying.bind("/only-the-dead").unwrap();
        assert_eq!(keep.waiters.load(Ordering::SeqCst), 1);
        assert_eq!(keep.binding.load(Ordering::SeqCst) & USERS, 2);
        // die as a SIGKILLed process does: its mapping and descriptor go (and with them its
        // locks) and none of its drops run
        let (raw, table) = (dying.fd.as_raw_fd(), dying.map.ptr());
        std::mem::forget((slot, own, dying));
        // SAFETY: the forgotten handle is never used or dropped again, so nothing reads
        // the mapping after this and `raw` has no other owner that closes it.
        unsafe {
            rustix::mm::munmap(table.cast(), SIZE).unwrap();
            drop(OwnedFd::from_raw_fd(raw));
        }
        // the next handle to open reclaims the waiter and the bindings
        let next = Doorbell::open(&name, 0o600).unwrap();
        live.unlink();
        assert_eq!(
            keep.waiters.load(Ordering::SeqCst),
            0,
            "stale waiter reclaimed"
        );
        assert_eq!(
            keep.binding.load(Ordering::SeqCst) & USERS,
            1,
            "only the live user remains"
        );
        let bound = live
            .table()
            .slots
            .iter()
            .filter(|s| s.binding.load(Ordering::SeqCst) != 0)
            .count();
        assert_eq!(bound, 1, "the dead handle's own key is freed");
        assert_eq!(
            next.record,
            Some(record),
            "the dead handle's record is reused"
        );
    }

    #[test]
    fn a_doorbell_others_can_write_or_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let name = name("owner");
        let path = format!("/dev/shm/{name}");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Doorbell::open(&name, 0o600)
            .err()
            .expect("world-writable refused");
        assert!(e.to_string().contains("mode 666"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let target = format!("/dev/shm/{name}_target");
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(
            Doorbell::open(&name, 0o600).is_err(),
            "a symbolic link is not followed"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&target).unwrap();
    }

    /// Names the doorbell file the child of the stopped-holder test locks.
    const HOLD_CHILD: &str = "NERVE_TEST_HOLD_BIND_LOCK";

    /// The child of `a_process_stopped_inside_the_bind_lock_stalls_no_creation`: takes the
    /// bind lock of the file named in HOLD_CHILD, says so, releases it when a line
    /// arrives on stdin, then waits to be killed. Does nothing in a plain test run.
    #[test]
    fn child_holds_the_bind_lock() {
        let Ok(path) = std::env::var(HOLD_CHILD) else {
            return;
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("the doorbell");
        let fd = OwnedFd::from(file);
        let lock = OfdLock::wait_at_most(&fd, BIND_LOCK, Duration::from_secs(10), "bind lock")
            .expect("the bind lock");
        println!("CHILD-LOCKED");
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        drop(lock);
        println!("CHILD-RELEASED");
        std::thread::sleep(Duration::from_secs(60));
    }

    #[test]
    fn a_process_stopped_inside_the_bind_lock_stalls_no_creation() {
        use crate::config::Config;
        use crate::context::Context;
        use crate::exec::machine::SpecText;
        use crate::message::Serde;
        use rustix::process::{kill_process, Pid, Signal};
        use std::io::{BufRead, Write};
        let domain = 700 + std::process::id() % 200;
        let dir = std::env::temp_dir().join("nerve-tests/");
        let config = Config::default().domain(domain).unwrap().state_dir(dir);
        let ctx = Context::new(config.clone()).unwrap();
        let node = ctx.node("creator").create().unwrap();
        let spawn_holder = || {
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "transport::doorbell::tests::child_holds_the_bind_lock",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(HOLD_CHILD, path(&config))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
            assert!(
                out.by_ref()
                    .map_while(Result::ok)
                    .any(|l| l.contains("CHILD-LOCKED")),
                "the child failed before taking the lock"
            );
            let pid = Pid::from_child(&child);
            (child, pid, out)
        };
        let create = |topic: &str| node.publisher::<Serde<SpecText>>(topic).create();

        // stopped inside the lock: creation fails within the deadline, naming the holder
        let (mut child, pid, mut out) = spawn_holder();
        kill_process(pid, Signal::STOP).unwrap();
        let t0 = std::time::Instant::now();
        let e = create("/stalled").err().expect("the lock is held");
        let waited = t0.elapsed();
        let text = e.to_string();
        assert!(
            waited >= LOCK_TIMEOUT && waited < LOCK_TIMEOUT * 4,
            "{waited:?}"
        );
        assert!(text.contains("/stalled"), "{text}");
        assert!(text.contains("the domain's bind lock"), "{text}");
        let holder = format!("held by pid {} (stopped)", child.id());
        assert!(text.contains(&holder), "{text}");

        // continued: creation goes on once the holder releases
        let mut stdin = child.stdin.take().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            kill_process(pid, Signal::CONT).unwrap();
            stdin.write_all(b"release\n").unwrap();
            stdin
        });
        create("/continued").expect("created once the holder released the lock");
        drop(release.join().unwrap());
        assert!(out
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("CHILD-RELEASED")));
        child.kill().unwrap();
        child.wait().unwrap();

        // dead: the kernel releases its lock
        let (mut child, pid, _out) = spawn_holder();
        kill_process(pid, Signal::STOP).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        create("/after_death").expect("created once the holder died");
    }
}
