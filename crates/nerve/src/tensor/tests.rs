//! Tensor pools: zero copy between handles, references and generations, a full pool,
//! dead handles (simulated and a killed process), and refused input.
//!
//! A second [`Context`] in this process stands in for another process: it opens its own
//! descriptor of the file, so its record locks are its own.

use super::pool::{FREE, READY, WRITING};
use super::*;
use crate::config::Config;
use crate::context::Context;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

fn ctx(domain: u32) -> Context {
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(domain).unwrap().state_dir(dir)).unwrap()
}

/// A pool name unique to this test process.
fn name(what: &str) -> String {
    format!("t_{what}_{}", std::process::id())
}

/// Writes `f(i)` into element `i`.
fn fill_f32(t: &mut TensorMut, f: impl Fn(usize) -> f32) {
    for (i, c) in t.bytes_mut().chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&f(i).to_ne_bytes());
    }
}

#[test]
fn dtypes_have_numpys_names_and_sizes() {
    for d in DType::ALL {
        assert_eq!(DType::from_name(d.name()), Some(d));
        assert_eq!(DType::from_code(d.code()), Some(d));
        assert_eq!(d.to_string(), d.name());
    }
    assert_eq!(DType::F32.name(), "float32");
    assert_eq!(DType::Bool.name(), "bool");
    assert_eq!((DType::F16.size(), DType::I64.size()), (2, 8));
    assert_eq!(DType::from_name("float"), None);
    assert_eq!(DType::from_code(0), None);
    assert_eq!(DType::from_code(13), None);
    assert_eq!(std::mem::size_of::<TensorDescriptor>(), 136);
}

#[test]
fn a_tensor_is_read_in_place_through_another_handle_and_over_a_topic() {
    let (a, b) = (ctx(960), ctx(960));
    let name = name("zero_copy");
    let producer = TensorPool::create(&a, &name, 4, 1000).unwrap();
    assert_eq!(producer.slot_bytes(), 1024, "rounded up to 64");
    let consumer = TensorPool::open(&b, &name).unwrap();
    assert_eq!(consumer.id(), producer.id());

    let mut t = producer.alloc(&[10, 20], DType::F32).unwrap();
    assert_eq!(
        (t.shape(), t.dtype(), t.len_bytes()),
        (&[10, 20][..], DType::F32, 800)
    );
    assert_eq!(t.as_mut_ptr() as usize % 64, 0, "64-byte aligned");
    fill_f32(&mut t, |i| i as f32 * 0.5);
    let t = t.freeze();
    let desc = t.descriptor();
    assert_eq!(desc.pool_name(), Some(name.as_str()));
    assert_eq!(
        (desc.dtype(), desc.shape()),
        (Some(DType::F32), &[10u64, 20][..])
    );

    // the descriptor travels on an ordinary topic between the two contexts
    let sub_node = b.node("tensor_sink").create().unwrap();
    let sub = sub_node
        .subscriber::<TensorDescriptor>(&format!("/{name}"))
        .create()
        .unwrap();
    let pub_node = a.node("tensor_source").create().unwrap();
    let publisher = pub_node
        .publisher::<TensorDescriptor>(&format!("/{name}"))
        .create()
        .unwrap();
    publisher.publish(&desc).unwrap();
    let got = sub
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("the descriptor");
    assert_eq!(*got, desc);

    let seen = consumer.open_tensor(&got).unwrap();
    assert_eq!(seen.shape(), &[10, 20]);
    assert_eq!(seen.dtype(), DType::F32);
    assert_eq!(seen.bytes(), t.bytes(), "the same bytes");
    assert_eq!(
        f32::from_ne_bytes(seen.bytes()[12..16].try_into().unwrap()),
        1.5
    );
    // two mappings of the same file: the same offset in each
    let (_, base_a, _) = producer.inner.raw_parts();
    let (_, base_b, _) = consumer.inner.raw_parts();
    assert_ne!(base_a, base_b, "two handles map the file twice");
    assert_eq!(
        t.as_ptr() as usize - base_a as usize,
        seen.as_ptr() as usize - base_b as usize
    );
    // the same memory, not a copy: a byte changed through the first mapping shows
    // through the second
    // SAFETY: test only: nothing borrows the bytes while this writes (`t.bytes()` and
    // `seen.bytes()` borrows ended above and below), and the slot is held by both.
    unsafe { t.as_ptr().cast_mut().write(0xAB) };
    assert_eq!(seen.bytes()[0], 0xAB);

    // a descriptor names its pool: opened without a pool handle at hand
    let again = TensorPool::open_descriptor(&b, &desc).unwrap();
    assert_eq!(again.bytes(), seen.bytes());
    assert_eq!(again.pool().name(), name);
    drop((t, seen, again));
    assert_eq!(producer.in_use(), 0);
    assert!(TensorPool::remove(&a, &name).unwrap());
    assert!(!TensorPool::remove(&a, &name).unwrap());
}

#[test]
fn the_last_reference_frees_the_slot_and_older_descriptors_are_stale() {
    let (a, b) = (ctx(961), ctx(961));
    let name = name("refs");
    let pool = TensorPool::create(&a, &name, 1, 64).unwrap();
    let other = TensorPool::open(&b, &name).unwrap();

    let t = pool.alloc(&[4], DType::U32).unwrap().freeze();
    let desc = t.descriptor();
    let clone = t.clone();
    let opened = other.open_tensor(&desc).unwrap();
    let (generation, phase, refs) = pool.inner.state_of(0);
    assert_eq!(
        (phase, refs),
        (READY, 2),
        "one per handle, clones count once"
    );
    drop(t);
    assert_eq!(pool.inner.state_of(0).2, 2, "a clone still holds it");
    drop(clone);
    assert_eq!(pool.inner.state_of(0), (generation, READY, 1));
    assert_eq!(pool.in_use(), 1);
    assert!(matches!(
        pool.alloc(&[1], DType::U8),
        Err(TensorError::Full { .. })
    ));
    drop(opened);
    assert_eq!(pool.inner.state_of(0), (generation + 1, FREE, 0), "freed");
    assert_eq!(pool.in_use(), 0);

    // kept after the free: refused, through either handle
    let e = other.open_tensor(&desc).unwrap_err();
    assert!(matches!(e, TensorError::Stale { slot: 0, .. }), "{e}");
    assert!(e.to_string().contains("stale"), "{e}");

    // and after the slot is reused: while being written, and once readable
    let mut w = pool.alloc(&[4], DType::U32).unwrap();
    assert!(matches!(
        other.open_tensor(&desc),
        Err(TensorError::Stale { .. })
    ));
    // a descriptor guessed for the slot being written is refused too
    let guessed = TensorDescriptor {
        generation: generation + 1,
        ..desc
    };
    let e = other.open_tensor(&guessed).unwrap_err();
    assert!(matches!(e, TensorError::Unpublished { slot: 0, .. }), "{e}");
    w.bytes_mut().fill(7);
    let w = w.freeze();
    assert!(matches!(
        pool.open_tensor(&desc),
        Err(TensorError::Stale { .. })
    ));
    let fresh = other.open_tensor(&w.descriptor()).unwrap();
    assert_eq!(fresh.bytes(), &[7; 16]);
    assert_eq!(
        fresh.descriptor(),
        guessed,
        "the same slot, one generation on"
    );

    // an unfrozen tensor frees its slot when dropped
    drop((w, fresh));
    let unfrozen = pool.alloc(&[2], DType::U8).unwrap();
    assert_eq!(pool.inner.state_of(0).1, WRITING);
    drop(unfrozen);
    assert_eq!(pool.inner.state_of(0), (generation + 3, FREE, 0));
    TensorPool::remove(&a, &name).unwrap();
}

#[test]
fn a_full_pool_fails_at_once() {
    let a = ctx(962);
    let name = name("full");
    let pool = TensorPool::create(&a, &name, 3, 4096).unwrap();
    let held: Vec<TensorMut> = (0..3)
        .map(|_| pool.alloc(&[1024], DType::F32).unwrap())
        .collect();
    let started = Instant::now();
    let e = pool.alloc(&[1], DType::U8).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "never a wait");
    assert!(
        matches!(&e, TensorError::Full { pool: p, slots: 3 } if *p == name),
        "{e}"
    );
    assert!(e.to_string().contains("is full"), "{e}");
    drop(held);
    assert!(pool.alloc(&[1], DType::U8).is_ok());
    TensorPool::remove(&a, &name).unwrap();
}

/// Dies as a SIGKILLed process does: its mapping and descriptor go (and with them its
/// locks) and no drop runs.
fn die(pool: TensorPool, held: Vec<Tensor>, writing: Vec<TensorMut>) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let (raw, map, len) = pool.inner.raw_parts();
    // SAFETY: the handle is forgotten below and never used or dropped again, so this
    // bitwise copy is the only Context that will ever be dropped of the two (the domain
    // is not kept alive by a leak).
    let ctx = unsafe { std::ptr::read(pool.inner.context()) };
    std::mem::forget((pool, held, writing));
    // SAFETY: as above: nothing reads the mapping after this and `raw` has no other
    // owner that closes it.
    unsafe {
        rustix::mm::munmap(map.cast(), len).unwrap();
        drop(OwnedFd::from_raw_fd(raw));
    }
    drop(ctx);
}

#[test]
fn the_references_of_a_dead_handle_are_reclaimed_while_others_live() {
    let (a, b) = (ctx(963), ctx(963));
    let name = name("dead");
    let live = TensorPool::create(&a, &name, 3, 64).unwrap();
    let dying = TensorPool::open(&b, &name).unwrap();
    let record = dying.inner.record();

    // the live handle's tensor, also opened by the dying one
    let mine = live.alloc(&[8], DType::U8).unwrap().freeze();
    let mine_there = dying.open_tensor(&mine.descriptor()).unwrap();
    // the dying one's: one being written, one frozen and opened here too
    let writing = dying.alloc(&[8], DType::U8).unwrap();
    let theirs = dying.alloc(&[8], DType::U8).unwrap().freeze();
    let theirs_here = live.open_tensor(&theirs.descriptor()).unwrap();
    assert!(matches!(
        live.alloc(&[1], DType::U8),
        Err(TensorError::Full { .. })
    ));
    let slot = |t: &Tensor| t.descriptor().slot as usize;
    assert_eq!(live.inner.state_of(slot(&mine)).2, 2);

    die(dying, vec![mine_there, theirs], vec![writing]);

    // the next allocation of a full pool reclaims the dead handle's references
    let next = live
        .alloc(&[1], DType::U8)
        .expect("the slot being written is back");
    assert_eq!(live.inner.state_of(slot(&mine)).2, 1, "only ours remains");
    assert_eq!(
        live.inner.state_of(slot(&theirs_here)).2,
        1,
        "only ours remains"
    );
    assert_eq!(live.in_use(), 3);
    drop(theirs_here);
    assert_eq!(live.in_use(), 2, "freed with our last reference");
    drop((next, mine));
    assert_eq!(live.in_use(), 0);
    let again = TensorPool::open(&b, &name).unwrap();
    assert_eq!(
        again.inner.record(),
        record,
        "the dead handle's record is reused"
    );
    TensorPool::remove(&a, &name).unwrap();
}

const CHILD: &str = "NERVE_TENSOR_TEST_CHILD";

/// The child of `a_killed_process_gives_its_slots_back`: opens the pool, holds a tensor
/// of the parent's, one it is writing and one it froze, says "ready" and waits to be
/// killed. Does nothing in an ordinary test run.
#[test]
fn child_holds_tensors_until_killed() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let v: Vec<&str> = spec.split(',').collect();
    let (domain, name) = (v[0].parse().unwrap(), v[1]);
    let (slot, generation) = (v[2].parse().unwrap(), v[3].parse().unwrap());
    let c = ctx(domain);
    let pool = TensorPool::open(&c, name).unwrap();
    let mut shape = [0u64; MAX_DIMS];
    shape[0] = 16;
    let desc = TensorDescriptor {
        pool: super::descriptor::name_field(name),
        pool_id: pool.id(),
        slot,
        generation,
        dtype: DType::U8.code(),
        ndim: 1,
        reserved: [0; 6],
        shape,
        len_bytes: 16,
        user: 0,
    };
    let parents = pool.open_tensor(&desc).unwrap();
    let writing = pool.alloc(&[16], DType::U8).unwrap();
    let frozen = pool.alloc(&[16], DType::U8).unwrap().freeze();
    println!("\nCHILD-READY");
    std::thread::sleep(Duration::from_secs(60));
    drop((parents, writing, frozen));
    panic!("not killed");
}

#[test]
fn a_killed_process_gives_its_slots_back() {
    use std::io::BufRead;
    let (domain, name) = (964, name("killed"));
    let a = ctx(domain);
    let pool = TensorPool::create(&a, &name, 3, 64).unwrap();
    let shared = pool.alloc(&[16], DType::U8).unwrap().freeze();
    let d = shared.descriptor();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tensor::tests::child_holds_tensors_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CHILD,
            format!("{domain},{name},{},{}", d.slot, d.generation),
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let ready = out
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("CHILD-READY"));
    assert!(ready, "the child failed before holding its tensors");
    assert_eq!(pool.in_use(), 3);
    assert_eq!(pool.inner.state_of(d.slot as usize).2, 2);
    child.kill().unwrap(); // SIGKILL: no drop runs
    child.wait().unwrap();

    drop(shared);
    assert_eq!(pool.in_use(), 3, "the dead child's references still count");
    let t = pool.alloc(&[16], DType::U8).expect("reclaimed when full");
    assert_eq!(pool.in_use(), 1, "every slot of the child is back");
    drop(t);
    TensorPool::remove(&a, &name).unwrap();
}

#[test]
fn bad_input_is_refused_by_name() {
    let (a, b) = (ctx(965), ctx(965));
    let name = name("bad");
    // names and sizes
    for bad in ["", "a/b", "../x", "name with space", &"x".repeat(32)] {
        let e = TensorPool::create(&a, bad, 1, 64).unwrap_err();
        assert!(matches!(e, TensorError::InvalidName { .. }), "{bad:?}: {e}");
    }
    for (slots, bytes) in [
        (0, 64),
        (MAX_SLOTS + 1, 64),
        (1, 0),
        (1, MAX_SLOT_BYTES + 1),
    ] {
        let e = TensorPool::create(&a, &name, slots, bytes).unwrap_err();
        assert!(matches!(e, TensorError::InvalidSize { .. }), "{e}");
    }
    let e = TensorPool::create(&a, &name, 4096, MAX_SLOT_BYTES).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::InvalidSize { .. } | TensorError::NoSpace { .. }
        ),
        "16 TiB: {e}"
    );
    assert!(matches!(
        TensorPool::open(&a, &name),
        Err(TensorError::NotFound { .. })
    ));

    let pool = TensorPool::create(&a, &name, 2, 256).unwrap();
    assert!(matches!(
        TensorPool::create(&a, &name, 2, 256),
        Err(TensorError::Exists { .. })
    ));
    let e = TensorPool::open_or_create(&b, &name, 2, 512).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::Mismatch {
                slot_bytes: 256,
                want_slot_bytes: 512,
                ..
            }
        ),
        "{e}"
    );
    let other = TensorPool::open_or_create(&b, &name, 2, 200).unwrap();

    // allocations
    let e = pool.alloc(&[65], DType::F32).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::TooLarge {
                bytes: Some(260),
                slot_bytes: 256,
                ..
            }
        ),
        "{e}"
    );
    let e = pool.alloc(&[usize::MAX, 2], DType::U8).unwrap_err();
    assert!(
        matches!(e, TensorError::TooLarge { bytes: None, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("more bytes than a u64"), "{e}");
    let e = pool.alloc(&[1; 9], DType::U8).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::TooManyDims {
                ndim: 9,
                max: 8,
                ..
            }
        ),
        "{e}"
    );
    let scalar = pool.alloc(&[], DType::F64).unwrap();
    assert_eq!(scalar.len_bytes(), 8);
    let empty = pool.alloc(&[0, 3], DType::F64).unwrap();
    assert_eq!(empty.len_bytes(), 0);
    drop((scalar, empty));

    // descriptors
    let mut t = pool.alloc(&[4, 8], DType::U16).unwrap();
    t.bytes_mut().fill(1);
    let t = t.freeze();
    let good = t.descriptor();
    let refused = |d: TensorDescriptor| other.open_tensor(&d).unwrap_err();
    let e = refused(TensorDescriptor { dtype: 0, ..good });
    assert!(
        matches!(e, TensorError::UnknownDType { code: 0, .. }),
        "{e}"
    );
    let e = refused(TensorDescriptor { dtype: 200, ..good });
    assert!(
        matches!(e, TensorError::UnknownDType { code: 200, .. }),
        "{e}"
    );
    let e = refused(TensorDescriptor { slot: 2, ..good });
    assert!(
        matches!(
            e,
            TensorError::SlotOutOfRange {
                slot: 2,
                slots: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = refused(TensorDescriptor {
        slot: u32::MAX,
        ..good
    });
    assert!(matches!(e, TensorError::SlotOutOfRange { .. }), "{e}");
    let e = refused(TensorDescriptor { ndim: 9, ..good });
    assert!(matches!(e, TensorError::TooManyDims { ndim: 9, .. }), "{e}");
    let e = refused(TensorDescriptor {
        len_bytes: 63,
        ..good
    });
    assert!(matches!(e, TensorError::BadShape { .. }), "{e}");
    let mut shape = good.shape;
    shape[0] = 40; // 40 x 8 x 2 = 640 bytes: consistent, but more than a slot
    let e = refused(TensorDescriptor {
        shape,
        len_bytes: 640,
        ..good
    });
    assert!(matches!(e, TensorError::BadShape { .. }), "{e}");
    let mut shape = good.shape;
    shape[5] = 1; // beyond ndim
    let e = refused(TensorDescriptor { shape, ..good });
    assert!(matches!(e, TensorError::BadShape { .. }), "{e}");
    let mut shape = good.shape;
    shape.swap(0, 1); // 8 x 4: the same bytes, not what the slot holds
    let e = refused(TensorDescriptor { shape, ..good });
    assert!(e.to_string().contains("holds another shape"), "{e}");
    let e = refused(TensorDescriptor {
        dtype: DType::I16.code(),
        ..good
    });
    assert!(matches!(e, TensorError::BadShape { .. }), "{e}");
    let e = refused(TensorDescriptor {
        ndim: 1,
        shape: [32, 0, 0, 0, 0, 0, 0, 0],
        ..good
    });
    assert!(matches!(e, TensorError::BadShape { .. }), "{e}");
    let e = refused(TensorDescriptor {
        reserved: [1, 0, 0, 0, 0, 0],
        ..good
    });
    assert!(matches!(e, TensorError::BadShape { .. }), "{e}");
    let e = refused(TensorDescriptor {
        pool_id: good.pool_id ^ 1,
        ..good
    });
    assert!(matches!(e, TensorError::WrongPool { .. }), "{e}");
    let e = refused(TensorDescriptor {
        pool: descriptor::name_field("elsewhere"),
        ..good
    });
    assert!(matches!(e, TensorError::WrongPool { .. }), "{e}");
    let e = refused(TensorDescriptor {
        generation: good.generation + 1,
        ..good
    });
    assert!(matches!(e, TensorError::Stale { .. }), "{e}");
    let mut garbage = good;
    garbage.pool = [0xff; 32];
    let e = TensorPool::open_descriptor(&b, &garbage).unwrap_err();
    assert!(matches!(e, TensorError::InvalidName { .. }), "{e}");
    let e = TensorPool::open_descriptor(&b, &TensorDescriptor::default()).unwrap_err();
    assert!(matches!(e, TensorError::InvalidName { .. }), "{e}");
    // none of the refusals kept a reference
    assert_eq!(pool.inner.state_of(good.slot as usize).2, 1);
    assert_eq!(other.open_tensor(&good).unwrap().bytes(), t.bytes());
    drop((t, pool, other));
    TensorPool::remove(&a, &name).unwrap();
}

#[test]
fn at_most_64_handles_are_open_at_once() {
    let a = ctx(966);
    let name = name("handles");
    let first = TensorPool::create(&a, &name, 1, 64).unwrap();
    let mut more: Vec<TensorPool> = (1..RECORDS)
        .map(|_| TensorPool::open(&a, &name).unwrap())
        .collect();
    let e = TensorPool::open(&a, &name).unwrap_err();
    assert!(
        matches!(e, TensorError::TooManyHandles { records: 64, .. }),
        "{e}"
    );
    more.pop();
    let last = TensorPool::open(&a, &name).unwrap();
    // a clone is the same handle, not another record
    let _clone = last.clone();
    drop((first, more, last));
    TensorPool::remove(&a, &name).unwrap();
}

#[test]
fn a_corrupt_or_foreign_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let a = ctx(967);
    let name = name("corrupt");
    let pool = TensorPool::create(&a, &name, 2, 128).unwrap();
    let path = pool.path().to_string();
    drop(pool);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut header = [0u8; 64];
    file.read_exact_at(&mut header, 0).unwrap();
    let size = file.metadata().unwrap().len();
    let patched = |at: usize, bytes: &[u8]| {
        let mut h = header;
        h[at..at + bytes.len()].copy_from_slice(bytes);
        file.write_all_at(&h, 0).unwrap();
        let e = TensorPool::open(&a, &name).unwrap_err();
        file.write_all_at(&header, 0).unwrap();
        e
    };
    let e = patched(0, b"GARBAGE!");
    assert!(matches!(e, TensorError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("magic"), "{e}");
    let e = patched(8, &2u32.to_ne_bytes());
    assert!(
        matches!(
            e,
            TensorError::Version {
                found: 2,
                supported: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = patched(12, &65u32.to_ne_bytes());
    assert!(matches!(e, TensorError::Corrupt { .. }), "records: {e}");
    let e = patched(16, &3u32.to_ne_bytes());
    assert!(matches!(e, TensorError::Corrupt { .. }), "slots: {e}");
    let e = patched(16, &u32::MAX.to_ne_bytes());
    assert!(matches!(e, TensorError::Corrupt { .. }), "slots: {e}");
    let e = patched(24, &u64::MAX.to_ne_bytes());
    assert!(matches!(e, TensorError::Corrupt { .. }), "slot bytes: {e}");
    let e = patched(24, &100u64.to_ne_bytes());
    assert!(
        matches!(e, TensorError::Corrupt { .. }),
        "slot bytes not a multiple: {e}"
    );
    let e = patched(32, &0u64.to_ne_bytes());
    assert!(matches!(e, TensorError::Corrupt { .. }), "id: {e}");
    let e = patched(40, &(size + 4096).to_ne_bytes());
    assert!(matches!(e, TensorError::Corrupt { .. }), "size: {e}");
    // a file of the wrong size for its header
    file.set_len(size - 64).unwrap();
    let e = TensorPool::open(&a, &name).unwrap_err();
    assert!(e.to_string().contains("its header needs"), "{e}");
    file.set_len(size).unwrap();
    // garbage slot states cannot push anything out of bounds
    let garbage: Vec<u8> = (0..2 * 128).map(|i| (i * 7919 % 251) as u8).collect();
    file.write_all_at(&garbage, 64).unwrap();
    let pool = TensorPool::open(&a, &name).expect("a valid header, garbage states");
    for _ in 0..4 {
        match pool.alloc(&[8], DType::U8) {
            Ok(t) => {
                let d = t.freeze().descriptor();
                assert!(matches!(
                    pool.open_tensor(&d),
                    Err(TensorError::Stale { .. })
                ));
            }
            Err(e) => assert!(matches!(e, TensorError::Full { .. }), "{e}"),
        }
    }
    drop(pool);
    // nor garbage records: a record table of nonsense has no record to claim
    file.write_all_at(&vec![0xff; size as usize - 64], 64)
        .unwrap();
    let e = TensorPool::open(&a, &name).unwrap_err();
    assert!(matches!(e, TensorError::TooManyHandles { .. }), "{e}");
    // short and foreign files
    file.set_len(10).unwrap();
    let e = TensorPool::open(&a, &name).unwrap_err();
    assert!(matches!(e, TensorError::Corrupt { .. }), "{e}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).unwrap();
    let e = TensorPool::open(&a, &name).unwrap_err();
    assert!(matches!(e, TensorError::NotPrivate { .. }), "{e}");
    std::fs::remove_file(&path).unwrap();
    let target = format!("{path}_target");
    std::fs::write(&target, b"").unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let e = TensorPool::open(&a, &name).unwrap_err();
    assert!(matches!(e, TensorError::NotPrivate { .. }), "a link: {e}");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&target).unwrap();
}

#[test]
fn the_domains_last_context_removes_its_pools() {
    let a = ctx(968);
    let name = name("cleanup");
    let pool = TensorPool::create(&a, &name, 1, 64).unwrap();
    let path = pool.path().to_string();
    drop(a);
    assert!(
        std::path::Path::new(&path).exists(),
        "the pool holds its context"
    );
    drop(pool);
    assert!(
        !std::path::Path::new(&path).exists(),
        "removed with the domain"
    );
}

#[test]
fn threads_of_two_handles_share_a_pool_without_losing_a_slot() {
    let (a, b) = (ctx(969), ctx(969));
    let name = name("threads");
    let producer = TensorPool::create(&a, &name, 8, 256).unwrap();
    let consumer = TensorPool::open(&b, &name).unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel::<TensorDescriptor>(4);
    let writers: Vec<_> = (0..2u8)
        .map(|k| {
            let (pool, tx) = (producer.clone(), tx.clone());
            std::thread::spawn(move || {
                // the writer keeps its last two tensors, so the reader opens some
                let mut kept = std::collections::VecDeque::new();
                let mut sent = 0;
                while sent < 500 {
                    let mut t = match pool.alloc(&[64], DType::U8) {
                        Ok(t) => t,
                        Err(TensorError::Full { .. }) => {
                            std::thread::yield_now();
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    t.bytes_mut().fill(k);
                    let t = t.freeze();
                    tx.send(t.descriptor()).unwrap();
                    kept.push_back(t);
                    if kept.len() > 2 {
                        kept.pop_front();
                    }
                    sent += 1;
                }
            })
        })
        .collect();
    drop(tx);
    let mut opened = 0;
    for d in rx {
        // the writer's reference may be gone already: then the descriptor is stale
        match consumer.open_tensor(&d) {
            Ok(t) => {
                let k = t.bytes()[0];
                assert!(
                    t.bytes().iter().all(|&x| x == k),
                    "never a torn or reused slot"
                );
                opened += 1;
            }
            Err(TensorError::Stale { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    eprintln!("{opened} of 1000 opened before their writer let go");
    assert_eq!(producer.in_use(), 0, "every slot is back");
    for p in [&producer, &consumer] {
        let counts = p.inner.counts(p.inner.record());
        assert!(counts
            .iter()
            .all(|c| c.load(std::sync::atomic::Ordering::SeqCst) == 0));
    }
    TensorPool::remove(&a, &name).unwrap();
}
