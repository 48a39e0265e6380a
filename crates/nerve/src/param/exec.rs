//! Parameters on an [`Executor`]: a node's remote parameter requests (`nerve param`,
//! [`super::ParamClient`]) answered as callbacks. The parameter layer registers itself with
//! the executor (as actions do), so the executor names nothing above it.

use super::{Parameters, SERVICE_SUFFIX};
use crate::error::ExecError;
use crate::exec::executor::{Budget, EntityId, EntityStats, Executor, Now, Work};
use crate::transport::doorbell::SlotRef;

impl Executor {
    /// Answers the remote requests (`nerve param`, [`super::ParamClient`]) of a
    /// node's parameters on this executor.
    pub fn parameters(&mut self, params: &Parameters) -> Result<EntityId, ExecError> {
        let name = format!("{}{}", params.node_path(), SERVICE_SUFFIX);
        self.add_work(
            &name,
            Box::new(ParamServing {
                params: params.clone(),
            }),
        )
    }
}

struct ParamServing {
    params: Parameters,
}

impl Work for ParamServing {
    fn slot(&self) -> Option<SlotRef> {
        Some(self.params.inner.server.wake_slot().clone())
    }
    fn ready(&self, _: Now) -> bool {
        self.params.inner.server.has_requests()
    }
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let server = &self.params.inner.server;
        let before = server.rejected();
        let mut n = 0;
        while budget.more(n) {
            let Some(req) = server.try_take()? else {
                break;
            };
            self.params.answer(&req)?;
            n += 1;
        }
        stats.rejected += server.rejected() - before;
        Ok(n)
    }
}
