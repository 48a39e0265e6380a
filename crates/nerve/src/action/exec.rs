//! Actions on an [`Executor`]: a server's requests and a client's feedback and results
//! run as callbacks.

use super::client::{ActionClient, Feedback, GoalResult};
use super::error::ActionError;
use super::server::{ActionServer, GoalHandle, GoalRequest};
use super::{Action, GoalId};
use crate::error::ExecError;
use crate::exec::executor::{Budget, EntityId, EntityStats, Executor, Now, RingWatch, Work};
use crate::service::client::LIVENESS_CHECK;
use crate::sys::clock::mono_ns;
use crate::transport::doorbell::SlotRef;
use std::cell::Cell;

fn exec_err(e: ActionError) -> ExecError {
    ExecError::Work(Box::new(e))
}

impl Executor {
    /// Serves `server` here: `on_goal` accepts (`Ok`) or rejects each goal the policy
    /// lets in, `on_accepted` gets each accepted goal's handle (end quick goals there;
    /// work on long ones from other callbacks, e.g. a timer, through
    /// [`ActionServer::goals`]); cancels and result requests are answered.
    pub fn action_server<A, F, G>(
        &mut self,
        server: &ActionServer<A>,
        on_goal: F,
        on_accepted: G,
    ) -> Result<EntityId, ExecError>
    where
        A: Action,
        F: FnMut(&GoalRequest<'_, A>) -> Result<(), String> + 'static,
        G: FnMut(GoalHandle<A>) + 'static,
    {
        let name = server.name().to_string();
        // late readers of the status topic get the current status
        self.add_work(
            &format!("{name}/_action/status"),
            Box::new(StatusWatch {
                watch: RingWatch::new(server.inner.status.wake_slot().clone()),
                server: server.clone(),
            }),
        )?;
        self.add_work(
            &format!("{name}/_action/cancel"),
            Box::new(ServerPart {
                server: server.clone(),
                part: Part::Cancel,
            }),
        )?;
        self.add_work(
            &format!("{name}/_action/result"),
            Box::new(ServerPart {
                server: server.clone(),
                part: Part::Result,
            }),
        )?;
        self.add_work(
            &format!("{name}/_action/goal"),
            Box::new(ServerPart {
                server: server.clone(),
                part: Part::Goal(Box::new(on_goal), Box::new(on_accepted)),
            }),
        )
    }

    /// Follows `client`'s goals here: `on_feedback` runs with each feedback,
    /// `on_result` once per goal with its result, or with
    /// [`ActionError::ServerGone`] if the server dies first. Send goals with
    /// [`ActionClient::send_goal`] from any callback of this thread.
    pub fn action_client<A, FB, FR>(
        &mut self,
        client: &ActionClient<A>,
        on_feedback: FB,
        on_result: FR,
    ) -> Result<EntityId, ExecError>
    where
        A: Action,
        FB: FnMut(&Feedback<A>) + 'static,
        FR: FnMut(GoalId, Result<GoalResult<A>, ActionError>) + 'static,
    {
        let name = client.name().to_string();
        client.inner.driven.set(true);
        self.add_work(
            &format!("{name}/_action/feedback"),
            Box::new(FeedbackPart {
                client: client.clone(),
                callback: on_feedback,
            }),
        )?;
        self.add_work(
            &format!("{name}/_action/result"),
            Box::new(ResultPart {
                client: client.clone(),
                callback: on_result,
                next_check: Cell::new(mono_ns() + LIVENESS_CHECK.as_nanos() as u64),
            }),
        )
    }
}

type OnGoal<A> = Box<dyn FnMut(&GoalRequest<'_, A>) -> Result<(), String>>;
type OnAccepted<A> = Box<dyn FnMut(GoalHandle<A>)>;

enum Part<A: Action> {
    Goal(OnGoal<A>, OnAccepted<A>),
    Cancel,
    Result,
}

struct ServerPart<A: Action> {
    server: ActionServer<A>,
    part: Part<A>,
}

impl<A: Action> Work for ServerPart<A> {
    fn slot(&self) -> Option<SlotRef> {
        let i = &self.server.inner;
        Some(match self.part {
            Part::Goal(..) => i.goal_srv.wake_slot().clone(),
            Part::Cancel => i.cancel_srv.wake_slot().clone(),
            Part::Result => i.result_srv.wake_slot().clone(),
        })
    }
    fn ready(&self, _: Now) -> bool {
        let i = &self.server.inner;
        match self.part {
            Part::Goal(..) => i.goal_srv.has_requests(),
            Part::Cancel => i.cancel_srv.has_requests(),
            Part::Result => i.result_srv.has_requests(),
        }
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        match &mut self.part {
            Part::Goal(on_goal, on_accepted) => self.server.handle_goals(on_goal, on_accepted),
            Part::Cancel => self.server.handle_cancels(),
            Part::Result => self.server.handle_result_requests(),
        }
        .map_err(exec_err)
    }
}

/// Connects status readers that joined and publishes the status if it changed while
/// nobody read it.
struct StatusWatch<A: Action> {
    server: ActionServer<A>,
    watch: RingWatch,
}

impl<A: Action> Work for StatusWatch<A> {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.watch.slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.watch.rang()
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        if self.watch.take() {
            self.server.inner.status.update_connections();
            self.server.flush_status().map_err(exec_err)?;
        }
        Ok(0)
    }
}

struct FeedbackPart<A: Action, F> {
    client: ActionClient<A>,
    callback: F,
}

impl<A: Action, F: FnMut(&Feedback<A>)> Work for FeedbackPart<A, F> {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.client.inner.feedback_sub.receiver().slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        // a pump for results moves feedback into the inbox too: it waits there
        self.client.has_feedback()
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        let all = self.client.poll_feedback().map_err(exec_err)?;
        let n = all.len();
        for f in &all {
            (self.callback)(f);
        }
        Ok(n)
    }
}

struct ResultPart<A: Action, F> {
    client: ActionClient<A>,
    callback: F,
    next_check: Cell<u64>,
}

impl<A: Action, F> Work for ResultPart<A, F>
where
    F: FnMut(GoalId, Result<GoalResult<A>, ActionError>),
{
    fn slot(&self) -> Option<SlotRef> {
        Some(self.client.inner.result_sub.receiver().slot().clone())
    }
    fn deadline(&self) -> Option<u64> {
        self.client.follows_any().then(|| self.next_check.get())
    }
    fn ready(&self, now: Now) -> bool {
        self.client.has_results()
            || (self.client.follows_any() && now.mono >= self.next_check.get())
    }
    fn run(&mut self, _: &mut EntityStats, _: &Budget<'_>) -> Result<usize, ExecError> {
        let mut n = 0;
        for (id, r) in self.client.poll_results().map_err(exec_err)? {
            (self.callback)(id, Ok(r));
            n += 1;
        }
        let now = mono_ns();
        if now >= self.next_check.get() {
            self.next_check.set(now + LIVENESS_CHECK.as_nanos() as u64);
            for (id, e) in self.client.check_server() {
                (self.callback)(id, Err(e));
                n += 1;
            }
            // pushes lost to a full queue come from the server's result store
            for (id, r) in self.client.fetch_due() {
                (self.callback)(id, r);
                n += 1;
            }
        }
        Ok(n)
    }
}
