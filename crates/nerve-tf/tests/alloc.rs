//! A lookup allocates nothing: by name and by handle, through a 5-edge chain, at LATEST
//! and at an interpolated time, while the histories hold many entries.

use nerve_tf::{Quat, TfBuffer, Transform, TreeLimits, Vec3, LATEST};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// plain atomic that allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: as for `dealloc`, the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn lookups_allocate_nothing() {
    let b = TfBuffer::new(TreeLimits::default());
    let names: Vec<String> = (0..=5).map(|i| format!("frame_{i}")).collect();
    for k in 0..500i64 {
        for i in 1..=5 {
            let t = Transform::new(
                Vec3::new(k as f64, i as f64, 0.0),
                Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), k as f64 * 0.01),
            );
            b.set_transform(&names[i - 1], &names[i], k * 10_000_000, t, false)
                .unwrap();
        }
    }
    let (t, s) = (b.frame("frame_0").unwrap(), b.frame("frame_5").unwrap());
    let before = ALLOCS.load(Relaxed);
    let mut sum = 0.0;
    for k in 0..10_000i64 {
        let time = if k % 2 == 0 {
            LATEST
        } else {
            1_234_567_890 + k
        };
        sum += b
            .lookup_transform("frame_0", "frame_5", time)
            .unwrap()
            .translation
            .x;
        sum += b.lookup_transform(t, s, time).unwrap().translation.x;
        assert!(b.can_transform("frame_5", "frame_2", time));
    }
    let after = ALLOCS.load(Relaxed);
    assert!(sum.is_finite());
    assert_eq!(after - before, 0, "allocations in 30,000 lookups");
}
