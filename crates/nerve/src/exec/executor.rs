//! Executors: run the callbacks of subscriptions, service servers, clients, timers and
//! state machines from one wait set.
//!
//! [`Executor`] is single-threaded: it sleeps on the doorbell slots of its entities, its
//! control word and the shutdown word in one `futex_waitv`, bounded by the next timer
//! deadline (minus the [`PreciseSleep`] margin, then a spin to the deadline). An idle
//! executor with no timer sleeps until something arrives. Ready work runs by strict
//! priority: after every callback batch the scan restarts at the highest priority.
//!
//! [`MultiThreadedExecutor`] runs one [`Executor`] per thread; callback groups say which
//! callbacks may run in parallel (see [`CallbackGroup`]). Ports are not `Send`, so every
//! entity is created on the thread that will run it, by the setup closure given to
//! [`MultiThreadedExecutor::add`].

use crate::error::{CallError, ExecError};
use crate::exec::timer::{
    spin_until, Overrun, PreciseSleep, Precision, Schedule, Tick, TimerHandle,
};
use crate::message::Message;
use crate::service::client::{Client, RawPendingCall, Reply};
use crate::service::server::{Request, Server};
use crate::service::{HandlerResult, Service};
use crate::sys::clock::mono_ns;
use crate::sys::futex::{self, WaitEntry};
use crate::topic::subscriber::{Sample, Subscriber};
use crate::transport::doorbell::SlotRef;
use crate::transport::wait::MAX_SLEEP;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Items (samples, requests, replies, ticks) one entity handles before the scan restarts
/// at the highest priority.
pub(crate) const BATCH: usize = 16;
/// The error of a fallible callback (`subscribe_raw`, `try_timer`): the spin that ran
/// it returns it as [`ExecError::Work`], and the executor stays usable.
pub type CallbackError = Box<dyn std::error::Error + Send + Sync + 'static>;
/// Default bound of the drain after a stop or a signal.
pub const DEFAULT_DRAIN: Duration = Duration::from_millis(500);

/// Identifies an entity of an [`Executor`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntityId(usize);

/// What an entity did so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityStats {
    /// Name given at registration (the topic, service or timer name).
    pub name: String,
    /// Its priority (higher runs first).
    pub priority: i32,
    /// Callbacks run.
    pub callbacks: u64,
    /// Malformed samples or requests dropped (never handed to the callback).
    pub rejected: u64,
}

/// The time on both of an executor's clocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Now {
    /// The monotonic clock, ns (call timeouts and drains: real time).
    pub(crate) mono: u64,
    /// The robot clock of timers, ns: the monotonic clock, or simulation time.
    pub(crate) robot: u64,
}

/// An executor's entity: something to wait on and callbacks to run.
pub(crate) trait Work {
    /// The doorbell slot rung when it has new input (none for pure timers).
    fn slot(&self) -> Option<SlotRef> {
        None
    }
    /// Its next deadline in real time (monotonic ns), if it has one.
    fn deadline(&self) -> Option<u64> {
        None
    }
    /// Its next deadline in robot time (timers, state timeouts), if it has one.
    fn due(&self) -> Option<u64> {
        None
    }
    /// Robot time jumped from `from` to `to` (simulation time only): deadlines keep the
    /// time they had left.
    fn rebase(&mut self, _from: u64, _to: u64) {}
    /// A simulation clock started at `at`: deadlines made before it count from there.
    fn start(&mut self, _at: u64) {}
    /// Whether input is waiting or a deadline has passed at `now`.
    fn ready(&self, now: Now) -> bool;
    /// Runs callbacks while `budget.more(n)` allows (at least one); returns how many ran.
    /// `stats.rejected` counts dropped input.
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError>;
    /// Whether it may run during the drain after a stop (timers may not).
    fn drains(&self) -> bool {
        true
    }
}

/// How much more an entity may run now: at most [`BATCH`] callbacks in a row, none
/// after a stop (normal running) or past the drain's end (draining); the first callback
/// of a batch always runs.
pub(crate) struct Budget<'a> {
    exec: &'a Executor,
    drain_end: Option<u64>,
}

impl Budget<'_> {
    /// Robot time now (for timers and state timeouts).
    pub(crate) fn robot_now(&self) -> u64 {
        self.exec.clock().timer_ns()
    }

    /// `n` samples of a subscription counted by a replay were handled (or lost): given
    /// back once the executor has nothing left to run.
    pub(crate) fn handled(&self, rx: &crate::time::lockstep::Receiver, n: u32) {
        if n == 0 {
            return;
        }
        match self.exec.replay_slot() {
            Some(_) => self.exec.owed.set(self.exec.owed.get() + n),
            // not an executor of the replay: give them back at once
            None => rx.handled(n),
        }
    }

    /// Whether a callback may run after `n` in this batch.
    pub(crate) fn more(&self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        n < BATCH
            && match self.drain_end {
                Some(end) => mono_ns() < end,
                None => !self.exec.stopping(),
            }
    }
}

/// Shared between an executor and its handles.
#[derive(Default)]
pub(crate) struct Control {
    stop: AtomicBool,
    word: AtomicU32,
}

impl Control {
    /// Wakes the executor (if it sleeps) so it looks at its inputs and flags again.
    pub(crate) fn wake(&self) {
        // SYNC: SeqCst bump after whatever the caller published (a stop flag, a queued
        // trigger); the executor reads the word before it checks them.
        self.word.fetch_add(1, Ordering::SeqCst);
        futex::futex_wake(&self.word);
    }
}

/// Stops or wakes an executor from any thread.
#[derive(Clone)]
pub struct ExecutorHandle {
    pub(crate) control: Arc<Control>,
}

impl ExecutorHandle {
    /// Asks the executor to drain and return from `spin`.
    pub fn stop(&self) {
        // SYNC: Release pairs with the Acquire load in `Executor::stopping`.
        self.control.stop.store(true, Ordering::Release);
        self.control.wake();
    }

    /// Whether a stop was asked.
    pub fn is_stopped(&self) -> bool {
        self.control.stop.load(Ordering::Acquire)
    }

    /// Wakes the executor (if it sleeps) so it looks at its entities again: for work
    /// another thread requested with [`Executor::on_request`].
    pub fn wake(&self) {
        self.control.wake();
    }
}

struct Entry {
    priority: i32,
    work: Box<dyn Work>,
    stats: EntityStats,
}

/// A single-threaded executor (see the module docs).
pub struct Executor {
    /// Sorted by priority, highest first (stable: equal priorities keep insertion order).
    entries: Vec<Entry>,
    /// `order[i]`: position in `entries` of the entity with id `i`.
    order: Vec<usize>,
    /// The entities' doorbell slots, sorted and without duplicates (the wait set).
    slots: Vec<SlotRef>,
    sleep: PreciseSleep,
    control: Arc<Control>,
    drain: Duration,
    signals: bool,
    rt: Option<crate::sys::rt::RtConfig>,
    rt_report: Option<crate::sys::rt::RtReport>,
    /// How long to look for work before sleeping, ns (0: sleep at once).
    spin_window_ns: u64,
    /// The slots' sequences of the current wait (kept: no allocation per wait).
    seen: std::cell::RefCell<Vec<u32>>,
    /// The robot clock (chosen on first use: the process clock unless set).
    clock: std::cell::OnceCell<crate::time::Clock>,
    /// This executor's slot in the domain's deterministic replay (chosen on first spin).
    replay: std::cell::OnceCell<Option<crate::time::lockstep::ExecutorSlot>>,
    /// Samples handled since the replay was last told.
    owed: std::cell::Cell<u32>,
    /// Robot time at the last scan (to see simulation time jump back).
    last_robot: std::cell::Cell<u64>,
    /// Deadlines made before a simulation clock started have been moved to its start.
    started: std::cell::Cell<bool>,
    /// The simulation clock's epoch when the last scan began.
    scan_epoch: std::cell::Cell<u32>,
}

impl Drop for Executor {
    fn drop(&mut self) {
        // a replay waits for nothing this executor still owes
        if let Some(Some(slot)) = self.replay.get() {
            let epoch = slot.epoch();
            slot.settle(epoch, None, self.owed.replace(0));
        }
    }
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

impl Executor {
    /// An empty executor with the default timer [`Precision`].
    pub fn new() -> Executor {
        Executor {
            entries: Vec::new(),
            order: Vec::new(),
            slots: Vec::new(),
            sleep: PreciseSleep::new(Precision::default()),
            control: Arc::new(Control::default()),
            drain: DEFAULT_DRAIN,
            signals: true,
            rt: None,
            rt_report: None,
            spin_window_ns: 0,
            seen: std::cell::RefCell::new(Vec::new()),
            clock: std::cell::OnceCell::new(),
            replay: std::cell::OnceCell::new(),
            owed: std::cell::Cell::new(0),
            last_robot: std::cell::Cell::new(0),
            started: std::cell::Cell::new(false),
            scan_epoch: std::cell::Cell::new(0),
        }
    }

    /// Runs timers and state timeouts on `clock` (see [`Executor::clock`] for the
    /// default); call before adding entities. `false` if the executor already chose its
    /// clock (at its first subscription, state machine, timer or spin).
    pub fn use_clock(&mut self, clock: crate::time::Clock) -> bool {
        let now = clock.timer_ns();
        let set = self.clock.set(clock).is_ok();
        if set {
            self.last_robot.set(now);
        }
        set
    }

    /// Takes the clock of `node`'s context unless the executor chose one already: an
    /// executor runs on the clock of its first subscription's or state machine's context.
    fn adopt_clock(&mut self, node: &crate::context::Node) {
        if self.clock.get().is_none() {
            self.use_clock(node.inner.ctx.inner.clock.clone());
        }
    }

    /// The clock timers run on: the one given to [`Executor::use_clock`], else the clock
    /// of the context of the first subscription or state machine added, else the process
    /// clock (see [`crate::time`]).
    pub fn clock(&self) -> &crate::time::Clock {
        self.clock.get_or_init(|| {
            let clock = crate::time::clock();
            // jumps are seen from here on
            self.last_robot.set(clock.timer_ns());
            clock
        })
    }

    /// This executor's slot in the domain's replay, joined on first use when its clock is
    /// a replay's.
    fn replay_slot(&self) -> Option<&crate::time::lockstep::ExecutorSlot> {
        self.replay
            .get_or_init(|| {
                let ls = self.clock().lockstep_segment()?;
                match ls.join_executor() {
                    Ok(slot) => Some(slot),
                    Err(e) => {
                        eprintln!("nerve executor: not part of the replay: {e}");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// Both clocks now.
    fn now(&self) -> Now {
        let mono = mono_ns();
        let clock = self.clock();
        Now {
            mono,
            robot: if clock.is_sim() {
                clock.timer_ns()
            } else {
                mono
            },
        }
    }

    /// Simulation time jumped back (or started): every deadline keeps the time it had
    /// left, counted from the new time.
    fn follow_jumps(&mut self, robot: u64) {
        if !self.clock().is_sim() {
            return;
        }
        let last = self.last_robot.replace(robot);
        if robot < last {
            for e in &mut self.entries {
                e.work.rebase(last, robot);
            }
        }
        if robot > 0 && !self.started.replace(true) {
            for e in &mut self.entries {
                e.work.start(robot);
            }
        }
    }

    /// Looks for work for up to `window` before sleeping (default: none, sleep at once).
    ///
    /// A sleeping executor is woken through a futex: 10 to 15 µs on a 2-vCPU VM, which a
    /// server whose requests come back to back pays on each one it fell asleep before.
    /// A window a little longer than the gaps between a client's calls keeps such a
    /// server awake while it is busy, at the price of that much CPU each time it is about
    /// to sleep; an idle executor still sleeps (it spins one window per wake-up).
    pub fn spin_before_sleep(&mut self, window: Duration) -> &mut Self {
        self.spin_window_ns = window.as_nanos().min(u64::MAX as u128) as u64;
        self
    }

    /// Real-time settings (`SCHED_FIFO`, CPU affinity, locked memory) applied to the
    /// thread that first spins this executor, then read back (see [`crate::sys::rt`]); refused
    /// settings are reported on stderr and in [`Executor::realtime_report`].
    pub fn realtime(&mut self, rt: crate::sys::rt::RtConfig) -> &mut Self {
        self.rt = Some(rt);
        self
    }

    /// What the real-time settings came to, once spinning began.
    pub fn realtime_report(&self) -> Option<&crate::sys::rt::RtReport> {
        self.rt_report.as_ref()
    }

    fn apply_realtime(&mut self) {
        if let Some(rt) = self.rt.take() {
            let report = crate::sys::rt::apply(&rt);
            for w in report.warnings() {
                eprintln!("nerve executor: {w}");
            }
            self.rt_report = Some(report);
        }
    }

    /// Sets how timers are waited for (default: [`Precision::default`]).
    pub fn precision(&mut self, precision: Precision) -> &mut Self {
        self.sleep = PreciseSleep::new(precision);
        self
    }

    /// Bounds the drain after a stop or signal: ready input is handled for at most this
    /// long (default [`DEFAULT_DRAIN`]).
    pub fn drain_timeout(&mut self, drain: Duration) -> &mut Self {
        self.drain = drain;
        self
    }

    /// Whether `spin` installs SIGINT/SIGTERM handlers and stops on them (default true).
    pub fn handle_signals(&mut self, on: bool) -> &mut Self {
        self.signals = on;
        self
    }

    /// A handle that stops or wakes this executor from any thread.
    pub fn handle(&self) -> ExecutorHandle {
        ExecutorHandle {
            control: self.control.clone(),
        }
    }

    /// Number of entities.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no entities.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn add_work(
        &mut self,
        name: &str,
        work: Box<dyn Work>,
    ) -> Result<EntityId, ExecError> {
        if let Some(slot) = work.slot() {
            if !self.slots.iter().any(|s| s.same(&slot)) {
                // two words of the wait set are the control and shutdown words
                if self.slots.len() + 2 >= crate::exec::waitset::MAX_WAITSET_ENTRIES {
                    return Err(ExecError::Full {
                        max: crate::exec::waitset::MAX_WAITSET_ENTRIES - 2,
                    });
                }
                self.slots.push(slot);
            }
        }
        let id = self.order.len();
        self.entries.push(Entry {
            priority: 0,
            work,
            stats: EntityStats {
                name: name.to_string(),
                priority: 0,
                callbacks: 0,
                rejected: 0,
            },
        });
        self.order.push(self.entries.len() - 1);
        Ok(EntityId(id))
    }

    /// Sets an entity's priority (default 0; higher runs first when several are ready).
    pub fn set_priority(&mut self, id: EntityId, priority: i32) -> &mut Self {
        let pos = self.order[id.0];
        self.entries[pos].priority = priority;
        self.entries[pos].stats.priority = priority;
        // re-sort, keeping ids pointing at their entries
        let mut idx: Vec<usize> = (0..self.entries.len()).collect();
        idx.sort_by_key(|&i| std::cmp::Reverse(self.entries[i].priority));
        let mut old: Vec<Option<Entry>> = self.entries.drain(..).map(Some).collect();
        let mut new_pos = vec![0; idx.len()];
        for (to, &from) in idx.iter().enumerate() {
            new_pos[from] = to;
            self.entries
                .push(old[from].take().expect("each entry moves once"));
        }
        for p in &mut self.order {
            *p = new_pos[*p];
        }
        self
    }

    /// The statistics of every entity, highest priority first.
    pub fn stats(&self) -> Vec<EntityStats> {
        self.entries.iter().map(|e| e.stats.clone()).collect()
    }

    /// Calls `callback` with every sample of `sub`.
    pub fn subscribe<M, F>(
        &mut self,
        sub: Subscriber<M>,
        callback: F,
    ) -> Result<EntityId, ExecError>
    where
        M: Message,
        F: FnMut(&Sample<M>) + 'static,
    {
        let name = sub.topic().to_string();
        self.adopt_clock(sub.node());
        let counted = replay_receiver(sub.node(), &name)?;
        self.add_work(
            &name,
            Box::new(Subscription {
                sub,
                callback,
                counted,
            }),
        )
    }

    /// Answers every request of `server` with `handler`.
    pub fn serve<S, F>(&mut self, server: Server<S>, handler: F) -> Result<EntityId, ExecError>
    where
        S: Service,
        F: FnMut(&Request<'_, S>) -> HandlerResult + 'static,
    {
        let name = server.name().to_string();
        self.add_work(&name, Box::new(Serving { server, handler }))
    }

    /// Calls `callback` with every sample of a type-erased subscriber (bindings); an
    /// error from it ends the spin with [`ExecError::Work`] (that sample is consumed).
    pub fn subscribe_raw<F>(
        &mut self,
        sub: crate::topic::raw::RawSubscriber,
        callback: F,
    ) -> Result<EntityId, ExecError>
    where
        F: FnMut(&crate::topic::raw::RawSample) -> Result<(), CallbackError> + 'static,
    {
        let mut callback = callback;
        self.subscribe_raw_owned(sub, move |s| callback(&s))
    }

    /// As [`Executor::subscribe_raw`], but `callback` takes each sample over: it may keep
    /// it past the call (bindings' shared samples). A subscriber holds at most
    /// `Qos::max_borrowed` samples at once (the one being delivered included); a sample
    /// that arrives while that many are kept ends the spin with [`ExecError::Recv`]
    /// ([`crate::RecvError::TooManyHeld`]), and it stays queued until one is dropped.
    pub fn subscribe_raw_owned<F>(
        &mut self,
        sub: crate::topic::raw::RawSubscriber,
        callback: F,
    ) -> Result<EntityId, ExecError>
    where
        F: FnMut(crate::topic::raw::RawSample) -> Result<(), CallbackError> + 'static,
    {
        let name = sub.topic().to_string();
        self.adopt_clock(sub.rx.node());
        let counted = replay_receiver(sub.rx.node(), &name)?;
        self.add_work(
            &name,
            Box::new(RawSubscription {
                sub,
                callback,
                counted,
            }),
        )
    }

    /// Hands every request of a type-erased server to `handler`, which answers it
    /// (`reply_bytes`, `fail`); a request it returns an error for is failed with that
    /// error's message, so the caller learns why, and the executor goes on.
    pub fn serve_raw<F>(
        &mut self,
        server: crate::service::server::RawServer,
        handler: F,
    ) -> Result<EntityId, ExecError>
    where
        F: FnMut(&crate::service::server::RawRequest) -> Result<(), CallbackError> + 'static,
    {
        let name = server.name().to_string();
        self.add_work(&name, Box::new(RawServing { server, handler }))
    }

    /// Makes `client`'s calls asynchronous: [`Calls::call`] sends, and `on_reply` runs on
    /// this executor with each response, or with the error that ended the call (timeout,
    /// server gone).
    pub fn client<S, F>(
        &mut self,
        client: Client<S>,
        timeout: Duration,
        on_reply: F,
    ) -> Result<(EntityId, Calls<S>), ExecError>
    where
        S: Service,
        F: FnMut(u64, Result<Reply<S>, CallError>) + 'static,
    {
        let name = client.name().to_string();
        let shared = Rc::new(CallsInner {
            pending: RefCell::new(VecDeque::new()),
            client,
            timeout_ns: timeout.as_nanos().min(u64::MAX as u128 / 4) as u64,
        });
        let id = self.add_work(
            &name,
            Box::new(Calling {
                shared: shared.clone(),
                on_reply,
            }),
        )?;
        Ok((id, Calls { inner: shared }))
    }

    /// Keeps a publisher's history reaching late joiners while it sends nothing: whenever
    /// a subscriber joins its topic, the executor connects it (which hands it the history).
    /// For latched topics (maps, parameters, static transforms) published rarely.
    pub fn latch<M: Message>(
        &mut self,
        publisher: Rc<crate::topic::publisher::Publisher<M>>,
    ) -> Result<EntityId, ExecError> {
        let name = publisher.topic().to_string();
        let watch = RingWatch::new(publisher.wake_slot().clone());
        self.add_work(&name, Box::new(Latch { publisher, watch }))
    }

    /// Calls `callback` every `period` on an absolute grid starting one period from now.
    pub fn timer<F>(
        &mut self,
        name: &str,
        period: Duration,
        overrun: Overrun,
        callback: F,
    ) -> Result<(EntityId, TimerHandle), ExecError>
    where
        F: FnMut(&Tick) + 'static,
    {
        let mut callback = callback;
        self.try_timer(name, period, overrun, move |t| {
            callback(t);
            Ok(())
        })
    }

    /// [`Executor::timer`] with a fallible callback: an error ends the spin with
    /// [`ExecError::Work`]; the timer keeps its grid.
    pub fn try_timer<F>(
        &mut self,
        name: &str,
        period: Duration,
        overrun: Overrun,
        callback: F,
    ) -> Result<(EntityId, TimerHandle), ExecError>
    where
        F: FnMut(&Tick) -> Result<(), CallbackError> + 'static,
    {
        let first = self.clock().timer_ns() + period.as_nanos() as u64;
        self.add_timer(name, Schedule::periodic(first, period, overrun), callback)
    }

    /// A one-shot timer, disarmed until armed through its handle (or armed `after` from
    /// now if given).
    pub fn one_shot<F>(
        &mut self,
        name: &str,
        after: Option<Duration>,
        callback: F,
    ) -> Result<(EntityId, TimerHandle), ExecError>
    where
        F: FnMut(&Tick) + 'static,
    {
        let mut callback = callback;
        self.try_one_shot(name, after, move |t| {
            callback(t);
            Ok(())
        })
    }

    /// [`Executor::one_shot`] with a fallible callback (see [`Executor::try_timer`]).
    pub fn try_one_shot<F>(
        &mut self,
        name: &str,
        after: Option<Duration>,
        callback: F,
    ) -> Result<(EntityId, TimerHandle), ExecError>
    where
        F: FnMut(&Tick) -> Result<(), CallbackError> + 'static,
    {
        let now = self.clock().timer_ns();
        let at = after.map(|a| now + a.as_nanos() as u64);
        self.add_timer(name, Schedule::one_shot(at), callback)
    }

    /// Runs `machine` here: opens `/<name>/event` and `/<name>/spec` on `node`, enters
    /// the initial state, then fires its timeouts and the triggers sent through the
    /// returned handle, publishing every transition.
    pub fn machine(
        &mut self,
        node: &crate::context::Node,
        machine: crate::exec::machine::Machine,
    ) -> Result<(EntityId, crate::exec::machine::MachineHandle), ExecError> {
        let name = machine.name().to_string();
        self.adopt_clock(node);
        let (runner, handle) =
            crate::exec::machine::Runner::start(node, machine, self.control.clone())?;
        Ok((self.add_work(&name, Box::new(runner))?, handle))
    }

    fn add_timer<F>(
        &mut self,
        name: &str,
        schedule: Schedule,
        callback: F,
    ) -> Result<(EntityId, TimerHandle), ExecError>
    where
        F: FnMut(&Tick) -> Result<(), CallbackError> + 'static,
    {
        let clock = self.clock().clone();
        if clock.is_sim() && clock.timer_ns() == 0 {
            // made before the clock started: counts from its start
            schedule.float();
            self.started.set(false);
        }
        let handle = TimerHandle {
            schedule: Rc::new(schedule),
            clock,
        };
        let id = self.add_work(
            name,
            Box::new(TimerWork {
                schedule: handle.schedule.clone(),
                callback,
            }),
        )?;
        Ok((id, handle))
    }

    fn stopping(&self) -> bool {
        (self.signals && crate::sys::signals::requested())
            || self.control.stop.load(Ordering::Acquire)
    }

    /// Runs ready work by priority until nothing is ready; returns the callbacks run.
    /// Normal running (`drain_end: None`) ends between batches once a stop is asked or
    /// `limit` (monotonic ns) passes, so work that is always ready (a timer whose callback
    /// outlasts its period) cannot keep `spin_once` and `spin_for` from returning; a drain
    /// ends between batches at `drain_end`.
    fn run_ready(&mut self, limit: u64, drain_end: Option<u64>) -> Result<usize, ExecError> {
        let draining = drain_end.is_some();
        let mut total = 0;
        'scan: loop {
            // the replay's clock step this scan answers for: read before the time
            let epoch = self.replay_slot().map(|s| s.epoch());
            // SYNC: SeqCst, before the time is read: a later change of simulation time
            // ends the next wait at once (it waits on this value, see `wait`).
            if let Some(word) = self.clock().epoch_word() {
                self.scan_epoch.set(word.load(Ordering::SeqCst));
            }
            let now = self.now();
            self.follow_jumps(now.robot);
            let over = match drain_end {
                Some(end) => now.mono >= end,
                // a stop ends normal running; the drain takes over
                None => self.stopping() || (total > 0 && now.mono >= limit),
            };
            if over {
                return Ok(total);
            }
            for k in 0..self.entries.len() {
                let e = &self.entries[k];
                if (!draining || e.work.drains()) && e.work.ready(now) {
                    // the entity runs with its box taken out, so the budget can borrow
                    // the executor
                    let mut work = std::mem::replace(&mut self.entries[k].work, Box::new(Idle));
                    let mut stats =
                        std::mem::replace(&mut self.entries[k].stats, EntityStats::EMPTY);
                    let budget = Budget {
                        exec: self,
                        drain_end,
                    };
                    let r = work.run(&mut stats, &budget);
                    let e = &mut self.entries[k];
                    e.work = work;
                    e.stats = stats;
                    let n = r?;
                    e.stats.callbacks += n as u64;
                    total += n;
                    if n > 0 {
                        continue 'scan;
                    }
                }
            }
            // nothing ready: tell the replay what this executor handled and when its
            // next timer is due
            if let (Some(slot), Some(epoch)) = (self.replay_slot(), epoch) {
                slot.settle(epoch, self.next_due(), self.owed.replace(0));
            }
            return Ok(total);
        }
    }

    /// The next robot-time deadline (timers, state timeouts).
    fn next_due(&self) -> Option<u64> {
        self.entries.iter().filter_map(|e| e.work.due()).min()
    }

    /// The next deadline to sleep to, monotonic ns: real-time deadlines, and robot-time
    /// ones when robot time is the monotonic clock (a simulation clock wakes the executor
    /// itself when it moves).
    fn next_deadline(&self) -> Option<u64> {
        let real = self.entries.iter().filter_map(|e| e.work.deadline()).min();
        if self.clock().is_sim() {
            return real;
        }
        match (real, self.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleeps until some entity may be ready, `limit_ns` passes or a stop is asked.
    fn wait(&self, limit_ns: u64) {
        if self.spin_window_ns > 0 && self.look_before_sleeping(limit_ns) {
            return;
        }
        let deadline = self.next_deadline().map_or(limit_ns, |d| d.min(limit_ns));
        let timer_due = deadline < limit_ns;
        let wake = if timer_due {
            self.sleep.wake_at(deadline, mono_ns())
        } else {
            deadline
        };
        crate::transport::doorbell::wait_round(
            &self.slots,
            &mut self.seen.borrow_mut(),
            |seen| {
                let mut entries: Vec<WaitEntry> = self
                    .slots
                    .iter()
                    .zip(seen)
                    .map(|(s, &seen)| WaitEntry {
                        seen,
                        word: s.word(),
                    })
                    .collect();
                for word in [&self.control.word, crate::sys::signals::word()] {
                    entries.push(WaitEntry {
                        // SYNC: read the word before checking flags and queues below; a
                        // later bump makes the futex wait return at once.
                        seen: word.load(Ordering::SeqCst),
                        word,
                    });
                }
                if let Some(word) = self.clock().epoch_word() {
                    // the time the last scan saw: a step since (which a replay waits to
                    // have acknowledged) ends the wait at once
                    entries.push(WaitEntry {
                        seen: self.scan_epoch.get(),
                        word,
                    });
                }
                let now = self.now();
                let idle = !self.stopping() && !self.entries.iter().any(|e| e.work.ready(now));
                ((), (idle && now.mono < wake).then_some((entries, now.mono)))
            },
            |(entries, now)| {
                let limit = crate::transport::doorbell::sleep_limit(MAX_SLEEP).as_nanos() as u64;
                futex::wait_any_until(&entries, wake.min(now + limit));
                let woke = mono_ns();
                if timer_due && woke >= wake {
                    self.sleep.observe(wake, woke, deadline);
                }
            },
        );
        let now = mono_ns();
        if timer_due && now >= wake && now < deadline && !self.stopping() {
            spin_until(deadline, now);
        }
    }

    /// Looks for ready work (or a stop) for up to the spin window, `limit_ns` and the next
    /// timer deadline; whether it found any.
    fn look_before_sleeping(&self, limit_ns: u64) -> bool {
        let start = mono_ns();
        let end = self
            .next_deadline()
            .map_or(limit_ns, |d| d.min(limit_ns))
            .min(start.saturating_add(self.spin_window_ns));
        loop {
            let now = self.now();
            if self.stopping() || self.entries.iter().any(|e| e.work.ready(now)) {
                return true;
            }
            if now.mono >= end {
                return false;
            }
            core::hint::spin_loop();
        }
    }

    /// Waits up to `timeout` for work, then runs what is ready; returns the callbacks run.
    pub fn spin_once(&mut self, timeout: Duration) -> Result<usize, ExecError> {
        self.apply_realtime();
        let limit = mono_ns() + timeout.as_nanos().min(u64::MAX as u128 / 4) as u64;
        loop {
            let n = self.run_ready(limit, None)?;
            if n > 0 || self.stopping() || mono_ns() >= limit {
                return Ok(n);
            }
            self.wait(limit);
        }
    }

    /// Runs callbacks for `duration` (or until stopped).
    pub fn spin_for(&mut self, duration: Duration) -> Result<(), ExecError> {
        let end = mono_ns() + duration.as_nanos() as u64;
        while !self.stopping() {
            let now = mono_ns();
            if now >= end {
                return Ok(());
            }
            self.spin_once(Duration::from_nanos(end - now))?;
        }
        self.drain()
    }

    /// Runs callbacks until [`ExecutorHandle::stop`] or (with signal handling on) SIGINT or
    /// SIGTERM, then drains ready input within the drain bound and returns.
    pub fn spin(&mut self) -> Result<(), ExecError> {
        if self.signals {
            crate::sys::signals::install();
        }
        while !self.stopping() {
            self.spin_once(MAX_SLEEP)?;
        }
        self.drain()
    }

    /// Handles input that is already queued (no timers), for at most the drain bound.
    fn drain(&mut self) -> Result<(), ExecError> {
        let end = mono_ns() + self.drain.as_nanos() as u64;
        self.run_ready(end, Some(end))?;
        Ok(())
    }
}

/// Notices new endpoints on a topic: its doorbell slot rings whenever a publisher or
/// subscriber joins.
pub(crate) struct RingWatch {
    slot: SlotRef,
    seen: u32,
}

impl RingWatch {
    /// Watches `slot`.
    pub(crate) fn new(slot: SlotRef) -> RingWatch {
        let seen = slot.seq();
        RingWatch { slot, seen }
    }
    pub(crate) fn slot(&self) -> &SlotRef {
        &self.slot
    }
    /// Whether the slot rang since the last [`RingWatch::take`].
    pub(crate) fn rang(&self) -> bool {
        self.slot.seq() != self.seen
    }
    /// Like `rang`, and forgets the ring.
    pub(crate) fn take(&mut self) -> bool {
        let now = self.slot.seq();
        std::mem::replace(&mut self.seen, now) != now
    }
}

/// Hands a latched publisher's history to subscribers that join while it is idle.
struct Latch<M: Message> {
    publisher: Rc<crate::topic::publisher::Publisher<M>>,
    watch: RingWatch,
}

impl<M: Message> Work for Latch<M> {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.watch.slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.watch.rang()
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        if self.watch.take() {
            self.publisher.update_connections();
        }
        Ok(0)
    }
}

/// Stands in for an entity while it runs.
struct Idle;

impl Work for Idle {
    fn ready(&self, _: Now) -> bool {
        false
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        Ok(0)
    }
}

impl EntityStats {
    const EMPTY: EntityStats = EntityStats {
        name: String::new(),
        priority: 0,
        callbacks: 0,
        rejected: 0,
    };
}

struct Subscription<M: Message, F> {
    sub: Subscriber<M>,
    callback: F,
    /// Counted as a receiver of the topic by the domain's replay.
    counted: Option<crate::time::lockstep::Receiver>,
}

/// Counts a subscription as a receiver of `topic` in the replay its context takes part in.
fn replay_receiver(
    node: &crate::context::Node,
    topic: &str,
) -> Result<Option<crate::time::lockstep::Receiver>, ExecError> {
    let Some(ls) = &node.inner.ctx.inner.lockstep else {
        return Ok(None);
    };
    let count = ls
        .topic(topic)
        .map_err(|e| ExecError::Thread(format!("replay: {e}")))?;
    Ok(Some(count.receiver()))
}

/// Samples a subscriber took, dropped or lost since `before` (what a replay counted).
fn taken_since(
    before: &crate::topic::subscriber::SubscriberStats,
    after: &crate::topic::subscriber::SubscriberStats,
) -> u32 {
    let n = (after.received - before.received)
        + (after.malformed - before.malformed)
        + (after.lost - before.lost);
    n.min(u32::MAX as u64) as u32
}

impl<M: Message, F: FnMut(&Sample<M>)> Work for Subscription<M, F> {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.sub.receiver().slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.sub.receiver().has_samples()
    }
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        // malformed samples are dropped (and counted) by the subscriber itself
        let before = self.sub.stats();
        let mut n = 0;
        while budget.more(n) {
            let Some(s) = self.sub.try_recv()? else {
                break;
            };
            (self.callback)(&s);
            n += 1;
        }
        let after = self.sub.stats();
        stats.rejected += after.malformed - before.malformed;
        if let Some(rx) = &self.counted {
            budget.handled(rx, taken_since(&before, &after));
        }
        Ok(n)
    }
}

struct RawSubscription<F> {
    sub: crate::topic::raw::RawSubscriber,
    callback: F,
    counted: Option<crate::time::lockstep::Receiver>,
}

impl<F: FnMut(crate::topic::raw::RawSample) -> Result<(), CallbackError>> Work
    for RawSubscription<F>
{
    fn slot(&self) -> Option<SlotRef> {
        Some(self.sub.rx.slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.sub.rx.has_samples()
    }
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let before = self.sub.stats();
        let mut n = 0;
        let mut result = Ok(());
        while budget.more(n) {
            let Some(s) = self.sub.try_recv_held()? else {
                break;
            };
            n += 1;
            result = (self.callback)(s).map_err(ExecError::Work);
            if result.is_err() {
                break;
            }
        }
        let after = self.sub.stats();
        stats.rejected += after.malformed - before.malformed;
        if let Some(rx) = &self.counted {
            budget.handled(rx, taken_since(&before, &after));
        }
        result.map(|()| n)
    }
}

struct RawServing<F> {
    server: crate::service::server::RawServer,
    handler: F,
}

impl<F: FnMut(&crate::service::server::RawRequest) -> Result<(), CallbackError>> Work
    for RawServing<F>
{
    fn slot(&self) -> Option<SlotRef> {
        Some(self.server.wake_slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.server.has_requests()
    }
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let before = self.server.rejected();
        let mut n = 0;
        while budget.more(n) {
            let Some(req) = self.server.try_take()? else {
                break;
            };
            if let Err(e) = (self.handler)(&req) {
                // answered already (then this fails and is moot) or failed here
                let _ = req.fail(&e.to_string());
            }
            n += 1;
        }
        stats.rejected += self.server.rejected() - before;
        Ok(n)
    }
}

struct Serving<S: Service, F> {
    server: Server<S>,
    handler: F,
}

impl<S: Service, F: FnMut(&Request<'_, S>) -> HandlerResult> Work for Serving<S, F> {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.server.wake_slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.server.has_requests()
    }
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let before = self.server.rejected();
        let mut n = 0;
        while budget.more(n) {
            let Some(req) = self.server.try_take()? else {
                break;
            };
            self.server.handle(req, &mut self.handler)?;
            n += 1;
        }
        stats.rejected += self.server.rejected() - before;
        Ok(n)
    }
}

struct CallsInner<S: Service> {
    /// Calls in flight (owned: they hold what they need of the client) and their
    /// deadlines.
    pending: RefCell<VecDeque<(RawPendingCall, u64)>>,
    client: Client<S>,
    timeout_ns: u64,
}

/// Sends requests of an executor-driven client (see [`Executor::client`]); lives on the
/// executor's thread.
pub struct Calls<S: Service> {
    inner: Rc<CallsInner<S>>,
}

impl<S: Service> Clone for Calls<S> {
    fn clone(&self) -> Self {
        Calls {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Service> Calls<S> {
    /// Sends a head and its elements; the reply reaches the executor's callback with the
    /// returned call number. At most the client's `max_in_flight` calls are pending at
    /// once ([`CallError::TooManyInFlight`] beyond).
    pub fn call_slice(
        &self,
        head: &S::Request,
        elems: &[<S::Request as Message>::Elem],
    ) -> Result<u64, CallError> {
        let pending = self.inner.client.send_slice(head, elems)?.into_raw();
        let seq = pending.seq();
        let deadline = mono_ns().saturating_add(self.inner.timeout_ns);
        self.inner
            .pending
            .borrow_mut()
            .push_back((pending, deadline));
        Ok(seq)
    }

    /// Sends `req` (see [`Calls::call_slice`]).
    pub fn call(&self, req: &S::Request) -> Result<u64, CallError>
    where
        S::Request: Message<Elem = crate::message::NoElem>,
    {
        self.call_slice(req, &[])
    }

    /// Calls sent and not yet answered.
    pub fn pending(&self) -> usize {
        self.inner.pending.borrow().len()
    }

    /// The client.
    pub fn client(&self) -> &Client<S> {
        &self.inner.client
    }
}

struct Calling<S: Service, F> {
    shared: Rc<CallsInner<S>>,
    on_reply: F,
}

impl<S: Service, F: FnMut(u64, Result<Reply<S>, CallError>)> Work for Calling<S, F> {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.shared.client.reply_slot().clone())
    }
    fn deadline(&self) -> Option<u64> {
        self.shared.pending.borrow().iter().map(|p| p.1).min()
    }
    fn ready(&self, now: Now) -> bool {
        self.shared
            .pending
            .borrow()
            .iter()
            .any(|(p, deadline)| *deadline <= now.mono || p.is_done())
    }
    fn run(&mut self, _: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let mut done = Vec::new();
        {
            let now = mono_ns();
            let mut pending = self.shared.pending.borrow_mut();
            let mut i = 0;
            while i < pending.len() && budget.more(done.len()) {
                let (call, deadline) = &pending[i];
                let seq = call.seq();
                let outcome = match call.try_take() {
                    Ok(Some(reply)) => Some(Ok(Reply::from_raw(reply))),
                    Ok(None) if *deadline <= now => Some(Err(CallError::Timeout {
                        service: self.shared.client.name().to_string(),
                        timeout: Duration::from_nanos(self.shared.timeout_ns),
                    })),
                    Ok(None) => None,
                    Err(e) => Some(Err(e)),
                };
                match outcome {
                    Some(o) => {
                        pending.remove(i);
                        done.push((seq, o));
                    }
                    None => i += 1,
                }
            }
        }
        // callbacks run with the queue released, so they may send new calls
        let n = done.len();
        for (seq, outcome) in done {
            (self.on_reply)(seq, outcome);
        }
        Ok(n)
    }
}

struct TimerWork<F> {
    schedule: Rc<Schedule>,
    callback: F,
}

impl<F: FnMut(&Tick) -> Result<(), CallbackError>> Work for TimerWork<F> {
    fn due(&self) -> Option<u64> {
        self.schedule.next()
    }
    fn rebase(&mut self, from: u64, to: u64) {
        self.schedule.rebase(from, to);
    }
    fn start(&mut self, at: u64) {
        self.schedule.start(at);
    }
    fn ready(&self, now: Now) -> bool {
        self.schedule.next().is_some_and(|d| d <= now.robot)
    }
    fn run(&mut self, _: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let mut n = 0;
        while budget.more(n) {
            let Some(tick) = self.schedule.fire(budget.robot_now()) else {
                break;
            };
            (self.callback)(&tick).map_err(ExecError::Work)?;
            n += 1;
        }
        Ok(n)
    }
    fn drains(&self) -> bool {
        false
    }
}

/// How callbacks of a group of a [`MultiThreadedExecutor`] may overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackGroup {
    /// Never two callbacks of the group at once: the whole group runs on one thread.
    MutuallyExclusive,
    /// Callbacks of the group may run in parallel: every setup added to the group goes
    /// to the next thread in turn. (Each entity's own callbacks still run one at a time,
    /// in order: a topic's samples are never handled out of order.)
    Reentrant,
}

/// Identifies a group of a [`MultiThreadedExecutor`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupId(usize);

/// Creates entities on a worker's executor.
pub type Setup = Box<dyn FnOnce(&mut Executor) -> Result<(), ExecError> + Send>;

/// Several threads, each with its own [`Executor`] (see the module docs).
pub struct MultiThreadedExecutor {
    threads: usize,
    groups: Vec<(CallbackGroup, usize)>,
    next_thread: usize,
    setups: Vec<Vec<Setup>>,
    stop: MultiStop,
    signals: bool,
}

impl MultiThreadedExecutor {
    /// An executor with `threads` worker threads (at least one).
    pub fn new(threads: usize) -> MultiThreadedExecutor {
        let threads = threads.max(1);
        MultiThreadedExecutor {
            threads,
            groups: Vec::new(),
            next_thread: 0,
            setups: (0..threads).map(|_| Vec::new()).collect(),
            stop: MultiStop::default(),
            signals: true,
        }
    }

    /// Whether `spin` installs SIGINT/SIGTERM handlers and stops on them (default true).
    pub fn handle_signals(&mut self, on: bool) -> &mut Self {
        self.signals = on;
        self
    }

    fn take_thread(&mut self) -> usize {
        let t = self.next_thread;
        self.next_thread = (t + 1) % self.threads;
        t
    }

    /// A new callback group.
    pub fn group(&mut self, kind: CallbackGroup) -> GroupId {
        let t = self.take_thread();
        self.groups.push((kind, t));
        GroupId(self.groups.len() - 1)
    }

    /// Adds entities to `group`: `setup` runs on the worker thread the group chooses, and
    /// creates nodes, ports and callbacks there.
    pub fn add<F>(&mut self, group: GroupId, setup: F) -> &mut Self
    where
        F: FnOnce(&mut Executor) -> Result<(), ExecError> + Send + 'static,
    {
        let (kind, home) = self.groups[group.0];
        let thread = match kind {
            CallbackGroup::MutuallyExclusive => home,
            CallbackGroup::Reentrant => self.take_thread(),
        };
        self.setups[thread].push(Box::new(setup));
        self
    }

    /// A handle that stops every worker.
    pub fn stopper(&self) -> MultiStop {
        self.stop.clone()
    }

    /// Runs every worker until stopped (or SIGINT/SIGTERM), each draining within
    /// `drain`; the first error of any worker is returned after all have ended.
    pub fn spin(&mut self, drain: Duration) -> Result<(), ExecError> {
        let signals = self.signals;
        // setups run once; groups and setups added later go to the next spin's workers
        let fresh = (0..self.threads).map(|_| Vec::new()).collect();
        let setups = std::mem::replace(&mut self.setups, fresh);
        let mut workers = Vec::new();
        for (i, group) in setups.into_iter().enumerate() {
            let stop = self.stop.clone();
            let worker = std::thread::Builder::new()
                .name(format!("nerve-exec-{i}"))
                .spawn(move || -> Result<(), ExecError> {
                    // a worker that fails (or panics) stops the others at once: they are
                    // joined in order, and one still spinning would never be joined
                    let failing = StopOnFailure(stop.clone(), true);
                    let mut exec = Executor::new();
                    exec.drain_timeout(drain).handle_signals(signals);
                    stop.register(exec.handle());
                    for setup in group {
                        setup(&mut exec)?;
                    }
                    let r = exec.spin();
                    StopOnFailure::done(failing, r.is_err());
                    r
                })
                .map_err(|e| ExecError::Thread(e.to_string()))?;
            workers.push(worker);
        }
        let mut first = Ok(());
        for (i, w) in workers.into_iter().enumerate() {
            let r = w
                .join()
                .unwrap_or_else(|_| Err(ExecError::Thread(format!("worker {i} panicked"))));
            if r.is_err() {
                // one worker failed: stop the others
                self.stop.stop();
                if first.is_ok() {
                    first = r;
                }
            }
        }
        first
    }
}

/// Stops every worker when dropped armed: a worker's error or panic.
struct StopOnFailure(MultiStop, bool);

impl StopOnFailure {
    /// The worker ended: stops the others if `failed`.
    fn done(mut guard: StopOnFailure, failed: bool) {
        guard.1 = failed;
    }
}

impl Drop for StopOnFailure {
    fn drop(&mut self) {
        if self.1 {
            self.0.stop();
        }
    }
}

/// Stops a [`MultiThreadedExecutor`] from any thread.
#[derive(Clone, Default)]
pub struct MultiStop {
    inner: Arc<std::sync::Mutex<(bool, Vec<ExecutorHandle>)>>,
}

impl MultiStop {
    /// Asks every worker to drain and return.
    pub fn stop(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0 = true;
        g.1.iter().for_each(|h| h.stop());
    }

    /// A worker joins: stopped at once if a stop came first.
    fn register(&self, handle: ExecutorHandle) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.0 {
            handle.stop();
        }
        g.1.push(handle);
    }
}

/// Work another thread asks for: runs `work` whenever `requested()` is true (see
/// [`Executor::on_request`]).
struct Requested<R, F> {
    requested: R,
    work: F,
}

impl<R: Fn() -> bool, F: FnMut()> Work for Requested<R, F> {
    fn ready(&self, _: Now) -> bool {
        (self.requested)()
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        (self.work)();
        // housekeeping, not a callback of the user's
        Ok(0)
    }
}

impl Executor {
    /// Runs `work` on this executor's thread whenever `requested()` is true: another
    /// thread makes it true, then calls [`ExecutorHandle::wake`]. `requested` is asked
    /// at every scan and before every sleep (so a request made just before the executor
    /// sleeps is seen), and `work` must make it false again, or the executor keeps
    /// running it. It returns no callback count: `spin_once` does not count it.
    pub fn on_request<R, F>(
        &mut self,
        name: &str,
        requested: R,
        work: F,
    ) -> Result<EntityId, ExecError>
    where
        R: Fn() -> bool + 'static,
        F: FnMut() + 'static,
    {
        self.add_work(name, Box::new(Requested { requested, work }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entity with a doorbell slot that is never waited on in this test.
    struct Slotted(SlotRef);

    impl Work for Slotted {
        fn slot(&self) -> Option<SlotRef> {
            Some(self.0.clone())
        }
        fn ready(&self, _: Now) -> bool {
            false
        }
        fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
            Ok(0)
        }
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "exec_test/Num")]
    struct Num {
        n: u64,
    }

    /// This thread's CPU time so far, ns (`/proc/thread-self/schedstat`).
    fn thread_cpu_ns() -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .expect("schedstat")
    }

    /// With a spin window, work that comes within it is taken without sleeping, and an
    /// idle executor still sleeps: 300 ms idle with a 1 ms window costs a few windows of
    /// CPU (one per wake-up), not 300 ms.
    #[test]
    fn a_spin_window_takes_work_and_still_sleeps_when_idle() {
        let mut exec = Executor::new();
        exec.spin_before_sleep(Duration::from_millis(1));
        let fired = std::rc::Rc::new(std::cell::Cell::new(0u32));
        let f = fired.clone();
        exec.timer(
            "tick",
            Duration::from_micros(200),
            Overrun::Skip,
            move |_| f.set(f.get() + 1),
        )
        .unwrap();
        // a count, not a rate: 20 ticks run, however the machine schedules this thread
        // (the bound only ends a hang)
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        while fired.get() < 20 && std::time::Instant::now() < give_up {
            exec.spin_once(Duration::from_millis(10)).unwrap();
        }
        assert!(fired.get() >= 20, "the timer ran 20 times: {}", fired.get());

        let mut idle = Executor::new();
        idle.spin_before_sleep(Duration::from_millis(1));
        let cpu0 = thread_cpu_ns();
        idle.spin_for(Duration::from_millis(300)).unwrap();
        let cpu = thread_cpu_ns() - cpu0;
        assert!(
            cpu < 100_000_000,
            "an idle executor slept: {cpu} ns of CPU in 300 ms"
        );
    }

    /// Samples that break the topic's layout, written straight into shared memory by a
    /// raw iceoryx2 port, never reach the callback and count as rejected.
    #[test]
    fn malformed_samples_count_as_rejected() {
        let dir = std::env::temp_dir().join("nerve-tests/");
        let cfg = crate::config::Config::default()
            .domain(977)
            .unwrap()
            .state_dir(dir);
        let ctx = crate::context::Context::new(cfg).unwrap();
        let node = ctx.node("rejects").create().unwrap();
        let sub = node.subscriber::<Num>("/exec/rejects").create().unwrap();
        let ty = crate::message::TypeInfo::of::<Num>();
        let service = crate::transport::shm::open_topic(
            &node.inner.iox,
            "/exec/rejects",
            Some(&ty),
            None,
            &crate::qos::Qos::default(),
        )
        .unwrap();
        let raw = service
            .publisher_builder()
            .initial_max_slice_len(4)
            .create()
            .unwrap();
        let good = crate::message::header::SampleHeader {
            seq: 1,
            payload_len: 8,
            type_hash: ty.layout_hash,
            publisher_id: 7,
            ..Default::default()
        };
        let lies = [
            crate::message::header::SampleHeader {
                type_hash: ty.layout_hash ^ 1,
                ..good
            },
            crate::message::header::SampleHeader {
                payload_len: 4096,
                ..good
            },
            crate::message::header::SampleHeader {
                payload_len: 3,
                ..good
            },
            crate::message::header::SampleHeader { seq: 2, ..good },
        ];
        for h in lies {
            let mut s = raw.loan_slice(1).unwrap();
            *s.user_header_mut() = h;
            s.payload_mut()[0] = 42;
            s.send().unwrap();
        }
        let mut exec = Executor::new();
        exec.handle_signals(false);
        let got = Rc::new(RefCell::new(Vec::new()));
        let g = got.clone();
        exec.subscribe(sub, move |s| g.borrow_mut().push(s.n))
            .unwrap();
        exec.spin_once(Duration::from_secs(1)).unwrap();
        assert_eq!(*got.borrow(), vec![42], "only the well-formed sample");
        assert_eq!(exec.stats()[0].rejected, 3);
    }

    #[test]
    fn the_wait_set_is_bounded_and_shared_slots_count_once() {
        let name = format!("nerve_test_exec_slots_{}", std::process::id());
        let bell = Arc::new(crate::transport::doorbell::Doorbell::open(&name, 0o600).unwrap());
        bell.unlink();
        let slot = |i: usize| Box::new(Slotted(bell.bind(&format!("/k{i}")).unwrap()));
        let mut exec = Executor::new();
        let max = crate::exec::waitset::MAX_WAITSET_ENTRIES - 2;
        for i in 0..max {
            exec.add_work("s", slot(i)).unwrap();
        }
        // a slot already in the set costs nothing more
        exec.add_work("again", slot(0)).unwrap();
        let e = exec.add_work("one too many", slot(max));
        assert!(matches!(e, Err(ExecError::Full { max: m }) if m == max));
        assert_eq!(exec.len(), max + 1);
    }
}
