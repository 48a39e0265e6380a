//! Nerve's C++ API as a system under test: the C++ peers of `cpp/peer.cpp` (compiled into
//! this binary by build.rs over `nerve.hpp`), here the echo service's client and server;
//! the ping-pong ends are driven by the paths suite (`suites/paths/cpp.rs`).

use crate::harness::PeerError;
use crate::peers::echo::{Check, EchoClient, Fill};
#[cfg(nerve_bench_cpp)]
use std::ffi::{c_void, CString};
use std::time::Duration;

const SYSTEM: &str = "nerve C++";

/// Why the C++ peers cannot run here, if they cannot.
pub fn unavailable() -> Option<&'static str> {
    if cfg!(nerve_bench_cpp) {
        None
    } else {
        Some("no C++ compiler was found when the benchmark was built (g++ / c++)")
    }
}

/// The text of a NUL-terminated error buffer.
pub fn message(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The entry points of `cpp/peer.cpp`.
#[cfg(nerve_bench_cpp)]
pub(crate) mod ffi {
    use std::ffi::{c_char, c_void};
    extern "C" {
        pub fn nerve_bench_cpp_echo_client(
            name: *const c_char,
            domain: u32,
            timeout_ns: u64,
            err: *mut c_char,
            err_cap: usize,
        ) -> *mut c_void;
        pub fn nerve_bench_cpp_echo_call(
            client: *mut c_void,
            len: usize,
            fill: unsafe extern "C" fn(*mut c_void, *mut u8, usize),
            check: unsafe extern "C" fn(*mut c_void, *const u8, usize) -> i32,
            user: *mut c_void,
            err: *mut c_char,
            err_cap: usize,
        ) -> i32;
        pub fn nerve_bench_cpp_echo_client_free(client: *mut c_void);
        pub fn nerve_bench_cpp_lidar_filter(
            input: *const c_char,
            output: *const c_char,
            frames: u64,
            point_step: usize,
            ready: *mut i32,
            err: *mut c_char,
            err_cap: usize,
        ) -> i32;
        pub fn nerve_bench_cpp_echo_server(
            name: *const c_char,
            ready: *mut i32,
            err: *mut c_char,
            err_cap: usize,
        ) -> i32;
        pub fn nerve_bench_cpp_ponger(
            kind: i32,
            topic: *const c_char,
            domain: u32,
            stop: *const i32,
            ready: *mut i32,
            err: *mut c_char,
            err_cap: usize,
        ) -> i32;
        pub fn nerve_bench_cpp_pinger(
            kind: i32,
            topic: *const c_char,
            domain: u32,
            elems: usize,
            warmup: usize,
            iterations: usize,
            rtt_ns: *mut u64,
            err: *mut c_char,
            err_cap: usize,
        ) -> i32;
    }
}

fn call_err(reason: String) -> PeerError {
    PeerError::Call {
        system: SYSTEM,
        reason,
    }
}

/// A C++ client of the echo service (`nerve::Client<nerve::msgs::Echo>`).
pub struct CppEchoClient {
    #[cfg(nerve_bench_cpp)]
    raw: *mut c_void,
}

impl CppEchoClient {
    /// Connects to the echo service `name` in `domain`, waiting up to `timeout`.
    pub fn connect(name: &str, domain: u32, timeout: Duration) -> Result<CppEchoClient, PeerError> {
        #[cfg(nerve_bench_cpp)]
        {
            let name = CString::new(name).map_err(|e| call_err(e.to_string()))?;
            let mut err = [0u8; 512];
            // SAFETY: valid C string and error buffer of its stated length.
            let raw = unsafe {
                ffi::nerve_bench_cpp_echo_client(
                    name.as_ptr(),
                    domain,
                    timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
                    err.as_mut_ptr().cast(),
                    err.len(),
                )
            };
            if raw.is_null() {
                return Err(PeerError::Setup {
                    system: SYSTEM,
                    reason: message(&err),
                });
            }
            Ok(CppEchoClient { raw })
        }
        #[cfg(not(nerve_bench_cpp))]
        {
            let _ = (name, domain, timeout);
            Err(PeerError::Setup {
                system: SYSTEM,
                reason: unavailable().unwrap_or_default().into(),
            })
        }
    }
}

impl Drop for CppEchoClient {
    fn drop(&mut self) {
        #[cfg(nerve_bench_cpp)]
        // SAFETY: made by nerve_bench_cpp_echo_client, freed once, here.
        unsafe {
            ffi::nerve_bench_cpp_echo_client_free(self.raw)
        }
    }
}

#[cfg(nerve_bench_cpp)]
struct Callbacks<'a, 'b> {
    fill: Fill<'a>,
    check: Check<'b>,
    failure: Option<String>,
}

#[cfg(nerve_bench_cpp)]
unsafe extern "C" fn fill_cb(user: *mut c_void, data: *mut u8, len: usize) {
    // SAFETY: `user` is the `Callbacks` of this call; `data` holds `len` writable bytes.
    unsafe {
        let cb = &mut *user.cast::<Callbacks<'_, '_>>();
        (cb.fill)(std::slice::from_raw_parts_mut(data, len));
    }
}

#[cfg(nerve_bench_cpp)]
unsafe extern "C" fn check_cb(user: *mut c_void, data: *const u8, len: usize) -> i32 {
    // SAFETY: `user` is the `Callbacks` of this call; `data` holds `len` readable bytes
    // (null only when empty).
    unsafe {
        let cb = &mut *user.cast::<Callbacks<'_, '_>>();
        let bytes = if len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(data, len)
        };
        match (cb.check)(bytes) {
            Ok(()) => 0,
            Err(e) => {
                cb.failure = Some(e);
                1
            }
        }
    }
}

impl EchoClient for CppEchoClient {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        #[cfg(nerve_bench_cpp)]
        {
            let mut cb = Callbacks {
                fill,
                check,
                failure: None,
            };
            let mut err = [0u8; 512];
            // SAFETY: a client of nerve_bench_cpp_echo_client; callbacks that take
            // `cb` (alive for the call) as their user data; an error buffer.
            let rc = unsafe {
                ffi::nerve_bench_cpp_echo_call(
                    self.raw,
                    len,
                    fill_cb,
                    check_cb,
                    (&mut cb as *mut Callbacks<'_, '_>).cast(),
                    err.as_mut_ptr().cast(),
                    err.len(),
                )
            };
            match (rc, cb.failure) {
                (0, _) => Ok(()),
                (_, Some(reason)) => Err(PeerError::BadResponse {
                    system: SYSTEM,
                    reason,
                }),
                _ => Err(call_err(message(&err))),
            }
        }
        #[cfg(not(nerve_bench_cpp))]
        {
            let _ = (len, fill, check);
            Err(call_err(unavailable().unwrap_or_default().into()))
        }
    }
}

/// Serves the echo service `name` from C++ (`nerve::Server<nerve::msgs::Echo>`) until
/// SIGTERM; `ready` runs once it serves.
pub fn serve(name: &str, ready: &mut dyn FnMut()) -> Result<(), PeerError> {
    #[cfg(nerve_bench_cpp)]
    {
        use std::sync::atomic::{AtomicI32, Ordering};
        let name = CString::new(name).map_err(|e| call_err(e.to_string()))?;
        let flag = AtomicI32::new(0);
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                let mut err = [0u8; 512];
                // SAFETY: valid C string, an atomic that outlives the call (written with
                // an atomic builtin), an error buffer of its stated length.
                let rc = unsafe {
                    ffi::nerve_bench_cpp_echo_server(
                        name.as_ptr(),
                        flag.as_ptr(),
                        err.as_mut_ptr().cast(),
                        err.len(),
                    )
                };
                (rc == 0)
                    .then_some(())
                    .ok_or_else(|| call_err(message(&err)))
            });
            // SYNC: Acquire pairs with the server's release store once it serves.
            while flag.load(Ordering::Acquire) == 0 && !server.is_finished() {
                std::thread::sleep(Duration::from_millis(1));
            }
            if flag.load(Ordering::Acquire) != 0 {
                ready();
            }
            server
                .join()
                .unwrap_or_else(|_| Err(call_err("the C++ server thread panicked".into())))
        })
    }
    #[cfg(not(nerve_bench_cpp))]
    {
        let _ = (name, ready);
        Err(PeerError::Setup {
            system: SYSTEM,
            reason: unavailable().unwrap_or_default().into(),
        })
    }
}

/// Runs the lidar pipeline's filter stage in C++ (`nerve_bench_cpp_lidar_filter`):
/// `frames` clouds from `input`, every other point of `point_step` bytes kept, published
/// on `output`; `ready` runs once its endpoints exist.
pub fn lidar_filter(
    input: &str,
    output: &str,
    frames: u64,
    point_step: usize,
    ready: &mut dyn FnMut(),
) -> Result<(), String> {
    #[cfg(nerve_bench_cpp)]
    {
        use std::sync::atomic::{AtomicI32, Ordering};
        let input = CString::new(input).map_err(|e| e.to_string())?;
        let output = CString::new(output).map_err(|e| e.to_string())?;
        let flag = AtomicI32::new(0);
        std::thread::scope(|s| {
            let stage = s.spawn(|| {
                let mut err = [0u8; 512];
                // SAFETY: valid C strings, an atomic that outlives the call (written with
                // an atomic builtin), an error buffer of its stated length.
                let rc = unsafe {
                    ffi::nerve_bench_cpp_lidar_filter(
                        input.as_ptr(),
                        output.as_ptr(),
                        frames,
                        point_step,
                        flag.as_ptr(),
                        err.as_mut_ptr().cast(),
                        err.len(),
                    )
                };
                (rc == 0).then_some(()).ok_or_else(|| message(&err))
            });
            // SYNC: Acquire pairs with the stage's release store once it is ready.
            while flag.load(Ordering::Acquire) == 0 && !stage.is_finished() {
                std::thread::sleep(Duration::from_millis(1));
            }
            if flag.load(Ordering::Acquire) != 0 {
                ready();
            }
            stage
                .join()
                .unwrap_or_else(|_| Err("the C++ filter thread panicked".into()))
        })
    }
    #[cfg(not(nerve_bench_cpp))]
    {
        let _ = (input, output, frames, point_step, ready);
        Err(unavailable().unwrap_or_default().into())
    }
}
