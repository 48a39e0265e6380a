//! Ownership without copies: samples a callback keeps past its call, and requests
//! written in place in shared memory (client loans).

use crate::exec::{clear_callback_message, exec_err, failed, move_in, with_exec, User};
use crate::handle::{self, Kind};
use crate::service::{store_reply, ClientObj};
use crate::status::call_error;
use crate::status::{guard, nerve_status_t, nerve_status_t::*, out, Error, Result};
use crate::topic::{nerve_sample_view_t, view_of, Sub};
use crate::types::{
    nerve_client_t, nerve_executor_t, nerve_pending_t, nerve_reply_t, nerve_sample_t,
    nerve_subscriber_t,
};
use nerve::RawRequestLoan;
use std::ffi::c_void;
use std::time::Duration;

/// Called with each sample, which the callback owns from then on (even when it fails):
/// it reads it through `view` and releases it with `nerve_sample_release`, now or later
/// (on this thread). Returns 0, or non-zero to fail the spin.
#[allow(non_camel_case_types)]
pub type nerve_owned_sample_callback_t = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        sample: nerve_sample_t,
        view: *const nerve_sample_view_t,
    ) -> i32,
>;

/// Moves a subscriber into the executor: `callback` takes over each sample as a handle
/// and may keep it past the call (no copy: the sample's memory stays valid until
/// released). The subscriber holds at most its QoS's `max_borrowed` samples at once (the
/// one being delivered and the kept ones; 0 in `nerve_qos_t` means the default, 2): a
/// sample that arrives while that many are kept ends the spin with `NERVE_ERR_EXEC`
/// ("already holds N samples"), and it stays queued until one is released. The
/// subscriber handle is released (the executor owns it now).
///
/// # Safety
/// `callback` is a valid function; `user` is whatever it expects; `drop` is null or
/// frees `user`.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_add_subscriber_shared(
    exec: nerve_executor_t,
    sub: nerve_subscriber_t,
    callback: nerve_owned_sample_callback_t,
    user: *mut c_void,
    drop: crate::exec::nerve_drop_callback_t,
) -> nerve_status_t {
    guard(|| {
        let user = User { ptr: user, drop };
        let cb = callback.ok_or_else(|| Error::new(NERVE_ERR_NULL, "callback is null"))?;
        with_exec(exec, |ex, ctx| {
            let s = move_in(sub.id, Kind::Subscriber, ctx, |s: Sub| s.0)?;
            let topic = s.topic().to_string();
            ex.subscribe_raw_owned(s, move |sample| {
                // the payload stays where it is in shared memory when the sample moves
                // into the table
                let view = view_of(sample.bytes(), sample.elems(), sample.header());
                let id = handle::insert(Kind::Sample, ctx, sample)
                    .map_err(|e| -> nerve::executor::CallbackError { e.message.into() })?;
                clear_callback_message();
                // SAFETY: the registered callback with its own `user`; `view` lives for
                // the call and names the sample the callback now owns.
                match unsafe { cb(user.ptr(), nerve_sample_t { id }, &view) } {
                    0 => Ok(()),
                    code => Err(failed(&format!("a subscriber of {topic}"), code)),
                }
            })
            .map_err(exec_err)?;
            Ok(NERVE_OK)
        })
    })
}

/// A request loaned from a client, written in place in shared memory until sent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_request_loan_t {
    /// The handle (0: none).
    pub id: u64,
}

/// A client's request loan in the table.
pub(crate) struct RequestLoanObj(RawRequestLoan);

boxed!(RequestLoanObj);

/// Loans a request of `len` payload bytes (head, then slice elements; zeroed) from the
/// client: write it at `*data` (8-byte aligned, `len` bytes), then send it with
/// `nerve_client_send_loan` or `nerve_client_call_loan` (no copy), or drop it with
/// `nerve_client_loan_discard` (nothing is sent). A length that is not a request of the
/// service's type is `NERVE_ERR_CALL` (nothing loaned); too many loans and calls in
/// flight at once is `NERVE_ERR_CALL` too.
///
/// # Safety
/// `out_loan` and `data` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_loan(
    client: nerve_client_t,
    len: usize,
    out_loan: *mut nerve_request_loan_t,
    data: *mut *mut c_void,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_loan, "out_loan")?;
        let data = out(data, "data")?;
        let (mut loan, ctx) = handle::with(client.id, Kind::Client, |c: &ClientObj, ctx| {
            c.0.loan_request(len).map(|l| (l, ctx))
        })?
        .map_err(call_error)?;
        // the payload stays where it is in shared memory when the loan moves
        let ptr = loan.bytes_mut().as_mut_ptr();
        slot.id = handle::insert(Kind::RequestLoan, ctx, RequestLoanObj(loan))?;
        *data = ptr.cast();
        Ok(NERVE_OK)
    })
}

fn take_loan(loan: nerve_request_loan_t) -> Result<(RawRequestLoan, u32)> {
    handle::remove::<RequestLoanObj>(loan.id, Kind::RequestLoan).map(|(l, ctx)| (l.0, ctx))
}

/// Sends a loaned request as written and returns the call in flight. The loan is used
/// up, even when the send fails.
///
/// # Safety
/// `out_pending` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_send_loan(
    loan: nerve_request_loan_t,
    out_pending: *mut nerve_pending_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_pending, "out_pending")?;
        let (l, ctx) = take_loan(loan)?;
        let call = l.send().map_err(call_error)?;
        slot.id = handle::insert(Kind::Pending, ctx, call)?;
        Ok(NERVE_OK)
    })
}

/// Sends a loaned request and waits up to `timeout_ns` for the reply (as
/// `nerve_client_call`). The loan is used up, even when the call fails.
///
/// # Safety
/// `out_reply` and `view` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_call_loan(
    loan: nerve_request_loan_t,
    timeout_ns: u64,
    out_reply: *mut nerve_reply_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_reply, "out_reply")?;
        let view = out(view, "view")?;
        let (l, ctx) = take_loan(loan)?;
        let r = l
            .send()
            .map_err(call_error)?
            .wait(Duration::from_nanos(timeout_ns))
            .map_err(call_error)?;
        store_reply(r, ctx, slot, view)?;
        Ok(NERVE_OK)
    })
}

/// Drops a loaned request unsent (its memory returns to the client's pool).
#[no_mangle]
pub extern "C" fn nerve_client_loan_discard(loan: nerve_request_loan_t) -> nerve_status_t {
    guard(|| handle::release(loan.id, Kind::RequestLoan).map(|_| NERVE_OK))
}
