//! One-way streams between two processes, the method of seeds/001 (CyberRT) and seeds/003
//! (Ouster on ROS 2): a publisher writes the whole payload of every message at a fixed
//! rate, stamps it once written and sends it; a subscriber stamps each arrival. Both ends
//! of every system under test live here; the suites start them as child processes
//! (`nerve bench role <spec>`), each pinned to its own core.
//!
//! Protocol on the child's stdout: `ready` (set up; a publisher also waits for its
//! subscriber), then for a publisher `start` before the first message and `done <n>` after
//! the last; a subscriber prints one JSON line of [`Arrivals`] when it has the last message
//! or its stdin closes. A publisher stays alive until its stdin closes.

use crate::harness::child::{say, stdin_closed};
use crate::harness::machine::{mono_ns, pin_to_cpu, sleep_until};
use crate::harness::PeerError;
use crate::peers::pattern;
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The systems a stream runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamSystem {
    /// Nerve, default wait mode (adaptive).
    NerveAdaptive,
    /// Nerve, predictive wait mode (learns the period).
    NervePredictive,
    /// The floor: the payload in a shared file, a bare futex wake-up per message.
    Floor,
    /// Raw iceoryx2 publish-subscribe woken by an iceoryx2 event (its event-driven path).
    Iceoryx2,
    /// The same, the subscriber spinning on `receive()` for [`IOX_SPIN`] before it waits on
    /// the event listener (a spin-then-block wait, as Nerve's adaptive mode).
    Iceoryx2SpinBlock,
    /// Zenoh publisher/subscriber in peer mode over loopback TCP.
    Zenoh,
    /// The same with Zenoh's shared-memory feature: payloads allocated from its
    /// shared-memory provider, only a reference crosses the socket.
    ZenohShm,
    /// ROS 2: rclpy over Fast DDS, rclpy's default `SingleThreadedExecutor` on both ends
    /// (Python processes, [`crate::peers::rclpy`]; not in [`StreamSystem::ALL`]: the
    /// topic suite starts its ends from the ROS 2 environment).
    Rclpy,
    /// The same with rclpy's `EventsExecutor` on both ends.
    RclpyEvents,
}

impl StreamSystem {
    /// Every system, in report order.
    pub const ALL: [StreamSystem; 7] = [
        StreamSystem::NerveAdaptive,
        StreamSystem::NervePredictive,
        StreamSystem::Floor,
        StreamSystem::Iceoryx2,
        StreamSystem::Iceoryx2SpinBlock,
        StreamSystem::Zenoh,
        StreamSystem::ZenohShm,
    ];

    /// Name on the command line.
    pub fn id(self) -> &'static str {
        match self {
            StreamSystem::NerveAdaptive => "nerve-adaptive",
            StreamSystem::NervePredictive => "nerve-predictive",
            StreamSystem::Floor => "floor",
            StreamSystem::Iceoryx2 => "iceoryx2",
            StreamSystem::Iceoryx2SpinBlock => "iceoryx2-spin-block",
            StreamSystem::Zenoh => "zenoh",
            StreamSystem::ZenohShm => "zenoh-shm",
            StreamSystem::Rclpy => "rclpy-single-threaded",
            StreamSystem::RclpyEvents => "rclpy-events",
        }
    }

    /// The rclpy systems, in report order.
    pub const RCLPY: [StreamSystem; 2] = [StreamSystem::Rclpy, StreamSystem::RclpyEvents];

    /// The rclpy executor, for the rclpy systems.
    pub fn rclpy(self) -> Option<crate::peers::rclpy::Executor> {
        match self {
            StreamSystem::Rclpy => Some(crate::peers::rclpy::Executor::SingleThreaded),
            StreamSystem::RclpyEvents => Some(crate::peers::rclpy::Executor::Events),
            _ => None,
        }
    }

    /// System name in reports.
    pub fn system(self) -> &'static str {
        match self {
            StreamSystem::NerveAdaptive | StreamSystem::NervePredictive => "nerve",
            StreamSystem::Floor => "floor",
            StreamSystem::Iceoryx2 | StreamSystem::Iceoryx2SpinBlock => "iceoryx2",
            StreamSystem::Zenoh | StreamSystem::ZenohShm => "zenoh",
            StreamSystem::Rclpy | StreamSystem::RclpyEvents => "rclpy",
        }
    }

    /// Mode in reports.
    pub fn mode(self) -> &'static str {
        match self {
            StreamSystem::NerveAdaptive => "adaptive",
            StreamSystem::NervePredictive => "predictive",
            StreamSystem::Floor => "futex",
            StreamSystem::Iceoryx2 => "event",
            StreamSystem::Iceoryx2SpinBlock => "spin-then-block",
            StreamSystem::Zenoh => "peer-tcp",
            StreamSystem::ZenohShm => "peer-shm",
            StreamSystem::Rclpy => "single-threaded",
            StreamSystem::RclpyEvents => "events",
        }
    }
}

/// What a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Payload {
    /// Opaque bytes of the stream's size.
    Bytes,
    /// An Ouster-style point cloud (`nerve_msgs::PointCloud`): `columns` x `beams` points
    /// of [`OUSTER_POINT_STEP`] bytes (x, y, z, intensity, t, reflectivity, ring, noise,
    /// range, as the Ouster ROS driver lays them out).
    Lidar {
        /// Points per row (512, 1024, 2048).
        columns: u32,
        /// Rows (16 for OS1-16, 64 for OS1-64).
        beams: u32,
    },
}

/// How long the spin-then-block iceoryx2 subscriber spins on `receive()` before it waits
/// on its event listener: the upper bound of Nerve's adaptive spin window (which adapts
/// between 2 and 200 µs).
pub const IOX_SPIN: Duration = Duration::from_micros(200);

/// Bytes per point of the Ouster layout (PCL-aligned, as the Ouster ROS driver's).
pub const OUSTER_POINT_STEP: usize = 48;

/// Everything one end of a stream needs to know.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StreamSpec {
    /// System under test.
    pub system: StreamSystem,
    /// Topic, file name or port (system specific).
    pub endpoint: String,
    /// Bytes per message (for `Bytes`; a lidar stream's size follows from its mode).
    pub payload_bytes: usize,
    /// Messages per second.
    pub rate_hz: f64,
    /// Messages to send.
    pub count: u64,
    /// What is sent.
    pub payload: Payload,
    /// Nerve domain.
    pub domain: u32,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Reliable delivery (Nerve: back-pressure QoS) instead of sensor QoS (newest wins).
    #[serde(default)]
    pub reliable: bool,
    /// Address a Zenoh publisher listens on and its subscriber connects to (loopback
    /// without one); for streams between simulated hosts.
    #[serde(default)]
    pub listen_ip: Option<String>,
}

impl StreamSpec {
    /// Bytes of one message as it travels.
    pub fn message_bytes(&self) -> usize {
        match self.payload {
            Payload::Bytes => self.payload_bytes,
            Payload::Lidar { columns, beams } => {
                lidar_points(columns, beams) * OUSTER_POINT_STEP
                    + nerve::message::elems_offset::<nerve_msgs::PointCloud>()
            }
        }
    }
}

fn lidar_points(columns: u32, beams: u32) -> usize {
    columns as usize * beams as usize
}

/// What a subscriber saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Arrivals {
    /// One `[seq, publish stamp ns, receive stamp ns]` per message, in arrival order.
    pub arrivals: Vec<[u64; 3]>,
    /// Messages that failed their integrity check (not in `arrivals`).
    pub malformed: u64,
}

/// Which end of a stream a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Sends the messages.
    Publisher,
    /// Receives and stamps them.
    Subscriber,
}

/// Longest wait for the other end to appear.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Receive timeout of one poll (the stop flag is checked between polls).
const POLL: Duration = Duration::from_millis(100);

/// Runs one end of a stream (in a child process started by a suite).
pub fn run_role(role: Role, spec: &StreamSpec) -> Result<(), PeerError> {
    if let Some(cpu) = spec.cpu {
        pin_to_cpu(cpu);
    }
    let stop = stdin_closed();
    match role {
        Role::Publisher => {
            let mut sender = open_sender(spec)?;
            say("ready");
            let period_ns = (1e9 / spec.rate_hz.max(0.001)) as u64;
            let t0 = mono_ns() + 5_000_000;
            say("start");
            for seq in 1..=spec.count {
                sleep_until(t0 + (seq - 1) * period_ns);
                sender(seq)?;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            say(&format!("done {}", spec.count));
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }
        Role::Subscriber => {
            let mut receiver = open_receiver(spec)?;
            say("ready");
            let mut out = Arrivals {
                arrivals: Vec::with_capacity(spec.count.min(1 << 20) as usize),
                malformed: 0,
            };
            while !stop.load(Ordering::Relaxed) {
                match receiver(POLL)? {
                    Some(Ok(a)) => {
                        let last = a[0] >= spec.count;
                        if out.arrivals.len() < (1 << 20) {
                            out.arrivals.push(a);
                        }
                        if last {
                            break;
                        }
                    }
                    Some(Err(())) => out.malformed += 1,
                    None => {}
                }
            }
            let json = serde_json::to_string(&out)
                .map_err(|e| PeerError::call("stream", format!("encode arrivals: {e}")))?;
            say(&json);
            // stay alive (and measurable) until the suite is done with us
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }
    }
}

/// Sends message `seq` (writing its whole payload first).
type Sender = Box<dyn FnMut(u64) -> Result<(), PeerError>>;
/// Waits up to a timeout for the next message: `Ok(None)` on timeout, `Some(Err(()))` for
/// a message that failed its check, else `[seq, stamp, recv]`.
type Receiver = Box<dyn FnMut(Duration) -> Result<Option<Result<[u64; 3], ()>>, PeerError>>;

fn open_sender(spec: &StreamSpec) -> Result<Sender, PeerError> {
    match spec.system {
        StreamSystem::NerveAdaptive | StreamSystem::NervePredictive => nerve_end::sender(spec),
        StreamSystem::Floor => floor::sender(spec),
        StreamSystem::Iceoryx2 | StreamSystem::Iceoryx2SpinBlock => iox::sender(spec),
        StreamSystem::Zenoh => zenoh_end::sender(spec, false),
        StreamSystem::ZenohShm => zenoh_end::sender(spec, true),
        StreamSystem::Rclpy | StreamSystem::RclpyEvents => Err(in_python()),
    }
}

/// The rclpy ends run in Python ([`crate::peers::rclpy`]), not in this process.
fn in_python() -> PeerError {
    PeerError::setup(
        "rclpy",
        "the rclpy ends run in Python (rclpy_bench.py), started by the topic suite",
    )
}

fn open_receiver(spec: &StreamSpec) -> Result<Receiver, PeerError> {
    match spec.system {
        StreamSystem::NerveAdaptive | StreamSystem::NervePredictive => nerve_end::receiver(spec),
        StreamSystem::Floor => floor::receiver(spec),
        StreamSystem::Iceoryx2 => iox::receiver(spec, None),
        StreamSystem::Iceoryx2SpinBlock => iox::receiver(spec, Some(IOX_SPIN)),
        StreamSystem::Zenoh => zenoh_end::receiver(spec, false),
        StreamSystem::ZenohShm => zenoh_end::receiver(spec, true),
        StreamSystem::Rclpy | StreamSystem::RclpyEvents => Err(in_python()),
    }
}

/// Writes `seq` and `stamp` into the first 16 bytes of a payload (systems without a
/// header of their own carry them there).
fn put_stamp(buf: &mut [u8], seq: u64, stamp: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&stamp.to_le_bytes());
}

fn get_stamp(buf: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(buf.get(..8)?.try_into().ok()?);
    let stamp = u64::from_le_bytes(buf.get(8..16)?.try_into().ok()?);
    Some((seq, stamp))
}

/// Writes a synthetic Ouster sweep into `data` (every byte of every point).
pub fn fill_sweep(data: &mut [u8], columns: u32, beams: u32, frame: u64) {
    let cols = columns.max(1) as usize;
    for (i, p) in data.chunks_exact_mut(OUSTER_POINT_STEP).enumerate() {
        let (beam, col) = (i / cols, i % cols);
        let angle = col as f32 * (std::f32::consts::TAU / cols as f32);
        let range_m = 5.0 + ((i as u64 + frame) % 97) as f32 * 0.1;
        let elev = (beam as f32 - beams as f32 / 2.0) * 0.01;
        let fields: [(usize, [u8; 4]); 6] = [
            (0, (range_m * angle.cos()).to_le_bytes()),
            (4, (range_m * angle.sin()).to_le_bytes()),
            (8, (range_m * elev).to_le_bytes()),
            (12, 0u32.to_le_bytes()),
            (16, (range_m * 10.0).to_le_bytes()),
            (20, ((col as u32) * 48_828).to_le_bytes()),
        ];
        for (off, b) in fields {
            p[off..off + 4].copy_from_slice(&b);
        }
        p[24..26].copy_from_slice(&(((i as u64 + frame) % 255) as u16).to_le_bytes());
        p[26..28].copy_from_slice(&(beam as u16).to_le_bytes());
        p[28..30].copy_from_slice(&(((col * 7) % 1024) as u16).to_le_bytes());
        p[30..32].copy_from_slice(&0u16.to_le_bytes());
        p[32..36].copy_from_slice(&((range_m * 1000.0) as u32).to_le_bytes());
        p[36..48].fill(0);
    }
}

/// The point fields of the Ouster layout.
pub fn ouster_fields() -> Vec<nerve_msgs::PointField> {
    use nerve_msgs::datatype::{FLOAT32, UINT16, UINT32};
    use nerve_msgs::PointCloud as P;
    vec![
        P::field("x", 0, FLOAT32, 1),
        P::field("y", 4, FLOAT32, 1),
        P::field("z", 8, FLOAT32, 1),
        P::field("intensity", 16, FLOAT32, 1),
        P::field("t", 20, UINT32, 1),
        P::field("reflectivity", 24, UINT16, 1),
        P::field("ring", 26, UINT16, 1),
        P::field("noise", 28, UINT16, 1),
        P::field("range", 32, UINT32, 1),
    ]
}

mod nerve_end {
    //! Nerve: `nerve_msgs::Bytes` (tag = sequence number) or `nerve_msgs::PointCloud`,
    //! loaned in shared memory at the stream's size and written in place; stamps and
    //! sequence numbers are Nerve's own sample header.
    use super::*;
    use nerve::{Context, Qos, WaitMode};
    use nerve_msgs::srv::Bytes;
    use nerve_msgs::PointCloud;

    const SYSTEM: &str = "nerve";

    fn setup(e: impl std::fmt::Display) -> PeerError {
        PeerError::setup(SYSTEM, e)
    }

    /// The domain of the spec, and otherwise the environment's settings (the network
    /// plane, between simulated hosts).
    fn context(spec: &StreamSpec) -> Result<Context, PeerError> {
        let cfg = nerve::Config::from_env()
            .and_then(|c| c.domain(spec.domain))
            .map_err(setup)?;
        Context::new(cfg).map_err(setup)
    }

    /// Sensor QoS sized for the stream: pools hold whole messages from the start, and a
    /// publisher's pool holds depth + 2 of them (what a subscriber may queue, plus the one
    /// it reads and the one being written).
    fn qos(spec: &StreamSpec) -> Qos {
        let q = if spec.reliable {
            Qos::reliable()
        } else {
            Qos::sensor()
        };
        Qos {
            initial_payload: spec.message_bytes(),
            shm_budget: (q.depth + 2) * spec.message_bytes(),
            ..q
        }
    }

    pub(super) fn sender(spec: &StreamSpec) -> Result<Sender, PeerError> {
        let ctx = context(spec)?;
        let node = ctx.node("bench_stream_pub").create().map_err(setup)?;
        let call = |e: nerve::PublishError| PeerError::call(SYSTEM, e);
        match spec.payload {
            Payload::Bytes => {
                let p = node
                    .publisher::<Bytes>(&spec.endpoint)
                    .qos(qos(spec))
                    .create()
                    .map_err(setup)?;
                if !p.wait_for_subscribers(1, CONNECT_TIMEOUT) {
                    return Err(setup("no subscriber appeared"));
                }
                let elems = spec.payload_bytes.saturating_sub(8);
                Ok(Box::new(move |seq| {
                    let mut loan = p.loan_slice(elems).map_err(|e| call(e.into()))?;
                    loan.tag = seq;
                    pattern::fill(loan.elem_bytes_mut(), seq);
                    loan.send().map_err(call)
                }))
            }
            Payload::Lidar { columns, beams } => {
                let p = node
                    .publisher::<PointCloud>(&spec.endpoint)
                    .qos(qos(spec))
                    .create()
                    .map_err(setup)?;
                if !p.wait_for_subscribers(1, CONNECT_TIMEOUT) {
                    return Err(setup("no subscriber appeared"));
                }
                let points = lidar_points(columns, beams);
                let fields = ouster_fields();
                Ok(Box::new(move |seq| {
                    let mut loan = p
                        .loan_slice(points * OUSTER_POINT_STEP)
                        .map_err(|e| call(e.into()))?;
                    loan.height = beams;
                    loan.width = columns;
                    loan.point_step = OUSTER_POINT_STEP as u32;
                    loan.row_step = OUSTER_POINT_STEP as u32 * columns;
                    loan.is_dense = 1;
                    loan.set_fields(&fields).map_err(setup)?;
                    fill_sweep(loan.elem_bytes_mut(), columns, beams, seq);
                    // the sweep is complete: Nerve stamps it as it is sent
                    loan.send().map_err(call)
                }))
            }
        }
    }

    pub(super) fn receiver(spec: &StreamSpec) -> Result<Receiver, PeerError> {
        let ctx = context(spec)?;
        let node = ctx.node("bench_stream_sub").create().map_err(setup)?;
        let mode = if spec.system == StreamSystem::NervePredictive {
            WaitMode::Predictive
        } else {
            WaitMode::Adaptive
        };
        let recv = |e: nerve::RecvError| PeerError::call(SYSTEM, e);
        match spec.payload {
            Payload::Bytes => {
                let s = node
                    .subscriber::<Bytes>(&spec.endpoint)
                    .qos(qos(spec))
                    .wait_mode(mode)
                    .create()
                    .map_err(setup)?;
                let len = spec.payload_bytes.saturating_sub(8);
                Ok(Box::new(move |timeout| {
                    let Some(m) = s.recv_timeout(timeout).map_err(recv)? else {
                        return Ok(None);
                    };
                    let now = mono_ns();
                    let h = m.header();
                    let ok = m.tag == h.seq && m.elems().len() == len;
                    Ok(Some(if ok {
                        Ok([h.seq, h.publish_mono_ns, now])
                    } else {
                        Err(())
                    }))
                }))
            }
            Payload::Lidar { columns, beams } => {
                let s = node
                    .subscriber::<PointCloud>(&spec.endpoint)
                    .qos(qos(spec))
                    .wait_mode(mode)
                    .create()
                    .map_err(setup)?;
                let len = lidar_points(columns, beams) * OUSTER_POINT_STEP;
                Ok(Box::new(move |timeout| {
                    let Some(m) = s.recv_timeout(timeout).map_err(recv)? else {
                        return Ok(None);
                    };
                    let now = mono_ns();
                    let h = m.header();
                    let ok = m.width == columns && m.height == beams && m.elems().len() == len;
                    Ok(Some(if ok {
                        Ok([h.seq, h.publish_mono_ns, now])
                    } else {
                        Err(())
                    }))
                }))
            }
        }
    }
}

mod floor {
    //! The floor of any event-driven transport: the payload is written into a shared
    //! file, then a sequence word is bumped and the waiter woken with one `FUTEX_WAKE`.
    use super::*;
    use std::sync::atomic::AtomicU32;

    const SYSTEM: &str = "floor";
    /// Header bytes before the payload: futex word, stamp, sequence number.
    const HEAD: usize = 64;

    struct Mapping {
        ptr: *mut u8,
        len: usize,
    }

    impl Mapping {
        fn open(name: &str, len: usize, create: bool) -> Result<Mapping, PeerError> {
            let path = std::ffi::CString::new(format!("/dev/shm/{name}"))
                .map_err(|e| PeerError::setup(SYSTEM, e))?;
            let flags = libc::O_RDWR | libc::O_CLOEXEC | if create { libc::O_CREAT } else { 0 };
            let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
            let fd = loop {
                // SAFETY: path is NUL-terminated; flags and mode are plain integers.
                let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600 as libc::c_uint) };
                if fd >= 0 {
                    break fd;
                }
                if create || std::time::Instant::now() > deadline {
                    return Err(PeerError::setup(
                        SYSTEM,
                        format!("open {name}: {}", std::io::Error::last_os_error()),
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            // SAFETY: fd is open; sizing the file is idempotent for both ends.
            let ok = unsafe { libc::ftruncate(fd, len as libc::off_t) } == 0;
            // SAFETY: mapping len bytes of a file of that size, shared between processes.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            // SAFETY: the mapping (if any) keeps the file alive; fd is no longer needed.
            unsafe { libc::close(fd) };
            if !ok || ptr == libc::MAP_FAILED {
                return Err(PeerError::setup(SYSTEM, std::io::Error::last_os_error()));
            }
            Ok(Mapping {
                ptr: ptr as *mut u8,
                len,
            })
        }

        fn word(&self) -> &AtomicU32 {
            // SAFETY: offset 0 is inside the mapping and 4-aligned (page aligned).
            unsafe { &*(self.ptr as *const AtomicU32) }
        }

        fn head(&self, i: usize) -> &std::sync::atomic::AtomicU64 {
            // SAFETY: offsets 8 and 16 are inside the 64-byte head and 8-aligned.
            unsafe { &*(self.ptr.add(8 * i) as *const std::sync::atomic::AtomicU64) }
        }

        fn payload(&mut self) -> &mut [u8] {
            // SAFETY: the payload lies after the head inside the mapping; &mut self makes
            // this process's view exclusive.
            unsafe { std::slice::from_raw_parts_mut(self.ptr.add(HEAD), self.len - HEAD) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: unmapping what open() mapped.
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        }
    }

    fn futex(word: &AtomicU32, op: i32, val: u32, timeout: Option<&libc::timespec>) {
        // SAFETY: word lives in a shared mapping; FUTEX_WAIT/WAKE (not private) work
        // across processes; the timeout pointer is valid or null.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word as *const AtomicU32,
                op,
                val,
                timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec),
                0,
                0,
            )
        };
    }

    pub(super) fn sender(spec: &StreamSpec) -> Result<Sender, PeerError> {
        let mut m = Mapping::open(&spec.endpoint, HEAD + spec.payload_bytes, false)?;
        Ok(Box::new(move |seq| {
            pattern::fill(m.payload(), seq);
            // SYNC: Release publishes the payload and stamp before the wake-up word.
            m.head(1).store(mono_ns(), Ordering::Release);
            m.head(2).store(seq, Ordering::Release);
            m.word().fetch_add(1, Ordering::Release);
            futex(m.word(), libc::FUTEX_WAKE, i32::MAX as u32, None);
            Ok(())
        }))
    }

    pub(super) fn receiver(spec: &StreamSpec) -> Result<Receiver, PeerError> {
        let m = Mapping::open(&spec.endpoint, HEAD + spec.payload_bytes, true)?;
        let mut seen = m.word().load(Ordering::Acquire);
        Ok(Box::new(move |timeout| {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            futex(m.word(), libc::FUTEX_WAIT, seen, Some(&ts));
            // SYNC: Acquire pairs with the sender's Release on the word.
            let now_word = m.word().load(Ordering::Acquire);
            if now_word == seen {
                return Ok(None);
            }
            let now = mono_ns();
            seen = now_word;
            let stamp = m.head(1).load(Ordering::Acquire);
            let seq = m.head(2).load(Ordering::Acquire);
            Ok(Some(Ok([seq, stamp, now])))
        }))
    }
}

mod iox {
    //! Raw iceoryx2: a `[u64]` publish-subscribe service sized for the stream plus an
    //! event service; the publisher notifies after each send and the subscriber waits on
    //! its listener (iceoryx2's event-driven path), then drains its queue.
    use super::*;
    use iceoryx2::prelude::*;

    const SYSTEM: &str = "iceoryx2";

    fn fail(e: impl std::fmt::Debug) -> PeerError {
        PeerError::setup(SYSTEM, format!("{e:?}"))
    }

    /// File prefix of the raw iceoryx2 runs (so their shared memory can be measured).
    pub(crate) fn prefix(domain: u32) -> String {
        format!("nervebench{domain}_")
    }

    fn node(spec: &StreamSpec) -> Result<iceoryx2::node::Node<ipc::Service>, PeerError> {
        let mut cfg = iceoryx2::config::Config::default();
        cfg.global.prefix = FileName::new(prefix(spec.domain).as_bytes()).map_err(fail)?;
        NodeBuilder::new()
            .config(&cfg)
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<ipc::Service>()
            .map_err(fail)
    }

    type Pubsub =
        iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u64], ()>;
    type Event = iceoryx2::service::port_factory::event::PortFactory<ipc::Service>;

    fn services(
        node: &iceoryx2::node::Node<ipc::Service>,
        spec: &StreamSpec,
    ) -> Result<(Pubsub, Event), PeerError> {
        let name = ServiceName::new(&spec.endpoint).map_err(fail)?;
        let ev = ServiceName::new(&format!("{}/event", spec.endpoint)).map_err(fail)?;
        let pubsub = node
            .service_builder(&name)
            .publish_subscribe::<[u64]>()
            .history_size(0)
            .subscriber_max_buffer_size(4)
            .enable_safe_overflow(true)
            .open_or_create()
            .map_err(fail)?;
        let event = node
            .service_builder(&ev)
            .event()
            .open_or_create()
            .map_err(fail)?;
        Ok((pubsub, event))
    }

    pub(super) fn sender(spec: &StreamSpec) -> Result<Sender, PeerError> {
        let node = node(spec)?;
        let (pubsub, event) = services(&node, spec)?;
        let words = spec.payload_bytes.div_ceil(8);
        let publisher = pubsub
            .publisher_builder()
            .initial_max_slice_len(words)
            .create()
            .map_err(fail)?;
        let notifier = event.notifier_builder().create().map_err(fail)?;
        let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
        while pubsub.dynamic_config().number_of_subscribers() < 1 {
            if std::time::Instant::now() > deadline {
                return Err(fail("no subscriber appeared"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let len = spec.payload_bytes;
        Ok(Box::new(move |seq| {
            let _keep = (&node, &pubsub, &event);
            let s = publisher.loan_slice_uninit(words).map_err(fail)?;
            // SAFETY: shared memory of a mapped file is initialized memory and u64 has no
            // invalid values; every word is overwritten below anyway.
            let mut s = unsafe { s.assume_init() };
            let bytes = words_as_bytes_mut(s.payload_mut());
            pattern::fill(&mut bytes[..len], seq);
            put_stamp(bytes, seq, mono_ns());
            s.send().map_err(fail)?;
            notifier.notify().map_err(fail)?;
            Ok(())
        }))
    }

    fn words_as_bytes_mut(w: &mut [u64]) -> &mut [u8] {
        // SAFETY: the same memory viewed as bytes; u8 has no alignment or validity needs.
        unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, w.len() * 8) }
    }

    /// The subscriber: woken by the listener, or with `spin`, first spinning on `receive()`
    /// for that long (then the notifications of a sample taken while spinning are drained,
    /// so they do not end the next wait at once).
    pub(super) fn receiver(
        spec: &StreamSpec,
        spin: Option<Duration>,
    ) -> Result<Receiver, PeerError> {
        let node = node(spec)?;
        let (pubsub, event) = services(&node, spec)?;
        let sub = pubsub
            .subscriber_builder()
            .buffer_size(4)
            .create()
            .map_err(fail)?;
        let listener = event.listener_builder().create().map_err(fail)?;
        let words = spec.payload_bytes.div_ceil(8);
        Ok(Box::new(move |timeout| {
            let _keep = (&node, &pubsub, &event);
            let take = |s: &iceoryx2::sample::Sample<ipc::Service, [u64], ()>| {
                let now = mono_ns();
                let p = s.payload();
                // SAFETY: reading the received words as bytes (see words_as_bytes_mut).
                let bytes =
                    unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u8, p.len() * 8) };
                match get_stamp(bytes) {
                    Some((seq, stamp)) if p.len() == words => Ok([seq, stamp, now]),
                    _ => Err(()),
                }
            };
            if let Some(window) = spin {
                let until = std::time::Instant::now() + window;
                loop {
                    if let Some(s) = sub.receive().map_err(fail)? {
                        let got = take(&s);
                        listener.try_wait(|_| {}).map_err(fail)?;
                        return Ok(Some(got));
                    }
                    if std::time::Instant::now() >= until {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            loop {
                if let Some(s) = sub.receive().map_err(fail)? {
                    return Ok(Some(take(&s)));
                }
                if listener.timed_wait(|_| {}, timeout).map_err(fail)? == 0 {
                    return Ok(None);
                }
            }
        }))
    }
}

mod zenoh_end {
    //! Zenoh publisher and subscriber in peer mode over loopback TCP (reliable, blocking
    //! congestion control so nothing is dropped). Without shared memory the payload is a
    //! fresh buffer per message (Zenoh takes ownership); with it, the buffer comes from
    //! Zenoh's shared-memory provider (a pool of depth + 2 messages, blocking on garbage
    //! collection when full) and only a reference crosses the socket. The subscriber
    //! stamps in its callback once the payload is contiguous (joined if it came in pieces).
    use super::*;
    use crate::peers::zenoh::loopback_config;
    use zenoh::qos::CongestionControl;
    use zenoh::shm::{BlockOn, GarbageCollect, ShmProviderBuilder};
    use zenoh::Wait;

    const SYSTEM: &str = "zenoh";
    const KEY: &str = "nerve/bench/stream";

    fn fail(e: impl std::fmt::Display) -> PeerError {
        PeerError::setup(SYSTEM, e)
    }

    fn config(listen: &str, connect: &str, shm: bool) -> Result<zenoh::Config, PeerError> {
        let mut cfg = loopback_config(listen, connect)?;
        cfg.insert_json5("transport/shared_memory/enabled", &shm.to_string())
            .map_err(fail)?;
        Ok(cfg)
    }

    /// The publisher's endpoint as a JSON5 list.
    fn endpoint(spec: &StreamSpec) -> Result<String, PeerError> {
        let port: u16 = spec.endpoint.parse().map_err(fail)?;
        let ip = spec.listen_ip.as_deref().unwrap_or("127.0.0.1");
        Ok(format!(r#"["tcp/{ip}:{port}"]"#))
    }

    pub(super) fn sender(spec: &StreamSpec, shm: bool) -> Result<Sender, PeerError> {
        let cfg = config(&endpoint(spec)?, "[]", shm)?;
        let session = zenoh::open(cfg).wait().map_err(fail)?;
        let publisher = session
            .declare_publisher(KEY)
            .congestion_control(CongestionControl::Block)
            .wait()
            .map_err(fail)?;
        let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
        loop {
            let matching = publisher.matching_status().wait().map_err(fail)?.matching();
            if matching {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(fail("no subscriber appeared"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // let the route settle so the first samples are not paying for it
        std::thread::sleep(Duration::from_millis(200));
        let len = spec.payload_bytes;
        let provider = if shm {
            Some(
                ShmProviderBuilder::default_backend(6 * len.max(4096))
                    .wait()
                    .map_err(fail)?,
            )
        } else {
            None
        };
        Ok(Box::new(move |seq| {
            let _keep = &session;
            let call = |e: String| PeerError::call(SYSTEM, e);
            match &provider {
                Some(p) => {
                    let mut buf = p
                        .alloc(len)
                        .with_policy::<BlockOn<GarbageCollect>>()
                        .wait()
                        .map_err(|e| call(format!("shared-memory allocation: {e:?}")))?;
                    pattern::fill(&mut buf, seq);
                    put_stamp(&mut buf, seq, mono_ns());
                    publisher.put(buf).wait().map_err(|e| call(e.to_string()))
                }
                None => {
                    let mut buf = vec![0u8; len];
                    pattern::fill(&mut buf, seq);
                    put_stamp(&mut buf, seq, mono_ns());
                    publisher.put(buf).wait().map_err(|e| call(e.to_string()))
                }
            }
        }))
    }

    pub(super) fn receiver(spec: &StreamSpec, shm: bool) -> Result<Receiver, PeerError> {
        let cfg = config("[]", &endpoint(spec)?, shm)?;
        let session = zenoh::open(cfg).wait().map_err(fail)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<[u64; 3], ()>>(1024);
        let len = spec.payload_bytes;
        let subscriber = session
            .declare_subscriber(KEY)
            .callback(move |sample| {
                // received = the whole payload contiguous in hand, as a Nerve subscriber
                // gets it: a payload in pieces (large messages) is joined first, a
                // contiguous one (always, in shared memory) is read in place
                let bytes = sample.payload().to_bytes();
                let now = mono_ns();
                let a = match get_stamp(&bytes) {
                    Some((seq, stamp)) if bytes.len() == len => Ok([seq, stamp, now]),
                    _ => Err(()),
                };
                let _ = tx.try_send(a);
            })
            .wait()
            .map_err(fail)?;
        Ok(Box::new(move |timeout| {
            let _keep = (&session, &subscriber);
            match rx.recv_timeout(timeout) {
                Ok(a) => Ok(Some(a)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(None),
                Err(e) => Err(PeerError::call(SYSTEM, e)),
            }
        }))
    }
}

/// File prefix of the raw iceoryx2 runs in `domain` (to measure their shared memory).
pub fn iceoryx2_prefix(domain: u32) -> String {
    iox::prefix(domain)
}

/// Removes what raw iceoryx2 peers of `domain` left in /dev/shm once they are gone:
/// iceoryx2 keeps its per-prefix node counter (`…global_mgmt`) after its last node, so
/// every run would leave one behind.
pub fn remove_iceoryx2_leftovers(domain: u32) {
    crate::harness::machine::remove_shm_files(&iceoryx2_prefix(domain));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_short_buffers_are_refused() {
        let mut b = vec![0u8; 32];
        put_stamp(&mut b, 7, 123_456);
        assert_eq!(get_stamp(&b), Some((7, 123_456)));
        assert_eq!(get_stamp(&b[..10]), None);
    }

    #[test]
    fn sweep_fills_every_point_with_the_ouster_layout() {
        let (cols, beams) = (16u32, 4u32);
        let mut data = vec![0xEEu8; lidar_points(cols, beams) * OUSTER_POINT_STEP];
        fill_sweep(&mut data, cols, beams, 3);
        for (i, p) in data.chunks_exact(OUSTER_POINT_STEP).enumerate() {
            let ring = u16::from_le_bytes([p[26], p[27]]);
            assert_eq!(ring as usize, i / cols as usize);
            let range = u32::from_le_bytes([p[32], p[33], p[34], p[35]]);
            assert!(range >= 5000, "point {i} range {range}");
            assert!(p[36..].iter().all(|&b| b == 0));
        }
        assert_eq!(ouster_fields().len(), 9);
        let spec = StreamSpec {
            system: StreamSystem::NerveAdaptive,
            endpoint: "/x".into(),
            payload_bytes: 0,
            rate_hz: 10.0,
            count: 1,
            payload: Payload::Lidar {
                columns: 2048,
                beams: 64,
            },
            domain: 0,
            cpu: None,
            reliable: false,
            listen_ip: None,
        };
        assert!(spec.message_bytes() > 2048 * 64 * 48);
    }
}
