//! Figures published elsewhere, in one place: the seed reports (`seeds/000` … `seeds/004`),
//! what other tools measured with their own harness on this machine kind (`ANCHORS.md`) and
//! other projects' issues. Nothing here is measured by `nerve bench`. Suites show these
//! figures beside their own rows and take any threshold that names another tool's figure
//! from here; the report lists every one of them in one labelled table ([`figures`],
//! "Published figures (not measured here)").

use serde::Serialize;

/// Where a group of figures comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The seed report (`"000"` … `"004"`) whose method the figures belong to, if any.
    pub seed: Option<&'static str>,
    /// The system measured, with its version where the source gives one.
    pub system: &'static str,
    /// The document, section or thread the figures are taken from, and its hardware.
    pub reference: &'static str,
}

/// seeds/000: Segar's service round trips.
pub const SEGAR: Source = Source {
    seed: Some("000"),
    system: "Segar 2.0.0",
    reference: "seeds/000 §4, per-payload tables (28-core x86, Ubuntu 22.04)",
};

/// seeds/000: ROS 2's service round trips.
pub const ROS2_SERVICE: Source = Source {
    seed: Some("000"),
    system: "ROS 2 Humble",
    reference: "seeds/000 §4, per-payload tables (28-core x86, Ubuntu 22.04)",
};

/// The service figures of seeds/000, in the order of [`SEED_000`]'s arrays.
pub const SEED_000_METRICS: [(&str, &str); 6] = [
    ("TPS", "calls/s"),
    ("RTT mean", "µs"),
    ("RTT P50", "µs"),
    ("RTT P90", "µs"),
    ("RTT P99", "µs"),
    ("RTT max", "µs"),
];

/// One system's figures at one payload of seeds/000: TPS, then mean, P50, P90, P99 and max
/// round trip in µs ([`SEED_000_METRICS`]); `None` where the seed gives none.
pub type ServiceFigures = [Option<f64>; 6];

/// seeds/000 by payload: Segar's figures, then ROS 2's.
pub const SEED_000: [(usize, ServiceFigures, ServiceFigures); 7] = [
    (
        256,
        [
            Some(10342.9),
            Some(95.6),
            None,
            None,
            Some(277.7),
            Some(1378.0),
        ],
        [Some(10850.0), Some(91.2), None, None, None, Some(1150.0)],
    ),
    (
        1024,
        [
            Some(11202.6),
            Some(87.9),
            None,
            None,
            Some(237.1),
            Some(1393.8),
        ],
        [Some(10200.0), Some(96.5), None, None, None, Some(1280.0)],
    ),
    (
        4096,
        [
            Some(16210.0),
            Some(58.9),
            None,
            None,
            Some(127.4),
            Some(1279.8),
        ],
        [Some(9200.0), Some(108.3), None, None, None, Some(1520.0)],
    ),
    (
        16384,
        [
            Some(21075.8),
            Some(42.8),
            Some(38.5),
            Some(52.5),
            Some(100.6),
            Some(263.6),
        ],
        [
            Some(8517.0),
            Some(108.1),
            Some(107.6),
            Some(144.2),
            None,
            Some(1850.0),
        ],
    ),
    (
        65536,
        [
            Some(6864.8),
            Some(117.7),
            Some(120.2),
            Some(158.9),
            Some(235.1),
            Some(622.9),
        ],
        [
            Some(4395.0),
            Some(196.3),
            Some(188.5),
            Some(265.9),
            None,
            Some(3850.0),
        ],
    ),
    (
        262144,
        [
            Some(2714.5),
            Some(268.3),
            Some(267.0),
            Some(400.7),
            Some(515.6),
            Some(1284.7),
        ],
        [
            Some(2069.0),
            Some(399.0),
            Some(380.0),
            Some(558.0),
            Some(824.0),
            Some(8240.0),
        ],
    ),
    (
        1048576,
        [
            Some(961.7),
            Some(715.0),
            Some(626.3),
            Some(1077.8),
            Some(1386.9),
            Some(3059.5),
        ],
        [
            Some(116.0),
            Some(8076.0),
            Some(2805.0),
            Some(22185.0),
            Some(25429.0),
            Some(43959.0),
        ],
    ),
];

/// seeds/000 at one payload: (Segar's, ROS 2's) figures ([`SEED_000_METRICS`]).
pub fn seed_000(payload_bytes: usize) -> Option<(ServiceFigures, ServiceFigures)> {
    SEED_000
        .iter()
        .find(|s| s.0 == payload_bytes)
        .map(|s| (s.1, s.2))
}

/// seeds/001: CyberRT's cross-process scenarios.
pub const CYBERRT: Source = Source {
    seed: Some("001"),
    system: "CyberRT (Apollo 10.0)",
    reference: "seeds/001, scenarios for cross-process transfers, platform 1 (i9-9900K)",
};

/// seeds/001: CyberRT's cross-machine scenarios.
pub const CYBERRT_CROSS_MACHINE: Source = Source {
    seed: Some("001"),
    system: "CyberRT (Apollo 10.0, Fast DDS 2.x)",
    reference: "seeds/001, scenarios for cross-machine transfers, platform 1 (i9-9900K, \
                real network)",
};

/// One of CyberRT's scenarios as seeds/001 publishes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CyberRtScenario {
    /// Scenario name.
    pub name: &'static str,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Messages per second.
    pub rate_hz: u32,
    /// CPU usage, %.
    pub cpu_percent: f64,
    /// Mean latency, µs.
    pub latency_us: f64,
    /// Message loss, %.
    pub loss_percent: f64,
    /// Memory usage, MB.
    pub memory_mb: f64,
    /// Arena shared memory configured on top, MB.
    pub arena_mb: Option<f64>,
}

impl CyberRtScenario {
    /// Memory as the seed states it, e.g. "250 MB + 1024 MB arena".
    pub fn memory(&self) -> String {
        match self.arena_mb {
            Some(a) => format!("{} MB + {a} MB arena", self.memory_mb),
            None => format!("{} MB", self.memory_mb),
        }
    }
}

/// CyberRT's cross-process scenarios ([`CYBERRT`]).
pub const CYBERRT_SCENARIOS: [CyberRtScenario; 4] = [
    CyberRtScenario {
        name: "functional module",
        payload_bytes: 64 * 1024,
        rate_hz: 10,
        cpu_percent: 9.14,
        latency_us: 84.6,
        loss_percent: 0.0,
        memory_mb: 250.0,
        arena_mb: None,
    },
    CyberRtScenario {
        name: "localization",
        payload_bytes: 64 * 1024,
        rate_hz: 100,
        cpu_percent: 9.71,
        latency_us: 69.54,
        loss_percent: 0.0,
        memory_mb: 250.0,
        arena_mb: Some(1024.0),
    },
    CyberRtScenario {
        name: "normal sensor",
        payload_bytes: 1 << 20,
        rate_hz: 10,
        cpu_percent: 8.47,
        latency_us: 82.29,
        loss_percent: 0.0,
        memory_mb: 250.0,
        arena_mb: Some(1024.0),
    },
    CyberRtScenario {
        name: "high-end sensor",
        payload_bytes: 10 << 20,
        rate_hz: 10,
        cpu_percent: 5.55,
        latency_us: 58.95,
        loss_percent: 0.0,
        memory_mb: 250.0,
        arena_mb: Some(1024.0),
    },
];

/// CyberRT's cross-machine scenarios ([`CYBERRT_CROSS_MACHINE`]): name, size, rate,
/// mean latency in µs.
pub const CYBERRT_CROSS: [(&str, usize, u32, f64); 4] = [
    ("functional module", 64 * 1024, 10, 391.0),
    ("localization", 64 * 1024, 100, 369.0),
    ("normal sensor", 1 << 20, 10, 2124.0),
    ("high-end sensor", 10 << 20, 10, 18886.0),
];

/// seeds/002: ros_transitions' one-shot timer benchmark.
pub const ROS_TRANSITIONS: Source = Source {
    seed: Some("002"),
    system: "ros_transitions (ROS 2 Humble)",
    reference: "seeds/002, results of commit 123f588 (Intel Xeon W-2135, Linux 5.15)",
};

/// One run of seeds/002.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimerRun {
    /// Requested timeout, ms.
    pub timeout_ms: u32,
    /// Measured intervals.
    pub n: u32,
    /// Largest δ, ms.
    pub max_ms: f64,
    /// Smallest δ, ms.
    pub min_ms: f64,
    /// Mean δ, ms.
    pub mean_ms: f64,
}

/// Every run of seeds/002, in the seed's order ([`ROS_TRANSITIONS`]).
pub const SEED_002: [TimerRun; 6] = [
    timer_run(10, 3.866, 0.007, 1.042),
    timer_run(100, 2.844, 0.018, 1.208),
    timer_run(5, 1.947, 0.062, 0.995),
    timer_run(10, 2.15, 0.59, 1.28),
    timer_run(10, 3.29, 0.00, 1.20),
    timer_run(10, 2.16, 0.13, 1.24),
];

const fn timer_run(timeout_ms: u32, max_ms: f64, min_ms: f64, mean_ms: f64) -> TimerRun {
    TimerRun {
        timeout_ms,
        n: 1000,
        max_ms,
        min_ms,
        mean_ms,
    }
}

/// seeds/003: the Ouster driver on ROS 2.
pub const OUSTER_ROS2: Source = Source {
    seed: Some("003"),
    system: "Ouster OS1 driver on ROS 2",
    reference: "seeds/003, test cases 1-5 (Thinkpad T480, Ubuntu 18.04, 5.3 low-latency \
                kernel)",
};

/// One test case of seeds/003 (ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LidarCase {
    /// The seed's test case and its setting.
    pub case: &'static str,
    /// Lidar columns (mode `<columns>x10`).
    pub columns: u32,
    /// End-to-end latency, median, ms.
    pub e2e_median_ms: f64,
    /// End-to-end latency, median absolute deviation, ms.
    pub e2e_mad_ms: f64,
    /// Inter-arrival of `recv_stamp`, median, ms.
    pub recv_jitter_median_ms: f64,
    /// Inter-arrival of `recv_stamp`, median absolute deviation, ms.
    pub recv_jitter_mad_ms: f64,
}

/// The test cases of seeds/003 ([`OUSTER_ROS2`]).
pub const SEED_003: [LidarCase; 5] = [
    lidar_case("test 1 (default)", 2048, 1455.07, 39.69, 128.17, 14.01),
    lidar_case("test 2", 512, 132.09, 0.327, 99.99, 0.46),
    lidar_case("test 3", 1024, 131.48, 7.144, 100.2, 12.6),
    lidar_case("test 4", 1024, 26.97, 7.145, 101.39, 13.55),
    lidar_case("test 5 (tuned)", 1024, 18.16, 4.256, 100.10, 6.44),
];

const fn lidar_case(
    case: &'static str,
    columns: u32,
    e2e_median_ms: f64,
    e2e_mad_ms: f64,
    recv_jitter_median_ms: f64,
    recv_jitter_mad_ms: f64,
) -> LidarCase {
    LidarCase {
        case,
        columns,
        e2e_median_ms,
        e2e_mad_ms,
        recv_jitter_median_ms,
        recv_jitter_mad_ms,
    }
}

/// The case of seeds/003 the summary compares with: 1024x10 stamped at reception with
/// the seed's tuned middleware settings.
pub const SEED_003_TUNED: LidarCase = SEED_003[4];

/// seeds/004: HORUS's all-routes latency.
pub const HORUS: Source = Source {
    seed: Some("004"),
    system: "HORUS",
    reference: "seeds/004, All-Routes Latency (other hardware, cycle-counter timed)",
};

/// HORUS's latency by route as seeds/004 publishes it: route, topology, ns.
pub const SEED_004: [(&str, &str, f64); 5] = [
    ("same-thread", "1:1", 16.0),
    ("cross-thread", "1:1", 11.0),
    ("cross-process", "1:1", 182.0),
    ("cross-process", "N:1", 244.0),
    ("cross-process", "N:N", 187.0),
];

/// HORUS's load figures per message type as seeds/004 publishes them ([`HORUS`]):
/// message, send-only latency N:N and 1:1 in ns (one direction, no receive; "~"
/// figures, the 1:1 ones partly "estimated" by the seed), throughput N:N in messages/s.
pub const SEED_004_LOAD: [(&str, f64, f64, f64); 7] = [
    ("CmdVel", 313.0, 87.0, 2_700_000.0),
    ("BatteryState", 600.0, 350.0, 1_670_000.0),
    ("Imu", 940.0, 400.0, 1_800_000.0),
    ("Odometry", 1_100.0, 600.0, 1_300_000.0),
    ("LaserScan", 2_200.0, 900.0, 633_000.0),
    ("PointCloud1K", 12_000.0, f64::NAN, 83_000.0),
    ("PointCloud10K", 360_000.0, 120_000.0, 4_700.0),
];

/// HORUS's mixed robot loop (CmdVel and Imu at 100 Hz, BatteryState at 1 Hz, run flat
/// out): average latency N:N in ns and throughput in messages/s ([`HORUS`]).
pub const SEED_004_MIXED: (f64, f64) = (1_000.0, 1_500_000.0);

/// HORUS's own benchmark run by us on this machine kind (not in this run).
pub const HORUS_HERE: Source = Source {
    seed: Some("004"),
    system: "HORUS",
    reference: "ANCHORS.md: its own all_paths_latency on this machine kind (2 vCPU KVM), \
                cycle-counter timed, after its outlier filter, patched to pin on 2 vCPUs",
};

/// HORUS CmdVel cross-process one-way P50 in ns, from its own filtered run on this machine
/// kind ([`HORUS_HERE`]; 74 ns in another run).
pub const HORUS_HERE_CROSS_PROCESS_P50_NS: f64 = 180.0;

/// rosbag2's recording throughput issue.
pub const ROSBAG2_RECORDING: Source = Source {
    seed: None,
    system: "rosbag2 (ROS 2 Humble)",
    reference: "ros2/rosbag2#1787 (i9-13900, NVMe)",
};

/// rosbag2 recording caps (MCAP or SQLite, compressed or not), MB/s, low and high end
/// ([`ROSBAG2_RECORDING`]).
pub const ROSBAG2_RECORD_MB_S: (f64, f64) = (110.0, 120.0);

/// The same disk's write speed measured by dd/fio in that issue, MB/s.
pub const ROSBAG2_DISK_MB_S: f64 = 620.0;

/// One published figure, labelled: a row of the report's table of published figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// The seed report whose method it belongs to, if any.
    pub seed: Option<&'static str>,
    /// The system measured.
    pub system: &'static str,
    /// What was measured, and where (payload, rate, route, timeout).
    pub what: String,
    /// The value as published (the low end of a published range).
    pub value: f64,
    /// The high end, where the source publishes a range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<f64>,
    /// Unit of `value`.
    pub unit: &'static str,
    /// Where it is published, and on what hardware.
    pub source: &'static str,
}

impl Figure {
    fn new(src: &Source, what: String, value: f64, unit: &'static str) -> Figure {
        Figure {
            seed: src.seed,
            system: src.system,
            what,
            value,
            to: None,
            unit,
            source: src.reference,
        }
    }
}

fn size(bytes: usize) -> String {
    crate::report::human_bytes(bytes)
}

/// Every published figure, labelled with its seed, system, unit and source.
pub fn figures() -> Vec<Figure> {
    let mut out = Vec::new();
    for (payload, segar, ros) in SEED_000 {
        for (src, values) in [(&SEGAR, segar), (&ROS2_SERVICE, ros)] {
            for ((what, unit), v) in SEED_000_METRICS.iter().zip(values) {
                if let Some(v) = v {
                    out.push(Figure::new(
                        src,
                        format!("{what}, {}", size(payload)),
                        v,
                        unit,
                    ));
                }
            }
        }
    }
    for s in CYBERRT_SCENARIOS {
        let at = format!("{} ({} @ {} Hz)", s.name, size(s.payload_bytes), s.rate_hz);
        out.push(Figure::new(
            &CYBERRT,
            format!("latency mean, {at}"),
            s.latency_us,
            "µs",
        ));
        out.push(Figure::new(
            &CYBERRT,
            format!("CPU, {at}"),
            s.cpu_percent,
            "%",
        ));
        out.push(Figure::new(
            &CYBERRT,
            format!("message loss, {at}"),
            s.loss_percent,
            "%",
        ));
        let arena = s.arena_mb.map_or(String::new(), |a| {
            format!(" (plus {a} MB arena shared memory)")
        });
        out.push(Figure::new(
            &CYBERRT,
            format!("memory, {at}{arena}"),
            s.memory_mb,
            "MB",
        ));
    }
    for (name, bytes, rate, latency) in CYBERRT_CROSS {
        out.push(Figure::new(
            &CYBERRT_CROSS_MACHINE,
            format!("latency mean, {name} ({} @ {rate} Hz)", size(bytes)),
            latency,
            "µs",
        ));
    }
    for (i, r) in SEED_002.iter().enumerate() {
        let at = format!("{} ms timeout, run {} (N = {})", r.timeout_ms, i + 1, r.n);
        for (what, v) in [
            ("δ min", r.min_ms),
            ("δ mean", r.mean_ms),
            ("δ max", r.max_ms),
        ] {
            out.push(Figure::new(
                &ROS_TRANSITIONS,
                format!("{what}, {at}"),
                v,
                "ms",
            ));
        }
    }
    for c in SEED_003 {
        let at = format!("{}x10, {}", c.columns, c.case);
        for (what, v) in [
            ("e2e latency median", c.e2e_median_ms),
            ("e2e latency MAD", c.e2e_mad_ms),
            ("recv_stamp jitter median", c.recv_jitter_median_ms),
            ("recv_stamp jitter MAD", c.recv_jitter_mad_ms),
        ] {
            out.push(Figure::new(&OUSTER_ROS2, format!("{what}, {at}"), v, "ms"));
        }
    }
    for (route, topology, ns) in SEED_004 {
        out.push(Figure::new(
            &HORUS,
            format!("latency, {route} {topology}"),
            ns,
            "ns",
        ));
    }
    for (message, nn_ns, one_ns, msgs) in SEED_004_LOAD {
        out.push(Figure::new(
            &HORUS,
            format!("send-only latency, {message} N:N"),
            nn_ns,
            "ns",
        ));
        if one_ns.is_finite() {
            out.push(Figure::new(
                &HORUS,
                format!("send-only latency, {message} 1:1"),
                one_ns,
                "ns",
            ));
        }
        out.push(Figure::new(
            &HORUS,
            format!("throughput, {message} N:N"),
            msgs,
            "msg/s",
        ));
    }
    let (mixed_ns, mixed_msgs) = SEED_004_MIXED;
    out.push(Figure::new(
        &HORUS,
        "mixed robot loop, average latency N:N".into(),
        mixed_ns,
        "ns",
    ));
    out.push(Figure::new(
        &HORUS,
        "mixed robot loop, throughput".into(),
        mixed_msgs,
        "msg/s",
    ));
    out.push(Figure::new(
        &HORUS_HERE,
        "one-way P50, CmdVel cross-process 1:1".into(),
        HORUS_HERE_CROSS_PROCESS_P50_NS,
        "ns",
    ));
    let (lo, hi) = ROSBAG2_RECORD_MB_S;
    out.push(Figure {
        to: Some(hi),
        ..Figure::new(
            &ROSBAG2_RECORDING,
            "recording throughput cap (MCAP or SQLite, compressed or not)".into(),
            lo,
            "MB/s",
        )
    });
    out.push(Figure::new(
        &ROSBAG2_RECORDING,
        "the same disk written by dd/fio".into(),
        ROSBAG2_DISK_MB_S,
        "MB/s",
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_is_labelled_and_finite() {
        let all = figures();
        // 36 + 31 service figures of seeds/000, 16 + 4 of seeds/001, 18 of 002, 20 of
        // 003, 5 routes + 20 load + 2 mixed + 1 run here of 004, 2 of rosbag2
        assert_eq!(all.len(), 155);
        for f in &all {
            assert!(f.value.is_finite() && !f.what.is_empty() && !f.unit.is_empty());
            assert!(!f.source.is_empty() && !f.system.is_empty());
        }
        let ros_1mib = all
            .iter()
            .find(|f| f.system == "ROS 2 Humble" && f.what == "TPS, 1 MiB")
            .unwrap();
        assert_eq!((ros_1mib.value, ros_1mib.seed), (116.0, Some("000")));
        let rosbag = all.iter().find(|f| f.unit == "MB/s").unwrap();
        assert_eq!(
            (rosbag.value, rosbag.to, rosbag.seed),
            (110.0, Some(120.0), None)
        );
    }

    #[test]
    fn seed_000_is_found_by_payload() {
        let (segar, ros) = seed_000(1 << 20).unwrap();
        assert_eq!((segar[0], ros[1]), (Some(961.7), Some(8076.0)));
        assert!(seed_000(64).is_none());
    }
}
