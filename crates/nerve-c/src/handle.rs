//! The handle table: every object a C caller holds is a slot of the table of the thread
//! that created it, named by a 64-bit handle.
//!
//! Nerve's objects are not `Send` (one context per thread is the library's rule), so
//! each thread has its own table and no lock is taken on any call. A handle is
//!
//! ```text
//!  63     58 57        44 43         28 27               0
//! +---------+------------+-------------+------------------+
//! | kind 6  | table 14   | slot 16     | generation 28    |
//! +---------+------------+-------------+------------------+
//! ```
//!
//! and is checked on every use, in this order, each check certain: null or never issued
//! (`NERVE_ERR_BAD_HANDLE`: kind 0 or unknown, table 0), of another kind
//! (`NERVE_ERR_WRONG_KIND`), of another thread's table (`NERVE_ERR_WRONG_THREAD`, naming
//! the owning thread; `NERVE_ERR_STALE_HANDLE` when that thread has exited), released
//! (`NERVE_ERR_STALE_HANDLE`: its slot's generation no longer matches).
//!
//! Limits: 16 383 threads holding Nerve objects at once (table ids 1..=16383, given out
//! round-robin so an exited thread's id comes back only after all others were used);
//! 65 536 live handles per thread and slab (the hot kinds have their own slab, the
//! others share one); generations come from one 28-bit counter per table, started at a
//! per-thread offset, so a released handle is taken for a live one only after 2^28
//! (268 million) more insertions on its thread and only if they reuse its very slot.
//!
//! The fast path of a call (`with`, `insert`, `remove`, `release_typed`, `derive`), all
//! inlined into the entry point: one thread-local access (its address taken by a tiny
//! closure, so it compiles to a `%fs`-relative load) and its borrow flag, the handle's
//! kind and table id compared with the caller's, a typed slab indexed by the slot (no
//! `Box<dyn Any>`, no downcast, for loans, samples, requests, replies, publishers and
//! subscribers), the generation compared, and one Acquire load of the table's
//! "deferred releases pending" flag. A loan or a sample is made and written straight
//! into its slot under one borrow of the table (`derive`): no `Rc` clone of the
//! subscriber, no copies of the 96-byte sample on the way.
//!
//! Releasing from another thread: `release` (every `nerve_*_destroy`, `*_release`,
//! `nerve_loan_discard`) called on a thread other than the owner queues the handle on
//! the owner table's deferred-release queue (reachable from any thread through the
//! registry of live tables) and returns `NERVE_OK`; the owner drains the queue at its
//! next call that touches the table and while its executors spin (they are woken). If
//! the owner has exited, its table was dropped with everything in it and the release is
//! a no-op success. The queue holds at most as many entries as the owner's table has
//! slots (each live handle can be queued once before the owner runs; more means a bogus
//! or repeated handle and is refused with `NERVE_ERR_BUSY`).
//!
//! Objects keep what they need alive (a loan its publisher, a sample its memory), so
//! releasing a parent never leaves a child dangling: a sample stays readable after its
//! subscriber is destroyed, exactly as in the Rust API.

use crate::status::{nerve_status_t::*, Error, Result};
use std::cell::{Ref, RefCell, RefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a handle names. Its number is the handle's top 6 bits.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Context = 1,
    Node,
    Publisher,
    Loan,
    Subscriber,
    Sample,
    Client,
    Pending,
    Reply,
    Server,
    Request,
    Executor,
    Timer,
    Parameters,
    ActionClient,
    Goal,
    ActionServer,
    ServerGoal,
    TensorPool,
    Tensor,
    TfListener,
    TfBroadcaster,
    Managed,
    RequestLoan,
}

impl Kind {
    const ALL: [Kind; 24] = [
        Kind::Context,
        Kind::Node,
        Kind::Publisher,
        Kind::Loan,
        Kind::Subscriber,
        Kind::Sample,
        Kind::Client,
        Kind::Pending,
        Kind::Reply,
        Kind::Server,
        Kind::Request,
        Kind::Executor,
        Kind::Timer,
        Kind::Parameters,
        Kind::ActionClient,
        Kind::Goal,
        Kind::ActionServer,
        Kind::ServerGoal,
        Kind::TensorPool,
        Kind::Tensor,
        Kind::TfListener,
        Kind::TfBroadcaster,
        Kind::Managed,
        Kind::RequestLoan,
    ];

    /// The name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Context => "context",
            Kind::Node => "node",
            Kind::Publisher => "publisher",
            Kind::Loan => "loan",
            Kind::Subscriber => "subscriber",
            Kind::Sample => "sample",
            Kind::Client => "client",
            Kind::Pending => "pending call",
            Kind::Reply => "reply",
            Kind::Server => "server",
            Kind::Request => "request",
            Kind::Executor => "executor",
            Kind::Timer => "timer",
            Kind::Parameters => "parameters",
            Kind::ActionClient => "action client",
            Kind::Goal => "goal",
            Kind::ActionServer => "action server",
            Kind::ServerGoal => "server goal",
            Kind::TensorPool => "tensor pool",
            Kind::Tensor => "tensor",
            Kind::TfListener => "transform listener",
            Kind::TfBroadcaster => "transform broadcaster",
            Kind::Managed => "managed node",
            Kind::RequestLoan => "request loan",
        }
    }

    #[inline]
    fn of(bits: u8) -> Option<Kind> {
        // the discriminants run 1..=24 in `ALL`'s order
        Kind::ALL.get(usize::from(bits).wrapping_sub(1)).copied()
    }
}

const GEN_BITS: u32 = 28;
const SLOT_BITS: u32 = 16;
const TABLE_BITS: u32 = 14;
const SLOT_SHIFT: u32 = GEN_BITS;
const TABLE_SHIFT: u32 = GEN_BITS + SLOT_BITS;
const KIND_SHIFT: u32 = TABLE_SHIFT + TABLE_BITS;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// Live handles one thread may hold per slab (the slot field's width).
const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Tables (threads holding Nerve objects) alive at once; id 0 is never issued.
const MAX_TABLES: usize = (1 << TABLE_BITS) - 1;

/// A handle, read field by field. Kept as the one `u64` (not a struct of `u8`, `u16` and
/// `u32` fields): spilled to the stack, such a struct was written in pieces and read
/// back whole, a store-forwarding stall on every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parts(u64);

impl Parts {
    #[inline(always)]
    fn kind(self) -> u8 {
        (self.0 >> KIND_SHIFT) as u8
    }
    #[inline(always)]
    fn table(self) -> u16 {
        ((self.0 >> TABLE_SHIFT) & ((1 << TABLE_BITS) - 1)) as u16
    }
    #[inline(always)]
    fn slot(self) -> u32 {
        ((self.0 >> SLOT_SHIFT) & ((1 << SLOT_BITS) - 1)) as u32
    }
    #[inline(always)]
    fn generation(self) -> u32 {
        (self.0 as u32) & GEN_MASK
    }
}

#[inline]
fn pack(kind: Kind, table: u16, slot: u32, generation: u32) -> u64 {
    (u64::from(kind as u8) << KIND_SHIFT)
        | (u64::from(table) << TABLE_SHIFT)
        | (u64::from(slot) << SLOT_SHIFT)
        | u64::from(generation & GEN_MASK)
}

#[inline(always)]
fn unpack(h: u64) -> Parts {
    Parts(h)
}

/// A slot of a slab: the generation its handle carries, the kind and context of its
/// object, and the object while it lives.
struct Slot<T> {
    generation: u32,
    kind: Kind,
    ctx: u32,
    value: Option<T>,
}

/// Objects of one Rust type (or the boxed ones), reused slot by slot.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    const fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The slot `p` names, if it is live with `p`'s generation and of kind `want`.
    #[inline]
    fn live(&self, p: Parts, want: Kind) -> Result<usize> {
        match self.slots.get(p.slot() as usize) {
            Some(s) if s.generation == p.generation() && s.kind == want && s.value.is_some() => {
                Ok(p.slot() as usize)
            }
            _ => Err(stale(want)),
        }
    }

    /// Stores `value`; its slot, and whether the slab grew by one slot.
    #[inline]
    fn insert(&mut self, kind: Kind, ctx: u32, generation: u32, value: T) -> Result<(u32, bool)> {
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.generation = generation;
            s.kind = kind;
            s.ctx = ctx;
            s.value = Some(value);
            return Ok((i, false));
        }
        if self.slots.len() >= MAX_SLOTS {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!("this thread holds {MAX_SLOTS} live handles of one kind: release some"),
            ));
        }
        self.slots.push(Slot {
            generation,
            kind,
            ctx,
            value: Some(value),
        });
        Ok(((self.slots.len() - 1) as u32, true))
    }

    /// As [`Slab::insert`], with the value made by `make` and written straight into its
    /// slot (no copies on the way); nothing is stored when `make` fails or returns None.
    #[inline(always)]
    fn insert_with<R>(
        &mut self,
        kind: Kind,
        ctx: u32,
        generation: u32,
        make: impl FnOnce() -> Result<Option<T>>,
        inspect: impl FnOnce(&mut T) -> R,
    ) -> Result<Option<(u32, R)>> {
        if self.free.is_empty() {
            if self.slots.len() >= MAX_SLOTS {
                return Err(Error::new(
                    NERVE_ERR_INVALID_ARGUMENT,
                    format!("this thread holds {MAX_SLOTS} live handles of one kind: release some"),
                ));
            }
            self.slots.push(Slot {
                generation: 0,
                kind,
                ctx,
                value: None,
            });
            self.free.push((self.slots.len() - 1) as u32);
        }
        let Some(&i) = self.free.last() else {
            return Ok(None);
        };
        let s = &mut self.slots[i as usize];
        s.value = make()?;
        let Some(v) = s.value.as_mut() else {
            return Ok(None);
        };
        s.generation = generation;
        s.kind = kind;
        s.ctx = ctx;
        let r = inspect(v);
        self.free.pop();
        Ok(Some((i, r)))
    }

    /// Drops live slot `i`'s value in place and frees the slot.
    #[inline(always)]
    fn drop_at(&mut self, i: usize) {
        self.slots[i].value = None;
        self.free.push(i as u32);
    }

    #[inline]
    fn take(&mut self, i: usize) -> Option<(T, u32)> {
        let s = &mut self.slots[i];
        let v = s.value.take()?;
        self.free.push(i as u32);
        Some((v, s.ctx))
    }

    fn live_count(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count()
    }
}

/// What other threads see of a table: its deferred-release queue, the flag saying it
/// is not empty, and the executors to wake when something is queued.
pub(crate) struct Deferred {
    /// Set (Release) after a handle is queued; cleared by the owner before it takes the
    /// queue.
    pending: AtomicBool,
    /// Handles released by other threads, in the order they came.
    queue: Mutex<Vec<u64>>,
    /// The queue's bound: the slots of the owner's table (a live handle names one).
    capacity: AtomicUsize,
    /// The owner's executors (woken when something is queued), by key.
    wakers: Mutex<Vec<(u64, nerve::ExecutorHandle)>>,
    /// The owning thread, for messages.
    owner: String,
}

/// Locks `m`, ignoring poison (every critical section leaves the data consistent).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Deferred {
    /// Queues `h` for the owner to release and wakes its executors.
    fn push(&self, h: u64, kind: Kind) -> Result<()> {
        {
            let mut q = lock(&self.queue);
            // SYNC: Relaxed: a bound, published by the owner as its table grows; an old
            // (smaller) value refuses early at worst.
            if q.len() >= self.capacity.load(Ordering::Relaxed) {
                return Err(Error::new(
                    NERVE_ERR_BUSY,
                    format!(
                        "the {} handle cannot be queued for release by {}: its queue holds \
                         as many handles as its table has slots (a handle was released \
                         twice, or was never issued), and the thread has not run since",
                        kind.name(),
                        self.owner
                    ),
                ));
            }
            q.push(h);
        }
        // SYNC: Release after the push (under the lock): the owner's Acquire load that
        // sees `true` then takes the queue under the same lock and finds the handle.
        self.pending.store(true, Ordering::Release);
        for (_, w) in lock(&self.wakers).iter() {
            w.wake();
        }
        Ok(())
    }
}

/// The tables alive now, by id: how another thread finds a handle's owner.
struct Registry {
    tables: Vec<Option<Arc<Deferred>>>,
    /// Where the search for a free id starts (round-robin).
    next: usize,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    tables: Vec::new(),
    next: 1,
});

/// The owner of table `id`, if it is alive.
fn owner_of(id: u16) -> Option<Arc<Deferred>> {
    lock(&REGISTRY)
        .tables
        .get(usize::from(id))
        .and_then(|d| d.clone())
}

/// Registers a new table: its id and shared part.
fn register() -> Result<(u16, Arc<Deferred>)> {
    let t = std::thread::current();
    let owner = match t.name() {
        Some(n) => format!("thread '{n}' ({:?})", t.id()),
        None => format!("thread {:?}", t.id()),
    };
    let d = Arc::new(Deferred {
        pending: AtomicBool::new(false),
        queue: Mutex::new(Vec::new()),
        capacity: AtomicUsize::new(0),
        wakers: Mutex::new(Vec::new()),
        owner,
    });
    let mut r = lock(&REGISTRY);
    let start = r.next;
    for k in 0..MAX_TABLES {
        let id = (start - 1 + k) % MAX_TABLES + 1;
        if r.tables.len() <= id {
            r.tables.resize(id + 1, None);
        }
        if r.tables[id].is_none() {
            r.tables[id] = Some(d.clone());
            r.next = id % MAX_TABLES + 1;
            return Ok((id as u16, d));
        }
    }
    Err(Error::new(
        NERVE_ERR_INVALID_ARGUMENT,
        format!("{MAX_TABLES} threads hold Nerve objects: no handle table is left"),
    ))
}

/// A thread's objects: the hot kinds (per-message objects, publishers and subscribers)
/// in slabs of their own type, so using, taking and releasing one moves it once,
/// allocates nothing and downcasts nothing; the others boxed in one slab.
pub(crate) struct Tables {
    /// This table's id (0 until the first object is stored).
    id: u16,
    next_generation: u32,
    /// Slots of all slabs (the deferred queue's bound).
    slots: usize,
    /// Shared with other threads (`None` until the first object is stored).
    deferred: Option<Arc<Deferred>>,
    /// The queue's other buffer: swapped with it when draining (no allocation).
    spare: Vec<u64>,
    loans: Slab<crate::topic::Loan>,
    samples: Slab<nerve::RawSample>,
    requests: Slab<nerve::RawRequest>,
    replies: Slab<nerve::RawReply>,
    pubs: Slab<crate::topic::Pub>,
    subs: Slab<crate::topic::Sub>,
    boxed: Slab<Box<dyn std::any::Any>>,
}

impl Drop for Tables {
    fn drop(&mut self) {
        // the thread exits: its id leaves the registry first, so releases from other
        // threads become no-ops, then the objects drop (in field order)
        if self.id != 0 {
            let mut r = lock(&REGISTRY);
            if let Some(e) = r.tables.get_mut(usize::from(self.id)) {
                *e = None;
            }
        }
    }
}

impl Tables {
    /// Whether other threads queued releases (checked on every call).
    #[inline]
    fn pending(&self) -> bool {
        // SYNC: Acquire pairs with the Release store in `Deferred::push`.
        self.deferred
            .as_ref()
            .is_some_and(|d| d.pending.load(Ordering::Acquire))
    }
}

/// A type the table can hold: which slab keeps it and how. [`boxed!`] implements it for
/// the types kept boxed.
pub(crate) trait Stored: Sized + 'static {
    /// What the slab stores.
    type Cell: 'static;
    fn slab(t: &Tables) -> &Slab<Self::Cell>;
    fn slab_mut(t: &mut Tables) -> &mut Slab<Self::Cell>;
    fn into_cell(self) -> Self::Cell;
    fn view(c: &Self::Cell) -> Option<&Self>;
    fn from_cell(c: Self::Cell) -> Option<Self>;
}

macro_rules! inline {
    ($field:ident, $t:ty) => {
        impl Stored for $t {
            type Cell = $t;
            #[inline]
            fn slab(t: &Tables) -> &Slab<$t> {
                &t.$field
            }
            #[inline]
            fn slab_mut(t: &mut Tables) -> &mut Slab<$t> {
                &mut t.$field
            }
            #[inline]
            fn into_cell(self) -> $t {
                self
            }
            #[inline]
            fn view(c: &$t) -> Option<&Self> {
                Some(c)
            }
            #[inline]
            fn from_cell(c: $t) -> Option<Self> {
                Some(c)
            }
        }
    };
}
inline!(loans, crate::topic::Loan);
inline!(samples, nerve::RawSample);
inline!(requests, nerve::RawRequest);
inline!(replies, nerve::RawReply);
inline!(pubs, crate::topic::Pub);
inline!(subs, crate::topic::Sub);

/// Implements [`Stored`] for types kept boxed in the table.
macro_rules! boxed {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::handle::Stored for $t {
            type Cell = Box<dyn std::any::Any>;
            fn slab(t: &$crate::handle::Tables) -> &$crate::handle::Slab<Self::Cell> {
                $crate::handle::boxed_slab(t)
            }
            fn slab_mut(t: &mut $crate::handle::Tables) -> &mut $crate::handle::Slab<Self::Cell> {
                $crate::handle::boxed_slab_mut(t)
            }
            fn into_cell(self) -> Self::Cell {
                Box::new(self)
            }
            fn view(c: &Self::Cell) -> Option<&Self> {
                c.downcast_ref()
            }
            fn from_cell(c: Self::Cell) -> Option<Self> {
                c.downcast().ok().map(|b| *b)
            }
        }
    )*};
}

pub(crate) fn boxed_slab(t: &Tables) -> &Slab<Box<dyn std::any::Any>> {
    &t.boxed
}

pub(crate) fn boxed_slab_mut(t: &mut Tables) -> &mut Slab<Box<dyn std::any::Any>> {
    &mut t.boxed
}

#[cfg(test)]
boxed!(u32);

/// Spreads each thread's first generation over the generation space.
static THREAD_SEED: AtomicU32 = AtomicU32::new(0x9E37_79B9);

thread_local! {
    static TABLE: RefCell<Tables> = const {
        RefCell::new(Tables {
            id: 0,
            next_generation: 0,
            slots: 0,
            deferred: None,
            spare: Vec::new(),
            loans: Slab::new(),
            samples: Slab::new(),
            requests: Slab::new(),
            replies: Slab::new(),
            pubs: Slab::new(),
            subs: Slab::new(),
            boxed: Slab::new(),
        })
    };
}

/// This thread's table. The closure given to `LocalKey::with` only takes the table's
/// address, so the thread-local access inlines into every entry point (with the whole
/// body in that closure, `LocalKey::with` became an out-of-line call through the key's
/// accessor pointer, and the body a closure call of its own).
///
/// The reference is only used within the ABI call that took it (callers keep it in a
/// local): `with` returned, so the thread-local is alive, and it stays alive until this
/// thread exits, which cannot happen during the call.
#[inline(always)]
fn local<'a>() -> &'a RefCell<Tables> {
    let p: *const RefCell<Tables> = TABLE.with(|t| t as *const RefCell<Tables>);
    // SAFETY: see above: alive for the call; `Tables` is not `Sync`, so the reference
    // cannot be sent to another thread.
    unsafe { &*p }
}

/// As [`local`], or `None` when this thread is exiting and its table is gone.
#[inline(always)]
fn try_local<'a>() -> Option<&'a RefCell<Tables>> {
    let p = TABLE.try_with(|t| t as *const RefCell<Tables>).ok()?;
    // SAFETY: as in `local`.
    Some(unsafe { &*p })
}

#[cold]
fn bad(h: u64, want: Kind) -> Error {
    if h == 0 {
        Error::new(
            NERVE_ERR_BAD_HANDLE,
            format!("the {} handle is null", want.name()),
        )
    } else {
        Error::new(
            NERVE_ERR_BAD_HANDLE,
            format!("{h:#x} was never issued as a handle"),
        )
    }
}

#[cold]
fn stale(want: Kind) -> Error {
    Error::new(
        NERVE_ERR_STALE_HANDLE,
        format!(
            "the {} handle is no longer valid: it was released (destroyed, sent, or moved \
             into an executor)",
            want.name()
        ),
    )
}

/// The thread calling, for messages.
fn this_thread() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(n) => format!("thread '{n}' ({:?})", t.id()),
        None => format!("thread {:?}", t.id()),
    }
}

/// The error for a handle of table `p.table()`, used on a thread whose table is not it.
#[cold]
#[inline(never)]
fn foreign(h: u64, p: Parts, want: Kind) -> Error {
    if p.table() == 0 {
        return bad(h, want);
    }
    match owner_of(p.table()) {
        Some(d) => Error::new(
            NERVE_ERR_WRONG_THREAD,
            format!(
                "the {} handle belongs to {}, not to {} that used it: Nerve objects are \
                 used on the thread that created them (destroying them works from any \
                 thread)",
                want.name(),
                d.owner,
                this_thread()
            ),
        ),
        None => Error::new(
            NERVE_ERR_STALE_HANDLE,
            format!(
                "the {} handle is no longer valid: the thread that created it has exited \
                 (its objects went with it)",
                want.name()
            ),
        ),
    }
}

/// Checks `h`'s kind against `want` and splits it.
#[inline(always)]
fn check_kind(h: u64, want: Kind) -> Result<Parts> {
    let p = unpack(h);
    if p.kind() != want as u8 {
        return Err(wrong_kind(h, p, want));
    }
    Ok(p)
}

#[cold]
#[inline(never)]
fn wrong_kind(h: u64, p: Parts, want: Kind) -> Error {
    let Some(kind) = Kind::of(p.kind()) else {
        return bad(h, want);
    };
    Error::new(
        NERVE_ERR_WRONG_KIND,
        format!(
            "a {} handle was passed where a {} handle is expected",
            kind.name(),
            want.name()
        ),
    )
}

#[cold]
fn busy() -> Error {
    Error::new(NERVE_ERR_BUSY, "the handle table is in use")
}

/// Borrows this thread's table to read `p`'s slot: fails unless `p` is of this table;
/// first drains releases other threads queued.
#[inline(always)]
fn enter(cell: &RefCell<Tables>, h: u64, p: Parts, want: Kind) -> Result<Ref<'_, Tables>> {
    let t = cell.try_borrow().map_err(|_| busy())?;
    if p.table() != t.id || p.table() == 0 {
        return Err(foreign(h, p, want));
    }
    if t.pending() {
        drop(t);
        drain(cell);
        return cell.try_borrow().map_err(|_| busy());
    }
    Ok(t)
}

/// As [`enter`], borrowed mutably.
#[inline(always)]
fn enter_mut(cell: &RefCell<Tables>, h: u64, p: Parts, want: Kind) -> Result<RefMut<'_, Tables>> {
    let t = cell.try_borrow_mut().map_err(|_| busy())?;
    if p.table() != t.id || p.table() == 0 {
        return Err(foreign(h, p, want));
    }
    if t.pending() {
        drop(t);
        drain(cell);
        return cell.try_borrow_mut().map_err(|_| busy());
    }
    Ok(t)
}

/// Releases what other threads queued for this thread's table (the owner's side of
/// the deferred release). Does nothing while the table is borrowed (the next call
/// drains).
#[cold]
#[inline(never)]
fn drain(cell: &RefCell<Tables>) {
    let (d, mut list) = {
        let Ok(mut t) = cell.try_borrow_mut() else {
            return;
        };
        let Some(d) = t.deferred.clone() else {
            return;
        };
        (d, std::mem::take(&mut t.spare))
    };
    // SYNC: cleared before the queue is taken under its lock: a push after the take
    // sets the flag again after this store (its lock follows this thread's unlock), so
    // no handle is left queued with the flag clear.
    d.pending.store(false, Ordering::Relaxed);
    std::mem::swap(&mut *lock(&d.queue), &mut list);
    for &h in &list {
        let p = unpack(h);
        if let Some(kind) = Kind::of(p.kind()) {
            // stale or bogus entries (released twice) are ignored: nothing to free
            let _ = release_here(cell, h, p, kind);
        }
    }
    list.clear();
    if let Ok(mut t) = cell.try_borrow_mut() {
        if t.spare.capacity() < list.capacity() {
            t.spare = list;
        }
    }
}

/// Releases what other threads queued for this thread's table now (the executor's
/// spin calls it when [`deferred_requested`] says so).
pub(crate) fn drain_deferred() {
    let _ = TABLE.try_with(drain);
}

/// Whether other threads queued releases for this thread's table.
pub(crate) fn deferred_requested() -> bool {
    TABLE
        .try_with(|t| t.try_borrow().is_ok_and(|t| t.pending()))
        .unwrap_or(false)
}

/// Registers an executor of this thread to be woken when another thread queues a
/// release; unregistered when the returned guard drops.
pub(crate) fn wake_on_release(handle: nerve::ExecutorHandle) -> Result<WakeGuard> {
    static KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let d = TABLE.with(|cell| {
        let mut t = cell.try_borrow_mut().map_err(|_| busy())?;
        registered(&mut t)
    })?;
    // SYNC: Relaxed: a unique key, publishing nothing.
    let key = KEYS.fetch_add(1, Ordering::Relaxed);
    lock(&d.wakers).push((key, handle));
    Ok(WakeGuard { deferred: d, key })
}

/// Unregisters an executor's waker (see [`wake_on_release`]).
pub(crate) struct WakeGuard {
    deferred: Arc<Deferred>,
    key: u64,
}

impl Drop for WakeGuard {
    fn drop(&mut self) {
        lock(&self.deferred.wakers).retain(|(k, _)| *k != self.key);
    }
}

/// This table's shared part, registering the table first if needed.
fn registered(t: &mut Tables) -> Result<Arc<Deferred>> {
    if let Some(d) = &t.deferred {
        return Ok(d.clone());
    }
    let (id, d) = register()?;
    t.id = id;
    t.deferred = Some(d.clone());
    Ok(d)
}

/// Stores `value` of `kind` (belonging to context `ctx`) and returns its handle.
#[inline(always)]
pub(crate) fn insert<T: Stored>(kind: Kind, ctx: u32, value: T) -> Result<u64> {
    insert_in(local(), kind, ctx, value)
}

/// [`insert`] into `cell`.
#[inline(always)]
fn insert_in<T: Stored>(cell: &RefCell<Tables>, kind: Kind, ctx: u32, value: T) -> Result<u64> {
    let mut t = cell.try_borrow_mut().map_err(|_| busy())?;
    if t.pending() {
        drop(t);
        drain(cell);
        t = cell.try_borrow_mut().map_err(|_| busy())?;
    }
    if t.id == 0 {
        first_insert(&mut t)?;
    }
    let generation = t.next_generation;
    let next = generation.wrapping_add(1) & GEN_MASK;
    t.next_generation = next.max(1);
    let (slot, grew) = T::slab_mut(&mut t).insert(kind, ctx, generation, value.into_cell())?;
    if grew {
        grown(&mut t);
    }
    Ok(pack(kind, t.id, slot, generation))
}

/// Looks up `h` (of `kind`), runs `make` on a clone of it (an `Rc`) and stores what it
/// returns (`Some`) as a new object of `out_kind` in the same context, written straight
/// into its slot; `inspect` then reads the stored object. One borrow of the table for
/// it all (the per-message fast path: a loan from a publisher, a sample from a
/// subscriber), so `make` and `inspect` must not call back into C. `Ok(None)`: `make`
/// had nothing to store.
#[inline(always)]
pub(crate) fn derive<P, T, R>(
    h: u64,
    kind: Kind,
    out_kind: Kind,
    make: impl FnOnce(&P) -> Result<Option<T>>,
    inspect: impl FnOnce(&mut T) -> R,
) -> Result<Option<(u64, R)>>
where
    P: Stored,
    T: Stored<Cell = T>,
{
    if std::any::TypeId::of::<P::Cell>() == std::any::TypeId::of::<T>() {
        // one slab for both: `parent` below could move (never so: loans and samples
        // come from publishers and subscribers)
        return Err(Error::new(
            NERVE_ERR_PANIC,
            "internal error: derive within one slab",
        ));
    }
    let p = check_kind(h, kind)?;
    let mut t = enter_mut(local(), h, p, kind)?;
    let (parent, ctx) = {
        let slab = P::slab(&t);
        let i = slab.live(p, kind)?;
        let s = &slab.slots[i];
        let v = s
            .value
            .as_ref()
            .and_then(P::view)
            .ok_or_else(|| stale(kind))?;
        (v as *const P, s.ctx)
    };
    let generation = t.next_generation;
    let table = t.id;
    let slots = T::slab(&t).slots.len();
    // SAFETY: `parent` points into the heap buffer of `P`'s slab. The table stays
    // borrowed, so nothing else changes it meanwhile, and `make` gets no access to it;
    // the only mutation before `make` runs is of `T`'s slab, which is another slab
    // (checked above: `P`'s cell type is not `T`), so `P`'s buffer neither moves nor
    // changes while the reference lives.
    let made = T::slab_mut(&mut t).insert_with(
        out_kind,
        ctx,
        generation,
        || make(unsafe { &*parent }),
        inspect,
    );
    // a slot added counts toward the deferred queue's bound, whatever `make` did
    if T::slab(&t).slots.len() != slots {
        grown(&mut t);
    }
    let Some((slot, r)) = made? else {
        return Ok(None);
    };
    t.next_generation = (generation.wrapping_add(1) & GEN_MASK).max(1);
    Ok(Some((pack(out_kind, table, slot, generation), r)))
}

/// Registers the table and seeds its generations (the first insertion on a thread).
#[cold]
fn first_insert(t: &mut Tables) -> Result<()> {
    registered(t)?;
    // SYNC: Relaxed: a seed, publishing nothing.
    let seed = THREAD_SEED.fetch_add(0x9E37_79B9, Ordering::Relaxed);
    t.next_generation = (seed & GEN_MASK).max(1);
    Ok(())
}

/// A slab grew by a slot: the deferred queue may hold one more handle.
#[cold]
fn grown(t: &mut Tables) {
    t.slots += 1;
    if let Some(d) = &t.deferred {
        // SYNC: Relaxed: a bound read by pushers under no ordering (see `push`).
        d.capacity.store(t.slots, Ordering::Relaxed);
    }
}

/// Runs `f` on the object named by `h` (of `kind`, with value type `T`) and its
/// context id. `f` must not call back into C: the table stays borrowed meanwhile.
#[inline(always)]
pub(crate) fn with<T: Stored, R>(h: u64, kind: Kind, f: impl FnOnce(&T, u32) -> R) -> Result<R> {
    let p = check_kind(h, kind)?;
    let t = enter(local(), h, p, kind)?;
    let slab = T::slab(&t);
    let i = slab.live(p, kind)?;
    let s = &slab.slots[i];
    let v = s
        .value
        .as_ref()
        .and_then(T::view)
        .ok_or_else(|| stale(kind))?;
    Ok(f(v, s.ctx))
}

/// Clones the object named by `h` out of the table (an `Rc`, a handle), so the caller
/// may run callbacks while using it.
#[inline(always)]
pub(crate) fn get<T: Stored + Clone>(h: u64, kind: Kind) -> Result<(T, u32)> {
    with(h, kind, |v: &T, ctx| (v.clone(), ctx))
}

/// The context id of the object named by `h`.
pub(crate) fn context_of(h: u64, kind: Kind) -> Result<u32> {
    let p = check_kind(h, kind)?;
    let t = enter(local(), h, p, kind)?;
    let slab = slab_of(&t, kind);
    let i = slab.live(p, kind)?;
    Ok(slab.ctx(i))
}

/// The slab of a kind, for its slot metadata (for calls that do not know the Rust
/// type).
fn slab_of(t: &Tables, kind: Kind) -> SlabRef<'_> {
    match kind {
        Kind::Loan => SlabRef::Loan(&t.loans),
        Kind::Sample => SlabRef::Sample(&t.samples),
        Kind::Request => SlabRef::Request(&t.requests),
        Kind::Reply => SlabRef::Reply(&t.replies),
        Kind::Publisher => SlabRef::Pub(&t.pubs),
        Kind::Subscriber => SlabRef::Sub(&t.subs),
        _ => SlabRef::Boxed(&t.boxed),
    }
}

/// A slab of any type, for its slot metadata.
enum SlabRef<'a> {
    Loan(&'a Slab<crate::topic::Loan>),
    Sample(&'a Slab<nerve::RawSample>),
    Request(&'a Slab<nerve::RawRequest>),
    Reply(&'a Slab<nerve::RawReply>),
    Pub(&'a Slab<crate::topic::Pub>),
    Sub(&'a Slab<crate::topic::Sub>),
    Boxed(&'a Slab<Box<dyn std::any::Any>>),
}

impl SlabRef<'_> {
    fn live(&self, p: Parts, want: Kind) -> Result<usize> {
        match self {
            SlabRef::Loan(s) => s.live(p, want),
            SlabRef::Sample(s) => s.live(p, want),
            SlabRef::Request(s) => s.live(p, want),
            SlabRef::Reply(s) => s.live(p, want),
            SlabRef::Pub(s) => s.live(p, want),
            SlabRef::Sub(s) => s.live(p, want),
            SlabRef::Boxed(s) => s.live(p, want),
        }
    }

    /// The context of live slot `i`.
    fn ctx(&self, i: usize) -> u32 {
        match self {
            SlabRef::Loan(s) => s.slots[i].ctx,
            SlabRef::Sample(s) => s.slots[i].ctx,
            SlabRef::Request(s) => s.slots[i].ctx,
            SlabRef::Reply(s) => s.slots[i].ctx,
            SlabRef::Pub(s) => s.slots[i].ctx,
            SlabRef::Sub(s) => s.slots[i].ctx,
            SlabRef::Boxed(s) => s.slots[i].ctx,
        }
    }
}

/// Takes the object named by `h` out of the table: the handle is released.
#[inline(always)]
pub(crate) fn remove<T: Stored>(h: u64, kind: Kind) -> Result<(T, u32)> {
    let p = check_kind(h, kind)?;
    let (cell, ctx) = {
        let mut t = enter_mut(local(), h, p, kind)?;
        let slab = T::slab_mut(&mut t);
        let i = slab.live(p, kind)?;
        slab.take(i).ok_or_else(|| stale(kind))?
    };
    T::from_cell(cell)
        .map(|v| (v, ctx))
        .ok_or_else(|| stale(kind))
}

/// Releases the object named by `h` (dropped after the table is released, so its drop
/// may use the table). From a thread other than its owner's, the handle is queued for
/// the owner to release (see the module docs); if the owner has exited, nothing is left
/// to release and this succeeds.
#[inline(always)]
pub(crate) fn release(h: u64, kind: Kind) -> Result<()> {
    let p = check_kind(h, kind)?;
    // this thread's table is gone while the thread exits: every handle is elsewhere's
    let Some(cell) = try_local() else {
        return release_elsewhere(h, p, kind);
    };
    let mut t = cell.try_borrow_mut().map_err(|_| busy())?;
    if p.table() != t.id || p.table() == 0 {
        drop(t);
        return release_elsewhere(h, p, kind);
    }
    if t.pending() {
        drop(t);
        drain(cell);
        t = cell.try_borrow_mut().map_err(|_| busy())?;
    }
    let dropped = take_kind(&mut t, p, kind)?;
    // dropped once the table is released: its drop may use the table
    drop(t);
    drop(dropped);
    Ok(())
}

/// Objects whose drop never calls into the C ABI (no user callback, no handle): the
/// per-message objects, which hold only the library's samples, loans and the `Rc` of a
/// publisher. They may drop in place, the table still borrowed.
pub(crate) trait DropsQuietly: Stored<Cell = Self> {}
impl DropsQuietly for crate::topic::Loan {}
impl DropsQuietly for nerve::RawSample {}
impl DropsQuietly for nerve::RawRequest {}
impl DropsQuietly for nerve::RawReply {}

/// [`release`] of a per-message object: it drops in place in its slot (nothing is
/// moved: a 96-byte sample copied out to be dropped later cost more than the rest of
/// the call).
#[inline(always)]
pub(crate) fn release_typed<T: DropsQuietly>(h: u64, kind: Kind) -> Result<()> {
    let p = check_kind(h, kind)?;
    // this thread's table is gone while the thread exits: every handle is elsewhere's
    let Some(cell) = try_local() else {
        return release_elsewhere(h, p, kind);
    };
    let mut t = cell.try_borrow_mut().map_err(|_| busy())?;
    if p.table() != t.id || p.table() == 0 {
        drop(t);
        return release_elsewhere(h, p, kind);
    }
    if t.pending() {
        drop(t);
        drain(cell);
        t = cell.try_borrow_mut().map_err(|_| busy())?;
    }
    let slab = T::slab_mut(&mut t);
    let i = slab.live(p, kind)?;
    slab.drop_at(i);
    Ok(())
}

/// Queues `h` on its owner's deferred-release queue.
#[cold]
#[inline(never)]
fn release_elsewhere(h: u64, p: Parts, kind: Kind) -> Result<()> {
    if p.table() == 0 {
        return Err(bad(h, kind));
    }
    match owner_of(p.table()) {
        Some(d) => d.push(h, kind),
        // the owner exited: its table dropped every object
        None => Ok(()),
    }
}

/// An object taken out of the table, to be dropped once the table is released.
enum Dropped {
    Loan(#[allow(dead_code)] crate::topic::Loan),
    Sample(#[allow(dead_code)] nerve::RawSample),
    Request(#[allow(dead_code)] nerve::RawRequest),
    Reply(#[allow(dead_code)] nerve::RawReply),
    Pub(#[allow(dead_code)] crate::topic::Pub),
    Sub(#[allow(dead_code)] crate::topic::Sub),
    Boxed(#[allow(dead_code)] Box<dyn std::any::Any>),
}

/// Takes the live object `p` names (of `kind`) out of `t`.
#[inline(always)]
fn take_kind(t: &mut Tables, p: Parts, kind: Kind) -> Result<Dropped> {
    #[inline(always)]
    fn take<T>(t: &mut Slab<T>, p: Parts, kind: Kind) -> Result<T> {
        let i = t.live(p, kind)?;
        t.take(i).map(|(v, _)| v).ok_or_else(|| stale(kind))
    }
    Ok(match kind {
        Kind::Loan => Dropped::Loan(take(&mut t.loans, p, kind)?),
        Kind::Sample => Dropped::Sample(take(&mut t.samples, p, kind)?),
        Kind::Request => Dropped::Request(take(&mut t.requests, p, kind)?),
        Kind::Reply => Dropped::Reply(take(&mut t.replies, p, kind)?),
        Kind::Publisher => Dropped::Pub(take(&mut t.pubs, p, kind)?),
        Kind::Subscriber => Dropped::Sub(take(&mut t.subs, p, kind)?),
        _ => Dropped::Boxed(take(&mut t.boxed, p, kind)?),
    })
}

/// Releases `h` (of this thread's table, `p` its parts) here, for the drain; stale
/// entries are an error the drain ignores.
fn release_here(cell: &RefCell<Tables>, h: u64, p: Parts, kind: Kind) -> Result<()> {
    let dropped = {
        let mut t = cell.try_borrow_mut().map_err(|_| busy())?;
        if p.table() != t.id {
            return Err(foreign(h, p, kind));
        }
        take_kind(&mut t, p, kind)?
    };
    drop(dropped);
    Ok(())
}

/// Fails unless both objects belong to one context.
pub(crate) fn same_context(a: u32, b: u32, what: &str) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::new(
            NERVE_ERR_WRONG_CONTEXT,
            format!("{what}: the handles come from different contexts ({a} and {b})"),
        ))
    }
}

/// Live handles of this thread (for tests and leak checks). Releases other threads
/// queued for this thread are done first.
#[no_mangle]
pub extern "C" fn nerve_live_handles() -> usize {
    drain_deferred();
    TABLE.with(|t| {
        t.try_borrow().map_or(0, |t| {
            t.loans.live_count()
                + t.samples.live_count()
                + t.requests.live_count()
                + t.replies.live_count()
                + t.pubs.live_count()
                + t.subs.live_count()
                + t.boxed.live_count()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_pack_and_unpack() {
        let h = pack(
            Kind::Managed,
            MAX_TABLES as u16,
            (MAX_SLOTS - 1) as u32,
            GEN_MASK,
        );
        let p = unpack(h);
        assert_eq!(
            (p.kind(), p.table(), p.slot(), p.generation()),
            (
                Kind::Managed as u8,
                MAX_TABLES as u16,
                (MAX_SLOTS - 1) as u32,
                GEN_MASK
            )
        );
        assert_eq!(Kind::of(p.kind()), Some(Kind::Managed));
        assert_eq!(Kind::of(0), None);
        assert_eq!(Kind::of(Kind::ALL.len() as u8 + 1), None);
    }

    #[test]
    fn checks_every_handle() {
        let h = insert(Kind::Node, 1, 42u32).unwrap();
        assert_eq!(with(h, Kind::Node, |v: &u32, c| (*v, c)).unwrap(), (42, 1));
        let e = with(h, Kind::Publisher, |_: &u32, _| ()).unwrap_err();
        assert_eq!(e.code, NERVE_ERR_WRONG_KIND);
        assert!(e.message.contains("node handle"), "{}", e.message);
        assert_eq!(
            with(0, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_BAD_HANDLE
        );
        // a kind but no table: never issued
        let forged = pack(Kind::Node, 0, 0, 1);
        assert_eq!(
            with(forged, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_BAD_HANDLE
        );
        assert_eq!(
            release(forged, Kind::Node).unwrap_err().code,
            NERVE_ERR_BAD_HANDLE
        );
        assert_eq!(remove::<u32>(h, Kind::Node).unwrap(), (42, 1));
        // double free and use after free
        assert_eq!(
            release(h, Kind::Node).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        assert_eq!(
            with(h, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        // the slot is reused with a new generation: the old handle stays stale
        let h2 = insert(Kind::Node, 1, 7u32).unwrap();
        assert_ne!(h, h2);
        assert_eq!(unpack(h).slot(), unpack(h2).slot());
        // another kind in a reused boxed slot is refused by kind, not by generation
        assert_eq!(
            with(h2, Kind::Context, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_WRONG_KIND
        );
        assert_eq!(
            with(h, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        // another thread's table does not know it: certainly, by the table id
        let e = std::thread::Builder::new()
            .name("intruder".into())
            .spawn(move || {
                // with and without a table of its own
                let first = with(h2, Kind::Node, |_: &u32, _| ()).unwrap_err();
                let own = insert(Kind::Node, 1, 1u32).unwrap();
                let second = remove::<u32>(h2, Kind::Node).unwrap_err();
                release(own, Kind::Node).unwrap();
                (first.code, second.code, second.message)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(e.0, NERVE_ERR_WRONG_THREAD);
        assert_eq!(e.1, NERVE_ERR_WRONG_THREAD);
        assert!(e.2.contains("intruder"), "{}", e.2);
        release(h2, Kind::Node).unwrap();
    }

    /// A release from another thread is queued and done at the owner's next call; a
    /// release after the owner exited is a no-op success.
    #[test]
    fn releases_from_other_threads_are_deferred() {
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        boxed!(Counted);
        let drops = Arc::new(AtomicUsize::new(0));
        let h = insert(Kind::Timer, 1, Counted(drops.clone())).unwrap();
        let before = nerve_live_handles();
        std::thread::spawn(move || release(h, Kind::Timer).unwrap())
            .join()
            .unwrap();
        // queued, not yet dropped: the owner drops it at its next call
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(nerve_live_handles(), before - 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(
            with(h, Kind::Timer, |_: &Counted, _| ()).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        // a repeated release from elsewhere is queued and ignored by the owner
        std::thread::spawn(move || release(h, Kind::Timer).unwrap())
            .join()
            .unwrap();
        let h3 = insert(Kind::Node, 1, 3u32).unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        release(h3, Kind::Node).unwrap();

        // the owner exits first: its objects drop with its table; releasing is a no-op
        let (tx, rx) = std::sync::mpsc::channel();
        let d2 = drops.clone();
        std::thread::spawn(move || tx.send(insert(Kind::Timer, 1, Counted(d2)).unwrap()))
            .join()
            .unwrap()
            .unwrap();
        let gone = rx.recv().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_eq!(release(gone, Kind::Timer).map_err(|e| e.code), Ok(()));
        assert_eq!(
            with(gone, Kind::Timer, |_: &Counted, _| ())
                .unwrap_err()
                .code,
            NERVE_ERR_STALE_HANDLE
        );
    }

    /// The queue holds no more handles than the owner's table has slots.
    #[test]
    fn the_deferred_queue_is_bounded() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let owner = std::thread::spawn(move || {
            let h = insert(Kind::Node, 1, 5u32).unwrap();
            tx.send(h).unwrap();
            // stays alive, making no call, until the test is done
            done_rx.recv().unwrap();
        });
        let h = rx.recv().unwrap();
        let cap = owner_of(unpack(h).table())
            .unwrap()
            .capacity
            .load(Ordering::Relaxed);
        assert!(cap >= 1);
        let mut refused = None;
        for _ in 0..=cap {
            if let Err(e) = release(h, Kind::Node) {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("a release past the bound is refused");
        assert_eq!(e.code, NERVE_ERR_BUSY);
        done_tx.send(()).unwrap();
        owner.join().unwrap();
    }
}
