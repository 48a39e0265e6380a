//! Local data plane on iceoryx2: nodes, topic services with Nerve's type identity, and the
//! mapping from [`Qos`] to iceoryx2 settings. No iceoryx2 type leaves the crate.

use crate::config::Config;
use crate::error::{ContextError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::TypeInfo;
use crate::qos::{Overflow, Qos};
use iceoryx2::prelude::*;
use iceoryx2::service::attribute::{AttributeKey, AttributeSpecifier, AttributeValue};
use iceoryx2::service::builder::publish_subscribe::{
    PublishSubscribeCreateError, PublishSubscribeOpenError,
};
use std::time::{Duration, Instant};

/// The iceoryx2 service flavour Nerve uses (inter-process, single-threaded ports).
pub(crate) type Ipc = ipc::Service;
/// An iceoryx2 node.
pub(crate) type IoxNode = iceoryx2::node::Node<Ipc>;
/// A topic's iceoryx2 service: byte payload behind Nerve's sample header.
pub(crate) type TopicService =
    iceoryx2::service::port_factory::publish_subscribe::PortFactory<Ipc, [Word], SampleHeader>;
pub(crate) type IoxPublisher = iceoryx2::port::publisher::Publisher<Ipc, [Word], SampleHeader>;
pub(crate) type IoxSubscriber = iceoryx2::port::subscriber::Subscriber<Ipc, [Word], SampleHeader>;
pub(crate) type IoxSample = iceoryx2::sample::Sample<Ipc, [Word], SampleHeader>;
pub(crate) type IoxSampleMut = iceoryx2::sample_mut::SampleMut<Ipc, [Word], SampleHeader>;

/// Payloads travel as 8-byte words: every payload is 8-byte aligned without asking
/// iceoryx2 for extra alignment (which it applies per element, multiplying the memory
/// of a byte slice by the alignment). The exact byte length is in [`SampleHeader`].
pub(crate) type Word = u64;
/// Largest payload alignment Nerve supports.
pub(crate) const MAX_ALIGN: usize = crate::message::MAX_ALIGN;
const _: () = assert!(MAX_ALIGN == core::mem::align_of::<Word>());

/// Words needed for `bytes` payload bytes.
pub(crate) fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(core::mem::size_of::<Word>())
}

/// Views a word slice as bytes.
pub(crate) fn words_as_bytes(w: &[Word]) -> &[u8] {
    // SAFETY: a u64 slice viewed as bytes: same memory, u8 has no alignment or validity
    // requirement, the length covers exactly the words.
    unsafe { core::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(w)) }
}

/// Views a mutable word slice as bytes.
pub(crate) fn words_as_bytes_mut(w: &mut [Word]) -> &mut [u8] {
    // SAFETY: a u64 slice viewed as bytes: same memory, u8 has no alignment or validity
    // requirement (and any byte written leaves valid u64s), the length covers exactly
    // the words, and the borrow is exclusive for its lifetime.
    unsafe { core::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, std::mem::size_of_val(w)) }
}

/// Checks a received payload (its header's type hash and length, the words it occupies)
/// against the expected layout; returns the number of slice elements.
pub(crate) fn check_payload(
    type_hash: u64,
    payload_len: u64,
    payload: &[Word],
    ty: &TypeInfo,
) -> Result<usize, String> {
    let bytes = std::mem::size_of_val(payload);
    if type_hash != ty.layout_hash {
        return Err(format!(
            "type hash {type_hash:016x} differs from {}'s",
            ty.name
        ));
    }
    let len = usize::try_from(payload_len).unwrap_or(usize::MAX);
    if len > bytes || len < ty.head_size {
        return Err(format!(
            "payload length {len} outside {}..={bytes}",
            ty.head_size
        ));
    }
    if !(payload.as_ptr() as usize).is_multiple_of(ty.align) {
        return Err("misaligned payload".into());
    }
    if ty.elem_size == 0 {
        return Ok(0);
    }
    let body = len.saturating_sub(ty.elems_offset());
    if len < ty.elems_offset() || !body.is_multiple_of(ty.elem_size) {
        return Err(format!(
            "{body} element bytes are not a multiple of {}",
            ty.elem_size
        ));
    }
    Ok(body / ty.elem_size)
}

/// Attribute that records a topic's message type.
pub(crate) const TYPE_ATTRIBUTE: &str = "nerve.type";
/// Attribute whose values, in order, hold the topic's encoded schema.
pub(crate) const SCHEMA_ATTRIBUTE: &str = "nerve.schema";
/// Most bytes of schema a topic's record holds: iceoryx2 keeps at most 8 attribute values
/// of 256 bytes each, one of them the type record. A larger schema (up to
/// [`MAX_SCHEMA_BYTES`]) is written to a file of the domain named by its layout hash
/// ([`schema_file`]) and the record holds [`SCHEMA_IN_FILE`] instead.
/// iceoryx2 keeps attribute values sorted, not in the order defined, so every chunk
/// starts with its index and a colon ([`SCHEMA_CHUNK`] bytes of schema follow).
pub(crate) const MAX_RECORDED_SCHEMA: usize = 7 * SCHEMA_CHUNK;
/// Schema bytes per attribute value (256 less the `i:` index prefix).
const SCHEMA_CHUNK: usize = 254;
/// The schema record of a topic whose schema is in its [`schema_file`].
pub(crate) const SCHEMA_IN_FILE: &str = "@file";

/// The file holding the schema of layout `hash` in the domain of `node`, for schemas too
/// large for a topic's record. Named by the hash, so every topic of the type shares it;
/// removed with the domain's other files.
pub(crate) fn schema_file(node: &IoxNode, hash: u64) -> String {
    format!("/dev/shm/{}schema_{hash:016x}", node.config().global.prefix)
}
/// Publishers that left with unread samples whose samples a subscriber still keeps
/// (iceoryx2's `subscriber_expired_connection_buffer`; its default is 128).
pub(crate) const EXPIRED_CONNECTIONS: usize = 8;
/// Prefix of every topic's iceoryx2 service name.
pub(crate) const TOPIC_PREFIX: &str = "topic:";

/// Builds the iceoryx2 configuration of a Nerve domain.
pub(crate) fn iceoryx_config(cfg: &Config) -> Result<iceoryx2::config::Config, ContextError> {
    let mut iox = iceoryx2::config::Config::default();
    let dir_err = |reason: &str| ContextError::StateDir {
        path: cfg.state_dir.display().to_string(),
        reason: reason.to_string(),
    };
    let mut dir = cfg
        .state_dir
        .to_str()
        .ok_or_else(|| dir_err("not valid UTF-8"))?
        .to_string();
    if !dir.starts_with('/') {
        return Err(dir_err("must be an absolute path"));
    }
    if !dir.ends_with('/') {
        dir.push('/');
    }
    let path = Path::new(dir.as_bytes()).map_err(|_| dir_err("not a valid path"))?;
    iox.global.set_root_path(&path);
    iox.global.prefix =
        FileName::new(cfg.file_prefix().as_bytes()).map_err(|_| dir_err("invalid file prefix"))?;
    iox.global.node.cleanup_dead_nodes_on_creation = true;
    iox.global.node.cleanup_dead_nodes_on_destruction = true;
    iox.global.service.cleanup_dead_nodes_on_open = true;
    // Every iceoryx2 subscriber preallocates room for the connections of its topic's
    // publishers plus this many publishers that left with samples still unread (about
    // 3.6 KiB each, touched at creation). iceoryx2's default of 128 made each subscription
    // cost 0.5 MB of private memory (issue 46); a topic has at most `max_publishers`
    // connected publishers (8 by default), and a subscriber now keeps the unread samples
    // of as many that left (iceoryx2 raises it to the topic's borrow limit if that is
    // larger, so borrowed samples stay valid).
    iox.defaults
        .publish_subscribe
        .subscriber_expired_connection_buffer = EXPIRED_CONNECTIONS;
    Ok(iox)
}

/// Removes every file of the domain but its doorbell: iceoryx2's management segment,
/// services, ports and node records, large schemas, tensor pools and rings, also what
/// killed processes left (whose node records may be gone with their state directory).
/// Call only while holding the domain's doorbell exclusively: no live process uses the
/// domain, so nothing of it is in use (a process that joins waits for the lock).
pub(crate) fn remove_domain_files(config: &Config) {
    let bell = crate::transport::doorbell::path(config);
    for path in domain_files(config) {
        if path != bell {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Files of a domain in /dev/shm (flat, as iceoryx2 and Nerve write them there) and in
/// the state directory (its subdirectories too: iceoryx2's node and service records).
pub(crate) fn domain_files(config: &Config) -> std::collections::BTreeSet<String> {
    let prefix = config.file_prefix();
    let mut files: std::collections::BTreeSet<String> = shm_file_names()
        .filter(|name| name.starts_with(&prefix))
        .map(|name| format!("/dev/shm/{name}"))
        .collect();
    let mut walk = vec![config.state_dir.clone()];
    while let Some(dir) = walk.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            // the entry's own type, from the directory read: no stat per file, and a
            // link to a folder above is not followed round in circles
            let Ok(kind) = e.file_type() else {
                continue;
            };
            if kind.is_dir() {
                walk.push(e.path());
            } else if e.file_name().to_string_lossy().starts_with(&prefix) {
                files.insert(e.path().display().to_string());
            }
        }
    }
    files
}

/// The names of the files in /dev/shm (none if it cannot be read).
pub(crate) fn shm_file_names() -> impl Iterator<Item = String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

/// The domain's iceoryx2 management segments in /dev/shm (one per iceoryx2 version that
/// used the domain: the file name carries the version).
fn management_segments(iox: &iceoryx2::config::Config) -> Vec<std::path::PathBuf> {
    let prefix = iox.global.prefix.to_string();
    let suffix = iox.global.node.global_mgmt_suffix.to_string();
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(&suffix)
        })
        .map(|e| e.path())
        .collect()
}

/// Creates an iceoryx2 node; signal handling stays with the application.
pub(crate) fn create_node(iox: &iceoryx2::config::Config, name: &str) -> Result<IoxNode, String> {
    let node_name = NodeName::new(name).map_err(|e| format!("{e:?}"))?;
    let node = NodeBuilder::new()
        .name(&node_name)
        .config(iox)
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<Ipc>()
        .map_err(|e| match unwritable_state_dir(iox) {
            Some(why) => format!("{e:?}: {why}"),
            None => format!("{e:?}"),
        })?;
    restrict_management_segment(iox);
    // iceoryx2 reclaimed the domain's dead nodes just now; their rings go with them
    crate::transport::shm_ring::remove_orphans(&iox.global.prefix.to_string());
    Ok(node)
}

/// Why iceoryx2 could not create a node, where it is the state directory: the first of
/// it and its `nodes` and `services` folders that this user cannot write (another user
/// made it), by name. iceoryx2 itself says only `InternalError`.
fn unwritable_state_dir(iox: &iceoryx2::config::Config) -> Option<String> {
    use rustix::fs::Access;
    use std::os::unix::fs::MetadataExt;
    let root = std::path::PathBuf::from(iox.global.root_path().to_string());
    [root.clone(), root.join("nodes"), root.join("services")]
        .into_iter()
        .find_map(|dir| {
            let meta = std::fs::metadata(&dir).ok()?;
            let denied = rustix::fs::access(&dir, Access::WRITE_OK | Access::EXEC_OK).is_err();
            denied.then(|| {
                format!(
                    "the state directory {} is not writable by this user (uid {}): it belongs \
                     to uid {} with mode {:o}",
                    dir.display(),
                    rustix::process::getuid().as_raw(),
                    meta.uid(),
                    meta.mode() & 0o7777
                )
            })
        })
}

/// iceoryx2 creates its per-domain management segment (a node counter) readable and
/// writable by everyone; Nerve keeps every file of a domain owner-only.
fn restrict_management_segment(iox: &iceoryx2::config::Config) {
    use std::os::unix::fs::PermissionsExt;
    for path in management_segments(iox) {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
}

/// Encodes a type identity as one attribute value.
pub(crate) fn encode_type(t: &TypeInfo) -> String {
    format!(
        "{};{:016x};{};{};{};{}",
        t.name, t.layout_hash, t.head_size, t.elem_size, t.elem_align, t.align
    )
}

/// Decodes a type identity written by [`encode_type`].
pub(crate) fn decode_type(s: &str) -> Option<TypeInfo> {
    let mut it = s.rsplitn(6, ';');
    let align = it.next()?.parse().ok()?;
    let elem_align = it.next()?.parse().ok()?;
    let elem_size = it.next()?.parse().ok()?;
    let head_size = it.next()?.parse().ok()?;
    let layout_hash = u64::from_str_radix(it.next()?, 16).ok()?;
    let name = it.next()?.to_string();
    // records come from other processes: accept only sane layouts
    let pow2 = |a: usize| a.is_power_of_two() && a <= 4096;
    if !pow2(align) || !pow2(elem_align) || head_size > (1 << 30) || elem_size > (1 << 30) {
        return None;
    }
    Some(TypeInfo {
        name,
        layout_hash,
        head_size,
        elem_size,
        elem_align,
        align,
    })
}

/// Reads the type identity recorded on a topic service.
pub(crate) fn topic_type(service: &TopicService) -> Option<TypeInfo> {
    let key = AttributeKey::try_from(TYPE_ATTRIBUTE).ok()?;
    let v = service.attributes().key_value(&key, 0)?;
    decode_type(&v.to_string())
}

/// Reads the schema recorded on a topic service: `None` when none was recorded (created
/// by a type-erased tool, or too large to record), an error when it is malformed or does
/// not describe the topic's type (it is never trusted unchecked).
pub(crate) fn topic_schema(
    node: &IoxNode,
    service: &TopicService,
) -> Option<Result<crate::message::schema::Schema, crate::message::schema::SchemaError>> {
    use crate::message::schema::{Schema, SchemaError};
    let key = AttributeKey::try_from(SCHEMA_ATTRIBUTE).ok()?;
    let mut chunks = Vec::new();
    while let Some(v) = service.attributes().key_value(&key, chunks.len()) {
        chunks.push(v.to_string());
    }
    if chunks.is_empty() {
        return None;
    }
    // `i:chunk`, in iceoryx2's sort order: put them back in index order
    let mut indexed = Vec::with_capacity(chunks.len());
    for c in &chunks {
        match c
            .split_once(':')
            .and_then(|(i, rest)| Some((i.parse::<usize>().ok()?, rest)))
        {
            Some(pair) => indexed.push(pair),
            None => {
                return Some(Err(SchemaError::Malformed(format!(
                    "schema record chunk {c:?} has no index"
                ))))
            }
        }
    }
    indexed.sort_by_key(|(i, _)| *i);
    if indexed.iter().enumerate().any(|(k, (i, _))| k != *i) {
        return Some(Err(SchemaError::Malformed(
            "schema record chunks are not numbered 0, 1, 2, ...".into(),
        )));
    }
    let text: String = indexed.into_iter().map(|(_, c)| c).collect();
    let ty = topic_type(service)?;
    if text == SCHEMA_IN_FILE {
        return Some(read_schema_file(node, &ty).unwrap_or_else(|| {
            Err(SchemaError::Unreadable(format!(
                "{} is missing",
                schema_file(node, ty.layout_hash)
            )))
        }));
    }
    Some(Schema::decode(&text).and_then(|s| check_schema(s, &ty)))
}

/// A decoded schema, if it describes `ty` (name and layout hash); never trusted unchecked.
fn check_schema(
    s: crate::message::schema::Schema,
    ty: &TypeInfo,
) -> Result<crate::message::schema::Schema, crate::message::schema::SchemaError> {
    if s.layout_hash == ty.layout_hash && s.name == ty.name {
        Ok(s)
    } else {
        Err(crate::message::schema::SchemaError::HashMismatch {
            name: ty.name.clone(),
            claimed: s.layout_hash,
            computed: ty.layout_hash,
        })
    }
}

/// Writes `schema` to its [`schema_file`] unless the file is there already (its name is
/// the layout hash, so the content is the same). Non-ASCII or oversized text is refused.
pub(crate) fn write_schema_file(
    node: &IoxNode,
    schema: &crate::message::schema::Schema,
) -> Result<(), crate::message::schema::SchemaError> {
    use crate::message::schema::{SchemaError, MAX_SCHEMA_BYTES};
    let path = schema_file(node, schema.layout_hash);
    if std::path::Path::new(&path).exists() {
        return Ok(());
    }
    let text = schema.encode();
    if !text.is_ascii() || text.len() > MAX_SCHEMA_BYTES {
        return Err(SchemaError::Malformed(format!(
            "schema of {} is not ASCII or longer than {MAX_SCHEMA_BYTES} bytes",
            schema.name
        )));
    }
    crate::sys::files::create_private(&path, text.as_bytes())
        .map_err(|e| SchemaError::Unreadable(e.to_string()))
}

/// Reads the [`schema_file`] of type `ty`: `None` when there is none, an error when it is
/// unreadable, malformed or describes another type.
pub(crate) fn read_schema_file(
    node: &IoxNode,
    ty: &TypeInfo,
) -> Option<Result<crate::message::schema::Schema, crate::message::schema::SchemaError>> {
    use crate::message::schema::{Schema, SchemaError, MAX_SCHEMA_BYTES};
    let path = schema_file(node, ty.layout_hash);
    // one byte more than allowed, so an oversized file is refused by the decoder
    let text = match crate::sys::files::read_private(&path, MAX_SCHEMA_BYTES + 1) {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(None) => return None,
        Err(e) => return Some(Err(SchemaError::Unreadable(e.to_string()))),
    };
    Some(Schema::decode(&text).and_then(|s| check_schema(s, ty)))
}

fn service_name(topic: &str) -> Result<ServiceName, TopicError> {
    ServiceName::new(&format!("{TOPIC_PREFIX}{topic}")).map_err(|e| TopicError::Shm {
        topic: topic.to_string(),
        reason: format!("{e:?}"),
    })
}

/// Opens a topic's service, creating it with `qos` (and recording `schema`, the encoded
/// schema of `ty`) if it does not exist yet.
///
/// `ty` = `None` opens whatever type the topic has (introspection). Type identity is
/// compared by Nerve (name and layout) so the error names both types.
pub(crate) fn open_topic(
    node: &IoxNode,
    topic: &str,
    ty: Option<&TypeInfo>,
    schema: Option<&str>,
    qos: &Qos,
) -> Result<TopicService, TopicError> {
    let name = service_name(topic)?;
    let shm_err = |reason: String| TopicError::Shm {
        topic: topic.to_string(),
        reason,
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let builder = node
            .service_builder(&name)
            .publish_subscribe::<[Word]>()
            .user_header::<SampleHeader>();
        match builder.open() {
            Ok(service) => {
                check_existing(topic, &service, ty)?;
                return Ok(service);
            }
            Err(PublishSubscribeOpenError::DoesNotExist) => {}
            Err(PublishSubscribeOpenError::IncompatibleMessagingPattern)
            | Err(PublishSubscribeOpenError::IncompatibleTypes) => {
                return Err(TopicError::NotATopic {
                    topic: topic.to_string(),
                    reason: "the name is used by a service that is not a Nerve topic".into(),
                })
            }
            Err(
                PublishSubscribeOpenError::ServiceInCorruptedState
                | PublishSubscribeOpenError::HangsInCreation
                | PublishSubscribeOpenError::IsMarkedForDestruction
                | PublishSubscribeOpenError::InternalFailure,
            ) if Instant::now() < deadline => {
                // another process is creating or removing it, or a dead one left it half
                // made (cleaned up on the next attempt): retry shortly
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) => return Err(shm_err(format!("open failed: {e:?}"))),
        }
        let Some(ty) = ty else {
            return Err(shm_err("topic does not exist".into()));
        };
        if ty.align > MAX_ALIGN {
            return Err(TopicError::UnsupportedLayout {
                topic: topic.to_string(),
                reason: format!(
                    "{} needs {}-byte alignment; Nerve aligns payloads to {MAX_ALIGN} bytes",
                    ty.name, ty.align
                ),
            });
        }
        let mut attrs = AttributeSpecifier::new()
            .define(
                &AttributeKey::try_from(TYPE_ATTRIBUTE).map_err(|e| shm_err(format!("{e:?}")))?,
                &AttributeValue::try_from(encode_type(ty).as_str())
                    .map_err(|_| shm_err(format!("type name {} is too long", ty.name)))?,
            )
            .map_err(|e| shm_err(format!("{e:?}")))?;
        if let Some(mut text) = schema.filter(|s| s.is_ascii()) {
            let key =
                AttributeKey::try_from(SCHEMA_ATTRIBUTE).map_err(|e| shm_err(format!("{e:?}")))?;
            if text.len() > MAX_RECORDED_SCHEMA {
                let path = schema_file(node, ty.layout_hash);
                crate::sys::files::create_private(&path, text.as_bytes())
                    .map_err(|e| shm_err(format!("schema file: {e}")))?;
                text = SCHEMA_IN_FILE;
            }
            for (i, chunk) in text.as_bytes().chunks(SCHEMA_CHUNK).enumerate() {
                // ASCII: every chunk is a whole string
                let chunk = format!("{i}:{}", std::str::from_utf8(chunk).unwrap_or_default());
                let value = AttributeValue::try_from(chunk.as_str())
                    .map_err(|e| shm_err(format!("schema record: {e:?}")))?;
                attrs = attrs
                    .define(&key, &value)
                    .map_err(|e| shm_err(format!("schema record: {e:?}")))?;
            }
        }
        let depth_max = qos.depth.max(DEFAULT_MAX_DEPTH);
        let builder =
            node.service_builder(&name)
                .publish_subscribe::<[Word]>()
                .user_header::<SampleHeader>()
                .payload_alignment(Alignment::new(ty.align).ok_or_else(|| {
                    shm_err(format!("alignment {} is not a power of two", ty.align))
                })?)
                .history_size(qos.history)
                .subscriber_max_buffer_size(depth_max)
                .subscriber_max_borrowed_samples(qos.max_borrowed.max(DEFAULT_MAX_BORROWED))
                .enable_safe_overflow(matches!(qos.overflow, Overflow::DropOldest))
                .max_publishers(qos.max_publishers)
                .max_subscribers(qos.max_subscribers)
                .max_nodes(qos.max_publishers + qos.max_subscribers + 4);
        match builder.create_with_attributes(&attrs) {
            Ok(service) => return Ok(service),
            Err(PublishSubscribeCreateError::AlreadyExists)
            | Err(PublishSubscribeCreateError::IsBeingCreatedByAnotherInstance)
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => return Err(shm_err(format!("create failed: {e:?}"))),
        }
    }
}

/// Queue depth every topic supports at least, so later subscribers may ask for more than
/// the creator did.
pub(crate) const DEFAULT_MAX_DEPTH: usize = Qos::GUARANTEED_DEPTH;
/// Samples every subscriber may hold at least.
pub(crate) const DEFAULT_MAX_BORROWED: usize = 4;

fn check_existing(
    topic: &str,
    service: &TopicService,
    ty: Option<&TypeInfo>,
) -> Result<(), TopicError> {
    let existing = topic_type(service).ok_or_else(|| TopicError::NotATopic {
        topic: topic.to_string(),
        reason: "the service carries no Nerve type record".into(),
    })?;
    if let Some(ty) = ty {
        if existing.name != ty.name || existing.layout_hash != ty.layout_hash {
            return Err(TopicError::TypeMismatch {
                topic: topic.to_string(),
                existing: existing.describe(),
                requested: ty.describe(),
            });
        }
    }
    Ok(())
}

/// Checks an endpoint's QoS against the settings the topic was created with.
pub(crate) fn check_qos(topic: &str, service: &TopicService, qos: &Qos) -> Result<(), TopicError> {
    let cfg = service.static_config();
    let err = |reason: String| TopicError::IncompatibleQos {
        topic: topic.to_string(),
        reason,
    };
    let drop_oldest = matches!(qos.overflow, Overflow::DropOldest);
    if cfg.has_safe_overflow() != drop_oldest {
        let policy = |d: bool| if d { "drop-oldest" } else { "back-pressure" };
        return Err(err(format!(
            "the topic uses {} overflow, this endpoint asked for {}",
            policy(cfg.has_safe_overflow()),
            policy(drop_oldest)
        )));
    }
    if qos.depth > cfg.subscriber_max_buffer_size() {
        return Err(err(format!(
            "depth {} exceeds the topic's maximum of {}",
            qos.depth,
            cfg.subscriber_max_buffer_size()
        )));
    }
    if qos.history > cfg.history_size() {
        return Err(err(format!(
            "history {} exceeds the {} samples the topic keeps",
            qos.history,
            cfg.history_size()
        )));
    }
    if qos.max_borrowed > cfg.subscriber_max_borrowed_samples() {
        return Err(err(format!(
            "max_borrowed {} exceeds the topic's maximum of {}",
            qos.max_borrowed,
            cfg.subscriber_max_borrowed_samples()
        )));
    }
    Ok(())
}

/// Worst-case number of samples one publisher needs so it can always loan.
/// Most samples a drop-oldest publisher can have in use at once: a subscriber's queue
/// holds the newest samples delivered to it (the oldest are taken back when it is full),
/// so all queues together hold at most the largest queue's worth of distinct samples; on
/// top come what every subscriber borrows, the history, the publisher's loans and one in
/// delivery.
pub(crate) fn drop_oldest_samples(service: &TopicService, qos: &Qos) -> usize {
    let cfg = service.static_config();
    cfg.subscriber_max_buffer_size()
        + cfg.max_subscribers() * cfg.subscriber_max_borrowed_samples()
        + cfg.history_size()
        + qos.max_loans
        + 1
}

/// Most samples a publisher can have in use at once whatever the overflow: every queue
/// full of distinct samples and every borrow used.
pub(crate) fn worst_case_samples(service: &TopicService, qos: &Qos) -> usize {
    let cfg = service.static_config();
    cfg.max_subscribers()
        * (cfg.subscriber_max_buffer_size() + cfg.subscriber_max_borrowed_samples())
        + cfg.history_size()
        + qos.max_loans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::schema::Schema;

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "shm_test/Pair")]
    struct Pair {
        a: u32,
        b: u32,
    }

    /// A schema written into a topic's record by someone else is checked before use: one
    /// describing another layout, a malformed one and another type's are refused by name.
    #[test]
    fn recorded_schemas_are_checked_not_trusted() {
        let dir = std::env::temp_dir().join("nerve-tests/");
        let cfg = crate::config::Config::default()
            .domain(978)
            .unwrap()
            .state_dir(dir);
        let ctx = crate::context::Context::new(cfg).unwrap();
        let node = ctx.node("schema_lies").create().unwrap();
        let ty = TypeInfo::of::<Pair>();
        let good = Schema::of::<Pair>().encode();
        let renamed = good.replace("b:4:u32", "c:4:u32");
        let other = good.replace("type=shm_test/Pair", "type=shm_test/Other");
        for (topic, text, check) in [
            ("/schema/good", good.as_str(), None),
            (
                "/schema/renamed",
                renamed.as_str(),
                Some("does not match its layout hash"),
            ),
            (
                "/schema/garbage",
                "nerve-schema/1|type=x",
                Some("malformed"),
            ),
            ("/schema/other", other.as_str(), Some("does not match")),
        ] {
            let service = open_topic(
                &node.inner.iox,
                topic,
                Some(&ty),
                Some(text),
                &Qos::default(),
            )
            .unwrap();
            match (
                topic_schema(&node.inner.iox, &service).expect("a record"),
                check,
            ) {
                (Ok(s), None) => assert_eq!(s, Schema::of::<Pair>()),
                (Err(e), Some(needle)) => assert!(e.to_string().contains(needle), "{topic}: {e}"),
                (r, _) => panic!("{topic}: {r:?}"),
            }
        }
        // a schema too large for the record travels in the domain's schema file
        let wide = TypeInfo::of::<Wide>();
        let text = Schema::of::<Wide>().encode();
        assert!(text.len() > MAX_RECORDED_SCHEMA, "{} bytes", text.len());
        let service = open_topic(
            &node.inner.iox,
            "/schema/big",
            Some(&wide),
            Some(&text),
            &Qos::default(),
        )
        .unwrap();
        let file = schema_file(&node.inner.iox, wide.layout_hash);
        assert_eq!(
            topic_schema(&node.inner.iox, &service).unwrap().unwrap(),
            Schema::of::<Wide>()
        );
        // the file is checked like the record: another text is refused, a missing file
        // is named
        std::fs::remove_file(&file).unwrap();
        let e = topic_schema(&node.inner.iox, &service)
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains(&file), "{e}");
        crate::sys::files::create_private(&file, good.as_bytes()).unwrap();
        let e = topic_schema(&node.inner.iox, &service)
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        std::fs::remove_file(&file).unwrap();
        crate::sys::files::create_private(&file, text.repeat(32).as_bytes()).unwrap();
        let e = topic_schema(&node.inner.iox, &service)
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
        std::fs::remove_file(&file).unwrap();
    }

    /// A type whose schema is larger than a topic's record holds.
    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "shm_test/Wide")]
    struct Wide {
        a_field_with_a_rather_long_name_00: u32,
        a_field_with_a_rather_long_name_01: u32,
        a_field_with_a_rather_long_name_02: u32,
        a_field_with_a_rather_long_name_03: u32,
        a_field_with_a_rather_long_name_04: u32,
        a_field_with_a_rather_long_name_05: u32,
        a_field_with_a_rather_long_name_06: u32,
        a_field_with_a_rather_long_name_07: u32,
        a_field_with_a_rather_long_name_08: u32,
        a_field_with_a_rather_long_name_09: u32,
        a_field_with_a_rather_long_name_10: u32,
        a_field_with_a_rather_long_name_11: u32,
        a_field_with_a_rather_long_name_12: u32,
        a_field_with_a_rather_long_name_13: u32,
        a_field_with_a_rather_long_name_14: u32,
        a_field_with_a_rather_long_name_15: u32,
        a_field_with_a_rather_long_name_16: u32,
        a_field_with_a_rather_long_name_17: u32,
        a_field_with_a_rather_long_name_18: u32,
        a_field_with_a_rather_long_name_19: u32,
        a_field_with_a_rather_long_name_20: u32,
        a_field_with_a_rather_long_name_21: u32,
        a_field_with_a_rather_long_name_22: u32,
        a_field_with_a_rather_long_name_23: u32,
        a_field_with_a_rather_long_name_24: u32,
        a_field_with_a_rather_long_name_25: u32,
        a_field_with_a_rather_long_name_26: u32,
        a_field_with_a_rather_long_name_27: u32,
        a_field_with_a_rather_long_name_28: u32,
        a_field_with_a_rather_long_name_29: u32,
        a_field_with_a_rather_long_name_30: u32,
        a_field_with_a_rather_long_name_31: u32,
        a_field_with_a_rather_long_name_32: u32,
        a_field_with_a_rather_long_name_33: u32,
        a_field_with_a_rather_long_name_34: u32,
        a_field_with_a_rather_long_name_35: u32,
        a_field_with_a_rather_long_name_36: u32,
        a_field_with_a_rather_long_name_37: u32,
        a_field_with_a_rather_long_name_38: u32,
        a_field_with_a_rather_long_name_39: u32,
        a_field_with_a_rather_long_name_40: u32,
        a_field_with_a_rather_long_name_41: u32,
        a_field_with_a_rather_long_name_42: u32,
        a_field_with_a_rather_long_name_43: u32,
        a_field_with_a_rather_long_name_44: u32,
        a_field_with_a_rather_long_name_45: u32,
        a_field_with_a_rather_long_name_46: u32,
        a_field_with_a_rather_long_name_47: u32,
        a_field_with_a_rather_long_name_48: u32,
        a_field_with_a_rather_long_name_49: u32,
        a_field_with_a_rather_long_name_50: u32,
        a_field_with_a_rather_long_name_51: u32,
        a_field_with_a_rather_long_name_52: u32,
        a_field_with_a_rather_long_name_53: u32,
        a_field_with_a_rather_long_name_54: u32,
        a_field_with_a_rather_long_name_55: u32,
        a_field_with_a_rather_long_name_56: u32,
        a_field_with_a_rather_long_name_57: u32,
        a_field_with_a_rather_long_name_58: u32,
        a_field_with_a_rather_long_name_59: u32,
        a_field_with_a_rather_long_name_60: u32,
        a_field_with_a_rather_long_name_61: u32,
        a_field_with_a_rather_long_name_62: u32,
        a_field_with_a_rather_long_name_63: u32,
    }

    #[test]
    fn type_record_round_trip() {
        let t = TypeInfo {
            name: "pkg/With;Semicolon".into(),
            layout_hash: 0xdead_beef,
            head_size: 24,
            elem_size: 4,
            elem_align: 4,
            align: 8,
        };
        assert_eq!(decode_type(&encode_type(&t)).unwrap(), t);
        assert!(decode_type("garbage").is_none());
        assert!(
            decode_type("t;00000000000000ff;8;0;1;0").is_none(),
            "alignment 0"
        );
        assert!(
            decode_type("t;00000000000000ff;8;0;3;8").is_none(),
            "alignment 3"
        );
    }
}
