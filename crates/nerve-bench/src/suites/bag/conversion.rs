//! What the recorder's conversion to CDR costs per message type, beside the copy out of
//! shared memory that recording pays anyway (part of `nerve bench bag`).
//!
//! For each type, one payload (pseudo-random elements) is converted by the encoding the
//! recorder uses (`nerve_bag::encoding::Encoding`) and copied into a reused buffer, in
//! alternating batches; the table gives the median batch of each per message and their
//! ratio. Types whose layout already is CDR (`zero conversion`) should cost a copy.

use crate::report::{num, Section, Verdict};
use nerve::message::schema::Schema;
use nerve::{Message, TypeInfo};
use nerve_bag::encoding::Encoding;
use nerve_msgs::{BatteryState, Clock, CmdVel, Image, Imu, LaserScan, Odometry, PointCloud, Twist};
use serde::Serialize;
use std::time::Instant;

/// One type's conversion cost.
#[derive(Clone, Debug, Serialize)]
pub struct ConversionRow {
    /// Suite name (`bag`).
    pub suite: &'static str,
    /// Row kind (`conversion`).
    pub kind: &'static str,
    /// The message, with its size where it varies.
    pub message: String,
    /// Its ROS 2 (or generated) type in a bag.
    pub schema_name: String,
    /// Whether the payload is written as it is laid out (no field is touched).
    pub zero_conversion: bool,
    /// Payload bytes (Nerve) and CDR bytes.
    pub payload_bytes: usize,
    /// CDR bytes written per message.
    pub cdr_bytes: usize,
    /// Median batch, ns per message: conversion.
    pub convert_ns: f64,
    /// Median batch, ns per message: a plain copy of the payload.
    pub copy_ns: f64,
    /// `convert_ns / copy_ns`.
    pub ratio: f64,
}

fn payload<M: Message>(elems: usize) -> Vec<u8> {
    let ty = TypeInfo::of::<M>();
    let len = if ty.is_slice() {
        ty.elems_offset() + elems * ty.elem_size
    } else {
        ty.head_size
    };
    let mut p = vec![0u8; len];
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ len as u64;
    for b in p[ty.head_size..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    p
}

fn measure(
    message: String,
    schema: Schema,
    payload: Vec<u8>,
    budget_ms: u64,
) -> Option<ConversionRow> {
    let enc = Encoding::for_schema(&schema).ok()?;
    let mut out = Vec::with_capacity(payload.len() + 4096);
    enc.encode(&payload, &mut out).ok()?;
    let cdr_bytes = out.len();
    // iterations per batch: about 1 ms of copying, at least one
    let t = Instant::now();
    out.clear();
    out.extend_from_slice(&payload);
    let one = t.elapsed().as_nanos().max(1) as u64;
    let per_batch = (1_000_000 / one).clamp(1, 100_000);
    let (mut conv, mut copy) = (Vec::new(), Vec::new());
    let end = Instant::now() + std::time::Duration::from_millis(budget_ms);
    while conv.len() < 5 || (Instant::now() < end && conv.len() < 1001) {
        let t = Instant::now();
        for _ in 0..per_batch {
            enc.encode(std::hint::black_box(&payload), &mut out).ok()?;
            std::hint::black_box(&out);
        }
        conv.push(t.elapsed().as_nanos() as f64 / per_batch as f64);
        let t = Instant::now();
        for _ in 0..per_batch {
            out.clear();
            out.extend_from_slice(std::hint::black_box(&payload));
            std::hint::black_box(&out);
        }
        copy.push(t.elapsed().as_nanos() as f64 / per_batch as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (convert_ns, copy_ns) = (median(&mut conv), median(&mut copy));
    Some(ConversionRow {
        suite: "bag",
        kind: "conversion",
        message,
        schema_name: enc.schema_name.clone(),
        zero_conversion: enc.is_zero_conversion(),
        payload_bytes: payload.len(),
        cdr_bytes,
        convert_ns,
        copy_ns,
        ratio: convert_ns / copy_ns.max(0.001),
    })
}

/// Measures every standard message (and `Twist`, recorded without conversion) for about
/// `budget_ms` each.
pub fn run(budget_ms: u64) -> Vec<ConversionRow> {
    let ouster = 1024 * 64; // points of a 1024x10 OS1-64 frame, 48 B each
    [
        (
            "Twist".to_string(),
            Schema::of::<Twist>(),
            payload::<Twist>(0),
        ),
        (
            "CmdVel".into(),
            Schema::of::<CmdVel>(),
            payload::<CmdVel>(0),
        ),
        ("Clock".into(), Schema::of::<Clock>(), payload::<Clock>(0)),
        ("Imu".into(), Schema::of::<Imu>(), payload::<Imu>(0)),
        (
            "Odometry".into(),
            Schema::of::<Odometry>(),
            payload::<Odometry>(0),
        ),
        (
            "BatteryState".into(),
            Schema::of::<BatteryState>(),
            payload::<BatteryState>(0),
        ),
        (
            "LaserScan 1,080 ranges".into(),
            Schema::of::<LaserScan>(),
            payload::<LaserScan>(1080),
        ),
        (
            "PointCloud 1024x64, 48 B points".into(),
            Schema::of::<PointCloud>(),
            payload::<PointCloud>(ouster * 48),
        ),
        (
            "Image 640x480 rgb8".into(),
            Schema::of::<Image>(),
            payload::<Image>(640 * 480 * 3),
        ),
    ]
    .into_iter()
    .filter_map(|(m, s, p)| measure(m, s, p, budget_ms))
    .collect()
}

/// The conversion table and its check (zero-conversion types cost a copy plus the fixed
/// CDR header).
pub fn section(s: &mut Section, rows: &[ConversionRow], checks: &mut Vec<Verdict>) {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.message.clone(),
                r.schema_name.clone(),
                if r.zero_conversion { "yes" } else { "no" }.into(),
                r.payload_bytes.to_string(),
                r.cdr_bytes.to_string(),
                num(r.convert_ns),
                num(r.copy_ns),
                format!("{:.2}", r.ratio),
            ]
        })
        .collect();
    s.table(
        Some("Conversion to the recorded encoding, per message (median batch)"),
        &[
            "message",
            "in the bag",
            "zero conversion",
            "payload B",
            "CDR B",
            "convert ns",
            "copy ns",
            "convert / copy",
        ],
        &table,
    );
    s.paragraph(
        "Recording copies each payload out of shared memory once; `copy` is that copy \
         alone, `convert` is the copy the recorder makes instead (CDR). Zero conversion: \
         the Nerve layout is already CDR, so the payload is written as it is behind a \
         4-byte header. The others walk their fields (stamps become sec/nanosec, CmdVel's \
         f32 become a TwistStamped's f64, strings and sequences get lengths); their large \
         arrays are copied whole.",
    );
    // the CDR header (4 bytes) and the length check are a fixed cost of a few ns; what
    // must not be paid is a walk over the fields
    for r in rows.iter().filter(|r| r.zero_conversion) {
        checks.push(Verdict::new(
            "bag",
            "zero-conversion types cost a copy: convert <= 1.25x copy + 10 ns (ns over that)",
            r.message.clone(),
            Some(r.convert_ns - (1.25 * r.copy_ns + 10.0)),
            |v| v <= 0.0,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_measured_and_zero_conversion_writes_the_payload_as_it_is() {
        let rows = run(1);
        assert_eq!(rows.len(), 9, "{rows:?}");
        let zero: Vec<_> = rows.iter().filter(|r| r.zero_conversion).collect();
        assert!(zero.iter().any(|r| r.message == "Twist"), "{rows:?}");
        for r in &zero {
            // the 4-byte encapsulation header, then the payload's bytes
            assert_eq!(r.cdr_bytes, r.payload_bytes + 4, "{r:?}");
        }
        let imu = rows.iter().find(|r| r.message == "Imu").unwrap();
        assert_eq!(imu.schema_name, "sensor_msgs/msg/Imu");
        assert!(rows.iter().all(|r| r.convert_ns > 0.0 && r.copy_ns > 0.0));
    }
}
