//! `nerve bridge foxglove --bag run.mcap`: a bag served to Foxglove with its playback bar
//! (play, pause, seek, speed).
//!
//! Every channel of the bag is advertised with the bag's own schema and message encoding
//! (what was recorded is sent as it is). The server declares the bag's time range
//! (`playback_time_range`, which gives the `playbackControl` capability) and `time`; a
//! playback thread streams the file's messages in order from the memory-mapped file
//! ([`crate::read::messages`]: nothing is loaded whole, memory stays bounded whatever the
//! bag's size), paced by their log times at the requested speed, broadcasting the bag's
//! time as it goes. A client's playback request ([`foxglove::websocket::PlaybackControlRequest`])
//! changes the state at once and is answered with the new state. A bag with a summary
//! (every bag Nerve and rosbag2 write) is read through its chunk index in log-time order:
//! a seek opens only the chunks from the time asked on ([`Cursor`]). A bag without one is
//! read from the file's start, and a seek skips to the time (its cost grows with the
//! distance into the file). Playback starts paused, as a file opened in Foxglove does.
//!
//! A damaged bag ([`crate::read::OnDamage`]) is refused at the start, unless tolerated;
//! a record found unreadable while playing ends the playback there, tells the clients
//! with an error status, and is kept in [`BagServer::damage`].

use crate::read::{self, Damage, Mapped, OnDamage};
use crate::BagError;
use foxglove::websocket::{
    Capability, PlaybackCommand, PlaybackControlRequest, PlaybackState, PlaybackStatus,
    ServerListener, Status,
};
use foxglove::{ChannelBuilder, PartialMetadata, RawChannel, WebSocketServer};
use mcap::sans_io::indexed_reader::{IndexedReadEvent, IndexedReader, IndexedReaderOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Slowest and fastest playback speeds accepted (others are clamped).
pub const SPEED_RANGE: (f32, f32) = (0.01, 100.0);
/// Longest the playback thread sleeps before looking at the state again.
const TICK: Duration = Duration::from_millis(20);
/// How often the bag's time is broadcast while playing, at most.
const TIME_PERIOD: Duration = Duration::from_millis(50);

/// The playback state the clients drive.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    /// Playing, paused or ended.
    pub status: PlaybackStatus,
    /// The bag time reached, ns.
    pub current: u64,
    /// Speed, a factor of real time.
    pub speed: f32,
    /// A seek not yet done by the playback thread.
    pub seek: Option<u64>,
    /// Changed since the playback thread last looked.
    pub changed: bool,
}

impl Control {
    /// Applies a client's request within the bag's `range`; the state to answer with.
    pub fn apply(&mut self, req: &PlaybackControlRequest, range: (u64, u64)) -> PlaybackState {
        let speed = if req.playback_speed.is_finite() {
            req.playback_speed.clamp(SPEED_RANGE.0, SPEED_RANGE.1)
        } else {
            self.speed
        };
        self.speed = speed;
        let did_seek = req.seek_time.is_some();
        if let Some(t) = req.seek_time {
            let t = t.clamp(range.0, range.1);
            self.seek = Some(t);
            self.current = t;
        }
        self.status = match req.playback_command {
            PlaybackCommand::Play if self.current >= range.1 && !did_seek => {
                // play at the end starts over, as a player does
                self.seek = Some(range.0);
                self.current = range.0;
                PlaybackStatus::Playing
            }
            PlaybackCommand::Play => PlaybackStatus::Playing,
            PlaybackCommand::Pause => PlaybackStatus::Paused,
        };
        self.changed = true;
        self.state(did_seek)
    }

    /// The state as the protocol sends it.
    pub fn state(&self, did_seek: bool) -> PlaybackState {
        PlaybackState {
            status: self.status,
            current_time: self.current,
            playback_speed: self.speed,
            did_seek,
            request_id: None,
        }
    }
}

struct Shared {
    control: Mutex<Control>,
    range: (u64, u64),
    stop: AtomicBool,
    /// The server, until the bag server stops.
    server: Mutex<Option<foxglove::WebSocketServerHandle>>,
    /// The bag's file, and the messages its summary promised.
    file: PathBuf,
    promised: Option<u64>,
    /// The damage found: on opening (tolerated), or while playing.
    damage: Mutex<Vec<Damage>>,
}

impl Shared {
    fn time(&self, t: u64) {
        if let Some(s) = self.server.lock().expect("poisoned").as_ref() {
            s.broadcast_time(t);
        }
    }

    fn state(&self, state: PlaybackState) {
        if let Some(s) = self.server.lock().expect("poisoned").as_ref() {
            s.broadcast_playback_state(state);
        }
    }

    /// A record that cannot be read, after `read` messages: kept (once per place: a
    /// bag played again meets it again) and told to the clients.
    fn damaged(&self, read: u64, why: &str) {
        let d = Damage::unreadable_after(&self.file, read, why, self.promised);
        let status = Status::error(format!("the bag is damaged: {d}"))
            .with_id("nerve-bag-damage".to_string());
        let mut all = self.damage.lock().expect("poisoned");
        if !all.contains(&d) {
            all.push(d);
        }
        drop(all);
        if let Some(s) = self.server.lock().expect("poisoned").as_ref() {
            s.publish_status(status);
        }
    }
}

struct Listener(Arc<Shared>);

impl ServerListener for Listener {
    fn on_playback_control_request(&self, req: PlaybackControlRequest) -> Option<PlaybackState> {
        let mut c = self.0.control.lock().expect("poisoned");
        Some(c.apply(&req, self.0.range))
    }
}

/// A bag being served; [`BagServer::stop`] (or dropping it) ends it.
pub struct BagServer {
    shared: Arc<Shared>,
    gate: super::gate::Gate,
    port: u16,
    player: Option<JoinHandle<()>>,
    /// Messages sent, by topic.
    sent: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl BagServer {
    /// Opens the bag at `path` and serves it on `host:port` (0: any free port); a damaged
    /// bag is refused unless `on_damage` tolerates it.
    pub fn start(
        path: &Path,
        host: &str,
        port: u16,
        backlog: usize,
        on_damage: OnDamage,
    ) -> Result<BagServer, BagError> {
        let info = read::info_checked(path, on_damage)?;
        if info.files.len() > 1 {
            return Err(BagError::Options(format!(
                "{}: a bag of {} files; serve its files one by one",
                path.display(),
                info.files.len()
            )));
        }
        let file = info
            .files
            .first()
            .map(PathBuf::from)
            .unwrap_or_else(|| path.to_path_buf());
        let mapped = Mapped::open(&file)?;
        let (start, end) = if info.messages == 0 {
            (0, 0)
        } else {
            (info.start_ns, info.end_ns.max(info.start_ns))
        };
        let shared = Arc::new(Shared {
            control: Mutex::new(Control {
                status: PlaybackStatus::Paused,
                current: start,
                speed: 1.0,
                seek: None,
                changed: false,
            }),
            range: (start, end),
            stop: AtomicBool::new(false),
            server: Mutex::new(None),
            file: file.clone(),
            promised: info
                .damage
                .as_ref()
                .map_or(Some(info.messages), |d| d.promised),
            damage: Mutex::new(info.damage.into_iter().collect()),
        });
        let fctx = foxglove::Context::new();
        let server = WebSocketServer::new()
            .name("nerve")
            .context(&fctx)
            .bind("127.0.0.1", 0)
            .message_backlog_size(backlog.max(1))
            .capabilities([Capability::Time])
            .playback_time_range(start, end)
            .listener(Arc::new(Listener(shared.clone())))
            .start_blocking()
            .map_err(|e| BagError::Io {
                path: "the bridge's server on 127.0.0.1".into(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let backend = std::net::SocketAddr::from(([127, 0, 0, 1], server.port()));
        *shared.server.lock().expect("poisoned") = Some(server);
        let gate = match super::gate::Gate::start(host, port, backend, backlog) {
            Ok(g) => g,
            Err(source) => {
                if let Some(s) = shared.server.lock().expect("poisoned").take() {
                    drop(s.stop());
                }
                return Err(BagError::Io {
                    path: format!("{host}:{port}"),
                    source,
                });
            }
        };
        // the channels are advertised before anyone connects: a summary lists them, else
        // the first pass over the file finds them
        let mut channels = Channels {
            fctx,
            by_id: BTreeMap::new(),
        };
        let summary = match mcap::Summary::read(mapped.bytes()) {
            Ok(Some(s)) => {
                for ch in s.channels.values() {
                    channels.get(ch);
                }
                // an index is only of use if it covers the messages
                Some(s).filter(|s| !s.chunk_indexes.is_empty())
            }
            _ => {
                for m in read::messages(mapped.bytes()).map_while(Result::ok) {
                    channels.get(&m.channel);
                }
                None
            }
        };
        let sent = Arc::new(Mutex::new(BTreeMap::new()));
        let player = {
            let (shared, sent) = (shared.clone(), sent.clone());
            std::thread::Builder::new()
                .name("bridge-playback".into())
                .spawn(move || play(&shared, &mapped, summary.as_ref(), &mut channels, &sent))
                .map_err(|e| BagError::io(Path::new("bridge-playback thread"), e))?
        };
        Ok(BagServer {
            port: gate.port(),
            shared,
            gate,
            player: Some(player),
            sent,
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The bag's time range, ns.
    pub fn range(&self) -> (u64, u64) {
        self.shared.range
    }

    /// Messages dropped for slow clients so far (each is told its own count).
    pub fn client_drops(&self) -> u64 {
        self.gate.dropped()
    }

    /// Messages sent so far, by topic.
    pub fn sent(&self) -> BTreeMap<String, u64> {
        self.sent.lock().expect("poisoned").clone()
    }

    /// The damage found so far: on opening (tolerated), or while playing (the playback
    /// ended there).
    pub fn damage(&self) -> Vec<Damage> {
        self.shared.damage.lock().expect("poisoned").clone()
    }

    /// Stops playback and the server.
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.gate.stop();
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self.player.take() {
            let _ = p.join();
        }
        if let Some(s) = self.shared.server.lock().expect("poisoned").take() {
            drop(s.stop());
        }
    }
}

impl Drop for BagServer {
    fn drop(&mut self) {
        if self.player.is_some() {
            self.finish();
        }
    }
}

/// The bag's channels as the server's.
struct Channels {
    fctx: Arc<foxglove::Context>,
    by_id: BTreeMap<u16, Option<Arc<RawChannel>>>,
}

impl Channels {
    /// The server's channel of a bag channel (made on first sight; `None` if it cannot be).
    fn get(&mut self, ch: &mcap::Channel) -> Option<Arc<RawChannel>> {
        let fctx = &self.fctx;
        self.by_id
            .entry(ch.id)
            .or_insert_with(|| {
                let mut b = ChannelBuilder::new(ch.topic.clone())
                    .context(fctx)
                    .message_encoding(ch.message_encoding.clone());
                if let Some(s) = &ch.schema {
                    b = b.schema(foxglove::Schema::new(
                        s.name.clone(),
                        s.encoding.clone(),
                        s.data.to_vec(),
                    ));
                }
                b.build_raw().ok()
            })
            .clone()
    }
}

/// The bag's messages in log-time order from a time on.
enum Cursor<'a> {
    /// Through the summary's chunk index: only the chunks from the time on are read.
    Indexed {
        bytes: &'a [u8],
        summary: &'a mcap::Summary,
        reader: IndexedReader,
    },
    /// From the file's start (a bag without a summary), skipping what is older.
    Linear {
        stream: read::Messages<'a>,
        from: u64,
    },
}

impl<'a> Cursor<'a> {
    /// The messages at or after `from` (ns).
    fn at(bytes: &'a [u8], summary: Option<&'a mcap::Summary>, from: u64) -> Cursor<'a> {
        let options = IndexedReaderOptions::new()
            .starting_at(from)
            .with_record_length_limit(bytes.len());
        match summary.map(|s| (s, IndexedReader::new_with_options(s, options))) {
            Some((summary, Ok(reader))) => Cursor::Indexed {
                bytes,
                summary,
                reader,
            },
            _ => Cursor::Linear {
                stream: read::messages(bytes),
                from,
            },
        }
    }

    /// The next message; `None` at the end, an error at the first unreadable record
    /// (after which there is nothing more).
    fn next(&mut self) -> Option<Result<mcap::Message<'static>, String>> {
        match self {
            Cursor::Linear { stream, from } => loop {
                match stream.next()? {
                    Ok(m) if m.log_time < *from => continue,
                    Ok(m) => return Some(Ok(m)),
                    Err(e) => return Some(Err(e.to_string())),
                }
            },
            Cursor::Indexed {
                bytes,
                summary,
                reader,
            } => loop {
                let event = match reader.next_event()? {
                    Ok(e) => e,
                    Err(e) => return Some(Err(e.to_string())),
                };
                match event {
                    IndexedReadEvent::ReadChunkRequest { offset, length } => {
                        let Some(chunk) = usize::try_from(offset)
                            .ok()
                            .and_then(|o| bytes.get(o..o.checked_add(length)?))
                        else {
                            return Some(Err(format!(
                                "the chunk index points past the file's end ({length} bytes \
                                 at {offset})"
                            )));
                        };
                        if let Err(e) = reader.insert_chunk_record_data(offset, chunk) {
                            return Some(Err(e.to_string()));
                        }
                    }
                    IndexedReadEvent::Message { header, data } => {
                        // a message of a channel the summary lacks is skipped
                        let Some(channel) = summary.channels.get(&header.channel_id) else {
                            continue;
                        };
                        return Some(Ok(mcap::Message {
                            channel: channel.clone(),
                            sequence: header.sequence,
                            log_time: header.log_time,
                            publish_time: header.publish_time,
                            data: data.to_vec().into(),
                        }));
                    }
                }
            },
        }
    }
}

/// The cursor's next message (`read` counts them); a damaged record ends it, reported
/// to the clients and kept ([`Shared::damaged`]).
fn next_message(
    shared: &Shared,
    stream: &mut Cursor<'_>,
    read: &mut u64,
) -> Option<mcap::Message<'static>> {
    match stream.next()? {
        Ok(m) => {
            *read += 1;
            Some(m)
        }
        Err(why) => {
            shared.damaged(*read, &why);
            None
        }
    }
}

/// The playback thread.
fn play(
    shared: &Shared,
    mapped: &Mapped,
    summary: Option<&mcap::Summary>,
    channels: &mut Channels,
    sent: &Mutex<BTreeMap<String, u64>>,
) {
    let (start, end) = shared.range;
    let mut stream = Cursor::at(mapped.bytes(), summary, start);
    // messages the cursor gave since it was made (where a damaged record stops it)
    let mut read = 0u64;
    // pacing: bag time `anchor.1` is shown at wall time `anchor.0`
    let mut anchor: Option<(Instant, u64)> = None;
    let mut last_time = Instant::now() - TIME_PERIOD;
    let mut next: Option<mcap::Message<'static>> = None;
    shared.time(start);
    while !shared.stop.load(Ordering::Relaxed) {
        let (status, speed, seek) = {
            let mut c = shared.control.lock().expect("poisoned");
            if c.changed {
                c.changed = false;
                anchor = None;
            }
            (c.status, c.speed, c.seek.take())
        };
        if let Some(t) = seek {
            stream = Cursor::at(mapped.bytes(), summary, t);
            read = 0;
            next = next_message(shared, &mut stream, &mut read);
            anchor = None;
            shared.time(t);
        }
        if status != PlaybackStatus::Playing {
            std::thread::sleep(TICK);
            continue;
        }
        if next.is_none() {
            next = next_message(shared, &mut stream, &mut read);
        }
        let Some(m) = next.take() else {
            // the end: say so once, and wait for a seek or a play
            let mut c = shared.control.lock().expect("poisoned");
            if c.status == PlaybackStatus::Playing && !c.changed {
                c.status = PlaybackStatus::Ended;
                c.current = end;
                let state = c.state(false);
                drop(c);
                shared.time(end);
                shared.state(state);
            }
            continue;
        };
        let (wall0, bag0) = *anchor.get_or_insert((Instant::now(), m.log_time));
        let due = wall0
            + Duration::from_secs_f64(m.log_time.saturating_sub(bag0) as f64 / 1e9 / speed as f64);
        let now = Instant::now();
        if due > now {
            // not yet: sleep a tick at most, then look at the state again
            std::thread::sleep((due - now).min(TICK));
            if last_time.elapsed() >= TIME_PERIOD {
                last_time = Instant::now();
                let t = bag0 + (wall0.elapsed().as_secs_f64() * speed as f64 * 1e9) as u64;
                shared.time(t.min(m.log_time));
            }
            next = Some(m);
            continue;
        }
        {
            // sent under the state's lock: once a client's pause or seek is answered, no
            // message of the old state follows
            let mut c = shared.control.lock().expect("poisoned");
            if c.changed || c.status != PlaybackStatus::Playing {
                next = Some(m);
                continue;
            }
            if let Some(ch) = channels.get(&m.channel) {
                ch.log_with_meta(
                    &m.data,
                    PartialMetadata {
                        log_time: Some(m.log_time),
                    },
                );
                let mut s = sent.lock().expect("poisoned");
                *s.entry(m.channel.topic.clone()).or_default() += 1;
            }
            c.current = m.log_time;
        }
        if last_time.elapsed() >= TIME_PERIOD {
            last_time = Instant::now();
            shared.time(m.log_time);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bag of 100 messages, 10 ms apart, in many small chunks; with or without the
    /// summary (and its chunk index).
    fn bag(summary: bool) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = mcap::WriteOptions::new()
            .chunk_size(Some(256))
            .emit_summary_records(summary)
            .emit_chunk_indexes(summary)
            .emit_summary_offsets(summary)
            .create(&mut out)
            .unwrap();
        let schema = w.add_schema("t/M", "jsonschema", b"{}").unwrap();
        let ch = w
            .add_channel(schema, "/m", "json", &BTreeMap::new())
            .unwrap();
        for i in 0..100u32 {
            let header = mcap::records::MessageHeader {
                channel_id: ch,
                sequence: i,
                log_time: 1_000_000_000 + u64::from(i) * 10_000_000,
                publish_time: 0,
            };
            w.write_to_known_channel(&header, format!("{{\"i\":{i}}}").as_bytes())
                .unwrap();
        }
        w.finish().unwrap();
        drop(w);
        out.into_inner()
    }

    #[test]
    fn a_seek_reads_on_from_the_time_asked_with_or_without_an_index() {
        for indexed in [true, false] {
            let bytes = bag(indexed);
            let summary = mcap::Summary::read(&bytes).unwrap();
            assert_eq!(
                summary
                    .as_ref()
                    .is_some_and(|s| !s.chunk_indexes.is_empty()),
                indexed
            );
            let mut c = Cursor::at(&bytes, summary.as_ref(), 1_500_000_000);
            assert_eq!(matches!(c, Cursor::Indexed { .. }), indexed);
            let seqs: Vec<u32> = std::iter::from_fn(|| c.next())
                .map(|m| m.unwrap().sequence)
                .collect();
            assert_eq!(seqs, (50..100).collect::<Vec<_>>(), "indexed: {indexed}");
            assert!(Cursor::at(&bytes, summary.as_ref(), u64::MAX)
                .next()
                .is_none());
        }
    }

    fn req(cmd: PlaybackCommand, speed: f32, seek: Option<u64>) -> PlaybackControlRequest {
        PlaybackControlRequest {
            playback_command: cmd,
            playback_speed: speed,
            seek_time: seek,
            request_id: "r".into(),
        }
    }

    #[test]
    fn requests_play_pause_seek_within_the_range_and_clamp_the_speed() {
        let mut c = Control {
            status: PlaybackStatus::Paused,
            current: 100,
            speed: 1.0,
            seek: None,
            changed: false,
        };
        let s = c.apply(&req(PlaybackCommand::Play, 2.0, None), (100, 200));
        assert_eq!(
            (s.status, s.playback_speed, s.did_seek),
            (PlaybackStatus::Playing, 2.0, false)
        );
        let s = c.apply(&req(PlaybackCommand::Pause, 2.0, Some(150)), (100, 200));
        assert_eq!(
            (s.status, s.current_time, s.did_seek),
            (PlaybackStatus::Paused, 150, true)
        );
        assert_eq!(c.seek, Some(150));
        let s = c.apply(&req(PlaybackCommand::Play, f32::NAN, Some(900)), (100, 200));
        assert_eq!((s.current_time, s.playback_speed), (200, 2.0));
        let s = c.apply(&req(PlaybackCommand::Play, 1e9, None), (100, 200));
        assert_eq!(s.playback_speed, SPEED_RANGE.1);
        // play at the end starts over
        c.current = 200;
        c.seek = None;
        let s = c.apply(&req(PlaybackCommand::Play, 1.0, None), (100, 200));
        assert_eq!((s.current_time, c.seek), (100, Some(100)));
    }
}
