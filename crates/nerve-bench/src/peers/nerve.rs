//! Nerve services: the `nerve_msgs/Echo` service, request and response loaned in shared
//! memory and written in place.

use crate::harness::PeerError;
use crate::peers::echo::{Check, EchoClient, Fill};
use nerve::{Client, Context, Node, ServiceQos, WaitMode};
use nerve_msgs::srv::Echo;
use std::time::Duration;

const SYSTEM: &str = "nerve";
/// Longest time one benchmark call may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The service limits the benchmark uses: payloads up to 64 MiB, one call in flight.
fn qos() -> ServiceQos {
    ServiceQos::default().max_payload(64 << 20, 64 << 20)
}

fn setup(e: impl std::fmt::Display) -> PeerError {
    PeerError::Setup {
        system: SYSTEM,
        reason: e.to_string(),
    }
}

/// Serves the echo service `name` (copying each request into its response) until SIGTERM.
pub fn serve(
    ctx: &Context,
    name: &str,
    mode: WaitMode,
    ready: &mut dyn FnMut(),
) -> Result<(), PeerError> {
    let node = ctx.node("bench_server").create().map_err(setup)?;
    let server = node
        .service::<Echo>(name)
        .qos(qos())
        .wait_mode(mode)
        .create()
        .map_err(setup)?;
    ready();
    server
        .serve(|req| {
            let mut out = req.loan_reply_slice(req.elems().len())?;
            out.tag = req.tag;
            out.elem_bytes_mut().copy_from_slice(req.elems());
            out.send()?;
            Ok(())
        })
        .map_err(|e| PeerError::Call {
            system: SYSTEM,
            reason: e.to_string(),
        })
}

/// Client of the echo service.
pub struct NerveClient {
    // field order is drop order: the client goes before its node
    client: Client<Echo>,
    _node: Node,
    seq: u64,
}

impl NerveClient {
    /// Connects to the echo service `name`, waiting up to `timeout` for its server.
    pub fn connect(
        ctx: &Context,
        name: &str,
        mode: WaitMode,
        timeout: Duration,
    ) -> Result<NerveClient, PeerError> {
        let node = ctx.node("bench_client").create().map_err(setup)?;
        let client = node
            .client::<Echo>(name)
            .qos(qos())
            .wait_mode(mode)
            .create()
            .map_err(setup)?;
        if !client.wait_for_service(timeout) {
            return Err(setup(format!("no server for {name} within {timeout:?}")));
        }
        Ok(NerveClient {
            client,
            _node: node,
            seq: 0,
        })
    }
}

impl EchoClient for NerveClient {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        let err = |e: nerve::CallError| PeerError::Call {
            system: SYSTEM,
            reason: e.to_string(),
        };
        self.seq += 1;
        let mut req = self.client.loan_slice(len).map_err(err)?;
        req.tag = self.seq;
        fill(req.elem_bytes_mut());
        let reply = req.call(CALL_TIMEOUT).map_err(err)?;
        if reply.tag != self.seq {
            return Err(PeerError::BadResponse {
                system: SYSTEM,
                reason: format!("tag {} instead of {}", reply.tag, self.seq),
            });
        }
        check(reply.elems()).map_err(|reason| PeerError::BadResponse {
            system: SYSTEM,
            reason,
        })
    }
}
