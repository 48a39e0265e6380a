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
}

impl Kind {
    const ALL: [Kind; 20] = [
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
        }
    }

    fn of(byte: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u8 == byte)
    }
}

/// One object of the table: per-message objects (loans, samples, requests, replies)
/// inline, so taking and releasing them allocates nothing; the others boxed.
pub(crate) enum Value {
    Loan(crate::topic::Loan),
    Sample(nerve::RawSample),
    Request(nerve::RawRequest),
    Reply(nerve::RawReply),
    Boxed(Box<dyn std::any::Any>),
}

/// A type the table can hold (see [`Value`]); [`boxed!`] implements it for the rest.
pub(crate) trait Stored: Sized + 'static {
    fn wrap(self) -> Value;
    fn view(v: &Value) -> Option<&Self>;
    fn unwrap(v: Value) -> Option<Self>;
}

macro_rules! inline {
    ($variant:ident, $t:ty) => {
        impl Stored for $t {
            fn wrap(self) -> Value {
                Value::$variant(self)
            }
            fn view(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn unwrap(v: Value) -> Option<Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}
inline!(Loan, crate::topic::Loan);
inline!(Sample, nerve::RawSample);
inline!(Request, nerve::RawRequest);
inline!(Reply, nerve::RawReply);

/// Implements [`Stored`] for types kept boxed in the table.
macro_rules! boxed {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::handle::Stored for $t {
            fn wrap(self) -> $crate::handle::Value {
                $crate::handle::Value::Boxed(Box::new(self))
            }
            fn view(v: &$crate::handle::Value) -> Option<&Self> {
                match v {
                    $crate::handle::Value::Boxed(b) => b.downcast_ref(),
                    _ => None,
                }
            }
            fn unwrap(v: $crate::handle::Value) -> Option<Self> {
                match v {
                    $crate::handle::Value::Boxed(b) => b.downcast().ok().map(|b| *b),
                    _ => None,
                }
            }
        }
    )*};
}


#[cfg(test)]
boxed!(u32);

/// One live object and the context it belongs to (its id, see [`crate::context`]).
struct Object {
    ctx: u32,
    value: Value,
}

struct Entry {
    generation: u32,
    kind: Kind,
    object: Option<Object>,
}

/// A thread's objects.
struct Table {
    entries: Vec<Entry>,
    free: Vec<u32>,
    next_generation: u32,
}

/// Live handles one thread may hold (the slot field's width).
const MAX_SLOTS: usize = 1 << 24;

/// Spreads each thread's first generation over the 32-bit space.
static THREAD_SEED: AtomicU32 = AtomicU32::new(0x9E37_79B9);

thread_local! {
    static TABLE: RefCell<Table> = const {
        RefCell::new(Table { entries: Vec::new(), free: Vec::new(), next_generation: 0 })
    };
}

fn pack(kind: Kind, slot: u32, generation: u32) -> u64 {
    (u64::from(kind as u8) << 56) | (u64::from(slot) << 32) | u64::from(generation)
}

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

/// Checks `h` against the table; returns the slot index.
fn check(t: &Table, h: u64, want: Kind) -> Result<usize> {
    let (kind, slot, generation) = unpack(h);
    let Some(kind) = Kind::of(kind) else {
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
    match t.entries.get(slot as usize) {
        Some(e) if e.generation == generation && e.object.is_some() => Ok(slot as usize),
        _ => Err(stale(want)),
    }
}

/// Stores `value` of `kind` (belonging to context `ctx`) and returns its handle.
pub(crate) fn insert<T: Stored>(kind: Kind, ctx: u32, value: T) -> Result<u64> {
    TABLE.with(|t| {
        let mut t = t
            .try_borrow_mut()
            .map_err(|_| Error::new(NERVE_ERR_BUSY, "the handle table is in use"))?;
        if t.next_generation == 0 {
            // SYNC: Relaxed: a seed, publishing nothing.
            t.next_generation = THREAD_SEED.fetch_add(0x9E37_79B9, Ordering::Relaxed) | 1;
        }
        let generation = t.next_generation;
        t.next_generation = t.next_generation.wrapping_add(1).max(1);
        let object = Some(Object {
            ctx,
            value: value.wrap(),
        });
        let slot = match t.free.pop() {
            Some(s) => {
                let e = &mut t.entries[s as usize];
                e.generation = generation;
                e.kind = kind;
                e.object = object;
                s
            }
            None => {
                if t.entries.len() >= MAX_SLOTS {
                    return Err(Error::new(
                        NERVE_ERR_INVALID_ARGUMENT,
                        format!("this thread holds {MAX_SLOTS} live handles: release some"),
                    ));
                }
                t.entries.push(Entry {
                    generation,
                    kind,
                    object,
                });
                (t.entries.len() - 1) as u32
            }
        };
        Ok(pack(kind, slot, generation))
    })
}

/// Runs `f` on the object named by `h` (of `kind`, with value type `T`) and its
/// context id. `f` must not call back into C: the table stays borrowed meanwhile.
pub(crate) fn with<T: Stored, R>(h: u64, kind: Kind, f: impl FnOnce(&T, u32) -> R) -> Result<R> {
    TABLE.with(|t| {
        let t = t
            .try_borrow()
            .map_err(|_| Error::new(NERVE_ERR_BUSY, "the handle table is in use"))?;
        let slot = check(&t, h, kind)?;
        let o = t.entries[slot].object.as_ref().ok_or_else(|| stale(kind))?;
        let v = T::view(&o.value).ok_or_else(|| stale(kind))?;
        Ok(f(v, o.ctx))
    })
}

/// Clones the object named by `h` out of the table (an `Rc`, a handle), so the caller
/// may run callbacks while using it.
pub(crate) fn get<T: Stored + Clone>(h: u64, kind: Kind) -> Result<(T, u32)> {
    with(h, kind, |v: &T, ctx| (v.clone(), ctx))
}

/// The context id of the object named by `h`.
pub(crate) fn context_of(h: u64, kind: Kind) -> Result<u32> {
    TABLE.with(|t| {
        let t = t
            .try_borrow()
            .map_err(|_| Error::new(NERVE_ERR_BUSY, "the handle table is in use"))?;
        let slot = check(&t, h, kind)?;
        Ok(t.entries[slot].object.as_ref().map_or(0, |o| o.ctx))
    })
}

/// Takes the object named by `h` out of the table: the handle is released.
pub(crate) fn remove<T: Stored>(h: u64, kind: Kind) -> Result<(T, u32)> {
    let (value, ctx) = TABLE.with(|t| {
        let mut t = t
            .try_borrow_mut()
            .map_err(|_| Error::new(NERVE_ERR_BUSY, "the handle table is in use"))?;
        let slot = check(&t, h, kind)?;
        let o = t.entries[slot].object.take().ok_or_else(|| stale(kind))?;
        t.free.push(slot as u32);
        let ctx = o.ctx;
        T::unwrap(o.value).map(|v| (v, ctx)).ok_or_else(|| stale(kind))
    })?;
    Ok((value, ctx))
}

/// Releases the object named by `h` (dropped after the table is released, so its drop
/// may use the table).
pub(crate) fn release(h: u64, kind: Kind) -> Result<()> {
    let object = TABLE.with(|t| {
        let mut t = t
            .try_borrow_mut()
            .map_err(|_| Error::new(NERVE_ERR_BUSY, "the handle table is in use"))?;
        let slot = check(&t, h, kind)?;
        let o = t.entries[slot].object.take();
        t.free.push(slot as u32);
        Ok::<_, Error>(o)
    })?;
    drop(object);
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
            t.entries.iter().filter(|e| e.object.is_some()).count()
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
        assert_eq!(release(h, Kind::Node).unwrap_err().code, NERVE_ERR_STALE_HANDLE);
        assert_eq!(
            with(h, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        // the slot is reused with a new generation: the old handle stays stale
        let h2 = insert(Kind::Node, 1, 7u32).unwrap();
        assert_ne!(h, h2);
        assert_eq!(unpack(h).1, unpack(h2).1);
        assert_eq!(
            with(h, Kind::Node, |_: &u32, _| ()).unwrap_err().code,
            NERVE_ERR_STALE_HANDLE
        );
        // another thread's table does not know it
        let code = std::thread::spawn(move || with(h2, Kind::Node, |_: &u32, _| ()).unwrap_err().code)
            .join()
            .unwrap();
        assert_eq!(code, NERVE_ERR_STALE_HANDLE);
        release(h2, Kind::Node).unwrap();
    }
}
