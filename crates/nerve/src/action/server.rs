//! The action server: accepts goals under a [`GoalPolicy`], runs cancels, pushes
//! feedback and results to each goal's own client and keeps results for late askers.

use super::error::ActionError;
use super::{
    names, Action, CancelReply, CancelService, GoalId, GoalPolicy, GoalReply, GoalService,
    GoalState, GoalStatus, ResultService, StatusList, Tagged,
};
use crate::context::Node;
use crate::exec::waitset::WaitSet;
use crate::message::{zeroed, Message, Serde};
use crate::qos::ServiceQos;
use crate::service::server::{KeptRequest, Request, Server};
use crate::topic::publisher::Publisher;
use crate::transport::wait::SpinWindow;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Builds an [`ActionServer`].
pub struct ActionServerBuilder<A: Action> {
    node: Node,
    name: String,
    policy: GoalPolicy,
    result_ttl: Duration,
    max_results: usize,
    max_result_bytes: usize,
    max_clients: usize,
    qos: ServiceQos,
    _a: std::marker::PhantomData<A>,
}

impl<A: Action> ActionServerBuilder<A> {
    /// How goals share the server (default: [`GoalPolicy::Queue`] of 8).
    pub fn policy(mut self, policy: GoalPolicy) -> Self {
        self.policy = policy;
        self
    }
    /// How long a finished goal's result stays available (default 60 s).
    pub fn result_ttl(mut self, ttl: Duration) -> Self {
        self.result_ttl = ttl;
        self
    }
    /// Most results kept (default 256) and their bytes in all (default 64 MiB): the
    /// oldest go first.
    pub fn max_results(mut self, count: usize, bytes: usize) -> Self {
        self.max_results = count;
        self.max_result_bytes = bytes;
        self
    }
    /// Most clients served at once (default 64; clients open the services with 64 too, so
    /// a larger figure takes effect where the server starts first).
    pub fn max_clients(mut self, n: usize) -> Self {
        self.max_clients = n;
        self
    }
    /// QoS of the goal, cancel and result services: sizes of goals and results, calls in
    /// flight per client (which also bounds the goals one client may have live). Its
    /// `max_clients` is set from [`max_clients`](Self::max_clients).
    pub fn qos(mut self, qos: ServiceQos) -> Self {
        self.qos = qos;
        self
    }

    /// Opens the action's services and status topic. An action type that carries others
    /// ([`Action::CARRIER`]) is refused: its server must say which type it serves
    /// ([`create_saying`](Self::create_saying)).
    pub fn create(self) -> Result<ActionServer<A>, ActionError> {
        if A::CARRIER {
            return Err(ActionError::Unsaid {
                action: self.node.resolve_name(&self.name),
                reason: format!(
                    "{} carries other action types: its server must say which one it serves \
                     (ActionServerBuilder::create_saying; for a ROS 2 action type, \
                     nerve_ros2_map::action::create_server)",
                    A::TYPE_NAME
                ),
            });
        }
        self.open(None)
    }

    /// Opens the action's services and status topic after `say` says which type the
    /// server serves (called with the node and the action's resolved name; what it returns
    /// is kept as long as the server, e.g. the publisher that says it). For any action
    /// type; the way to serve one that carries others ([`Action::CARRIER`]).
    pub fn create_saying(
        self,
        say: impl FnOnce(&Node, &str) -> Result<Box<dyn std::any::Any>, String>,
    ) -> Result<ActionServer<A>, ActionError> {
        let name = self.node.resolve_name(&self.name);
        let said = say(&self.node, &name).map_err(|reason| ActionError::Unsaid {
            action: name.clone(),
            reason,
        })?;
        self.open(Some(said))
    }

    fn open(self, said: Option<Box<dyn std::any::Any>>) -> Result<ActionServer<A>, ActionError> {
        let () = Tagged::<A::Goal>::NO_PADDING;
        let () = Tagged::<A::Feedback>::NO_PADDING;
        let () = Tagged::<A::Result>::NO_PADDING;
        let node = self.node;
        // resolved once, so a remap of the action's name moves all its endpoints
        let name = node.resolve_name(&self.name);
        let qos = ServiceQos {
            max_clients: self.max_clients,
            ..self.qos
        };
        let goal_srv = node
            .service::<GoalService<A>>(&names::goal(&name))
            .qos(qos.clone())
            .create()?;
        let cancel_srv = node
            .service::<CancelService>(&names::cancel(&name))
            .qos(qos.clone())
            .create()?;
        let result_srv = node
            .service::<ResultService<A>>(&names::result(&name))
            .qos(qos.clone())
            .create()?;
        let status = Rc::new(
            node.publisher::<Serde<StatusList>>(&names::status(&name))
                .qos(super::status_qos())
                .create()?,
        );
        let server = ActionServer {
            inner: Rc::new(ServerInner {
                node,
                name,
                policy: self.policy,
                ttl: self.result_ttl,
                max_results: self.max_results,
                max_result_bytes: self.max_result_bytes,
                max_clients: self.max_clients,
                max_live_per_client: qos.max_in_flight.saturating_sub(1).max(1),
                goal_srv,
                cancel_srv,
                result_srv,
                status,
                spin: SpinWindow::new(),
                status_dirty: Cell::new(true),
                _said: said,
                state: RefCell::new(State {
                    clients: HashMap::new(),
                    active: Vec::new(),
                    done: VecDeque::new(),
                    done_bytes: 0,
                }),
            }),
        };
        server.flush_status()?;
        Ok(server)
    }
}

/// Serves action `A`. Cheap to clone (shared); not `Send`, like the node's ports: serve it
/// with [`handle_pending`](ActionServer::handle_pending) or
/// [`crate::Executor::action_server`], and work on [`goals`](ActionServer::goals).
pub struct ActionServer<A: Action> {
    pub(crate) inner: Rc<ServerInner<A>>,
}

impl<A: Action> Clone for ActionServer<A> {
    fn clone(&self) -> Self {
        ActionServer {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct ServerInner<A: Action> {
    node: Node,
    name: String,
    policy: GoalPolicy,
    ttl: Duration,
    max_results: usize,
    max_result_bytes: usize,
    max_clients: usize,
    /// Goals one client may have live: each keeps its request borrowed, and one more
    /// request must stay takeable so a further goal can be refused.
    max_live_per_client: usize,
    pub(crate) goal_srv: Server<GoalService<A>>,
    pub(crate) cancel_srv: Server<CancelService>,
    pub(crate) result_srv: Server<ResultService<A>>,
    pub(crate) status: Rc<Publisher<Serde<StatusList>>>,
    state: RefCell<State<A>>,
    /// Adaptive spin window of [`ActionServer::wait`].
    spin: SpinWindow,
    /// The goals changed since the status was last published (it is published only
    /// while someone reads it: encoding it is most of a quick goal's cost otherwise).
    status_dirty: Cell<bool>,
    /// What says which type the server serves ([`ActionServerBuilder::create_saying`]).
    _said: Option<Box<dyn std::any::Any>>,
}

struct State<A: Action> {
    clients: HashMap<u64, ClientPorts<A>>,
    /// Goals accepted and not ended, in acceptance order.
    active: Vec<Rc<GoalInner<A>>>,
    /// Ended goals' results, oldest first (bounded by count, bytes and age).
    done: VecDeque<Done<A>>,
    done_bytes: usize,
}

struct ClientPorts<A: Action> {
    feedback: Rc<Publisher<Tagged<A::Feedback>>>,
    result: Rc<Publisher<Tagged<A::Result>>>,
}

struct Done<A: Action> {
    head: Tagged<A::Result>,
    elems: Vec<<A::Result as Message>::Elem>,
    at: Instant,
}

impl<A: Action> Done<A> {
    fn bytes(&self) -> usize {
        core::mem::size_of::<Tagged<A::Result>>()
            + self.elems.len() * core::mem::size_of::<<A::Result as Message>::Elem>()
    }
}

struct GoalInner<A: Action> {
    id: GoalId,
    request: KeptRequest<Tagged<A::Goal>>,
    state: Cell<GoalState>,
}

/// A goal as the server's acceptance callback sees it.
pub struct GoalRequest<'a, A: Action> {
    id: GoalId,
    head: &'a Tagged<A::Goal>,
    elems: &'a [<A::Goal as Message>::Elem],
}

impl<A: Action> GoalRequest<'_, A> {
    /// The goal's id.
    pub fn id(&self) -> GoalId {
        self.id
    }
    /// The goal.
    pub fn goal(&self) -> &A::Goal {
        &self.head.msg
    }
    /// The goal's slice elements.
    pub fn elems(&self) -> &[<A::Goal as Message>::Elem] {
        self.elems
    }
}

/// A goal the server accepted: read it, report feedback, end it. Handles of one goal
/// share it; the goal stays in the server until it is ended.
pub struct GoalHandle<A: Action> {
    goal: Rc<GoalInner<A>>,
    server: Rc<ServerInner<A>>,
}

impl<A: Action> Clone for GoalHandle<A> {
    fn clone(&self) -> Self {
        GoalHandle {
            goal: self.goal.clone(),
            server: self.server.clone(),
        }
    }
}

impl<A: Action> ActionServer<A> {
    /// Starts building the server of action `name` on `node`.
    pub fn builder(node: &Node, name: &str) -> ActionServerBuilder<A> {
        ActionServerBuilder {
            node: node.clone(),
            name: name.to_string(),
            policy: GoalPolicy::Queue { max: 8 },
            result_ttl: Duration::from_secs(60),
            max_results: 256,
            max_result_bytes: 64 << 20,
            max_clients: 64,
            qos: super::service_qos(),
            _a: std::marker::PhantomData,
        }
    }

    /// The action's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node it runs on.
    pub fn node(&self) -> &Node {
        &self.inner.node
    }

    /// Waits up to `timeout` until a goal, cancel or result request waits; returns
    /// whether one does. Spins for an adaptive window first (as service servers do),
    /// then sleeps on the three services' doorbells.
    pub fn wait(&self, timeout: Duration) -> Result<bool, ActionError> {
        let i = &self.inner;
        let ready = || {
            i.goal_srv.has_requests() || i.cancel_srv.has_requests() || i.result_srv.has_requests()
        };
        if ready() {
            return Ok(true);
        }
        let start = Instant::now();
        let spin_for = i.spin.get().min(timeout);
        let mut n: u32 = 0;
        loop {
            if ready() {
                i.spin.observe(start.elapsed());
                return Ok(true);
            }
            n = n.wrapping_add(1);
            if n.is_multiple_of(64) && start.elapsed() >= spin_for {
                break;
            }
            core::hint::spin_loop();
        }
        let mut ws = WaitSet::new();
        let protocol = |e: crate::error::WaitError| ActionError::Protocol {
            action: i.name.clone(),
            reason: e.to_string(),
        };
        for w in [
            &i.goal_srv as &dyn crate::exec::waitset::Waitable,
            &i.cancel_srv,
            &i.result_srv,
        ] {
            ws.add(w).map_err(protocol)?;
        }
        let got = !ws
            .wait(timeout.saturating_sub(start.elapsed()))
            .map_err(protocol)?
            .is_empty();
        match got {
            true => i.spin.observe(start.elapsed()),
            false => i.spin.timed_out(),
        }
        Ok(got)
    }

    /// What [`ActionServer::wait`] sleeps on: the goal, cancel and result services, for
    /// a [`WaitSet`] that waits on other things too (ready when a request waits there;
    /// [`ActionServer::handle_pending`] handles it).
    pub fn waitables(&self) -> [&dyn crate::exec::waitset::Waitable; 3] {
        let i = &self.inner;
        [&i.goal_srv, &i.cancel_srv, &i.result_srv]
    }

    /// Handles every waiting request: cancels, result queries, and goals, which
    /// `on_goal` accepts (`Ok`) or rejects with a reason after the policy let them in.
    /// Returns how many requests were handled.
    pub fn handle_pending<F>(&self, on_goal: F) -> Result<usize, ActionError>
    where
        F: FnMut(&GoalRequest<'_, A>) -> Result<(), String>,
    {
        self.handle_pending_with(on_goal, |_| {})
    }

    /// Like [`ActionServer::handle_pending`], and hands every goal it accepts to
    /// `on_accepted`, as [`crate::Executor::action_server`] does (for event loops of
    /// their own, e.g. the Python executor).
    pub fn handle_pending_with<F, G>(
        &self,
        mut on_goal: F,
        mut on_accepted: G,
    ) -> Result<usize, ActionError>
    where
        F: FnMut(&GoalRequest<'_, A>) -> Result<(), String>,
        G: FnMut(GoalHandle<A>),
    {
        // late status readers get the current status (an executor does this on a wake-up)
        self.inner.status.update_connections();
        self.flush_status()?;
        let mut n = self.handle_cancels()?;
        n += self.handle_result_requests()?;
        n += self.handle_goals(&mut on_goal, &mut on_accepted)?;
        Ok(n)
    }

    /// The goals being worked on (executing or canceling), oldest first.
    pub fn goals(&self) -> Vec<GoalHandle<A>> {
        let st = self.inner.state.borrow();
        st.active
            .iter()
            .filter(|g| matches!(g.state.get(), GoalState::Executing | GoalState::Canceling))
            .map(|g| GoalHandle {
                goal: g.clone(),
                server: self.inner.clone(),
            })
            .collect()
    }

    /// Every goal not yet ended (queued ones too), oldest first.
    pub fn active_goals(&self) -> Vec<(GoalId, GoalState)> {
        let st = self.inner.state.borrow();
        st.active.iter().map(|g| (g.id, g.state.get())).collect()
    }

    /// Takes the waiting goals: admits or rejects each, then hands every accepted one to
    /// `on_accepted`.
    pub(crate) fn handle_goals<F, G>(
        &self,
        on_goal: &mut F,
        on_accepted: &mut G,
    ) -> Result<usize, ActionError>
    where
        F: FnMut(&GoalRequest<'_, A>) -> Result<(), String>,
        G: FnMut(GoalHandle<A>),
    {
        let i = &self.inner;
        let mut n = 0;
        while let Some(req) = i.goal_srv.try_take()? {
            n += 1;
            if let Err(reason) = self.admit(&req, on_goal) {
                req.fail(&reason)?;
                continue;
            }
            let id = req.goal;
            if let Err(reason) = self.ensure_client(id.client) {
                req.fail(&reason)?;
                continue;
            }
            if self.inner.policy == GoalPolicy::Preempt {
                self.preempt_all()?;
            }
            let goal = Rc::new(GoalInner {
                id,
                state: Cell::new(GoalState::Accepted),
                request: {
                    req.reply(&GoalReply {
                        state: GoalState::Accepted as u32,
                        reserved: 0,
                        stamp_ns: crate::sys::clock::wall_ns(),
                    })?;
                    req.keep()
                },
            });
            i.state.borrow_mut().active.push(goal.clone());
            self.schedule();
            self.publish_status()?;
            on_accepted(self.handle(&goal));
        }
        Ok(n)
    }

    /// Whether the policy and `on_goal` let a goal in; the reason if not.
    fn admit<F>(&self, req: &Request<'_, GoalService<A>>, on_goal: &mut F) -> Result<(), String>
    where
        F: FnMut(&GoalRequest<'_, A>) -> Result<(), String>,
    {
        let id = req.goal;
        if id.client == 0 || id.seq == 0 {
            return Err(format!(
                "goal id {id} is not one a client makes (0 is reserved)"
            ));
        }
        {
            let st = self.inner.state.borrow();
            if st.active.iter().any(|g| g.id == id) || st.done.iter().any(|d| d.head.goal == id) {
                return Err(format!("goal id {id} was sent before"));
            }
            let mine = st
                .active
                .iter()
                .filter(|g| g.id.client == id.client)
                .count();
            if mine >= self.inner.max_live_per_client {
                return Err(format!(
                    "this client has {mine} goals live, the most one client may have \
                     (ServiceQos::max_in_flight of the goal service, less one)"
                ));
            }
            let active = st.active.len();
            let executing = st
                .active
                .iter()
                .filter(|g| g.state.get() != GoalState::Accepted)
                .count();
            match self.inner.policy {
                GoalPolicy::RejectNew if active > 0 => {
                    return Err(format!(
                        "busy with goal {} (policy: reject new goals)",
                        st.active[0].id
                    ))
                }
                GoalPolicy::Queue { max } if active - executing >= max && executing > 0 => {
                    return Err(format!(
                        "the queue is full ({max} goals wait; policy: queue)"
                    ))
                }
                GoalPolicy::Parallel { max } if active >= max => {
                    return Err(format!("{max} goals execute already (policy: parallel)"))
                }
                _ => {}
            }
        }
        on_goal(&GoalRequest {
            id,
            head: req,
            elems: req.elems(),
        })
    }

    /// The feedback and result topics of `client`, opened on its first goal.
    fn ensure_client(&self, client: u64) -> Result<(), String> {
        let i = &self.inner;
        let mut st = i.state.borrow_mut();
        if st.clients.contains_key(&client) {
            return Ok(());
        }
        if st.clients.len() >= i.max_clients {
            // forget clients that left and have no goal here
            let State {
                clients, active, ..
            } = &mut *st;
            clients.retain(|id, ports| {
                ports.result.subscriber_count() > 0 || active.iter().any(|g| g.id.client == *id)
            });
            if clients.len() >= i.max_clients {
                return Err(format!("more than {} clients", i.max_clients));
            }
        }
        let open = || -> Result<ClientPorts<A>, crate::error::TopicError> {
            Ok(ClientPorts {
                feedback: Rc::new(
                    i.node
                        .publisher::<Tagged<A::Feedback>>(&names::feedback_of(&i.name, client))
                        .qos(super::client::client_topic_qos())
                        .create()?,
                ),
                result: Rc::new(
                    i.node
                        .publisher::<Tagged<A::Result>>(&names::result_of(&i.name, client))
                        .qos(super::client::client_topic_qos())
                        .create()?,
                ),
            })
        };
        let ports = open().map_err(|e| format!("opening the client's topics: {e}"))?;
        st.clients.insert(client, ports);
        Ok(())
    }

    /// Under [`GoalPolicy::Preempt`]: asks the executing goals to cancel and ends the
    /// waiting ones canceled.
    fn preempt_all(&self) -> Result<(), ActionError> {
        let goals: Vec<Rc<GoalInner<A>>> = self.inner.state.borrow().active.clone();
        for g in goals {
            match g.state.get() {
                GoalState::Executing => g.state.set(GoalState::Canceling),
                GoalState::Accepted => self.handle(&g).end_zeroed(GoalState::Canceled)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Moves waiting goals to executing as far as the policy allows.
    fn schedule(&self) {
        let st = self.inner.state.borrow();
        let running = st
            .active
            .iter()
            .filter(|g| g.state.get() != GoalState::Accepted)
            .count();
        let room = match self.inner.policy {
            GoalPolicy::Parallel { max } => max.saturating_sub(running),
            _ => usize::from(running == 0),
        };
        for g in st
            .active
            .iter()
            .filter(|g| g.state.get() == GoalState::Accepted)
            .take(room)
        {
            g.state.set(GoalState::Executing);
        }
    }

    fn handle(&self, goal: &Rc<GoalInner<A>>) -> GoalHandle<A> {
        GoalHandle {
            goal: goal.clone(),
            server: self.inner.clone(),
        }
    }

    pub(crate) fn handle_cancels(&self) -> Result<usize, ActionError> {
        let i = &self.inner;
        let mut n = 0;
        while let Some(req) = i.cancel_srv.try_take()? {
            n += 1;
            let id = req.goal;
            let found = i.state.borrow().active.iter().find(|g| g.id == id).cloned();
            let reply = match found {
                Some(g) => {
                    match g.state.get() {
                        GoalState::Accepted => self.handle(&g).end_zeroed(GoalState::Canceled)?,
                        GoalState::Executing => {
                            g.state.set(GoalState::Canceling);
                            self.publish_status()?;
                        }
                        _ => {}
                    }
                    CancelReply {
                        state: g.state.get() as u32,
                        taken: 1,
                    }
                }
                None => match i.state.borrow().done.iter().find(|d| d.head.goal == id) {
                    Some(d) => CancelReply {
                        state: d.head.state,
                        taken: 0,
                    },
                    None => {
                        req.fail(&format!("unknown goal {id}"))?;
                        continue;
                    }
                },
            };
            req.reply(&reply)?;
        }
        Ok(n)
    }

    pub(crate) fn handle_result_requests(&self) -> Result<usize, ActionError> {
        let i = &self.inner;
        self.prune_done();
        let mut n = 0;
        while let Some(req) = i.result_srv.try_take()? {
            n += 1;
            let id = req.goal;
            let st = i.state.borrow();
            if let Some(d) = st.done.iter().find(|d| d.head.goal == id) {
                // a result this request cannot carry (over the response limit) fails the
                // request, not the server
                if let Err(e) = req.reply_slice(&d.head, &d.elems) {
                    req.fail(&e.to_string())?;
                }
            } else if let Some(g) = st.active.iter().find(|g| g.id == id) {
                req.fail(&format!("pending: goal {id} is {}", g.state.get()))?;
            } else {
                req.fail(&format!(
                    "unknown: goal {id} was never accepted here, or its result expired (kept {:?})",
                    i.ttl
                ))?;
            }
        }
        Ok(n)
    }

    fn prune_done(&self) {
        let mut st = self.inner.state.borrow_mut();
        let now = Instant::now();
        while let Some(d) = st.done.front() {
            if now.duration_since(d.at) <= self.inner.ttl {
                break;
            }
            let b = d.bytes();
            st.done.pop_front();
            st.done_bytes -= b;
        }
    }

    /// Notes that goals changed, and publishes the status if someone reads it.
    fn publish_status(&self) -> Result<(), ActionError> {
        self.inner.status_dirty.set(true);
        if self.inner.status.subscriber_count() > 0 {
            self.flush_status()?;
        }
        Ok(())
    }

    /// Publishes every held goal's state on the status topic, if it changed since the
    /// last time.
    pub(crate) fn flush_status(&self) -> Result<(), ActionError> {
        if !self.inner.status_dirty.replace(false) {
            return Ok(());
        }
        let st = self.inner.state.borrow();
        let goals = st
            .done
            .iter()
            .map(|d| GoalStatus {
                goal: (d.head.goal.client, d.head.goal.seq),
                state: GoalState::from_u32(d.head.state).unwrap_or(GoalState::Aborted),
            })
            .chain(st.active.iter().map(|g| GoalStatus {
                goal: (g.id.client, g.id.seq),
                state: g.state.get(),
            }))
            .collect();
        self.inner.status.publish_value(&StatusList {
            action_type: A::TYPE_NAME.to_string(),
            goals,
        })?;
        Ok(())
    }
}

impl<A: Action> GoalHandle<A> {
    /// The goal's id.
    pub fn id(&self) -> GoalId {
        self.goal.id
    }
    /// The goal, read in place.
    pub fn goal(&self) -> &A::Goal {
        &self.goal.request.head().msg
    }
    /// The goal's slice elements, read in place.
    pub fn elems(&self) -> &[<A::Goal as Message>::Elem] {
        self.goal.request.elems()
    }
    /// Its state.
    pub fn state(&self) -> GoalState {
        self.goal.state.get()
    }
    /// Whether its client (or a newer goal, under [`GoalPolicy::Preempt`]) asked it to
    /// cancel: end it with [`canceled`](GoalHandle::canceled) soon.
    pub fn is_canceling(&self) -> bool {
        self.goal.state.get() == GoalState::Canceling
    }

    fn ended(&self) -> Result<(), ActionError> {
        let state = self.goal.state.get();
        if state.is_terminal() {
            return Err(ActionError::Ended {
                action: self.server.name.clone(),
                goal: self.goal.id,
                state,
            });
        }
        Ok(())
    }

    /// Sends feedback with `elems` slice elements, written in place by `fill` (zero
    /// copy), to the goal's client only.
    pub fn feedback_with<F>(&self, elems: usize, fill: F) -> Result<(), ActionError>
    where
        F: FnOnce(&mut A::Feedback, &mut [<A::Feedback as Message>::Elem]),
    {
        self.ended()?;
        let publisher = {
            let st = self.server.state.borrow();
            match st.clients.get(&self.goal.id.client) {
                Some(ports) => ports.feedback.clone(),
                None => return Ok(()), // the client left: nobody to tell
            }
        };
        // no borrow of the server is held while the user's fill runs
        let mut loan = publisher.loan_slice(elems)?;
        let (head, e) = loan.parts_mut();
        head.goal = self.goal.id;
        head.state = self.goal.state.get() as u32;
        // the head came zeroed with the loan: msg is a valid M, overwritten by fill
        fill(&mut head.msg, e);
        loan.send()?;
        Ok(())
    }

    /// Sends `feedback` (copied) to the goal's client.
    pub fn feedback(&self, feedback: &A::Feedback) -> Result<(), ActionError> {
        self.feedback_with(0, |h, _| *h = *feedback)
    }

    /// Ends the goal in `state` with a result of `elems` slice elements written in place
    /// by `fill`, pushed to its client (and kept for [`ActionServerBuilder::result_ttl`]).
    pub fn end_with<F>(&self, state: GoalState, elems: usize, fill: F) -> Result<(), ActionError>
    where
        F: FnOnce(&mut A::Result, &mut [<A::Result as Message>::Elem]),
    {
        self.ended()?;
        if !state.is_terminal() {
            return Err(ActionError::Protocol {
                action: self.server.name.clone(),
                reason: format!("a goal ends succeeded, aborted or canceled, not {state}"),
            });
        }
        let id = self.goal.id;
        let mut head: Tagged<A::Result> = zeroed();
        head.goal = id;
        head.state = state as u32;
        let mut kept: Vec<<A::Result as Message>::Elem> = Vec::new();
        let publisher = {
            let st = self.server.state.borrow();
            st.clients.get(&id.client).map(|p| p.result.clone())
        };
        // no borrow of the server is held while the user's fill runs
        match publisher {
            Some(publisher) => {
                let mut loan = publisher.loan_slice(elems)?;
                let (h, e) = loan.parts_mut();
                *h = head;
                fill(&mut h.msg, e);
                // the fill may have ended the goal itself (a nested end): end it once
                self.ended()?;
                head = *h;
                kept.extend_from_slice(e);
                loan.send()?;
            }
            None => {
                kept.resize(elems, zeroed());
                fill(&mut head.msg, &mut kept);
                self.ended()?;
            }
        }
        self.goal.state.set(state);
        let srv = ActionServer {
            inner: self.server.clone(),
        };
        {
            let mut st = self.server.state.borrow_mut();
            st.active.retain(|g| g.id != id);
            let done = Done {
                head,
                elems: kept,
                at: Instant::now(),
            };
            st.done_bytes += done.bytes();
            st.done.push_back(done);
            while st.done.len() > self.server.max_results
                || (st.done_bytes > self.server.max_result_bytes && st.done.len() > 1)
            {
                if let Some(d) = st.done.pop_front() {
                    st.done_bytes -= d.bytes();
                }
            }
        }
        srv.schedule();
        srv.publish_status()
    }

    fn end_zeroed(&self, state: GoalState) -> Result<(), ActionError> {
        self.end_with(state, 0, |_, _| {})
    }

    /// Ends the goal succeeded with `result`.
    pub fn succeed(&self, result: &A::Result) -> Result<(), ActionError> {
        self.end_with(GoalState::Succeeded, 0, |h, _| *h = *result)
    }
    /// Ends the goal aborted with `result`.
    pub fn abort(&self, result: &A::Result) -> Result<(), ActionError> {
        self.end_with(GoalState::Aborted, 0, |h, _| *h = *result)
    }
    /// Ends the goal canceled with `result` (after [`is_canceling`](Self::is_canceling)).
    pub fn canceled(&self, result: &A::Result) -> Result<(), ActionError> {
        self.end_with(GoalState::Canceled, 0, |h, _| *h = *result)
    }
}
