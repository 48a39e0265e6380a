//! Shared-memory inline rings: the cross-process route of small fixed-size messages.
//!
//! Every publisher of such a topic (fixed size of at most [`INLINE_MAX`] bytes, no
//! history) writes one ring file, `/dev/shm/<prefix>ring_<publisher id>`, and every
//! subscriber in another context reads it: header and payload of a CmdVel in one cache
//! line, no loan, no reference count, no queue per connection. iceoryx2 still holds the
//! topic (types, endpoint counts, discovery: a subscriber finds the rings by the
//! publisher ids iceoryx2 lists) but carries no sample of it.
//!
//! Crash safety: the writer holds an open-file-description lock on byte 0 of its file
//! while it lives, and each reader on its entry's byte. A writer killed mid-write leaves
//! an odd version in the slot, which no reader ever accepts; a reader killed is found by
//! its free lock and stops counting for back-pressure. A writer that leaves cleanly marks
//! the ring closed and unlinks the file (readers keep their mapping until they drained
//! it); the file of a killed writer is unlinked by the next subscriber that finds its lock
//! free, by the next node created in the domain ([`remove_orphans`], as iceoryx2 reclaims
//! dead nodes then), or with the domain's other files when the domain empties.
//!
//! Files are created owner-only (0600) under a temporary name and linked into place, and
//! opened without following links; a reader checks owner, mode, size and every header
//! field (the type hash against its own) before it maps a slot: a file that lies is
//! refused, never trusted.

use crate::message::header::SampleHeader;
use crate::sys::files::{check_owner, same_inode, Mapping, OfdLock};
pub(crate) use crate::transport::ring::INLINE_MAX;
use crate::transport::ring::{
    hdr, InlineRing, Layout, Memory, MAGIC, MAX_CAPACITY, WRITER_LOCK_BYTE,
};
use rustix::fs::{Mode, OFlags};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reader entries of a shared ring: the subscribers of other contexts it can serve.
pub(crate) const READERS: usize = 64;

/// The kind part of ring file names (after the domain's prefix).
pub(crate) const FILE_KIND: &str = "ring_";

/// The ring file of publisher `id` for a domain's file `prefix`.
pub(crate) fn path(prefix: &str, id: u64) -> String {
    format!("/dev/shm/{prefix}{FILE_KIND}{id:016x}")
}

/// A writer's ring file: unlinked when dropped.
pub(crate) struct RingFile {
    path: String,
}

impl Drop for RingFile {
    fn drop(&mut self) {
        let _ = rustix::fs::unlink(&self.path);
    }
}

/// Creates the ring of the publisher `template` names at `path` (which must not exist)
/// and takes the writer's lock. The file is complete before it appears under its name.
pub(crate) fn create(
    path: &str,
    capacity: usize,
    payload_bytes: usize,
    back_pressure: bool,
    template: SampleHeader,
) -> io::Result<(InlineRing, RingFile)> {
    let layout = Layout {
        capacity: (capacity as u64).clamp(1, MAX_CAPACITY),
        payload_bytes: payload_bytes.min(INLINE_MAX),
        readers: READERS,
    };
    let bytes = layout.words() * 8;
    let tmp = format!("{path}.{}.tmp", std::process::id());
    let fd = rustix::fs::open(
        &tmp,
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io::Error::other(format!("{tmp}: {e}")))?;
    let tmp_file = RingFile { path: tmp.clone() };
    rustix::fs::ftruncate(&fd, bytes as u64)?;
    let map = Mapping::shared(&fd, bytes)?;
    // the writer's lock: held by this description until the ring is dropped or the
    // process dies
    let Some(lock) = OfdLock::try_take(&fd, WRITER_LOCK_BYTE)? else {
        return Err(io::Error::other(format!(
            "{tmp}: locked by another process"
        )));
    };
    std::mem::forget(lock);
    let ring = InlineRing::in_memory(Memory::Shared { map, fd }, layout, back_pressure, template);
    let set = |i: usize, v: u64| {
        // SYNC: Relaxed: nobody sees the file before it is linked into place below (the
        // link is a system call, ordering these stores for every later opener).
        ring.word(i).store(v, Ordering::Relaxed)
    };
    set(hdr::CAPACITY, layout.capacity);
    set(hdr::PAYLOAD_BYTES, layout.payload_bytes as u64);
    set(hdr::READERS, layout.readers as u64);
    set(hdr::TYPE_HASH, template.type_hash);
    set(hdr::PUBLISHER, template.publisher_id);
    set(hdr::ORIGIN, template.origin);
    set(hdr::BACK_PRESSURE, u64::from(back_pressure));
    set(hdr::CREATED_NS, crate::sys::clock::stamp_ns());
    set(hdr::MAGIC, MAGIC);
    rustix::fs::link(&tmp, path).map_err(|e| io::Error::other(format!("{path}: {e}")))?;
    drop(tmp_file);
    Ok((
        ring,
        RingFile {
            path: path.to_string(),
        },
    ))
}

/// Why a ring file was not opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// No such file (the publisher has no ring, or has gone).
    Missing,
    /// The file exists but cannot be trusted or used: the reason names what is wrong.
    Refused(String),
}

/// Opens the ring at `path` for reading, checking that it is a regular file of this user
/// alone, large enough for the layout its header states, and that the header is sane and
/// carries `type_hash`.
pub(crate) fn open(path: &str, type_hash: u64) -> Result<InlineRing, OpenError> {
    let refused = |why: String| OpenError::Refused(format!("{path}: {why}"));
    let fd = match rustix::fs::open(
        path,
        OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Err(OpenError::Missing),
        Err(e) => return Err(refused(e.to_string())),
    };
    check_owner(&fd).map_err(|e| refused(e.to_string()))?;
    let size = rustix::fs::fstat(&fd)
        .map_err(|e| refused(e.to_string()))?
        .st_size as usize;
    let header_bytes = 16 * 8;
    if size < header_bytes {
        return Err(refused(format!(
            "{size} bytes: shorter than a ring's header"
        )));
    }
    let head_map = Mapping::shared(&fd, header_bytes).map_err(|e| refused(e.to_string()))?;
    // SAFETY: the mapping is page-aligned and `header_bytes` long (the file is at least
    // that long, checked above); AtomicU64 accepts any bytes.
    let words =
        unsafe { std::slice::from_raw_parts(head_map.ptr() as *const AtomicU64, header_bytes / 8) };
    // SYNC: Acquire: the creator wrote the header before linking the file into place.
    let get = |i: usize| words[i].load(Ordering::Acquire);
    if get(hdr::MAGIC) != MAGIC {
        return Err(refused("not a ring of this layout version".into()));
    }
    let layout = Layout {
        capacity: get(hdr::CAPACITY),
        payload_bytes: get(hdr::PAYLOAD_BYTES) as usize,
        readers: get(hdr::READERS) as usize,
    };
    if !(1..=MAX_CAPACITY).contains(&layout.capacity)
        || layout.payload_bytes > INLINE_MAX
        || !(1..=READERS).contains(&layout.readers)
    {
        return Err(refused(format!("impossible layout {layout:?}")));
    }
    if get(hdr::TYPE_HASH) != type_hash {
        return Err(refused(format!(
            "type hash {:#x}, the topic's is {type_hash:#x}",
            get(hdr::TYPE_HASH)
        )));
    }
    let bytes = layout.words() * 8;
    if size < bytes {
        return Err(refused(format!("{size} bytes, its layout needs {bytes}")));
    }
    let template = SampleHeader {
        type_hash,
        publisher_id: get(hdr::PUBLISHER),
        origin: get(hdr::ORIGIN),
        ..SampleHeader::default()
    };
    let back_pressure = get(hdr::BACK_PRESSURE) != 0;
    drop(head_map);
    let map = Mapping::shared(&fd, bytes).map_err(|e| refused(e.to_string()))?;
    Ok(InlineRing::in_memory(
        Memory::Shared { map, fd },
        layout,
        back_pressure,
        template,
    ))
}

/// When the ring was created (stamp clock), from its header.
pub(crate) fn created_ns(ring: &InlineRing) -> u64 {
    // SYNC: Relaxed: written once before the file appeared.
    ring.word(hdr::CREATED_NS).load(Ordering::Relaxed)
}

/// Whether the ring's writer is gone without closing it (killed): its lock is free.
pub(crate) fn writer_died(ring: &InlineRing) -> bool {
    match ring.fd() {
        Some(fd) => matches!(OfdLock::try_take(fd, WRITER_LOCK_BYTE), Ok(Some(_))),
        None => false,
    }
}

/// Unlinks the ring file at `path` if it is still the file `ring` maps (a restarted
/// publisher never has the same id, so this never removes a live writer's file).
pub(crate) fn unlink_if_same(ring: &InlineRing, path: &str) {
    if let Some(fd) = ring.fd() {
        if same_inode(fd, path) {
            let _ = rustix::fs::unlink(path);
        }
    }
}

/// Unlinks the ring files of the domain with file prefix `prefix` whose writers died
/// without closing them (their writer lock is free), and the temporary files of creators
/// that died before linking theirs. Returns how many were removed. Without it, the rings
/// of publishers killed together with all their subscribers would stay until the domain
/// empties, piling up under churn.
pub(crate) fn remove_orphans(prefix: &str) -> usize {
    let kind = format!("{prefix}{FILE_KIND}");
    let mut removed = 0;
    for name in crate::transport::shm::shm_file_names() {
        if !name.starts_with(&kind) {
            continue;
        }
        let path = format!("/dev/shm/{name}");
        let orphan = match name.strip_suffix(".tmp") {
            // `<ring>.<pid>.tmp`: orphaned once its creator is gone (no such process here,
            // and its lock free: a creator in another pid namespace holds it from just
            // after creating the file)
            Some(stem) => {
                stem.rsplit('.')
                    .next()
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
                    && writer_gone(&path)
            }
            None => writer_gone(&path),
        };
        if orphan && rustix::fs::unlink(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether the ring file at `path` is this user's and its writer lock is free (its
/// writer died: a live writer holds it from before the file was linked into place until
/// it unlinks the file). Publisher ids are never reused, so no new writer can take the
/// name between this check and an unlink.
fn writer_gone(path: &str) -> bool {
    let Ok(fd) = rustix::fs::open(
        path,
        OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    ) else {
        return false;
    };
    check_owner(&fd).is_ok()
        && matches!(OfdLock::try_take(&fd, WRITER_LOCK_BYTE), Ok(Some(_)))
        && same_inode(&fd, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::ring::{RingReader, RingWriter, SlotHead};
    use std::sync::Arc;

    fn template() -> SampleHeader {
        SampleHeader {
            type_hash: 0xfeed,
            publisher_id: 7,
            origin: 9,
            ..SampleHeader::default()
        }
    }

    fn head(seq: u64) -> SlotHead {
        SlotHead {
            seq,
            mono_ns: 1,
            wall_ns: 2,
            len: 16,
        }
    }

    fn test_path(name: &str) -> String {
        format!("/dev/shm/nerve_test_ring_{name}_{}", std::process::id())
    }

    #[test]
    fn a_reader_in_another_handle_gets_what_the_writer_wrote() {
        let p = test_path("basic");
        let (ring, file) = create(&p, 4, 16, false, template()).unwrap();
        let w = RingWriter::new(Arc::new(ring));
        let r = Arc::new(open(&p, 0xfeed).unwrap());
        assert_eq!(r.template().publisher_id, 7);
        let reader = RingReader::register(r.clone(), 1, r.head(), 4)
            .unwrap()
            .unwrap();
        let payload: Vec<u8> = (0..16).collect();
        assert!(w.push(head(1), &payload, 0));
        let mut out = [0u64; 2];
        assert_eq!(reader.pop(&mut out), Some(head(1)));
        assert_eq!(crate::transport::shm::words_as_bytes(&out), &payload[..]);
        assert_eq!(r.active_readers(), 1);
        drop(reader);
        assert_eq!(r.active_readers(), 0);
        drop(w);
        assert!(r.is_closed());
        drop(file);
        assert!(matches!(open(&p, 0xfeed), Err(OpenError::Missing)));
    }

    #[test]
    fn rings_of_dead_writers_are_removed_and_live_ones_kept() {
        let prefix = format!("nerve_test_orphans_{}_", std::process::id());
        let live_path = path(&prefix, 1);
        let dead_path = path(&prefix, 2);
        let (_live, _live_file) = create(&live_path, 4, 16, false, template()).unwrap();
        // a writer killed: its lock released with its descriptor, its file left behind
        let (dead, dead_file) = create(&dead_path, 4, 16, false, template()).unwrap();
        std::mem::forget(dead_file);
        drop(dead);
        // a creator killed before linking (no such pid), and one still at work (this one)
        let gone_tmp = format!("{dead_path}.{}.tmp", u32::MAX - 1);
        let busy_tmp = format!("{live_path}.{}.tmp", std::process::id());
        for f in [&gone_tmp, &busy_tmp] {
            std::fs::write(f, b"").unwrap();
            let mut perms = std::fs::metadata(f).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
            std::fs::set_permissions(f, perms).unwrap();
        }
        assert_eq!(remove_orphans(&prefix), 2);
        assert!(
            std::fs::metadata(&live_path).is_ok(),
            "a live writer's ring is kept"
        );
        assert!(
            std::fs::metadata(&busy_tmp).is_ok(),
            "a living creator's file is kept"
        );
        assert!(std::fs::metadata(&dead_path).is_err());
        assert!(std::fs::metadata(&gone_tmp).is_err());
        let _ = std::fs::remove_file(&busy_tmp);
    }

    #[test]
    fn files_that_lie_are_refused_by_name() {
        let p = test_path("lies");
        let (_ring, _file) = create(&p, 4, 16, false, template()).unwrap();
        match open(&p, 0xbeef) {
            Err(OpenError::Refused(why)) => assert!(why.contains("type hash"), "{why}"),
            _ => panic!("a ring of another type must be refused"),
        }
        // a short file
        let q = test_path("short");
        std::fs::write(&q, [0u8; 40]).unwrap();
        let mut perms = std::fs::metadata(&q).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
        std::fs::set_permissions(&q, perms).unwrap();
        match open(&q, 0xfeed) {
            Err(OpenError::Refused(why)) => assert!(why.contains("shorter"), "{why}"),
            _ => panic!("a short file must be refused"),
        }
        // a header claiming more than the file holds
        let mut bytes = vec![0u8; 16 * 8];
        bytes[..8].copy_from_slice(&MAGIC.to_le_bytes());
        bytes[8..16].copy_from_slice(&1000u64.to_le_bytes()); // capacity
        bytes[16..24].copy_from_slice(&16u64.to_le_bytes()); // payload
        bytes[24..32].copy_from_slice(&1u64.to_le_bytes()); // readers
        bytes[32..40].copy_from_slice(&0xfeedu64.to_le_bytes());
        std::fs::write(&q, &bytes).unwrap();
        match open(&q, 0xfeed) {
            Err(OpenError::Refused(why)) => assert!(why.contains("layout needs"), "{why}"),
            _ => panic!("a file shorter than its layout must be refused"),
        }
        let _ = std::fs::remove_file(&q);
    }

    #[test]
    fn a_torn_slot_left_by_a_dead_writer_is_never_read() {
        let p = test_path("torn");
        let (ring, _file) = create(&p, 4, 16, false, template()).unwrap();
        let ring = Arc::new(ring);
        let w = RingWriter::new(ring.clone());
        let r = Arc::new(open(&p, 0xfeed).unwrap());
        let reader = RingReader::register(r, 1, 0, 4).unwrap().unwrap();
        assert!(w.push(head(1), &[1; 16], 0));
        // the writer dies after marking the next slot as being written
        ring.slot_version(1).store(2 + 1, Ordering::Relaxed);
        let mut out = [0u64; 2];
        assert_eq!(reader.pop(&mut out).map(|h| h.seq), Some(1));
        assert_eq!(
            reader.pop(&mut out),
            None,
            "the half-written slot stays unread"
        );
        std::mem::forget(w); // killed: no close
    }

    /// A writer reserving an entry for a subscriber while that subscriber registers on
    /// its own must leave it one entry, never two: a second one would never be read and
    /// would hold a back-pressure writer forever.
    #[test]
    fn a_reservation_racing_a_registration_leaves_one_entry() {
        let p = test_path("race");
        let (ring, _file) = create(&p, 4, 16, true, template()).unwrap();
        let w = RingWriter::new(Arc::new(ring));
        for round in 0..300u64 {
            let id = 1000 + round;
            let r = Arc::new(open(&p, 0xfeed).unwrap());
            // both start together: the reader spins until the writer says go
            let (ready, go) = (AtomicU64::new(0), AtomicU64::new(0));
            let reader = std::thread::scope(|s| {
                let registering = s.spawn(|| {
                    ready.store(1, Ordering::SeqCst);
                    while go.load(Ordering::SeqCst) == 0 {
                        std::hint::spin_loop();
                    }
                    // neither side waits for the claim lock: each tries until it has it
                    loop {
                        if let Ok(reader) = RingReader::register(r.clone(), id, 0, 4) {
                            break reader;
                        }
                    }
                });
                while ready.load(Ordering::SeqCst) == 0 {
                    std::hint::spin_loop();
                }
                go.store(1, Ordering::SeqCst);
                while w.ring().reserve_for(&[(id, 4)], 0).is_none() {}
                registering.join().unwrap().unwrap()
            });
            assert_eq!(
                w.ring().entries_of(id),
                1,
                "round {round}: subscriber {id} holds more than one entry"
            );
            drop(reader);
            // the subscriber left: its reservation (if any) goes too
            assert_eq!(w.ring().reserve_for(&[], 0), Some(0));
            assert_eq!(w.ring().active_readers(), 0);
        }
    }

    #[test]
    fn a_dead_reader_never_holds_back_pressure() {
        let p = test_path("deadreader");
        let (ring, _file) = create(&p, 2, 16, true, template()).unwrap();
        let w = RingWriter::new(Arc::new(ring));
        let soon = || crate::sys::clock::mono_ns() + 2_000_000;
        let r = Arc::new(open(&p, 0xfeed).unwrap());
        let stalled = RingReader::register(r.clone(), 1, 0, 2).unwrap().unwrap();
        assert!(w.push(head(1), &[0; 16], soon()));
        assert!(w.push(head(2), &[0; 16], soon()));
        assert!(
            !w.push(head(3), &[0; 16], soon()),
            "a live, stalled reader holds it"
        );
        // the reader's process dies: the kernel drops its lock, its entry stays active
        let fd = r.fd().unwrap();
        OfdLock::release(fd, crate::transport::ring::reader_lock_byte(0)).unwrap();
        std::mem::forget(stalled);
        assert!(
            w.push(head(3), &[0; 16], soon()),
            "the dead reader no longer counts"
        );
        assert_eq!(r.active_readers(), 0);
    }
}

/// Loom models of what a shared ring adds to the inline ring's protocol (whose `push` and
/// `pop` `transport::ring::loom_models` check): the reader entries. The writer reserves an
/// entry for a subscriber it learnt of (the real `reserve_for` and `claim`) and keeps
/// writing under back-pressure for it, while the subscriber takes the reservation (the
/// real core of `RingReader::register`) and reads. On a heap ring: the file, the claim
/// lock and the entries' locks (open-file-description locks, so the reclaim of dead
/// readers' entries too) stay outside the model; the tests above run them. Run by
/// `scripts/concurrency`.
#[cfg(all(test, nerve_loom))]
mod loom_models {
    use super::*;
    use crate::transport::ring::{RingReader, RingWriter, SlotHead};
    use std::sync::Arc;

    /// The subscriber's id.
    const ID: u64 = 42;

    fn head(seq: u64) -> SlotHead {
        SlotHead {
            seq,
            mono_ns: seq,
            wall_ns: 0,
            len: 8,
        }
    }

    #[test]
    fn a_reserved_subscriber_gets_every_sample_from_its_reservation_on() {
        loom::model(|| {
            let layout = Layout {
                capacity: 2,
                payload_bytes: 8,
                readers: 1,
            };
            let ring = Arc::new(InlineRing::heap(layout, true, SampleHeader::default()));
            let writer = {
                let ring = ring.clone();
                loom::thread::spawn(move || {
                    let w = RingWriter::new(ring.clone());
                    // before anyone subscribed: nobody is owed it
                    assert!(w.push(head(1), &1u64.to_ne_bytes(), u64::MAX));
                    // the subscriber appears (its depth: the whole ring)
                    assert_eq!(ring.reserve_for(&[(ID, 2)], w.head()), Some(1));
                    // one more than the ring holds: back-pressure waits for the reader
                    for seq in 2..=4u64 {
                        assert!(w.push(head(seq), &seq.to_ne_bytes(), u64::MAX));
                    }
                })
            };
            // the subscriber finds the ring and takes its reservation
            let reader = loop {
                match RingReader::take_reservation(&ring, ID, 2, |_| true, |_| {}) {
                    Some(r) => break r,
                    None => loom::thread::yield_now(),
                }
            };
            let mut out = [0u64; 1];
            let mut last = 1;
            while last < 4 {
                match reader.pop(&mut out) {
                    Some(h) => {
                        assert_eq!(h.seq, last + 1, "every sample from the reservation on");
                        assert_eq!(out[0], h.seq, "a whole sample");
                        last = h.seq;
                    }
                    None => loom::thread::yield_now(),
                }
            }
            writer.join().expect("writer");
        });
    }
}
