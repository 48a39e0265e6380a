//! Logging through the C ABI reaches `/rosout` as the Rust logger writes it: the same
//! record (level, full node name, text, file, function, line, the context's stamp), the
//! threshold applied, and a bad level refused with nothing sent.

use nerve::log::{log_qos, Level, LogRecord, LOG_TOPIC};
use nerve::Serde;
use nerve_c::*;
use std::ffi::CString;
use std::ptr::null;
use std::time::Duration;
mod common;

use common::{context_in, last_error, node, ok};

#[test]
fn a_c_record_reaches_rosout_with_every_field() {
    let domain = 700 + std::process::id() % 97;
    let dir = std::env::temp_dir().join(format!("nerve-c-log-{}", std::process::id()));
    let mut ctx = nerve_context_t::default();
    ok(context_in(domain, &dir, Some("/arm"), None, &mut ctx));
    let n = node(ctx, "gripper");

    let rust = nerve::Context::new(
        nerve::Config::default()
            .domain(domain)
            .unwrap()
            .state_dir(&dir),
    )
    .unwrap();
    let reader = rust.node("reader").create().unwrap();
    let sub = reader
        .subscriber::<Serde<LogRecord>>(LOG_TOPIC)
        .qos(log_qos())
        .create()
        .unwrap();

    let before = nerve::wall_ns();
    let text = CString::new("grip force 12.5 N").unwrap();
    let file = CString::new("gripper.cpp").unwrap();
    let function = CString::new("on_goal").unwrap();
    ok(nerve_node_set_log_level(
        n,
        nerve_log_level_t::NERVE_LOG_INFO as i32,
    ));
    // SAFETY: valid NUL-terminated strings (or null) for each call.
    ok(unsafe {
        nerve_node_log(
            n,
            nerve_log_level_t::NERVE_LOG_DEBUG as i32,
            text.as_ptr(),
            null(),
            null(),
            0,
        )
    });
    // SAFETY: as above.
    ok(unsafe {
        nerve_node_log(
            n,
            nerve_log_level_t::NERVE_LOG_ERROR as i32,
            text.as_ptr(),
            file.as_ptr(),
            function.as_ptr(),
            42,
        )
    });
    // a bad level: an error, nothing sent
    // SAFETY: as above.
    let code = unsafe { nerve_node_log(n, 11, text.as_ptr(), null(), null(), 0) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("log level 11"), "{}", last_error());

    let r = sub
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("the error record")
        .decode()
        .unwrap();
    assert_eq!(
        r.level,
        Level::Error,
        "the debug record was below the threshold"
    );
    assert_eq!(r.node, "/arm/gripper");
    assert_eq!(r.message, "grip force 12.5 N");
    assert_eq!(
        (
            r.location.file.as_str(),
            r.location.function.as_str(),
            r.location.line
        ),
        ("gripper.cpp", "on_goal", 42)
    );
    assert!(r.stamp_ns >= before, "{} < {before}", r.stamp_ns);
    assert!(sub.try_recv().unwrap().is_none(), "nothing else was sent");
    ok(nerve_node_destroy(n));
    ok(nerve_context_destroy(ctx));
    let _ = std::fs::remove_dir_all(&dir);
}
