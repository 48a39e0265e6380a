//! The handle table: every object a C caller holds is a slot of the table of the thread
//! that created it, named by a 64-bit handle (kind, slot, generation).
//!
//! Nerve's objects are not `Send` (one context per thread is the library's rule), so
//! each thread has its own table and no lock is taken on any call. A handle is checked
//! on every use: null or never issued (`NERVE_ERR_BAD_HANDLE`), released or from
//! another thread's table (`NERVE_ERR_STALE_HANDLE`: its generation no longer matches),
//! of another kind (`NERVE_ERR_WRONG_KIND`). Generations come from one counter per
//! table, started at a per-thread offset, so a handle of another thread matches a slot
//! here only by a 1-in-2^32 chance, and a released handle only after 2^32 more
//! insertions on this thread.
//!
//! Objects keep what they need alive (a loan its publisher, a sample its memory), so
//! releasing a parent never leaves a child dangling: a sample stays readable after its
//! subscriber is destroyed, exactly as in the Rust API.

use crate::status::{nerve_status_t::*, Error, Result};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

/// What a handle names. Its number is the handle's top byte.
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
    fn of(byte: u8) -> Option<Kind> {
        // the discriminants run 1..=24 in `ALL`'s order
        Kind::ALL.get(usize::from(byte).wrapping_sub(1)).copied()
    }
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

    /// The slot `h` names, if it is live with `h`'s generation and of kind `want`.
    fn live(&self, h: u64, want: Kind) -> Result<usize> {
        let (_, slot, generation) = unpack(h);
        match self.slots.get(slot as usize) {
            Some(s) if s.generation == generation && s.kind == want && s.value.is_some() => {
                Ok(slot as usize)
            }
            _ => Err(stale(want)),
        }
    }

    fn insert(&mut self, kind: Kind, ctx: u32, generation: u32, value: T) -> Result<u32> {
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.generation = generation;
            s.kind = kind;
            s.ctx = ctx;
            s.value = Some(value);
            return Ok(i);
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
        Ok((self.slots.len() - 1) as u32)
    }

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

/// A thread's objects: per-message objects (loans, samples, requests, replies) in slabs
/// of their own type, so taking and releasing one moves it once and allocates nothing;
/// the others boxed in one slab.
pub(crate) struct Tables {
    next_generation: u32,
    loans: Slab<crate::topic::Loan>,
    samples: Slab<nerve::RawSample>,
    requests: Slab<nerve::RawRequest>,
    replies: Slab<nerve::RawReply>,
    boxed: Slab<Box<dyn std::any::Any>>,
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
            fn slab(t: &Tables) -> &Slab<$t> {
                &t.$field
            }
            fn slab_mut(t: &mut Tables) -> &mut Slab<$t> {
                &mut t.$field
            }
            fn into_cell(self) -> $t {
                self
            }
            fn view(c: &$t) -> Option<&Self> {
                Some(c)
            }
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

/// Live handles one thread may hold per slab (the slot field's width).
const MAX_SLOTS: usize = 1 << 24;

/// Spreads each thread's first generation over the 32-bit space.
static THREAD_SEED: AtomicU32 = AtomicU32::new(0x9E37_79B9);

thread_local! {
    static TABLE: RefCell<Tables> = const {
        RefCell::new(Tables {
            next_generation: 0,
            loans: Slab::new(),
            samples: Slab::new(),
            requests: Slab::new(),
            replies: Slab::new(),
            boxed: Slab::new(),
        })
    };
}

#[inline]
fn pack(kind: Kind, slot: u32, generation: u32) -> u64 {
    (u64::from(kind as u8) << 56) | (u64::from(slot) << 32) | u64::from(generation)
}

#[inline]
fn unpack(h: u64) -> (u8, u32, u32) {
    ((h >> 56) as u8, ((h >> 32) & 0xFF_FFFF) as u32, h as u32)
}

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

fn stale(want: Kind) -> Error {
    Error::new(
        NERVE_ERR_STALE_HANDLE,
        format!(
            "the {} handle is no longer valid: it was released (destroyed, sent, or moved \
             into an executor) or belongs to another thread (Nerve objects stay on the \
             thread that created their context)",
            want.name()
        ),
    )
}

/// Checks `h`'s kind byte against `want`.
#[inline]
fn check_kind(h: u64, want: Kind) -> Result<()> {
    let Some(kind) = Kind::of(unpack(h).0) else {
        return Err(bad(h, want));
    };
    if kind != want {
        return Err(Error::new(
            NERVE_ERR_WRONG_KIND,
            format!(
                "a {} handle was passed where a {} handle is expected",
                kind.name(),
                want.name()
            ),
        ));
    }
    Ok(())
}

fn busy() -> Error {
    Error::new(NERVE_ERR_BUSY, "the handle table is in use")
}

/// Stores `value` of `kind` (belonging to context `ctx`) and returns its handle.
#[inline]
pub(crate) fn insert<T: Stored>(kind: Kind, ctx: u32, value: T) -> Result<u64> {
    TABLE.with(|t| {
        let mut t = t.try_borrow_mut().map_err(|_| busy())?;
        if t.next_generation == 0 {
            // SYNC: Relaxed: a seed, publishing nothing.
            t.next_generation = THREAD_SEED.fetch_add(0x9E37_79B9, Ordering::Relaxed) | 1;
        }
        let generation = t.next_generation;
        t.next_generation = generation.wrapping_add(1).max(1);
        let slot = T::slab_mut(&mut t).insert(kind, ctx, generation, value.into_cell())?;
        Ok(pack(kind, slot, generation))
    })
}

/// Runs `f` on the object named by `h` (of `kind`, with value type `T`) and its
/// context id. `f` must not call back into C: the table stays borrowed meanwhile.
#[inline]
pub(crate) fn with<T: Stored, R>(h: u64, kind: Kind, f: impl FnOnce(&T, u32) -> R) -> Result<R> {
    check_kind(h, kind)?;
    TABLE.with(|t| {
        let t = t.try_borrow().map_err(|_| busy())?;
        let slab = T::slab(&t);
        let i = slab.live(h, kind)?;
        let s = &slab.slots[i];
        let v = s
            .value
            .as_ref()
            .and_then(T::view)
            .ok_or_else(|| stale(kind))?;
        Ok(f(v, s.ctx))
    })
}

/// Clones the object named by `h` out of the table (an `Rc`, a handle), so the caller
/// may run callbacks while using it.
#[inline]
pub(crate) fn get<T: Stored + Clone>(h: u64, kind: Kind) -> Result<(T, u32)> {
    with(h, kind, |v: &T, ctx| (v.clone(), ctx))
}

/// The context id of the object named by `h`.
pub(crate) fn context_of(h: u64, kind: Kind) -> Result<u32> {
    check_kind(h, kind)?;
    TABLE.with(|t| {
        let t = t.try_borrow().map_err(|_| busy())?;
        let slab = slab_of(&t, kind);
        let i = slab.live(h, kind)?;
        Ok(slab.ctx(i))
    })
}

/// The boxed slab or the slot metadata of an inline one, by kind (for calls that do not
/// know the Rust type).
fn slab_of(t: &Tables, kind: Kind) -> SlabRef<'_> {
    match kind {
        Kind::Loan => SlabRef::Loan(&t.loans),
        Kind::Sample => SlabRef::Sample(&t.samples),
        Kind::Request => SlabRef::Request(&t.requests),
        Kind::Reply => SlabRef::Reply(&t.replies),
        _ => SlabRef::Boxed(&t.boxed),
    }
}

/// A slab of any type, for its slot metadata.
enum SlabRef<'a> {
    Loan(&'a Slab<crate::topic::Loan>),
    Sample(&'a Slab<nerve::RawSample>),
    Request(&'a Slab<nerve::RawRequest>),
    Reply(&'a Slab<nerve::RawReply>),
    Boxed(&'a Slab<Box<dyn std::any::Any>>),
}

impl SlabRef<'_> {
    fn live(&self, h: u64, want: Kind) -> Result<usize> {
        match self {
            SlabRef::Loan(s) => s.live(h, want),
            SlabRef::Sample(s) => s.live(h, want),
            SlabRef::Request(s) => s.live(h, want),
            SlabRef::Reply(s) => s.live(h, want),
            SlabRef::Boxed(s) => s.live(h, want),
        }
    }

    /// The context of live slot `i`.
    fn ctx(&self, i: usize) -> u32 {
        match self {
            SlabRef::Loan(s) => s.slots[i].ctx,
            SlabRef::Sample(s) => s.slots[i].ctx,
            SlabRef::Request(s) => s.slots[i].ctx,
            SlabRef::Reply(s) => s.slots[i].ctx,
            SlabRef::Boxed(s) => s.slots[i].ctx,
        }
    }
}

/// Takes the object named by `h` out of the table: the handle is released.
#[inline]
pub(crate) fn remove<T: Stored>(h: u64, kind: Kind) -> Result<(T, u32)> {
    check_kind(h, kind)?;
    let (cell, ctx) = TABLE.with(|t| {
        let mut t = t.try_borrow_mut().map_err(|_| busy())?;
        let slab = T::slab_mut(&mut t);
        let i = slab.live(h, kind)?;
        slab.take(i).ok_or_else(|| stale(kind))
    })?;
    T::from_cell(cell)
        .map(|v| (v, ctx))
        .ok_or_else(|| stale(kind))
}

/// Releases the object named by `h` (dropped after the table is released, so its drop
/// may use the table).
pub(crate) fn release(h: u64, kind: Kind) -> Result<()> {
    check_kind(h, kind)?;
    fn take<T>(t: &mut Slab<T>, h: u64, kind: Kind) -> Result<T> {
        let i = t.live(h, kind)?;
        t.take(i).map(|(v, _)| v).ok_or_else(|| stale(kind))
    }
    enum Dropped {
        Loan(#[allow(dead_code)] crate::topic::Loan),
        Sample(#[allow(dead_code)] nerve::RawSample),
        Request(#[allow(dead_code)] nerve::RawRequest),
        Reply(#[allow(dead_code)] nerve::RawReply),
        Boxed(#[allow(dead_code)] Box<dyn std::any::Any>),
    }
    let dropped = TABLE.with(|t| {
        let mut t = t.try_borrow_mut().map_err(|_| busy())?;
        Ok::<_, Error>(match kind {
            Kind::Loan => Dropped::Loan(take(&mut t.loans, h, kind)?),
            Kind::Sample => Dropped::Sample(take(&mut t.samples, h, kind)?),
            Kind::Request => Dropped::Request(take(&mut t.requests, h, kind)?),
            Kind::Reply => Dropped::Reply(take(&mut t.replies, h, kind)?),
            _ => Dropped::Boxed(take(&mut t.boxed, h, kind)?),
        })
    })?;
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

/// Live handles of this thread (for tests and leak checks).
#[no_mangle]
pub extern "C" fn nerve_live_handles() -> usize {
    TABLE.with(|t| {
        t.try_borrow().map_or(0, |t| {
            t.loans.live_count()
                + t.samples.live_count()
                + t.requests.live_count()
                + t.replies.live_count()
                + t.boxed.live_count()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(unpack(h).1, unpack(h2).1);
        // another kind in a reused boxed slot is refused by kind, not by generation
        assert_eq!(
            with(h2, Kind::Context, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_WRONG_KIND
        );
        assert_eq!(
            with(h, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        // another thread's table does not know it
        let code =
            std::thread::spawn(move || with(h2, Kind::Node, |_: &u32, _| ()).unwrap_err().code)
                .join()
                .unwrap();
        assert_eq!(code, NERVE_ERR_STALE_HANDLE);
        release(h2, Kind::Node).unwrap();
    }
}
