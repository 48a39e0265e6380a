//! [`ManagedNode`]: a node with a lifecycle, its callbacks, its services and its events.

use crate::error::{LifecycleError, TransitionError};
use crate::publisher::LifecyclePublisher;
use crate::state::{self, error_outcome, CallbackReturn, Hook, State, Transition, ALL_STATES};
use nerve::{Executor, HandlerResult, Message, Node, Publisher, Qos, Server};
use nerve_msgs::lifecycle::{
    ChangeState, ChangeStateResponse, GetAvailableStates, GetAvailableStatesResponse,
    GetAvailableTransitions, GetAvailableTransitionsResponse, GetState, GetStateResponse,
    TransitionDescription, TransitionEvent,
};
use std::cell::{Cell, Ref, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// `<node>/change_state`.
pub const CHANGE_STATE: &str = "/change_state";
/// `<node>/get_state`.
pub const GET_STATE: &str = "/get_state";
/// `<node>/get_available_states`.
pub const GET_AVAILABLE_STATES: &str = "/get_available_states";
/// `<node>/get_available_transitions`.
pub const GET_AVAILABLE_TRANSITIONS: &str = "/get_available_transitions";
/// `<node>/get_transition_graph`: every transition of the state machine (ROS 2's name;
/// the type of `get_available_transitions`).
pub const GET_TRANSITION_GRAPH: &str = "/get_transition_graph";
/// `<node>/transition_event`.
pub const TRANSITION_EVENT: &str = "/transition_event";

/// The QoS of `<node>/transition_event`: the last event kept for late joiners (it names
/// the current state), 64 queued per subscriber.
pub fn events_qos() -> Qos {
    Qos::default().history(1).depth(64)
}

/// A transition callback: gets the state the transition started from.
type Callback = Box<dyn FnMut(State) -> CallbackReturn>;

/// The five services of a managed node.
struct Servers {
    change: Server<ChangeState>,
    get: Server<GetState>,
    states: Server<GetAvailableStates>,
    transitions: Server<GetAvailableTransitions>,
    graph: Server<GetAvailableTransitions>,
}

/// What a managed node's services wait on, for a [`nerve::WaitSet`] that waits on other
/// things too (from [`ManagedNode::waitables`]; ready when a request waits, which
/// [`ManagedNode::handle_pending`] answers). Borrows the node's services: drop it before
/// [`ManagedNode::serve_on`].
pub struct LifecycleWaitables<'a> {
    servers: Ref<'a, Servers>,
}

impl LifecycleWaitables<'_> {
    /// The services: `change_state`, `get_state`, `get_available_states`,
    /// `get_available_transitions`, `get_transition_graph`.
    pub fn list(&self) -> [&dyn nerve::Waitable; 5] {
        let s = &*self.servers;
        [&s.change, &s.get, &s.states, &s.transitions, &s.graph]
    }
}

/// A node with ROS 2's lifecycle: it starts unconfigured; transitions run the user's
/// callbacks ([`on_configure`](ManagedNode::on_configure), ...) and are asked for
/// locally ([`trigger`](ManagedNode::trigger)) or remotely through `<node>/change_state`
/// (`nerve lifecycle set`, `nerve launch`). Every step is published on
/// `<node>/transition_event`; [`LifecyclePublisher`]s send only while the node is
/// active. Cheap to clone (shared); not `Send`, like the node's ports: serve its services
/// with [`serve_on`](ManagedNode::serve_on), or wait on its
/// [`waitables`](ManagedNode::waitables) and call [`handle_pending`](ManagedNode::handle_pending).
///
/// A callback must not hold a clone of its `ManagedNode` (that would be a reference
/// cycle); publishers and other state are fine.
#[derive(Clone)]
pub struct ManagedNode {
    inner: Rc<Inner>,
}

struct Inner {
    node: Node,
    path: String,
    /// The current state's id; publishers read it (see [`LifecyclePublisher`]).
    state: Arc<AtomicU8>,
    /// The transition running now.
    running: Cell<Option<Transition>>,
    callbacks: RefCell<[Option<Callback>; 6]>,
    events: Publisher<TransitionEvent>,
    /// Events that could not be published (counted, never fatal to a transition).
    events_lost: Cell<u64>,
    servers: RefCell<Option<Servers>>,
}

impl ManagedNode {
    /// Makes `node` managed: opens `<node>/change_state`, `get_state`,
    /// `get_available_states`, `get_available_transitions`, `get_transition_graph` and
    /// the event topic `<node>/transition_event`. The node starts unconfigured.
    pub fn create(node: &Node) -> Result<ManagedNode, LifecycleError> {
        let path = node.full_name();
        let svc = |source| LifecycleError::Service {
            node: path.clone(),
            source,
        };
        let servers = Servers {
            change: node
                .service::<ChangeState>(&format!("{path}{CHANGE_STATE}"))
                .create()
                .map_err(svc)?,
            get: node
                .service::<GetState>(&format!("{path}{GET_STATE}"))
                .create()
                .map_err(svc)?,
            states: node
                .service::<GetAvailableStates>(&format!("{path}{GET_AVAILABLE_STATES}"))
                .create()
                .map_err(svc)?,
            transitions: node
                .service::<GetAvailableTransitions>(&format!("{path}{GET_AVAILABLE_TRANSITIONS}"))
                .create()
                .map_err(svc)?,
            graph: node
                .service::<GetAvailableTransitions>(&format!("{path}{GET_TRANSITION_GRAPH}"))
                .create()
                .map_err(svc)?,
        };
        let events = node
            .publisher::<TransitionEvent>(&format!("{path}{TRANSITION_EVENT}"))
            .qos(events_qos())
            .create()
            .map_err(|source| LifecycleError::Topic {
                node: path.clone(),
                source,
            })?;
        Ok(ManagedNode {
            inner: Rc::new(Inner {
                node: node.clone(),
                path,
                state: Arc::new(AtomicU8::new(State::Unconfigured.id())),
                running: Cell::new(None),
                callbacks: RefCell::new(Default::default()),
                events,
                events_lost: Cell::new(0),
                servers: RefCell::new(Some(servers)),
            }),
        })
    }

    /// The node's full name (`/ns/name`).
    pub fn name(&self) -> &str {
        &self.inner.path
    }

    /// The node.
    pub fn node(&self) -> &Node {
        &self.inner.node
    }

    /// The current state (a transition state while a callback runs).
    pub fn state(&self) -> State {
        // SYNC: Relaxed: the id is the only data; it is written on this thread.
        State::from_id(self.inner.state.load(Ordering::Relaxed)).unwrap_or(State::Unknown)
    }

    /// Whether the node is active.
    pub fn is_active(&self) -> bool {
        self.state() == State::Active
    }

    /// The transitions valid now.
    pub fn available_transitions(&self) -> &'static [Transition] {
        self.state().transitions()
    }

    /// A handle that reads this node's state from any thread.
    pub fn watch(&self) -> StateWatch {
        StateWatch {
            state: self.inner.state.clone(),
        }
    }

    /// Transition events that could not be published (the transitions went on).
    pub fn events_lost(&self) -> u64 {
        self.inner.events_lost.get()
    }

    /// A publisher of `topic` that sends only while this node is active and drops (and
    /// counts) every sample otherwise.
    pub fn publisher<M: Message>(
        &self,
        topic: &str,
        qos: Qos,
    ) -> Result<LifecyclePublisher<M>, nerve::TopicError> {
        let publisher = self.inner.node.publisher::<M>(topic).qos(qos).create()?;
        Ok(LifecyclePublisher::new(publisher, self.inner.state.clone()))
    }

    /// Wraps an existing publisher so it follows this node's state.
    pub fn gate<M: Message>(&self, publisher: Publisher<M>) -> LifecyclePublisher<M> {
        LifecyclePublisher::new(publisher, self.inner.state.clone())
    }

    fn set_callback(&self, hook: Hook, f: Callback) {
        self.inner.callbacks.borrow_mut()[hook as usize] = Some(f);
    }

    /// Runs in `configuring` (from unconfigured). Unset callbacks succeed.
    pub fn on_configure<F: FnMut(State) -> CallbackReturn + 'static>(&self, f: F) {
        self.set_callback(Hook::Configure, Box::new(f));
    }

    /// Runs in `cleaningup` (from inactive).
    pub fn on_cleanup<F: FnMut(State) -> CallbackReturn + 'static>(&self, f: F) {
        self.set_callback(Hook::Cleanup, Box::new(f));
    }

    /// Runs in `activating` (from inactive).
    pub fn on_activate<F: FnMut(State) -> CallbackReturn + 'static>(&self, f: F) {
        self.set_callback(Hook::Activate, Box::new(f));
    }

    /// Runs in `deactivating` (from active).
    pub fn on_deactivate<F: FnMut(State) -> CallbackReturn + 'static>(&self, f: F) {
        self.set_callback(Hook::Deactivate, Box::new(f));
    }

    /// Runs in `shuttingdown` (from unconfigured, inactive or active).
    pub fn on_shutdown<F: FnMut(State) -> CallbackReturn + 'static>(&self, f: F) {
        self.set_callback(Hook::Shutdown, Box::new(f));
    }

    /// Runs in `errorprocessing` after a callback returned `Error` (or panicked); gets
    /// the transition state that erred. Success leads to unconfigured, anything else to
    /// finalized.
    pub fn on_error<F: FnMut(State) -> CallbackReturn + 'static>(&self, f: F) {
        self.set_callback(Hook::Error, Box::new(f));
    }

    /// `configure`, `activate`, ... by label (`shutdown` from any primary state).
    pub fn trigger_label(&self, label: &str) -> Result<State, TransitionError> {
        let state = self.state();
        match Transition::from_label(label, state) {
            Some(t) => self.trigger(t),
            None => Err(self.invalid(state, label.to_string())),
        }
    }

    /// Runs `transition` now, on this thread: its callback, then the internal transition
    /// its outcome selects (and error processing after an error). Returns the state
    /// reached, or why the transition was refused or did not reach its goal.
    pub fn trigger(&self, transition: Transition) -> Result<State, TransitionError> {
        let inner = &self.inner;
        let start = self.state();
        if let Some(running) = inner.running.get() {
            return Err(TransitionError::Busy {
                node: inner.path.clone(),
                state: start,
                transition,
                running,
            });
        }
        if transition.start() != start {
            return Err(self.invalid(start, transition.label().to_string()));
        }
        inner.running.set(Some(transition));
        let via = transition.via();
        self.enter(via);
        self.event(transition.id(), transition.label(), start, via);
        let result = self.run_callback(transition.hook(), start);
        let (mut end, internal) = transition.outcome(result);
        self.enter(end);
        self.event(internal, result.label(), via, end);
        if end == State::ErrorProcessing {
            let on_error = self.run_callback(Hook::Error, via);
            let (after, internal) = error_outcome(on_error);
            self.enter(after);
            self.event(internal, on_error.label(), State::ErrorProcessing, after);
            end = after;
        }
        inner.running.set(None);
        match result {
            CallbackReturn::Success => Ok(end),
            _ => Err(TransitionError::Failed {
                node: inner.path.clone(),
                transition,
                result,
                state: end,
            }),
        }
    }

    fn invalid(&self, state: State, transition: String) -> TransitionError {
        let valid: Vec<&str> = state.transitions().iter().map(|t| t.label()).collect();
        TransitionError::Invalid {
            node: self.inner.path.clone(),
            state,
            transition,
            valid: if valid.is_empty() {
                "none".into()
            } else {
                valid.join(", ")
            },
        }
    }

    fn enter(&self, state: State) {
        // SYNC: Relaxed: publishers read only this id, on this thread (ports are !Send).
        self.inner.state.store(state.id(), Ordering::Relaxed);
    }

    /// Runs a callback (taken out of its slot, so it may register callbacks itself); a
    /// panic counts as `Error`.
    fn run_callback(&self, hook: Hook, arg: State) -> CallbackReturn {
        let taken = self.inner.callbacks.borrow_mut()[hook as usize].take();
        let Some(mut f) = taken else {
            return CallbackReturn::Success;
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(arg)))
            .unwrap_or(CallbackReturn::Error);
        let mut slots = self.inner.callbacks.borrow_mut();
        // a callback that replaced itself keeps the replacement
        if slots[hook as usize].is_none() {
            slots[hook as usize] = Some(f);
        }
        result
    }

    fn event(&self, id: u8, label: &str, start: State, goal: State) {
        let ev = TransitionEvent {
            timestamp: nerve::wall_ns().max(0) as u64,
            transition: nerve_msgs::lifecycle::Transition {
                id,
                label: state::label(label),
            },
            start_state: start.to_msg(),
            goal_state: goal.to_msg(),
        };
        if self.inner.events.publish(&ev).is_err() {
            self.inner.events_lost.set(self.inner.events_lost.get() + 1);
        }
    }

    /// Answers the remote requests waiting now (when the services are not on an
    /// executor); returns how many.
    pub fn handle_pending(&self) -> Result<usize, LifecycleError> {
        let guard = self.inner.servers.borrow();
        let Some(s) = guard.as_ref() else {
            return Err(LifecycleError::AlreadyServed {
                node: self.inner.path.clone(),
            });
        };
        let serve = |source| LifecycleError::Serve {
            node: self.inner.path.clone(),
            source,
        };
        let mut n = 0;
        // requests are answered outside the borrow of the servers: a callback may ask
        // for the node's state
        while let Some(r) = s.get.try_take().map_err(serve)? {
            let _ = self.answer_get(&r);
            n += 1;
        }
        while let Some(r) = s.states.try_take().map_err(serve)? {
            let _ = self.answer_states(&r);
            n += 1;
        }
        while let Some(r) = s.transitions.try_take().map_err(serve)? {
            let _ = self.answer_transitions(&r);
            n += 1;
        }
        while let Some(r) = s.graph.try_take().map_err(serve)? {
            let _ = answer_graph(&r);
            n += 1;
        }
        while let Some(r) = s.change.try_take().map_err(serve)? {
            let _ = self.answer_change(&r);
            n += 1;
        }
        Ok(n)
    }

    /// Answers the requests waiting now, or waits up to `timeout` for one and answers
    /// everything waiting then (when the services are not on an executor); returns how
    /// many.
    pub fn serve_for(&self, timeout: std::time::Duration) -> Result<usize, LifecycleError> {
        let n = self.handle_pending()?;
        if n > 0 {
            return Ok(n);
        }
        {
            let waitables = self.waitables()?;
            let wait = |source| LifecycleError::Wait {
                node: self.inner.path.clone(),
                source,
            };
            let mut set = nerve::WaitSet::new();
            for w in waitables.list() {
                set.add(w).map_err(wait)?;
            }
            set.wait(timeout).map_err(wait)?;
        }
        self.handle_pending()
    }

    /// What [`serve_for`](ManagedNode::serve_for) sleeps on: the node's five services,
    /// for a [`nerve::WaitSet`] that waits on other things too (an executor of a
    /// binding); when one is ready, [`handle_pending`](ManagedNode::handle_pending)
    /// answers it. `AlreadyServed` once the services went to an executor.
    pub fn waitables(&self) -> Result<LifecycleWaitables<'_>, LifecycleError> {
        let guard = self
            .inner
            .servers
            .try_borrow()
            .ok()
            .and_then(|g| Ref::filter_map(g, Option::as_ref).ok());
        match guard {
            Some(servers) => Ok(LifecycleWaitables { servers }),
            None => Err(LifecycleError::AlreadyServed {
                node: self.inner.path.clone(),
            }),
        }
    }

    /// Hands the node's services to `exec`, which answers them from then on.
    pub fn serve_on(&self, exec: &mut Executor) -> Result<(), LifecycleError> {
        let taken = match self.inner.servers.try_borrow_mut() {
            Ok(mut s) => s.take(),
            // asked from inside handle_pending
            Err(_) => None,
        };
        let Some(s) = taken else {
            return Err(LifecycleError::AlreadyServed {
                node: self.inner.path.clone(),
            });
        };
        let err = |source| LifecycleError::Exec {
            node: self.inner.path.clone(),
            source,
        };
        let me = self.clone();
        exec.serve(s.change, move |r| me.answer_change(r))
            .map_err(err)?;
        let me = self.clone();
        exec.serve(s.get, move |r| me.answer_get(r)).map_err(err)?;
        let me = self.clone();
        exec.serve(s.states, move |r| me.answer_states(r))
            .map_err(err)?;
        let me = self.clone();
        exec.serve(s.transitions, move |r| me.answer_transitions(r))
            .map_err(err)?;
        exec.serve(s.graph, answer_graph).map_err(err)?;
        Ok(())
    }

    fn answer_change(&self, r: &nerve::Request<'_, ChangeState>) -> HandlerResult {
        let asked = r.transition;
        let label = asked.label.as_str().into_owned();
        let state = self.state();
        let result = if !label.is_empty() {
            self.trigger_label(&label)
        } else {
            match Transition::from_id(asked.id) {
                Some(t) => self.trigger(t),
                None => Err(self.invalid(state, format!("id {}", asked.id))),
            }
        };
        match result {
            Ok(_) => r.reply(&ChangeStateResponse { success: 1 })?,
            Err(TransitionError::Failed { .. }) => r.reply(&ChangeStateResponse { success: 0 })?,
            // refused: the caller learns why (ROS 2 answers success = false)
            Err(e) => r.fail(&e.to_string())?,
        }
        Ok(())
    }

    fn answer_get(&self, r: &nerve::Request<'_, GetState>) -> HandlerResult {
        r.reply(&GetStateResponse {
            current_state: self.state().to_msg(),
        })?;
        Ok(())
    }

    fn answer_states(&self, r: &nerve::Request<'_, GetAvailableStates>) -> HandlerResult {
        let states: Vec<_> = ALL_STATES.iter().map(|s| s.to_msg()).collect();
        r.reply_slice(&GetAvailableStatesResponse {}, &states)?;
        Ok(())
    }

    fn answer_transitions(&self, r: &nerve::Request<'_, GetAvailableTransitions>) -> HandlerResult {
        let list: Vec<TransitionDescription> = self
            .available_transitions()
            .iter()
            .map(|t| TransitionDescription {
                transition: t.to_msg(),
                start_state: t.start().to_msg(),
                goal_state: t.goal().to_msg(),
            })
            .collect();
        r.reply_slice(&GetAvailableTransitionsResponse {}, &list)?;
        Ok(())
    }
}

/// Answers `get_transition_graph`: every transition of the state machine.
fn answer_graph(r: &nerve::Request<'_, GetAvailableTransitions>) -> HandlerResult {
    r.reply_slice(
        &GetAvailableTransitionsResponse {},
        &state::transition_graph(),
    )?;
    Ok(())
}

/// Reads a managed node's state from any thread (bindings gate their publishers with it).
#[derive(Clone, Debug)]
pub struct StateWatch {
    state: Arc<AtomicU8>,
}

impl StateWatch {
    /// The node's state now.
    pub fn state(&self) -> State {
        // SYNC: Relaxed: the id alone is read; nothing else is published with it.
        State::from_id(self.state.load(Ordering::Relaxed)).unwrap_or(State::Unknown)
    }

    /// Whether the node is active now (one relaxed load).
    #[inline]
    pub fn is_active(&self) -> bool {
        // SYNC: Relaxed, as above.
        self.state.load(Ordering::Relaxed) == State::Active.id()
    }
}
