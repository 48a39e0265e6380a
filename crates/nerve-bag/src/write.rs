//! Writing a bag directly, without a live recorder: tests, simulators and tools that make
//! input bags ([`BagWriter`]).
//!
//! Channels are declared as the recorder declares them (the same schema, encoding and the
//! channel metadata [`crate::meta::TYPE`] and [`crate::meta::SCHEMA`]), so a bag written
//! here is read back by `nerve bag info`, replayed by `nerve bag play` and `nerve replay`,
//! and compared by [`crate::compare`] like a recorded one.
//!
//! ```no_run
//! # fn main() -> Result<(), nerve_bag::BagError> {
//! use nerve_bag::write::BagWriter;
//! let mut bag = BagWriter::new("input.mcap")?;
//! bag.add_topic::<nerve_msgs::Odometry>("/odom")?;
//! let odom = nerve_msgs::Odometry::default();
//! bag.write("/odom", 1_700_000_000_000_000_000, &odom)?;
//! bag.finish()?;
//! # Ok(())
//! # }
//! ```

use crate::encoding::Encoding;
use crate::{meta, BagError};
use nerve::message::schema::Schema;
use nerve::Message;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Declares a channel of `topic` in `writer` as every bag of Nerve declares it: the
/// encoding's schema, and the Nerve type and its schema (if known) in the channel's
/// metadata. `path` names the file in errors.
pub(crate) fn add_channel<W: std::io::Write + std::io::Seek>(
    writer: &mut mcap::Writer<W>,
    path: &Path,
    topic: &str,
    type_name: &str,
    schema: Option<&Schema>,
    encoding: &Encoding,
) -> Result<u16, BagError> {
    let schema_id = writer
        .add_schema(
            &encoding.schema_name,
            encoding.schema_encoding,
            &encoding.schema_data,
        )
        .map_err(|e| BagError::mcap(path, e))?;
    let mut metadata = BTreeMap::new();
    metadata.insert(meta::TYPE.to_string(), type_name.to_string());
    if let Some(s) = schema {
        metadata.insert(meta::SCHEMA.to_string(), s.encode());
    }
    writer
        .add_channel(schema_id, topic, encoding.message_encoding, &metadata)
        .map_err(|e| BagError::mcap(path, e))
}

/// One declared topic.
struct Channel {
    id: u16,
    encoding: Encoding,
    /// The Nerve type's layout hash (a write of another type is refused).
    layout_hash: u64,
    type_name: String,
    /// MCAP sequence of the next message (from 1, as a publisher's).
    next_seq: u32,
}

/// Writes an MCAP bag message by message (see the module docs).
pub struct BagWriter {
    path: PathBuf,
    writer: mcap::Writer<BufWriter<File>>,
    channels: BTreeMap<String, Channel>,
    /// Payload and CDR buffers, reused.
    payload: Vec<u8>,
    cdr: Vec<u8>,
}

impl BagWriter {
    /// Creates a new bag at `path`; an existing file is an error (as for the recorder).
    pub fn new(path: impl AsRef<Path>) -> Result<BagWriter, BagError> {
        BagWriter::create(path, false)
    }

    /// Creates a bag at `path`, replacing an existing file when `overwrite` is set.
    pub fn create(path: impl AsRef<Path>, overwrite: bool) -> Result<BagWriter, BagError> {
        let path = path.as_ref().to_path_buf();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .create_new(!overwrite)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => BagError::Options(format!(
                    "{} exists already: choose another output or allow overwriting it",
                    path.display()
                )),
                _ => BagError::io(&path, e),
            })?;
        let writer = mcap::WriteOptions::new()
            .compression(None)
            .profile("ros2")
            .library(concat!("nerve-bag ", env!("CARGO_PKG_VERSION")))
            .create(BufWriter::with_capacity(1 << 20, f))
            .map_err(|e| BagError::mcap(&path, e))?;
        Ok(BagWriter {
            path,
            writer,
            channels: BTreeMap::new(),
            payload: Vec::new(),
            cdr: Vec::new(),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Declares `topic` carrying `M` (again for the same type: nothing happens; for
    /// another type: an error).
    pub fn add_topic<M: Message>(&mut self, topic: &str) -> Result<(), BagError> {
        self.add_topic_schema(topic, &Schema::of::<M>())
    }

    /// Declares `topic` carrying the type `schema` describes.
    pub fn add_topic_schema(&mut self, topic: &str, schema: &Schema) -> Result<(), BagError> {
        if let Some(c) = self.channels.get(topic) {
            if c.layout_hash == schema.layout_hash {
                return Ok(());
            }
            return Err(BagError::Topic {
                topic: topic.to_string(),
                reason: format!(
                    "declared with type {}, now with {}",
                    c.type_name, schema.name
                ),
            });
        }
        let encoding = Encoding::for_schema(schema)?;
        let id = add_channel(
            &mut self.writer,
            &self.path,
            topic,
            &schema.name,
            Some(schema),
            &encoding,
        )?;
        self.channels.insert(
            topic.to_string(),
            Channel {
                id,
                encoding,
                layout_hash: schema.layout_hash,
                type_name: schema.name.clone(),
                next_seq: 1,
            },
        );
        Ok(())
    }

    /// Writes a fixed-size message (or a slice message with no elements) on `topic`
    /// (declared first with [`BagWriter::add_topic`]) at `log_time` (ns since the Unix
    /// epoch, also its publish time).
    pub fn write<M: Message>(
        &mut self,
        topic: &str,
        log_time: u64,
        msg: &M,
    ) -> Result<(), BagError> {
        self.write_slice(topic, log_time, msg, &[])
    }

    /// Writes a message with its slice elements (a `LaserScan` and its ranges).
    pub fn write_slice<M: Message>(
        &mut self,
        topic: &str,
        log_time: u64,
        head: &M,
        elems: &[M::Elem],
    ) -> Result<(), BagError> {
        let hash = nerve::TypeInfo::of::<M>().layout_hash;
        match self.channels.get(topic) {
            None => {
                return Err(BagError::Topic {
                    topic: topic.to_string(),
                    reason: "not declared (add_topic first)".into(),
                })
            }
            Some(c) if c.layout_hash != hash => {
                return Err(BagError::Topic {
                    topic: topic.to_string(),
                    reason: format!(
                        "declared with type {}, written as {}",
                        c.type_name,
                        M::TYPE_NAME
                    ),
                })
            }
            Some(_) => {}
        }
        let mut payload = std::mem::take(&mut self.payload);
        payload.clear();
        payload.extend_from_slice(nerve::message::as_bytes(head));
        if std::mem::size_of::<M::Elem>() > 0 {
            payload.resize(nerve::message::elems_offset::<M>(), 0);
            for e in elems {
                payload.extend_from_slice(nerve::message::as_bytes(e));
            }
        }
        let r = self
            .write_payload(topic, log_time, log_time, &payload)
            .map(|_| ());
        self.payload = payload;
        r
    }

    /// Writes a Nerve payload (head, padding, elements: the bytes a sample carries) on
    /// `topic`, converted with the topic's encoding; returns the message as written.
    pub fn write_payload(
        &mut self,
        topic: &str,
        log_time: u64,
        publish_time: u64,
        payload: &[u8],
    ) -> Result<&[u8], BagError> {
        let c = self
            .channels
            .get_mut(topic)
            .ok_or_else(|| BagError::Topic {
                topic: topic.to_string(),
                reason: "not declared (add_topic first)".into(),
            })?;
        c.encoding.encode(payload, &mut self.cdr)?;
        let header = mcap::records::MessageHeader {
            channel_id: c.id,
            sequence: c.next_seq,
            log_time,
            publish_time,
        };
        c.next_seq = c.next_seq.wrapping_add(1);
        self.writer
            .write_to_known_channel(&header, &self.cdr)
            .map_err(|e| BagError::mcap(&self.path, e))?;
        Ok(&self.cdr)
    }

    /// Writes the summary and closes the file (synced to the disk).
    pub fn finish(mut self) -> Result<(), BagError> {
        self.writer
            .finish()
            .map_err(|e| BagError::mcap(&self.path, e))?;
        let file = self
            .writer
            .into_inner()
            .into_inner()
            .map_err(|e| BagError::io(&self.path, e.into_error()))?;
        file.sync_all().map_err(|e| BagError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve_msgs::{LaserScan, Odometry, Time};

    #[test]
    fn a_written_bag_reads_back_with_its_types_times_and_payloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.mcap");
        let mut bag = BagWriter::new(&path).unwrap();
        bag.add_topic::<LaserScan>("/scan").unwrap();
        bag.add_topic::<Odometry>("/odom").unwrap();
        bag.add_topic::<Odometry>("/odom").unwrap();
        assert!(bag.add_topic::<LaserScan>("/odom").is_err(), "another type");
        assert!(bag.write("/nope", 1, &Odometry::default()).is_err());
        assert!(bag.write("/odom", 1, &LaserScan::default()).is_err());
        let t0 = 1_700_000_000_000_000_000u64;
        for i in 0..3u64 {
            let mut scan = LaserScan::default();
            scan.header.stamp = Time {
                nanos: (t0 + i * 100_000_000) as i64,
            };
            scan.range_max = 10.0;
            let ranges: Vec<f32> = (0..5).map(|k| k as f32 + i as f32).collect();
            bag.write_slice("/scan", t0 + i * 100_000_000, &scan, &ranges)
                .unwrap();
            let mut odom = Odometry::default();
            odom.pose.position.x = i as f64;
            bag.write("/odom", t0 + i * 100_000_000 + 1, &odom).unwrap();
        }
        bag.finish().unwrap();
        assert!(BagWriter::new(&path).is_err(), "an existing file is kept");

        // read back: channels carry the recorder's metadata, payloads decode
        let bytes = std::fs::read(&path).unwrap();
        let mut scans = Vec::new();
        let mut odoms = Vec::new();
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            let schema = Schema::decode(&m.channel.metadata[meta::SCHEMA]).unwrap();
            assert_eq!(m.channel.metadata[meta::TYPE], schema.name);
            let enc = Encoding::for_schema(&schema).unwrap();
            let mut out = Vec::new();
            enc.decode(&m.data, &mut out).unwrap();
            match m.channel.topic.as_str() {
                "/scan" => scans.push((m.log_time, m.sequence, out)),
                "/odom" => odoms.push(nerve::message::read_pod::<Odometry>(&out).unwrap()),
                t => panic!("unexpected topic {t}"),
            }
        }
        assert_eq!(scans.len(), 3);
        assert_eq!(odoms.len(), 3);
        assert_eq!(odoms[2].pose.position.x, 2.0);
        let (log_time, seq, payload) = &scans[1];
        assert_eq!((*log_time, *seq), (t0 + 100_000_000, 2));
        let head = nerve::message::read_pod::<LaserScan>(payload).unwrap();
        assert_eq!(head.header.stamp.nanos, (t0 + 100_000_000) as i64);
        let off = nerve::message::elems_offset::<LaserScan>();
        let ranges: Vec<f32> = payload[off..]
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(ranges, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    }
}
