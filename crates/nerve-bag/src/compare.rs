//! Comparing two bags message by message (`nerve bag diff`), and digesting a bag's
//! topics (`nerve bag digest`): checks that a replay is deterministic.
//!
//! [`compare`] groups each bag's messages by topic, in file order, and compares message
//! `i` of a topic in one bag with message `i` of the same topic in the other. Equal
//! payload bytes are equal messages; where the bytes differ, both payloads are decoded
//! with their channel's schema (every CDR channel with a `ros2msg` schema: what Nerve
//! records, its own types included, and what rosbag2 records) and compared field by
//! field, so the difference names the first differing field (`header.stamp.sec`,
//! `elems[3].x`) and fields can be ignored ([`CompareOptions::ignore`]). Floats are
//! compared bit for bit (`-0.0` is not `0.0`; a NaN equals the same NaN). A payload that
//! does not decode (another encoding, a schema that does not parse, bytes that do not
//! match it) is compared byte by byte, and so are two payloads that decode to the same
//! values from different bytes (padding, trailing bytes, byte order).
//!
//! [`digest`] gives each topic's message count and the SHA-256 of its payloads in order:
//! two bags with the same digests hold the same messages (times aside).
//!
//! Bags are read whole and must be complete: a file without its footer (a recorder
//! killed mid-run, a copy cut short) or with a damaged record is an error naming the
//! file (`nerve bag recover` saves what such a file holds), unless the damage is
//! tolerated ([`crate::read::OnDamage`]): then what is readable is compared or digested
//! and the damage reported beside it. A bag is a file or a directory of files, read in
//! order ([`crate::read::bag_files`]).

use crate::read::{is_cdr, messages, open_bag, BagFile, Damage, OnDamage};
use crate::BagError;
use nerve_ros2_types::{Array, Registry, Struct, TypeName, Value};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The `field` of a [`Difference`] where a topic is in one bag only.
pub const FIELD_TOPIC: &str = "<topic>";
/// The `field` of a [`Difference`] where a topic has more messages in one bag.
pub const FIELD_COUNT: &str = "<count>";
/// The `field` of a [`Difference`] where a topic's schema (type) differs.
pub const FIELD_TYPE: &str = "<type>";
/// The start of the `field` of a [`Difference`] found by comparing bytes:
/// `<bytes>[OFFSET]`, the offset of the first differing byte in the payload.
pub const FIELD_BYTES: &str = "<bytes>";

/// How to compare two bags.
///
/// # Ignored fields
///
/// Each entry of [`CompareOptions::ignore`] is a field path, for every topic
/// (`header.stamp`), or for one topic (`/detections:header.stamp`, the topic up to the
/// first `:`). Fields are separated by `.`; an ignored field is ignored with everything
/// under it (`header.stamp` ignores `header.stamp.sec` and `header.stamp.nanosec`).
///
/// **Array indices are optional**: a field name matches that field in every element of
/// the arrays on its way, so `points.x`, `points[].x` and `points[*].x` all ignore `x` in
/// every element of `points` (`points[3].x` among them); a number in brackets,
/// `points[3].x`, ignores it in that element only. `points` ignores the whole array, its
/// length included; `points[]` ignores what its elements hold, not its length.
///
/// Paths are the field names of the channel's schema, as the difference names them (a
/// type that Nerve records in its own layout has its slice as `elems`). A difference found
/// by comparing bytes (a payload that does not decode) is not ignored by any path.
#[derive(Clone, Debug, Default)]
pub struct CompareOptions {
    /// Field paths to ignore (see above).
    pub ignore: Vec<String>,
    /// What a damaged bag does: refused (the default), or compared as far as it can be
    /// read ([`CompareReport::damage`]).
    pub on_damage: OnDamage,
}

/// One topic of a bag: its messages and the digest of their payloads.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TopicDigest {
    /// Topic name.
    pub topic: String,
    /// Messages.
    pub messages: u64,
    /// SHA-256, in lowercase hex, of the topic's payloads in file order, each preceded
    /// by its length (8 bytes, little-endian), so that a byte moved from one message to
    /// the next changes the digest.
    pub sha256: String,
}

/// The first difference between two bags.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// The topic.
    pub topic: String,
    /// The message's index in the topic (from 0, in file order). For a different count,
    /// the smaller count (the first index that one bag lacks); 0 for a missing topic or
    /// a different type.
    pub index: u64,
    /// The first differing field, as a path (`header.stamp.sec`, `points[3].x`); or
    /// [`FIELD_TOPIC`], [`FIELD_COUNT`], [`FIELD_TYPE`], or `<bytes>[OFFSET]` where the
    /// payloads were compared byte by byte.
    pub field: String,
    /// The value in the actual bag, as text (strings quoted; `<absent>` for a field the
    /// message lacks; for an array of another length, `N elements`).
    pub actual: String,
    /// The value in the expected bag, as text.
    pub expected: String,
}

impl fmt::Display for Difference {
    /// `/detections message 17: field boxes[2].score: got 0.75, expected 0.8125`;
    /// `/imu: topic: got missing, expected 20 messages`;
    /// `/imu: message count: got 19, expected 20`;
    /// `/imu: type: got sensor_msgs/msg/Imu, expected demo/msg/Imu`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (actual, expected) = (&self.actual, &self.expected);
        match self.field.as_str() {
            FIELD_TOPIC => write!(
                f,
                "{}: topic: got {actual}, expected {expected}",
                self.topic
            ),
            FIELD_COUNT => write!(
                f,
                "{}: message count: got {actual}, expected {expected}",
                self.topic
            ),
            FIELD_TYPE => write!(f, "{}: type: got {actual}, expected {expected}", self.topic),
            field => write!(
                f,
                "{} message {}: field {field}: got {actual}, expected {expected}",
                self.topic, self.index
            ),
        }
    }
}

/// What [`compare`] found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CompareReport {
    /// The actual bag's topics, sorted by name, with their digests.
    pub topics: Vec<TopicDigest>,
    /// The first difference (topics in name order, then messages in index order), or
    /// `None` when the bags hold the same messages.
    pub first_difference: Option<Difference>,
    /// Pairs of messages compared (on each topic up to and including its first
    /// difference): every message of either bag when they are identical.
    pub messages_compared: u64,
    /// The damage found in either bag, tolerated ([`CompareOptions::on_damage`]).
    pub damage: Vec<Damage>,
}

impl CompareReport {
    /// Whether the bags hold the same messages (apart from ignored fields).
    pub fn identical(&self) -> bool {
        self.first_difference.is_none()
    }
}

/// Compares the bag `actual` with the bag `expected` message by message (see the
/// [module docs](self) and [`CompareOptions`]).
///
/// Errors: a bag that cannot be read whole (missing, not MCAP, incomplete, damaged; the
/// error names the file), an ignore path that does not parse ([`BagError::Options`]).
pub fn compare(
    actual: &Path,
    expected: &Path,
    opts: &CompareOptions,
) -> Result<CompareReport, BagError> {
    let patterns = opts
        .ignore
        .iter()
        .map(|p| Pattern::parse(p))
        .collect::<Result<Vec<_>, _>>()?;
    let a_files = open_bag(actual, opts.on_damage)?;
    let b_files = open_bag(expected, opts.on_damage)?;
    let mut a_stream = Stream::new(&a_files, opts.on_damage);
    let mut b_stream = Stream::new(&b_files, opts.on_damage);
    let mut topics: BTreeMap<String, TopicState> = BTreeMap::new();
    let mut decoders = Decoders::default();
    let (mut a_done, mut b_done) = (false, false);
    // both bags are read together, so that a topic's messages wait for their pair only
    // as long as the files' orders differ
    while !(a_done && b_done) {
        for side in [Side::Actual, Side::Expected] {
            let (done, next) = match side {
                Side::Actual => (&mut a_done, &mut a_stream),
                Side::Expected => (&mut b_done, &mut b_stream),
            };
            if *done {
                continue;
            }
            let Some(msg) = next.next() else {
                *done = true;
                continue;
            };
            let msg = msg?;
            let t = match topics.get_mut(&msg.channel.topic) {
                Some(t) => t,
                None => topics.entry(msg.channel.topic.clone()).or_default(),
            };
            t.add(side, msg, &patterns, &mut decoders);
        }
    }
    let mut report = CompareReport {
        topics: Vec::new(),
        first_difference: None,
        messages_compared: 0,
        damage: [a_stream.damage, b_stream.damage].concat(),
    };
    for (name, t) in topics {
        report.messages_compared += t.compared;
        if t.count[0] > 0 {
            report.topics.push(TopicDigest {
                topic: name.clone(),
                messages: t.count[0],
                sha256: format!("{:x}", t.hasher.clone().finalize()),
            });
        }
        if report.first_difference.is_none() {
            report.first_difference = t.difference(name);
        }
    }
    Ok(report)
}

/// Each topic of the bag at `path` (a file or a directory of them), sorted by name: its
/// message count and the SHA-256 of its payloads (see [`TopicDigest::sha256`]).
///
/// Errors: a bag that cannot be read whole (missing, not MCAP, incomplete, damaged; the
/// error names the file).
pub fn digest(path: &Path) -> Result<Vec<TopicDigest>, BagError> {
    digest_checked(path, OnDamage::Refuse).map(|(topics, _)| topics)
}

/// [`digest`] under `policy`: with [`OnDamage::Tolerate`], the digests of what is
/// readable, and the damage found.
pub fn digest_checked(
    path: &Path,
    policy: OnDamage,
) -> Result<(Vec<TopicDigest>, Vec<Damage>), BagError> {
    let files = open_bag(path, policy)?;
    let mut topics: BTreeMap<String, (u64, Sha256)> = BTreeMap::new();
    let mut stream = Stream::new(&files, policy);
    for msg in stream.by_ref() {
        let msg = msg?;
        let t = match topics.get_mut(&msg.channel.topic) {
            Some(t) => t,
            None => topics
                .entry(msg.channel.topic.clone())
                .or_insert_with(|| (0, Sha256::new())),
        };
        t.0 += 1;
        hash_payload(&mut t.1, &msg.data);
    }
    let topics = topics
        .into_iter()
        .map(|(topic, (messages, h))| TopicDigest {
            topic,
            messages,
            sha256: format!("{:x}", h.finalize()),
        })
        .collect();
    Ok((topics, stream.damage))
}

fn hash_payload(h: &mut Sha256, data: &[u8]) {
    h.update((data.len() as u64).to_le_bytes());
    h.update(data);
}

type Msg = mcap::Message<'static>;

/// The messages of a bag's files in order. A damaged record is an error naming its file,
/// or (tolerated) ends that file: the damage is kept in [`Stream::damage`] and the next
/// file read. Files damaged on opening ([`BagFile::damage`]) are read as far as they can
/// be, their damage kept as well.
struct Stream<'a> {
    files: &'a [BagFile],
    policy: OnDamage,
    /// The file being read, its messages, and how many of them were read.
    at: usize,
    messages: Option<crate::read::Messages<'a>>,
    read: u64,
    /// Damage tolerated so far.
    damage: Vec<Damage>,
}

impl<'a> Stream<'a> {
    fn new(files: &'a [BagFile], policy: OnDamage) -> Stream<'a> {
        Stream {
            files,
            policy,
            at: 0,
            messages: None,
            read: 0,
            damage: files.iter().filter_map(|f| f.damage.clone()).collect(),
        }
    }
}

impl Iterator for Stream<'_> {
    type Item = Result<Msg, BagError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let file = self.files.get(self.at)?;
            let messages = self
                .messages
                .get_or_insert_with(|| messages(file.mapped.bytes()));
            match messages.next() {
                Some(Ok(m)) => {
                    self.read += 1;
                    return Some(Ok(m));
                }
                Some(Err(e)) => {
                    let d = Damage::unreadable_after(&file.path, self.read, e, file.promised());
                    match self.policy.admit(d) {
                        // a file damaged on opening was counted there already
                        Ok(d) if file.damage.is_none() => self.damage.push(d),
                        Ok(_) => {}
                        Err(e) => {
                            self.at = self.files.len();
                            return Some(Err(e));
                        }
                    }
                }
                None => {}
            }
            self.at += 1;
            self.messages = None;
            self.read = 0;
        }
    }
}

#[derive(Clone, Copy)]
enum Side {
    Actual = 0,
    Expected = 1,
}

/// One topic while the bags are read.
#[derive(Default)]
struct TopicState {
    /// Messages of each side waiting for their pair.
    pending: [VecDeque<Msg>; 2],
    /// Messages of each side.
    count: [u64; 2],
    /// Schema name of each side's first message.
    schema: [Option<String>; 2],
    /// Pairs compared.
    compared: u64,
    /// The first differing pair: (index, field, actual, expected).
    found: Option<(u64, Found)>,
    /// Digest of the actual side.
    hasher: Sha256,
}

impl TopicState {
    fn add(&mut self, side: Side, msg: Msg, patterns: &[Pattern], decoders: &mut Decoders) {
        let s = side as usize;
        self.count[s] += 1;
        if s == 0 {
            hash_payload(&mut self.hasher, &msg.data);
        }
        if self.schema[s].is_none() {
            self.schema[s] = Some(
                msg.channel
                    .schema
                    .as_ref()
                    .map_or_else(String::new, |sc| sc.name.clone()),
            );
        }
        if self.found.is_some() {
            return;
        }
        let Some(other) = self.pending[1 - s].pop_front() else {
            self.pending[s].push_back(msg);
            return;
        };
        let (a, b) = match side {
            Side::Actual => (&msg, &other),
            Side::Expected => (&other, &msg),
        };
        let index = self.compared;
        self.compared += 1;
        if let Some(found) = compare_messages(a, b, patterns, decoders) {
            self.found = Some((index, found));
            self.pending = Default::default();
        }
    }

    /// The topic's first difference, if any.
    fn difference(self, topic: String) -> Option<Difference> {
        let diff = |index, field: &str, actual: String, expected: String| Difference {
            topic: topic.clone(),
            index,
            field: field.to_string(),
            actual,
            expected,
        };
        let [a, b] = self.count;
        let messages = |n: u64| format!("{n} message{}", if n == 1 { "" } else { "s" });
        if a == 0 || b == 0 {
            let (got, want) = if a == 0 {
                ("missing".to_string(), messages(b))
            } else {
                (messages(a), "missing".to_string())
            };
            return Some(diff(0, FIELD_TOPIC, got, want));
        }
        let [sa, sb] = self.schema;
        if sa != sb {
            let name = |s: Option<String>| match s {
                Some(s) if !s.is_empty() => s,
                _ => "no schema".into(),
            };
            return Some(diff(0, FIELD_TYPE, name(sa), name(sb)));
        }
        if let Some((index, f)) = self.found {
            return Some(diff(index, &f.field, f.actual, f.expected));
        }
        (a != b).then(|| diff(a.min(b), FIELD_COUNT, a.to_string(), b.to_string()))
    }
}

/// Where two messages differ.
struct Found {
    field: String,
    actual: String,
    expected: String,
}

/// The decoders of the channels seen, by channel (the readers hand out one `Arc` per
/// channel of a file; it is kept here, so its address is not reused).
#[derive(Default)]
struct Decoders {
    by_channel: HashMap<usize, (Arc<mcap::Channel<'static>>, Option<Arc<Decoder>>)>,
}

/// A channel's schema, ready to decode its payloads.
struct Decoder {
    registry: Registry,
    type_name: String,
}

impl Decoders {
    fn get(&mut self, ch: &Arc<mcap::Channel<'static>>) -> Option<Arc<Decoder>> {
        let key = Arc::as_ptr(ch) as usize;
        self.by_channel
            .entry(key)
            .or_insert_with(|| (ch.clone(), Decoder::new(ch).map(Arc::new)))
            .1
            .clone()
    }
}

impl Decoder {
    /// The decoder of a CDR channel with a `ros2msg` schema (None for any other, or a
    /// schema that does not parse: its payloads are compared as bytes).
    fn new(ch: &mcap::Channel<'static>) -> Option<Decoder> {
        if !is_cdr(ch) {
            return None;
        }
        let schema = ch.schema.as_ref()?;
        let type_name = TypeName::parse(&schema.name).ok()?.to_string();
        let text = std::str::from_utf8(&schema.data).ok()?;
        let registry = Registry::from_ros2msg(&type_name, text).ok()?;
        Some(Decoder {
            registry,
            type_name,
        })
    }

    fn decode(&self, payload: &[u8]) -> Option<Value> {
        nerve_ros2_types::decode(&self.registry, &self.type_name, payload).ok()
    }
}

/// Where messages `a` (actual) and `b` (expected) differ: the first field that differs
/// and is not ignored, or the first differing byte if either does not decode.
fn compare_messages(
    a: &Msg,
    b: &Msg,
    patterns: &[Pattern],
    decoders: &mut Decoders,
) -> Option<Found> {
    if a.data == b.data {
        return None;
    }
    let topic = &a.channel.topic;
    let decoded = decoders
        .get(&a.channel)
        .and_then(|d| d.decode(&a.data))
        .zip(decoders.get(&b.channel).and_then(|d| d.decode(&b.data)));
    if let Some((va, vb)) = decoded {
        let ignore: Vec<&Pattern> = patterns.iter().filter(|p| p.applies_to(topic)).collect();
        let mut walk = Walk {
            ignore: &ignore,
            path: Vec::new(),
        };
        if let Some(found) = walk.value(&va, &vb) {
            return Some(found);
        }
        if !same(&va, &vb) {
            // they differ in ignored fields only
            return None;
        }
        // the same values from other bytes (padding, trailing bytes, byte order):
        // compared as bytes below
    }
    let (a, b) = (&a.data[..], &b.data[..]);
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let byte = |d: &[u8]| match d.get(at) {
        Some(x) => format!("0x{x:02x}"),
        None => format!("end of payload ({} bytes)", d.len()),
    };
    Some(Found {
        field: format!("{FIELD_BYTES}[{at}]"),
        actual: byte(a),
        expected: byte(b),
    })
}

/// One step of a field path.
#[derive(Clone, Debug)]
enum Seg {
    Field(Arc<str>),
    Index(usize),
}

/// A field path to ignore ([`CompareOptions`]).
#[derive(Debug)]
struct Pattern {
    topic: Option<String>,
    segs: Vec<PatSeg>,
}

#[derive(Debug, PartialEq)]
enum PatSeg {
    Field(String),
    /// An index: a number, or any (`[]`, `[*]`).
    Index(Option<usize>),
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, BagError> {
        let fail = |why: &str| {
            BagError::Options(format!(
                "ignore path {text:?}: {why} (expected field.path or /topic:field.path, \
                 e.g. header.stamp or /scan:points[].x)"
            ))
        };
        let (topic, path) = match text.strip_prefix('/') {
            Some(_) => {
                let (t, p) = text
                    .split_once(':')
                    .ok_or_else(|| fail("a topic without :field.path"))?;
                (Some(t.to_string()), p)
            }
            None => (None, text),
        };
        if path.is_empty() {
            return Err(fail("no field path"));
        }
        let mut segs = Vec::new();
        for part in path.split('.') {
            let (name, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
            if name.is_empty() || name.contains(']') {
                return Err(fail(&format!("{part:?} does not start with a field name")));
            }
            segs.push(PatSeg::Field(name.to_string()));
            while !rest.is_empty() {
                let close = rest
                    .find(']')
                    .filter(|_| rest.starts_with('['))
                    .ok_or_else(|| fail("unbalanced brackets"))?;
                let index = match &rest[1..close] {
                    "" | "*" => None,
                    n => Some(n.parse::<usize>().map_err(|_| {
                        fail(&format!("[{n}] is not an index (a number, [] or [*])"))
                    })?),
                };
                segs.push(PatSeg::Index(index));
                rest = &rest[close + 1..];
            }
        }
        Ok(Pattern { topic, segs })
    }

    fn applies_to(&self, topic: &str) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
    }

    /// Whether the field at `path` is this pattern's field or under it; indices in
    /// `path` that the pattern does not name match any.
    fn covers(&self, path: &[Seg]) -> bool {
        let mut at = 0;
        for p in &self.segs {
            match p {
                PatSeg::Field(name) => {
                    while let Some(Seg::Index(_)) = path.get(at) {
                        at += 1;
                    }
                    match path.get(at) {
                        Some(Seg::Field(f)) if **f == **name => at += 1,
                        _ => return false,
                    }
                }
                PatSeg::Index(want) => match path.get(at) {
                    Some(Seg::Index(i)) if want.is_none_or(|w| w == *i) => at += 1,
                    _ => return false,
                },
            }
        }
        true
    }
}

/// A comparison of two decoded messages, at `path`.
struct Walk<'a> {
    ignore: &'a [&'a Pattern],
    path: Vec<Seg>,
}

/// Longest text shown for a value that is not a number or a string.
const SHOWN: usize = 120;

impl Walk<'_> {
    fn ignored(&self) -> bool {
        self.ignore.iter().any(|p| p.covers(&self.path))
    }

    fn found(&self, actual: String, expected: String) -> Option<Found> {
        if self.ignored() {
            return None;
        }
        let mut field = String::new();
        for s in &self.path {
            match s {
                Seg::Field(f) => {
                    if !field.is_empty() {
                        field.push('.');
                    }
                    field.push_str(f);
                }
                Seg::Index(i) => field.push_str(&format!("[{i}]")),
            }
        }
        if field.is_empty() {
            field.push_str("<message>");
        }
        Some(Found {
            field,
            actual,
            expected,
        })
    }

    fn value(&mut self, a: &Value, b: &Value) -> Option<Found> {
        match (a, b) {
            (Value::Struct(x), Value::Struct(y)) => self.structs(x, y),
            (Value::Array(x), Value::Array(y)) => self.arrays(x, y),
            _ if same(a, b) => None,
            _ => {
                let (mut ta, mut tb) = (text(a), text(b));
                if ta == tb {
                    // NaNs of other payloads, or one type's value as another's
                    ta = format!("{ta} ({a:?})");
                    tb = format!("{tb} ({b:?})");
                }
                self.found(ta, tb)
            }
        }
    }

    fn structs(&mut self, x: &Struct, y: &Struct) -> Option<Found> {
        for (name, va) in &x.fields {
            self.path.push(Seg::Field(name.clone()));
            let r = match y.get(name) {
                Some(vb) => self.value(va, vb),
                None => self.found(text(va), "<absent>".into()),
            };
            self.path.pop();
            if r.is_some() {
                return r;
            }
        }
        for (name, vb) in &y.fields {
            if x.get(name).is_none() {
                self.path.push(Seg::Field(name.clone()));
                let r = self.found("<absent>".into(), text(vb));
                self.path.pop();
                if r.is_some() {
                    return r;
                }
            }
        }
        None
    }

    fn arrays(&mut self, x: &Array, y: &Array) -> Option<Found> {
        if x.len() != y.len() {
            let n = |a: &Array| match a.len() {
                1 => "1 element".to_string(),
                n => format!("{n} elements"),
            };
            return self.found(n(x), n(y));
        }
        if let (Some(sx), Some(sy)) = (x.as_structs(), y.as_structs()) {
            for (i, (ex, ey)) in sx.iter().zip(sy).enumerate() {
                self.path.push(Seg::Index(i));
                let r = self.structs(ex, ey);
                self.path.pop();
                if r.is_some() {
                    return r;
                }
            }
            return None;
        }
        let mut from = 0;
        while let Some(i) = first_unequal(x, y, from) {
            let (ex, ey) = (x.get(i)?, y.get(i)?);
            self.path.push(Seg::Index(i));
            let r = self.value(&ex, &ey);
            self.path.pop();
            if r.is_some() {
                return r;
            }
            from = i + 1;
        }
        None
    }
}

/// The first index from `from` where two arrays of the same length differ (floats
/// compared bit for bit); element by element where their element types differ.
fn first_unequal(x: &Array, y: &Array, from: usize) -> Option<usize> {
    fn first<T>(x: &[T], y: &[T], from: usize, eq: impl Fn(&T, &T) -> bool) -> Option<usize> {
        x.get(from..)?
            .iter()
            .zip(y.get(from..)?)
            .position(|(a, b)| !eq(a, b))
            .map(|i| i + from)
    }
    match (x, y) {
        (Array::Bool(x), Array::Bool(y)) => first(x, y, from, |a, b| a == b),
        (Array::Int8(x), Array::Int8(y)) => first(x, y, from, |a, b| a == b),
        (Array::UInt8(x), Array::UInt8(y)) => first(x, y, from, |a, b| a == b),
        (Array::Int16(x), Array::Int16(y)) => first(x, y, from, |a, b| a == b),
        (Array::UInt16(x), Array::UInt16(y)) => first(x, y, from, |a, b| a == b),
        (Array::Int32(x), Array::Int32(y)) => first(x, y, from, |a, b| a == b),
        (Array::UInt32(x), Array::UInt32(y)) => first(x, y, from, |a, b| a == b),
        (Array::Int64(x), Array::Int64(y)) => first(x, y, from, |a, b| a == b),
        (Array::UInt64(x), Array::UInt64(y)) => first(x, y, from, |a, b| a == b),
        (Array::Float32(x), Array::Float32(y)) => {
            first(x, y, from, |a, b| a.to_bits() == b.to_bits())
        }
        (Array::Float64(x), Array::Float64(y)) => {
            first(x, y, from, |a, b| a.to_bits() == b.to_bits())
        }
        (Array::String(x), Array::String(y)) | (Array::WString(x), Array::WString(y)) => {
            first(x, y, from, |a, b| a == b)
        }
        _ => (from..x.len()).find(|&i| match (x.get(i), y.get(i)) {
            (Some(a), Some(b)) => !same(&a, &b),
            _ => true,
        }),
    }
}

/// Whether two values are the same: floats bit for bit (`-0.0` is not `0.0`, a NaN is
/// itself), everything else by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float32(x), Value::Float32(y)) => x.to_bits() == y.to_bits(),
        (Value::Float64(x), Value::Float64(y)) => x.to_bits() == y.to_bits(),
        (Value::Struct(x), Value::Struct(y)) => {
            x.fields.len() == y.fields.len()
                && x.fields
                    .iter()
                    .zip(&y.fields)
                    .all(|((n, u), (m, v))| n == m && same(u, v))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && first_unequal(x, y, 0).is_none()
        }
        _ => a == b,
    }
}

/// A value as text: numbers as JSON writes them (floats in their shortest form), strings
/// quoted, anything else as JSON cut to [`SHOWN`] characters.
fn text(v: &Value) -> String {
    let mut s = nerve_ros2_types::to_json(v).to_string();
    if s.len() > SHOWN {
        let mut cut = SHOWN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<Seg> {
        let mut out = Vec::new();
        for part in text.split('.') {
            let (name, rest) = part.split_at(part.find('[').unwrap_or(part.len()));
            out.push(Seg::Field(name.into()));
            for i in rest.split(['[', ']']).filter(|s| !s.is_empty()) {
                out.push(Seg::Index(i.parse().unwrap()));
            }
        }
        out
    }

    #[test]
    fn ignore_paths_match_fields_under_them_and_any_index_unless_one_is_named() {
        let p = |s: &str| Pattern::parse(s).unwrap();
        let covers = |pat: &str, at: &str| p(pat).covers(&path(at));
        assert!(covers("header.stamp", "header.stamp.sec"));
        assert!(covers("header.stamp", "header.stamp"));
        assert!(!covers("header.stamp", "header.frame_id"));
        assert!(!covers("header.stamp.sec", "header.stamp"));
        for pat in [
            "points.x",
            "points[].x",
            "points[*].x",
            "points[3].x",
            "points",
        ] {
            assert!(covers(pat, "points[3].x"), "{pat}");
        }
        assert!(!covers("points[2].x", "points[3].x"));
        assert!(!covers("points.x", "points[3].y"));
        assert!(
            !covers("points[]", "points"),
            "[] leaves the length compared"
        );
        assert!(covers("points", "points"));
        assert!(covers("grid.cells", "grid[1][2].cells[0]"));
        assert!(covers("grid[1][].cells", "grid[1][2].cells[0]"));
        assert!(!covers("grid[0][].cells", "grid[1][2].cells[0]"));
        let t = p("/scan:ranges");
        assert!(t.applies_to("/scan") && !t.applies_to("/scan2"));
        assert!(p("ranges").applies_to("/any"));
        for bad in ["", "/scan", "/scan:", "a..b", "a[x]", "a[1", "a]", "[1]"] {
            let e = Pattern::parse(bad).unwrap_err();
            assert!(matches!(e, BagError::Options(_)), "{bad}: {e}");
        }
    }

    #[test]
    fn values_differ_bit_for_bit_and_say_where() {
        let mut inner = Struct::new();
        inner.push("x", Value::Float32(0.75));
        inner.push("name", Value::String("a".into()));
        let mut a = Struct::new();
        a.push("v", Value::Float64(0.0));
        a.push(
            "items",
            Value::Array(Array::Struct(vec![inner.clone(), inner.clone()])),
        );
        let mut b = a.clone();
        let none: Vec<&Pattern> = Vec::new();
        let mut w = Walk {
            ignore: &none,
            path: Vec::new(),
        };
        let (va, vb) = (Value::Struct(a.clone()), Value::Struct(b.clone()));
        assert!(w.value(&va, &vb).is_none());
        b.set("v", Value::Float64(-0.0));
        let f = w.value(&va, &Value::Struct(b.clone())).unwrap();
        assert_eq!((f.field.as_str(), f.actual.as_str()), ("v", "0.0"));
        assert_eq!(f.expected, "-0.0");
        b.set("v", Value::Float64(0.0));
        let mut changed = inner.clone();
        changed.set("x", Value::Float32(0.8125));
        b.set(
            "items",
            Value::Array(Array::Struct(vec![inner.clone(), changed])),
        );
        let f = w.value(&va, &Value::Struct(b.clone())).unwrap();
        assert_eq!(f.field, "items[1].x");
        assert_eq!((f.actual.as_str(), f.expected.as_str()), ("0.75", "0.8125"));
        let pat = Pattern::parse("items.x").unwrap();
        let ignore = vec![&pat];
        let mut w = Walk {
            ignore: &ignore,
            path: Vec::new(),
        };
        assert!(w.value(&va, &Value::Struct(b.clone())).is_none());
        b.set("items", Value::Array(Array::Struct(vec![inner])));
        let f = w.value(&va, &Value::Struct(b)).unwrap();
        assert_eq!(f.field, "items");
        assert_eq!(
            (f.actual.as_str(), f.expected.as_str()),
            ("2 elements", "1 element")
        );
    }
}
