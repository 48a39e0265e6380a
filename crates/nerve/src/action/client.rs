//! The action client: sends goals, receives their feedback and results on topics of its
//! own, cancels, and notices a server that died.

use super::error::ActionError;
use super::{
    names, Action, CancelRequest, CancelService, GoalId, GoalService, GoalState, ResultRequest,
    ResultService, Tagged,
};
use crate::context::Node;
use crate::error::CallError;
use crate::message::{zeroed, Message};
use crate::qos::Overflow;
use crate::qos::Qos;
use crate::service::client::LIVENESS_CHECK;
use crate::service::client::{Client, Reply};
use crate::topic::subscriber::Sample;
use crate::topic::subscriber::Subscriber;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ops::Deref;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Feedback samples a client holds at once (over all its goals): the oldest give way.
pub const FEEDBACK_KEPT: usize = 12;
/// Pushed results a client holds before they are taken; more wait in the topic's queue
/// (and, past it, in the server's result store).
pub const RESULTS_KEPT: usize = 16;
/// How long a waiting client trusts the push before it also asks the result service.
pub(crate) const FETCH_AFTER: Duration = Duration::from_millis(500);

/// QoS of a client's own feedback and result topics: a slow client never stalls the
/// server (drop oldest), and it may hold what [`FEEDBACK_KEPT`] and its goals need.
pub(crate) fn client_topic_qos() -> Qos {
    Qos {
        depth: 16,
        overflow: Overflow::DropOldest,
        // the inbox's own (FEEDBACK_KEPT, RESULTS_KEPT) and what the user holds
        max_borrowed: 64,
        max_publishers: 2,
        max_subscribers: 2,
        ..Qos::default()
    }
}

/// A client of action `A`. Cheap to clone (shared); not `Send`, like the node's ports.
pub struct ActionClient<A: Action> {
    pub(crate) inner: Rc<ClientInner<A>>,
}

impl<A: Action> Clone for ActionClient<A> {
    fn clone(&self) -> Self {
        ActionClient {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct ClientInner<A: Action> {
    name: String,
    id: u64,
    next_seq: Cell<u64>,
    accept_timeout: Cell<Duration>,
    goal: Client<GoalService<A>>,
    cancel: Client<CancelService>,
    result: Client<ResultService<A>>,
    pub(crate) feedback_sub: Subscriber<Tagged<A::Feedback>>,
    pub(crate) result_sub: Subscriber<Tagged<A::Result>>,
    inbox: RefCell<Inbox<A>>,
    /// An executor delivers results and feedback (see `Executor::action_client`).
    pub(crate) driven: Cell<bool>,
}

struct Inbox<A: Action> {
    /// Goals this client still follows, and when to ask the result service next (the
    /// fallback for a push that was lost).
    live: HashMap<GoalId, Instant>,
    feedback: VecDeque<Sample<Tagged<A::Feedback>>>,
    results: HashMap<GoalId, Sample<Tagged<A::Result>>>,
    feedback_dropped: u64,
}

/// Feedback of a goal, read in place.
pub struct Feedback<A: Action> {
    sample: Sample<Tagged<A::Feedback>>,
}

impl<A: Action> Feedback<A> {
    /// The goal it is about.
    pub fn goal_id(&self) -> GoalId {
        self.sample.goal
    }
    /// The goal's state when it was sent.
    pub fn state(&self) -> GoalState {
        GoalState::from_u32(self.sample.state).unwrap_or(GoalState::Executing)
    }
    /// Its slice elements.
    pub fn elems(&self) -> &[<A::Feedback as Message>::Elem] {
        self.sample.elems()
    }
}

impl<A: Action> Deref for Feedback<A> {
    type Target = A::Feedback;
    fn deref(&self) -> &A::Feedback {
        &self.sample.msg
    }
}

enum ResultHolder<A: Action> {
    Pushed(Sample<Tagged<A::Result>>),
    Fetched(Reply<ResultService<A>>),
}

/// A goal's result and how it ended, read in place.
pub struct GoalResult<A: Action> {
    holder: ResultHolder<A>,
}

impl<A: Action> GoalResult<A> {
    fn tagged(&self) -> &Tagged<A::Result> {
        match &self.holder {
            ResultHolder::Pushed(s) => s,
            ResultHolder::Fetched(r) => r,
        }
    }
    /// How the goal ended.
    pub fn state(&self) -> GoalState {
        GoalState::from_u32(self.tagged().state).unwrap_or(GoalState::Aborted)
    }
    /// The goal.
    pub fn goal_id(&self) -> GoalId {
        self.tagged().goal
    }
    /// The result's slice elements.
    pub fn elems(&self) -> &[<A::Result as Message>::Elem] {
        match &self.holder {
            ResultHolder::Pushed(s) => s.elems(),
            ResultHolder::Fetched(r) => r.elems(),
        }
    }
}

impl<A: Action> Deref for GoalResult<A> {
    type Target = A::Result;
    fn deref(&self) -> &A::Result {
        &self.tagged().msg
    }
}

/// A goal this client sent and the server accepted. Dropping it stops following the
/// goal (it keeps running on the server; cancel it first if that is not wanted), unless
/// an executor follows the client's goals ([`crate::Executor::action_client`]): then the
/// executor's callbacks get its feedback and result.
pub struct ClientGoal<A: Action> {
    client: ActionClient<A>,
    id: GoalId,
}

impl<A: Action> ActionClient<A> {
    /// A client of action `name`, calling from `node`. Its own feedback and result
    /// topics exist before any goal is sent.
    pub fn create(node: &Node, name: &str) -> Result<ActionClient<A>, ActionError> {
        let () = Tagged::<A::Goal>::NO_PADDING;
        let () = Tagged::<A::Feedback>::NO_PADDING;
        let () = Tagged::<A::Result>::NO_PADDING;
        let mut id = 0u64;
        while id == 0 {
            let mut b = [0u8; 8];
            rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).map_err(
                |e| ActionError::Protocol {
                    action: name.to_string(),
                    reason: format!("no random client id: {e}"),
                },
            )?;
            id = u64::from_le_bytes(b);
        }
        // resolved once, so a remap of the action's name moves all its endpoints
        let name = &node.resolve_name(name);
        let feedback_sub = node
            .subscriber::<Tagged<A::Feedback>>(&names::feedback_of(name, id))
            .qos(client_topic_qos())
            .create()?;
        let result_sub = node
            .subscriber::<Tagged<A::Result>>(&names::result_of(name, id))
            .qos(client_topic_qos())
            .create()?;
        let qos = super::service_qos();
        let goal = node
            .client::<GoalService<A>>(&names::goal(name))
            .qos(qos.clone())
            .create()?;
        let cancel = node
            .client::<CancelService>(&names::cancel(name))
            .qos(qos.clone())
            .create()?;
        let result = node
            .client::<ResultService<A>>(&names::result(name))
            .qos(qos)
            .create()?;
        Ok(ActionClient {
            inner: Rc::new(ClientInner {
                name: name.to_string(),
                id,
                next_seq: Cell::new(1),
                accept_timeout: Cell::new(Duration::from_secs(5)),
                goal,
                cancel,
                result,
                feedback_sub,
                result_sub,
                inbox: RefCell::new(Inbox {
                    live: HashMap::new(),
                    feedback: VecDeque::new(),
                    results: HashMap::new(),
                    feedback_dropped: 0,
                }),
                driven: Cell::new(false),
            }),
        })
    }

    /// The action's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// This client's id (the first half of its goals' ids).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Sets how long sending a goal waits for its acceptance (default 5 s).
    pub fn set_accept_timeout(&self, timeout: Duration) {
        self.inner.accept_timeout.set(timeout);
    }

    /// Waits up to `timeout` for a server; returns whether one serves the action.
    pub fn wait_for_server(&self, timeout: Duration) -> bool {
        self.inner.goal.wait_for_service(timeout)
            && self.inner.cancel.wait_for_service(timeout)
            && self.inner.result.wait_for_service(timeout)
    }

    /// Feedback samples dropped because the client held [`FEEDBACK_KEPT`] unread ones.
    pub fn feedback_dropped(&self) -> u64 {
        self.inner.inbox.borrow().feedback_dropped
    }

    /// Sends a goal and waits for its acceptance.
    pub fn send_goal(&self, goal: &A::Goal) -> Result<ClientGoal<A>, ActionError> {
        self.send_goal_with(0, |h, _| *h = *goal)
    }

    /// Sends a goal with `elems` slice elements, written in place by `fill` (zero copy),
    /// and waits for its acceptance. A rejection is [`ActionError::Rejected`] with the
    /// server's reason.
    pub fn send_goal_with<F>(&self, elems: usize, fill: F) -> Result<ClientGoal<A>, ActionError>
    where
        F: FnOnce(&mut A::Goal, &mut [<A::Goal as Message>::Elem]),
    {
        let i = &self.inner;
        let seq = i.next_seq.get();
        i.next_seq.set(seq + 1);
        let id = GoalId { client: i.id, seq };
        let mut loan = i.goal.loan_slice(elems)?;
        loan.head_mut().goal = id;
        let (head, e) = loan.parts_mut();
        fill(&mut head.msg, e);
        // follow the goal before it can end
        i.inbox
            .borrow_mut()
            .live
            .insert(id, Instant::now() + FETCH_AFTER);
        match loan.call(i.accept_timeout.get()) {
            Ok(_) => Ok(ClientGoal {
                client: self.clone(),
                id,
            }),
            Err(e) => {
                i.inbox.borrow_mut().live.remove(&id);
                Err(match e {
                    CallError::Handler { message, .. } => ActionError::Rejected {
                        action: i.name.clone(),
                        reason: message,
                    },
                    e => e.into(),
                })
            }
        }
    }

    /// Follows a goal sent earlier by this client (its feedback and result from now on).
    pub fn follow(&self, id: GoalId) -> ClientGoal<A> {
        self.inner
            .inbox
            .borrow_mut()
            .live
            .insert(id, Instant::now() + FETCH_AFTER);
        ClientGoal {
            client: self.clone(),
            id,
        }
    }

    /// Asks the server to cancel goal `id` (of any client); returns the goal's state
    /// after the request: `Canceling` (the server winds it down), `Canceled`, or the
    /// state it had ended in already.
    pub fn cancel(&self, id: GoalId) -> Result<GoalState, ActionError> {
        let i = &self.inner;
        match i
            .cancel
            .call(&CancelRequest { goal: id }, i.accept_timeout.get())
        {
            Ok(r) => GoalState::from_u32(r.state).ok_or_else(|| ActionError::Protocol {
                action: i.name.clone(),
                reason: format!("cancel answered with state {}", r.state),
            }),
            Err(CallError::Handler { message, .. }) => Err(ActionError::UnknownGoal {
                action: i.name.clone(),
                goal: id,
                reason: message,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Asks the server for the result of goal `id` (of any client): `None` while the
    /// goal runs.
    pub fn fetch_result(&self, id: GoalId) -> Result<Option<GoalResult<A>>, ActionError> {
        self.fetch_within(id, self.inner.accept_timeout.get())
    }

    /// [`fetch_result`](Self::fetch_result), waiting at most `timeout` for the answer.
    fn fetch_within(
        &self,
        id: GoalId,
        timeout: Duration,
    ) -> Result<Option<GoalResult<A>>, ActionError> {
        let i = &self.inner;
        match i.result.call(&ResultRequest { goal: id }, timeout) {
            Ok(reply) => Ok(Some(GoalResult {
                holder: ResultHolder::Fetched(reply),
            })),
            Err(CallError::Handler { message, .. }) if message.starts_with("pending") => Ok(None),
            Err(CallError::Handler { message, .. }) => Err(ActionError::UnknownGoal {
                action: i.name.clone(),
                goal: id,
                reason: message,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Moves what arrived on the client's topics into its inbox, as far as its bounds
    /// allow. A receive that fails (every sample the subscriber may lend is held: by the
    /// inbox and by results and feedback the caller keeps) stops receiving for now: what
    /// stays queued is taken later, a result that is dropped from the queue is fetched
    /// from the server's result store.
    pub(crate) fn pump(&self) -> Result<(), ActionError> {
        let i = &self.inner;
        let mut inbox = i.inbox.borrow_mut();
        while inbox.results.len() < RESULTS_KEPT {
            match i.result_sub.try_recv() {
                Ok(Some(s)) => inbox.route_result(s),
                Ok(None) | Err(_) => break,
            }
        }
        drop(inbox);
        self.pump_feedback();
        Ok(())
    }

    /// Moves the feedback that arrived into the inbox (dropping the oldest beyond
    /// [`FEEDBACK_KEPT`]).
    fn pump_feedback(&self) {
        let i = &self.inner;
        let mut inbox = i.inbox.borrow_mut();
        while let Ok(Some(s)) = i.feedback_sub.try_recv() {
            inbox.route_feedback(s);
        }
    }

    /// Takes the next feedback of goal `id` that arrived.
    fn take_feedback(&self, id: GoalId) -> Option<Feedback<A>> {
        let mut inbox = self.inner.inbox.borrow_mut();
        let pos = inbox.feedback.iter().position(|s| s.goal == id)?;
        inbox.feedback.remove(pos).map(|sample| Feedback { sample })
    }

    /// Takes the pushed result of goal `id`, if it arrived.
    /// The goal stays followed (its last feedback may still be on its way on the other
    /// topic); a [`ClientGoal`] stops following when dropped, an executor on delivery.
    fn take_result(&self, id: GoalId) -> Option<GoalResult<A>> {
        let mut inbox = self.inner.inbox.borrow_mut();
        let s = inbox.results.remove(&id)?;
        Some(GoalResult {
            holder: ResultHolder::Pushed(s),
        })
    }

    /// Whether a server still serves the action (dead ones are reclaimed first).
    pub fn server_alive(&self) -> bool {
        self.inner.goal.server_count() > 0
    }

    /// Results of followed goals that arrived (for an executor).
    pub(crate) fn poll_results(&self) -> Result<Vec<(GoalId, GoalResult<A>)>, ActionError> {
        self.pump()?;
        let ids: Vec<GoalId> = self.inner.inbox.borrow().results.keys().copied().collect();
        let out: Vec<_> = ids
            .into_iter()
            .filter_map(|id| self.take_result(id).map(|r| (id, r)))
            .collect();
        // delivered once: the feedback that came before is already in the inbox
        let mut inbox = self.inner.inbox.borrow_mut();
        for (id, _) in &out {
            inbox.live.remove(id);
        }
        Ok(out)
    }

    /// For an executor: asks the result store for followed goals whose push has not come
    /// for [`FETCH_AFTER`]; returns the results found and the goals the server no longer
    /// knows (both stop being followed).
    pub(crate) fn fetch_due(&self) -> Vec<(GoalId, Result<GoalResult<A>, ActionError>)> {
        let now = Instant::now();
        let due: Vec<GoalId> = {
            let inbox = self.inner.inbox.borrow();
            inbox
                .live
                .iter()
                .filter(|(id, t)| **t <= now && !inbox.results.contains_key(id))
                .map(|(id, _)| *id)
                .collect()
        };
        let mut out = Vec::new();
        for id in due {
            // short: an executor's thread waits here
            match self.fetch_within(id, Duration::from_millis(50)) {
                Ok(Some(r)) => {
                    // the goal's feedback was sent before its result was stored: take
                    // it while the goal is still followed (pushed results are left:
                    // this one is delivered here)
                    self.pump_feedback();
                    self.inner.inbox.borrow_mut().live.remove(&id);
                    out.push((id, Ok(r)));
                }
                Err(e @ ActionError::UnknownGoal { .. }) => {
                    self.inner.inbox.borrow_mut().live.remove(&id);
                    out.push((id, Err(e)));
                }
                // still running, or no answer yet: ask again later
                Ok(None) | Err(_) => {
                    if let Some(t) = self.inner.inbox.borrow_mut().live.get_mut(&id) {
                        *t = Instant::now() + FETCH_AFTER;
                    }
                }
            }
        }
        out
    }

    /// Whether feedback waits to be taken: in the subscriber's queue, or already moved
    /// into the inbox by a [`pump`](Self::pump) made for results.
    pub(crate) fn has_feedback(&self) -> bool {
        self.inner.feedback_sub.receiver().has_samples()
            || !self.inner.inbox.borrow().feedback.is_empty()
    }

    /// Whether a pushed result waits to be taken, in the queue or in the inbox.
    pub(crate) fn has_results(&self) -> bool {
        self.inner.result_sub.receiver().has_samples()
            || !self.inner.inbox.borrow().results.is_empty()
    }

    /// Whether the client follows any goal.
    pub(crate) fn follows_any(&self) -> bool {
        !self.inner.inbox.borrow().live.is_empty()
    }

    /// Ends every followed goal with [`ActionError::ServerGone`] if the server died.
    pub(crate) fn check_server(&self) -> Vec<(GoalId, ActionError)> {
        if self.inner.inbox.borrow().live.is_empty() || self.server_alive() {
            return Vec::new();
        }
        let mut inbox = self.inner.inbox.borrow_mut();
        inbox
            .live
            .drain()
            .map(|(goal, _)| {
                (
                    goal,
                    ActionError::ServerGone {
                        action: self.inner.name.clone(),
                        goal,
                    },
                )
            })
            .collect()
    }

    /// Feedback that arrived for followed goals, oldest first.
    pub(crate) fn poll_feedback(&self) -> Result<Vec<Feedback<A>>, ActionError> {
        self.pump()?;
        let mut inbox = self.inner.inbox.borrow_mut();
        Ok(inbox
            .feedback
            .drain(..)
            .map(|sample| Feedback { sample })
            .collect())
    }
}

impl<A: Action> Inbox<A> {
    fn route_result(&mut self, s: Sample<Tagged<A::Result>>) {
        if !self.live.contains_key(&s.goal) {
            return; // a goal nobody follows any more
        }
        // each result sample stays borrowed until taken; the followed goals bound them
        self.results.insert(s.goal, s);
    }

    fn route_feedback(&mut self, s: Sample<Tagged<A::Feedback>>) {
        if !self.live.contains_key(&s.goal) {
            return;
        }
        if self.feedback.len() >= FEEDBACK_KEPT {
            self.feedback.pop_front();
            self.feedback_dropped += 1;
        }
        self.feedback.push_back(s);
    }
}

impl<A: Action> ClientGoal<A> {
    /// The goal's id.
    pub fn id(&self) -> GoalId {
        self.id
    }

    /// The next feedback that arrived, if any.
    pub fn try_feedback(&self) -> Option<Feedback<A>> {
        let _ = self.client.pump();
        self.client.take_feedback(self.id)
    }

    /// Waits up to `timeout` for the next feedback; `None` when the goal ended (its
    /// result arrived) or nothing came.
    pub fn next_feedback(&self, timeout: Duration) -> Result<Option<Feedback<A>>, ActionError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.client.pump()?;
            if let Some(f) = self.client.take_feedback(self.id) {
                return Ok(Some(f));
            }
            if self
                .client
                .inner
                .inbox
                .borrow()
                .results
                .contains_key(&self.id)
            {
                return Ok(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.check_server()?;
            let i = &self.client.inner;
            match i.feedback_sub.recv_timeout(left.min(LIVENESS_CHECK)) {
                Ok(Some(s)) => i.inbox.borrow_mut().route_feedback(s),
                Ok(None) => {}
                // every sample the subscriber may lend is held by the caller
                Err(_) => std::thread::sleep(left.min(Duration::from_millis(1))),
            }
        }
    }

    fn check_server(&self) -> Result<(), ActionError> {
        if self.client.server_alive() {
            return Ok(());
        }
        // a result pushed just before the server died still counts
        self.client.pump()?;
        if self
            .client
            .inner
            .inbox
            .borrow()
            .results
            .contains_key(&self.id)
        {
            return Ok(());
        }
        Err(ActionError::ServerGone {
            action: self.client.inner.name.clone(),
            goal: self.id,
        })
    }

    /// The result, if it arrived.
    pub fn try_result(&self) -> Result<Option<GoalResult<A>>, ActionError> {
        // one already in the inbox first: pumping could be refused while it is held
        if let Some(r) = self.client.take_result(self.id) {
            return Ok(Some(r));
        }
        self.client.pump()?;
        Ok(self.client.take_result(self.id))
    }

    /// Waits up to `timeout` for the result. A server that dies meanwhile is
    /// [`ActionError::ServerGone`] within about [`LIVENESS_CHECK`]. A result whose push
    /// was lost (the client's queue overflowed) is fetched from the server's result store
    /// once the goal has been followed for half a second without one.
    pub fn result(&self, timeout: Duration) -> Result<GoalResult<A>, ActionError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut next_check = start + LIVENESS_CHECK;
        let i = &self.client.inner;
        loop {
            if let Some(r) = self.try_result()? {
                return Ok(r);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ActionError::Timeout {
                    action: i.name.clone(),
                    goal: self.id,
                    timeout,
                });
            }
            if now >= next_check {
                self.check_server()?;
                next_check = now + LIVENESS_CHECK;
            }
            // the fetch time is the goal's, so callers that wait in slices reach it too
            let next_fetch = i.inbox.borrow().live.get(&self.id).copied().unwrap_or(now);
            if now >= next_fetch {
                let bound = deadline
                    .saturating_duration_since(now)
                    .min(i.accept_timeout.get())
                    .max(Duration::from_millis(1));
                if let Some(r) = self.client.fetch_within(self.id, bound)? {
                    return Ok(r);
                }
                if let Some(t) = i.inbox.borrow_mut().live.get_mut(&self.id) {
                    *t = Instant::now() + FETCH_AFTER;
                }
                continue;
            }
            let wait = deadline
                .min(next_check)
                .min(next_fetch)
                .saturating_duration_since(now);
            match i.result_sub.recv_timeout(wait) {
                Ok(Some(s)) => i.inbox.borrow_mut().route_result(s),
                Ok(None) => {}
                // every sample the subscriber may lend is held: wait for the fallback
                Err(_) => std::thread::sleep(wait.min(Duration::from_millis(1))),
            }
        }
    }

    /// Asks the server to cancel this goal; see [`ActionClient::cancel`].
    pub fn cancel(&self) -> Result<GoalState, ActionError> {
        self.client.cancel(self.id)
    }
}

impl<A: Action> Drop for ClientGoal<A> {
    fn drop(&mut self) {
        if self.client.inner.driven.get() {
            return;
        }
        let mut inbox = self.client.inner.inbox.borrow_mut();
        inbox.live.remove(&self.id);
        inbox.results.remove(&self.id);
        let id = self.id;
        inbox.feedback.retain(|s| s.goal != id);
    }
}

/// A zeroed `Tagged<M>`, for tests and tools.
#[allow(dead_code)]
pub(crate) fn zero_tagged<M: Message>() -> Tagged<M> {
    zeroed()
}
