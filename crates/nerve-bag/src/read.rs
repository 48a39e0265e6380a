//! Reading bags: what a bag holds (`nerve bag info`), and what a damaged one still holds
//! (`nerve bag recover`).
//!
//! A complete file is described from its summary section (statistics, channels, and the
//! recorder's closing metadata), without reading the messages. A file without one (a
//! recorder killed mid-run, a copy cut short) is scanned from the start up to the first
//! record that cannot be read; what was read is reported, and where and why it stopped.
//!
//! A bag is a file or a directory ([`bag_files`]): a rosbag2 bag directory lists its
//! files in `metadata.yaml` (`relative_file_paths`), a directory without one holds its
//! files as `*.mcap`, read in name order (numbers by value: `b_2` before `b_10`).
//!
//! **Damage** has one policy, decided here ([`OnDamage`]) for every command that reads
//! bags (play, info, digest, diff, replay, the Foxglove bridge's `--bag`): a file without
//! its summary and footer (cut short, a recorder killed), or with a record that cannot be
//! read, is refused with [`BagError::Damaged`] naming the file, the damage and how many
//! messages were readable of how many its summary promised (when known), unless the
//! caller asked to keep going ([`OnDamage::Tolerate`]: what is readable is read and the
//! [`Damage`] reported beside it). [`open_bag`] applies it to a bag's files as they are
//! opened, and each reader to a record that fails while it reads on
//! ([`Damage::unreadable_after`]).

use crate::encoding::{MESSAGE_ENCODING, SCHEMA_ENCODING};
use crate::{meta, BagError};
use mcap::sans_io::LinearReaderOptions;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a reader does with a damaged bag (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnDamage {
    /// Refuse it with [`BagError::Damaged`] (the default).
    #[default]
    Refuse,
    /// Read what is readable and report the [`Damage`] beside the result (the user asked
    /// for it: `--tolerate-damage`).
    Tolerate,
}

impl OnDamage {
    /// The one decision: `damage` is an error under [`OnDamage::Refuse`], and handed back
    /// to be reported under [`OnDamage::Tolerate`].
    pub fn admit(self, damage: Damage) -> Result<Damage, BagError> {
        match self {
            OnDamage::Refuse => Err(BagError::Damaged(damage)),
            OnDamage::Tolerate => Ok(damage),
        }
    }
}

/// Where a bag file stops being whole, and how much of it could be read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Damage {
    /// The file.
    pub file: String,
    /// What is wrong: where reading stopped and why, or what is missing.
    pub what: String,
    /// Messages of the file read before the damage (all it holds that can be read).
    pub read: u64,
    /// Messages the file's summary (its statistics) promised, when it has one that can
    /// still be read.
    pub promised: Option<u64>,
}

impl Damage {
    /// A record of `file` that cannot be read after `read` messages (`why`), the file's
    /// summary having promised `promised` ([`BagFile::promised`]).
    pub fn unreadable_after(
        file: &Path,
        read: u64,
        why: impl fmt::Display,
        promised: Option<u64>,
    ) -> Damage {
        Damage {
            file: file.display().to_string(),
            what: format!("unreadable after {read} messages: {why}"),
            read,
            promised,
        }
    }
}

impl fmt::Display for Damage {
    /// `run.mcap: no summary or footer (...); 302 messages readable, of a count the file
    /// does not record`, or `...; 302 of 594 messages readable`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; ", self.file, self.what)?;
        match self.promised {
            Some(n) => write!(f, "{} of {n} messages readable", self.read),
            None => write!(
                f,
                "{} messages readable, of a count the file does not record",
                self.read
            ),
        }
    }
}

/// One file of a bag, open for reading ([`open_bag`]).
pub struct BagFile {
    /// The file.
    pub path: PathBuf,
    /// Its bytes.
    pub mapped: Arc<Mapped>,
    /// Its summary, if it is complete.
    pub summary: Option<mcap::Summary>,
    /// What is wrong with it, found on opening (only under [`OnDamage::Tolerate`]: it is
    /// refused otherwise).
    pub damage: Option<Damage>,
}

impl BagFile {
    /// The messages the file's summary promises, if it has one.
    pub fn promised(&self) -> Option<u64> {
        match &self.damage {
            Some(d) => d.promised,
            None => self
                .summary
                .as_ref()
                .and_then(|s| s.stats.as_ref())
                .map(|s| s.message_count),
        }
    }
}

/// Opens the files of the bag at `path` ([`bag_files`]) under `policy`. A file without a
/// readable summary and footer is damaged: it is scanned to count what it holds, then
/// refused ([`BagError::Damaged`]), or under [`OnDamage::Tolerate`] opened with its
/// [`BagFile::damage`]. A file that is not MCAP at all is an error either way.
pub fn open_bag(path: &Path, policy: OnDamage) -> Result<Vec<BagFile>, BagError> {
    bag_files(path)?
        .into_iter()
        .map(|p| {
            let mapped = Arc::new(Mapped::open(&p)?);
            // a complete file may lack a summary (it is optional in MCAP): not damage
            let footer = mcap::read::footer(mapped.bytes()).is_ok();
            let summary = if footer {
                match quiet_catch(|| mcap::Summary::read(mapped.bytes())) {
                    Ok(Ok(s)) => Ok(s),
                    Ok(Err(e)) => Err(format!("its summary cannot be read: {e}")),
                    Err(why) => Err(format!("its summary cannot be read: {why}")),
                }
            } else {
                Err(NO_FOOTER.to_string())
            };
            let (summary, damage) = match summary {
                Ok(s) => (s, None),
                Err(what) => {
                    let (info, read) = scan(&p, &mapped, |_| Ok(()))?;
                    let damage = match info.damage {
                        // no footer: the scan says so, and where reading stopped
                        Some(d) if !footer => d,
                        Some(d) => Damage {
                            what: format!("{what}, and {}", d.what),
                            ..d
                        },
                        None => Damage {
                            file: p.display().to_string(),
                            what,
                            read,
                            promised: None,
                        },
                    };
                    (None, Some(policy.admit(damage)?))
                }
            };
            Ok(BagFile {
                path: p,
                mapped,
                summary,
                damage,
            })
        })
        .collect()
}

/// What a file without its footer lacks.
const NO_FOOTER: &str = "no summary or footer (cut short, or the recorder did not close it)";

/// The message count of the file's statistics record, if one can still be read (a file
/// cut short by a few bytes keeps its summary section but loses its footer).
fn promised_by_statistics(bytes: &[u8]) -> Option<u64> {
    quiet_catch(|| {
        let records = mcap::read::LinearReader::new_with_options(
            bytes,
            mcap::read::Options::IgnoreEndMagic.into(),
        )
        .ok()?;
        for r in records {
            match r {
                Ok(mcap::records::Record::Statistics(s)) => return Some(s.message_count),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    })
    .ok()
    .flatten()
}

/// A bag file mapped into memory.
pub struct Mapped {
    map: memmap2::Mmap,
}

impl Mapped {
    /// Maps `path` read-only; refuses what is not an MCAP file.
    pub fn open(path: &Path) -> Result<Mapped, BagError> {
        if path.is_dir() {
            return Err(BagError::mcap(
                path,
                "it is a directory (a bag of several files is described and replayed as a \
                 whole; give its files one by one here)",
            ));
        }
        let f = File::open(path).map_err(|e| BagError::io(path, e))?;
        // SAFETY: the map is read-only and private to this process. Another process
        // truncating the file while it is mapped would make reads fault (SIGBUS); bags
        // are written once and not changed in place, which is the contract of this API.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| BagError::io(path, e))?;
        if !map.starts_with(mcap::MAGIC) {
            return Err(BagError::mcap(
                path,
                "it does not start with the MCAP magic bytes",
            ));
        }
        Ok(Mapped { map })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
}

/// One topic of a bag.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TopicSummary {
    /// Topic name.
    pub topic: String,
    /// Schema name (the ROS 2 type for standard messages).
    pub schema_name: String,
    /// The Nerve type, if Nerve recorded it.
    pub nerve_type: Option<String>,
    /// Messages.
    pub count: u64,
    /// Mean rate over the bag's duration, in Hz.
    pub frequency: f64,
    /// Payload bytes, if known (scanned, or counted by the recorder).
    pub bytes: Option<u64>,
    /// Samples the recorder counted as dropped, lost or not converted, if it closed the
    /// file.
    pub losses: Option<u64>,
}

/// What a bag holds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BagInfo {
    /// The file, or the directory of a bag of several files.
    pub path: String,
    /// The files, in order (one for a single file).
    pub files: Vec<String>,
    /// File size in bytes (all files together).
    pub file_bytes: u64,
    /// Messages.
    pub messages: u64,
    /// First log time, ns since the Unix epoch.
    pub start_ns: u64,
    /// Last log time, ns since the Unix epoch.
    pub end_ns: u64,
    /// End minus start, in seconds.
    pub duration_s: f64,
    /// Chunk compression seen.
    pub compression: Vec<String>,
    /// Whether the file is complete (summary and footer present).
    pub complete: bool,
    /// For a damaged bag: its first damaged file, where reading stopped and why.
    pub damage: Option<Damage>,
    /// Per topic.
    pub topics: Vec<TopicSummary>,
}

/// The name of a rosbag2 bag directory's description.
pub const ROSBAG2_METADATA: &str = "metadata.yaml";

/// What this reader needs of a rosbag2 `metadata.yaml`.
#[derive(serde::Deserialize)]
struct Rosbag2Metadata {
    rosbag2_bagfile_information: Rosbag2Info,
}

#[derive(serde::Deserialize)]
struct Rosbag2Info {
    #[serde(default)]
    storage_identifier: String,
    #[serde(default)]
    compression_mode: String,
    #[serde(default)]
    relative_file_paths: Vec<String>,
}

/// The files of the bag at `path`, in order: `path` itself when it is a file; for a
/// directory, the files its rosbag2 `metadata.yaml` lists (`relative_file_paths`), or
/// without one every `*.mcap` in it, in name order (runs of digits compared by value, so
/// `bag_2.mcap` comes before `bag_10.mcap`).
pub fn bag_files(path: &Path) -> Result<Vec<PathBuf>, BagError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let fail = |reason: String| BagError::Directory {
        path: path.display().to_string(),
        reason,
    };
    let yaml = path.join(ROSBAG2_METADATA);
    if yaml.is_file() {
        let text = std::fs::read_to_string(&yaml).map_err(|e| BagError::io(&yaml, e))?;
        let meta: Rosbag2Metadata = serde_yaml_ng::from_str(&text)
            .map_err(|e| fail(format!("{ROSBAG2_METADATA} is not a rosbag2 bag's: {e}")))?;
        let info = meta.rosbag2_bagfile_information;
        if !info.storage_identifier.is_empty() && info.storage_identifier != "mcap" {
            return Err(fail(format!(
                "its files are stored as {:?}: only MCAP bags are read (`ros2 bag convert` \
                 writes one)",
                info.storage_identifier
            )));
        }
        if info.compression_mode.eq_ignore_ascii_case("file") {
            return Err(fail(
                "its files are compressed whole (rosbag2 --compression-mode file): \
                 decompress them first (zstd -d), or record with chunk compression"
                    .into(),
            ));
        }
        if info.relative_file_paths.is_empty() {
            return Err(fail(format!("{ROSBAG2_METADATA} lists no files")));
        }
        return info
            .relative_file_paths
            .iter()
            .map(|rel| {
                let direct = path.join(rel);
                if direct.is_file() {
                    return Ok(direct);
                }
                // old rosbag2 versions wrote the paths with the bag directory in front
                let beside = Path::new(rel).file_name().map(|n| path.join(n));
                beside.filter(|p| p.is_file()).ok_or_else(|| {
                    fail(format!(
                        "{ROSBAG2_METADATA} lists {rel}, which is not there"
                    ))
                })
            })
            .collect();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| BagError::io(path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "mcap"))
        .collect();
    if files.is_empty() {
        return Err(fail(format!(
            "no {ROSBAG2_METADATA} and no *.mcap file in it"
        )));
    }
    files.sort_by(|a, b| natural_order(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(files)
}

/// Compares names with runs of digits by their value (`b_2` before `b_10`).
fn natural_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len()).then_with(|| a.cmp(b))
}

/// Describes the bag at `path` (a file or a directory, see [`bag_files`]): each file
/// from its summary when it is complete, else by scanning; the files of a directory
/// together.
pub fn info(path: &Path) -> Result<BagInfo, BagError> {
    let files = bag_files(path)?;
    if let [one] = files.as_slice() {
        if one == path {
            return info_file(path);
        }
    }
    let mut all = BagInfo {
        path: path.display().to_string(),
        complete: true,
        start_ns: u64::MAX,
        ..BagInfo::default()
    };
    let mut by_topic: BTreeMap<String, TopicSummary> = BTreeMap::new();
    for f in &files {
        let i = info_file(f)?;
        all.files.push(i.path.clone());
        all.file_bytes += i.file_bytes;
        if i.messages > 0 {
            all.start_ns = all.start_ns.min(i.start_ns);
            all.end_ns = all.end_ns.max(i.end_ns);
        }
        all.messages += i.messages;
        all.compression.extend(i.compression);
        all.complete &= i.complete;
        if all.damage.is_none() {
            all.damage = i.damage;
        }
        for t in i.topics {
            match by_topic.get_mut(&t.topic) {
                None => {
                    by_topic.insert(t.topic.clone(), t);
                }
                Some(had) => {
                    had.count += t.count;
                    had.bytes = had.bytes.zip(t.bytes).map(|(a, b)| a + b);
                    had.losses = had.losses.zip(t.losses).map(|(a, b)| a + b);
                }
            }
        }
    }
    if all.messages == 0 {
        all.start_ns = 0;
    }
    all.compression.sort();
    all.compression.dedup();
    all.topics = by_topic.into_values().collect();
    finish(&mut all);
    Ok(all)
}

/// [`info`] under `policy`: a damaged bag is refused ([`BagError::Damaged`]), or
/// described with its [`BagInfo::damage`].
pub fn info_checked(path: &Path, policy: OnDamage) -> Result<BagInfo, BagError> {
    let info = info(path)?;
    if let Some(d) = &info.damage {
        policy.admit(d.clone())?;
    }
    Ok(info)
}

/// Describes one bag file.
fn info_file(path: &Path) -> Result<BagInfo, BagError> {
    let m = Mapped::open(path)?;
    let summary = match mcap::read::footer(m.bytes()) {
        Ok(_) => mcap::Summary::read(m.bytes()).map_err(|e| BagError::mcap(path, e))?,
        Err(_) => None,
    };
    let Some(summary) = summary.filter(|s| s.stats.is_some()) else {
        return scan(path, &m, |_| Ok(())).map(|(info, _)| info);
    };
    let stats = summary.stats.as_ref().expect("filtered");
    let recorder = recorder_counts(&m, &summary);
    let mut info = BagInfo {
        path: path.display().to_string(),
        files: vec![path.display().to_string()],
        file_bytes: m.bytes().len() as u64,
        messages: stats.message_count,
        start_ns: stats.message_start_time,
        end_ns: stats.message_end_time,
        complete: true,
        ..BagInfo::default()
    };
    let mut compression: Vec<String> = summary
        .chunk_indexes
        .iter()
        .map(|c| c.compression.clone())
        .collect();
    compression.sort();
    compression.dedup();
    info.compression = compression;
    let mut by_topic: BTreeMap<String, TopicSummary> = BTreeMap::new();
    for (id, ch) in &summary.channels {
        let t = by_topic
            .entry(ch.topic.clone())
            .or_insert_with(|| TopicSummary {
                topic: ch.topic.clone(),
                schema_name: ch
                    .schema
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                nerve_type: ch.metadata.get(meta::TYPE).cloned(),
                ..TopicSummary::default()
            });
        t.count += stats.channel_message_counts.get(id).copied().unwrap_or(0);
    }
    for t in by_topic.values_mut() {
        let get = |k: &str| {
            recorder
                .get(&format!("{}.{k}", t.topic))?
                .parse::<u64>()
                .ok()
        };
        t.bytes = get("bytes");
        t.losses = match (get("dropped"), get("lost"), get("failed")) {
            (Some(d), Some(l), Some(f)) => Some(d + l + f),
            _ => None,
        };
    }
    info.topics = by_topic.into_values().collect();
    finish(&mut info);
    Ok(info)
}

/// The counts the recorder wrote when it closed the file (empty if it did not).
fn recorder_counts(m: &Mapped, summary: &mcap::Summary) -> BTreeMap<String, String> {
    summary
        .metadata_indexes
        .iter()
        .filter(|i| i.name == meta::RECORDING)
        .filter_map(|i| mcap::read::metadata(m.bytes(), i).ok())
        .flat_map(|md| md.metadata)
        .collect()
}

fn finish(info: &mut BagInfo) {
    info.duration_s = info.end_ns.saturating_sub(info.start_ns) as f64 * 1e-9;
    for t in &mut info.topics {
        t.frequency = if info.duration_s > 0.0 && t.count > 1 {
            (t.count - 1) as f64 / info.duration_s
        } else {
            0.0
        };
    }
}

/// Longest record the readers accept: the file's length, or 1 GiB for records inside
/// compressed chunks (which may be longer than the file).
const RECORD_LIMIT: usize = 1 << 30;

/// The messages of a bag in file order, from the start to the end or to the first damaged
/// record (no end magic needed; chunk CRCs checked), ending with an error where the file
/// is damaged. Every record length is bounded: the mcap crate's `MessageStream` sets no
/// limit inside chunks and panics on a length near `u64::MAX` (found by the `mcap` fuzz
/// target; `fuzz/corpus/mcap/bad_record_length`). A panic of the mcap crate on other
/// malformed bytes (its chunk reader subtracts a record's length from what the chunk has
/// left without checking; debug builds panic there) ends the stream with an error too.
pub fn messages(bytes: &[u8]) -> Messages<'_> {
    Messages {
        reader: Some(mcap::io::MessageReader::new_with_options(
            std::io::Cursor::new(bytes),
            LinearReaderOptions::default()
                .with_record_length_limit(bytes.len().max(RECORD_LIMIT))
                .with_skip_end_magic(true)
                .with_validate_chunk_crcs(true),
        )),
    }
}

/// The messages of a bag ([`messages`]).
pub struct Messages<'a> {
    reader: Option<mcap::io::MessageReader<std::io::Cursor<&'a [u8]>>>,
}

impl Iterator for Messages<'_> {
    type Item = Result<mcap::Message<'static>, mcap::McapError>;

    fn next(&mut self) -> Option<Self::Item> {
        let reader = self.reader.as_mut()?;
        match quiet_catch(|| reader.next()) {
            Ok(next) => next,
            Err(why) => {
                self.reader = None;
                Some(Err(mcap::McapError::Io(std::io::Error::other(format!(
                    "malformed record (the mcap reader failed: {why})"
                )))))
            }
        }
    }
}

thread_local! {
    /// Set while this thread runs the mcap reader under [`quiet_catch`].
    static IN_READER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, turning a panic into an error carrying its message; the panic is not
/// printed (the process's panic hook is wrapped once to stay silent for these alone, and
/// runs as before for every other panic).
fn quiet_catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_READER.with(|r| r.get()) {
                previous(info);
            }
        }));
    });
    IN_READER.with(|r| r.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_READER.with(|r| r.set(false));
    result.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}

/// Reads every message from the start until the end or the first damaged record,
/// calling `each` for each message. Returns what was read, and how many messages.
pub fn scan(
    path: &Path,
    m: &Mapped,
    mut each: impl FnMut(&mcap::Message<'static>) -> Result<(), BagError>,
) -> Result<(BagInfo, u64), BagError> {
    let mut info = BagInfo {
        path: path.display().to_string(),
        files: vec![path.display().to_string()],
        file_bytes: m.bytes().len() as u64,
        ..BagInfo::default()
    };
    let stream = messages(m.bytes());
    let mut by_topic: BTreeMap<String, TopicSummary> = BTreeMap::new();
    let mut start = u64::MAX;
    let mut end = 0;
    let mut stopped = None;
    for msg in stream {
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                stopped = Some(Damage::unreadable_after(path, info.messages, e, None));
                break;
            }
        };
        each(&msg)?;
        info.messages += 1;
        start = start.min(msg.log_time);
        end = end.max(msg.log_time);
        let ch = &msg.channel;
        let t = by_topic
            .entry(ch.topic.clone())
            .or_insert_with(|| TopicSummary {
                topic: ch.topic.clone(),
                schema_name: ch
                    .schema
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                nerve_type: ch.metadata.get(meta::TYPE).cloned(),
                bytes: Some(0),
                ..TopicSummary::default()
            });
        t.count += 1;
        *t.bytes.get_or_insert(0) += msg.data.len() as u64;
    }
    if info.messages > 0 {
        info.start_ns = start;
        info.end_ns = end;
    }
    let footer = mcap::read::footer(m.bytes()).is_ok();
    info.complete = stopped.is_none() && footer;
    if !info.complete {
        let what = match stopped {
            Some(d) if footer => d.what,
            Some(d) => format!("{NO_FOOTER}, and {}", d.what),
            None => NO_FOOTER.to_string(),
        };
        info.damage = Some(Damage {
            file: info.path.clone(),
            what,
            read: info.messages,
            promised: promised_by_statistics(m.bytes()),
        });
    }
    info.topics = by_topic.into_values().collect();
    finish(&mut info);
    let n = info.messages;
    Ok((info, n))
}

/// Writes every message readable in `input` to a new, complete bag at `output` (the
/// channels, schemas and metadata as recorded). Returns what was saved.
pub fn recover(input: &Path, output: &Path) -> Result<BagInfo, BagError> {
    let m = Mapped::open(input)?;
    // the same file under another name (./a.mcap, a link) would be truncated while mapped
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if input == output || same(input, output) {
        return Err(BagError::Options(format!(
            "recover writes a new file: {} is the damaged bag itself",
            output.display()
        )));
    }
    let f = File::create(output).map_err(|e| BagError::io(output, e))?;
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .create(std::io::BufWriter::new(f))
        .map_err(|e| BagError::mcap(output, e))?;
    let mut ids: BTreeMap<u16, u16> = BTreeMap::new();
    let (mut info, _) = scan(input, &m, |msg| {
        let ch = &msg.channel;
        let id = match ids.get(&ch.id) {
            Some(&id) => id,
            None => {
                let schema = match &ch.schema {
                    Some(s) => w
                        .add_schema(&s.name, &s.encoding, &s.data)
                        .map_err(|e| BagError::mcap(output, e))?,
                    None => 0,
                };
                let id = w
                    .add_channel(schema, &ch.topic, &ch.message_encoding, &ch.metadata)
                    .map_err(|e| BagError::mcap(output, e))?;
                ids.insert(ch.id, id);
                id
            }
        };
        let header = mcap::records::MessageHeader {
            channel_id: id,
            sequence: msg.sequence,
            log_time: msg.log_time,
            publish_time: msg.publish_time,
        };
        w.write_to_known_channel(&header, &msg.data)
            .map_err(|e| BagError::mcap(output, e))
    })?;
    w.finish().map_err(|e| BagError::mcap(output, e))?;
    info.path = output.display().to_string();
    info.files = vec![info.path.clone()];
    Ok(info)
}

/// Whether a channel is one this crate can decode (CDR with a `ros2msg` schema).
pub fn is_cdr(ch: &mcap::Channel) -> bool {
    ch.message_encoding == MESSAGE_ENCODING
        && ch
            .schema
            .as_ref()
            .is_some_and(|s| s.encoding == SCHEMA_ENCODING)
}

#[cfg(test)]
mod tests {
    #[test]
    fn split_files_are_read_in_the_order_of_their_numbers() {
        let mut names = vec!["b_10.mcap", "b_2.mcap", "b_0.mcap", "a.mcap", "b_1.mcap"];
        names.sort_by(|a, b| super::natural_order(a, b));
        assert_eq!(
            names,
            ["a.mcap", "b_0.mcap", "b_1.mcap", "b_2.mcap", "b_10.mcap"]
        );
    }
}
