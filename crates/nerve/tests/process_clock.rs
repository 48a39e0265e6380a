//! The process clock (`nerve::time::now_ns`, which the C ABI's `nerve_time_now_ns` and
//! Python read) is the first context's clock, also when that context runs on simulation
//! time. A test binary of its own: the process clock is chosen once per process.
//!
//! The simulation clock's feed opens a system-clock context of its own on a helper thread;
//! that context used to become the process's first, so the process clock read the wall
//! clock while samples were stamped with simulation time (found by the conformance
//! matrix's C++ door: it waited for the clock to leave 0, then stamped 0).

use nerve::{Config, Context};

#[test]
fn a_simulation_time_context_gives_the_process_its_clock() {
    let dir = std::env::temp_dir().join("nerve-tests/");
    let mut config = Config::default().domain(754).unwrap().state_dir(dir);
    config.sim_time = true;
    let ctx = Context::new(config).unwrap();
    assert!(ctx.clock().is_sim());
    assert!(
        nerve::time::clock().is_sim(),
        "the process clock is the first context's (simulation time), not its feed's"
    );
    // nothing on /clock yet: simulation time stands at 0, for the process as for the context
    assert_eq!(nerve::time::now_ns(), 0);
    assert_eq!(ctx.clock().now_ns(), 0);
}
