//! C++ classes of ROS 2 interface types (`nerve types gen-cpp` from `.msg/.srv/.action`,
//! by name from `AMENT_PREFIX_PATH` or a file), read by `nerve-ros2-types`.
//!
//! A message `pkg/msg/Name` becomes `struct pkg::msg::Name` in `pkg/msg/<snake>.hpp`,
//! laid out as rosidl's C++ structs read: `bool`, `std::uint8_t` (`byte`, `char`),
//! `std::int8_t` … `double`, `std::string` (`string`, `string<=N`), `std::u16string`
//! (`wstring`), `std::array<T, N>` (`T[N]`), `std::vector<T>` (`T[]`, `T[<=N]`), nested
//! message classes; constants as `static constexpr` members, defaults as member
//! initializers. Bounds (`string<=N`, `T[<=N]`) are checked when the message is written
//! and read (a `nerve::cdr::Error` naming the field), never cut. Each header holds the
//! CDR writer and reader of its type (over `nerve/cdr.hpp`, byte for byte what
//! `nerve_ros2_types::CdrWriter` and Fast DDS write) and `nerve::cdr::message_traits<T>`:
//! the type name, its RIHS01 hash and its `ros2msg` definition, computed here, which the
//! C ABI turns into the topic's foreign schema (`nerve_msgs/Ros2Cdr`).
//!
//! Standard types map to Nerve's own: a `builtin_interfaces/msg/Time` field is a
//! `nerve::msgs::Time` (converted as the ROS 2 bridge converts it), not a generated
//! `builtin_interfaces::msg::Time`.
//!
//! A service `pkg/srv/Name` gives its `_Request` and `_Response` messages; an action
//! `pkg/action/Name` gives `pkg/action/<snake>.hpp` with its `_Goal`, `_Result` and
//! `_Feedback` messages and the tag `struct Name` (`Goal`, `Result`, `Feedback`) with
//! `nerve::cdr::action_traits` (name, hash, definition), for `nerve::ros2::ActionServer`.

use super::names::{check_identifier, snake_case};
use nerve_ros2_types::{
    BaseType, Container, DefinitionRole, FieldType, InterfaceKind, MessageDefinition,
    PrimitiveType, Registry, RegistryError, SearchPath, SubType, TypeName, Value,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Why C++ classes of ROS 2 types cannot be generated.
#[derive(Debug, thiserror::Error)]
pub enum Ros2CodegenError {
    /// The type, or a type it uses, has no definition or does not parse.
    #[error("ROS 2 type {name}: {source}")]
    Definition {
        /// The type asked for.
        name: String,
        /// What failed.
        #[source]
        source: RegistryError,
    },
    /// A name that cannot be a C++ name.
    #[error("ROS 2 type {type_name}: {what} {name:?} cannot be a C++ name: {reason}")]
    BadName {
        /// The type.
        type_name: String,
        /// What it names.
        what: &'static str,
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A default or constant value with no C++ form.
    #[error("ROS 2 type {type_name}: {what}: {reason}")]
    Unsupported {
        /// The type.
        type_name: String,
        /// The field or constant.
        what: String,
        /// Why.
        reason: String,
    },
}

/// The ROS 2 types a field is declared as Nerve's own type of (read and written as the
/// bridge converts them): the same fields with the same zero defaults.
/// (`geometry_msgs/Quaternion` is not among them: its `w` defaults to 1, Nerve's to 0.)
const STANDARD: &[(&str, &str, &str)] = &[
    (
        "builtin_interfaces/msg/Time",
        "::nerve::msgs::Time",
        "nerve/msgs/time.hpp",
    ),
    (
        "geometry_msgs/msg/Vector3",
        "::nerve::msgs::Vector3",
        "nerve/msgs/vector3.hpp",
    ),
    (
        "geometry_msgs/msg/Twist",
        "::nerve::msgs::Twist",
        "nerve/msgs/twist.hpp",
    ),
];

fn standard(name: &TypeName) -> Option<(&'static str, &'static str)> {
    STANDARD
        .iter()
        .find(|(ros, _, _)| *ros == name.as_str())
        .map(|(_, cpp, header)| (*cpp, *header))
}

/// Headers (relative path, text) of the C++ classes of ROS 2 types `names` (`pkg/msg/Name`,
/// `pkg/srv/Name`, `pkg/action/Name`, or `pkg/Name` for a message), their definitions
/// found on `search`, with every type they use. Sorted by path.
pub fn ros2_headers(
    names: &[String],
    search: &SearchPath,
) -> Result<Vec<(PathBuf, String)>, Ros2CodegenError> {
    let mut registry = Registry::new();
    let mut roots = Vec::new();
    for name in names {
        // a type that is one of Nerve's own needs no definition (it becomes an alias)
        if let Ok(tn) = TypeName::parse(name) {
            if tn.kind() == InterfaceKind::Msg && nerve_ros2_map::of_ros(tn.as_str(), &[]).is_some()
            {
                roots.push(tn);
                continue;
            }
        }
        let tn = registry
            .load(name, search)
            .map_err(|source| Ros2CodegenError::Definition {
                name: name.clone(),
                source,
            })?;
        roots.push(tn);
    }
    ros2_headers_of(&registry, &roots)
}

/// [`ros2_headers`] from definitions already in `registry` (a `.msg` file read by the
/// caller, a `ros2msg` schema).
pub fn ros2_headers_of(
    registry: &Registry,
    roots: &[TypeName],
) -> Result<Vec<(PathBuf, String)>, Ros2CodegenError> {
    let mut out: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut messages: Vec<TypeName> = Vec::new();
    let mut actions: Vec<TypeName> = Vec::new();
    let mut services: Vec<TypeName> = Vec::new();
    let def_err = |name: &TypeName| {
        let name = name.to_string();
        move |source| Ros2CodegenError::Definition { name, source }
    };
    for root in roots {
        match root.kind() {
            InterfaceKind::Msg => {
                if let Some(alias) = nerve_form(root)? {
                    out.insert(header_path(root), alias);
                    continue;
                }
                messages.push(root.clone())
            }
            InterfaceKind::Srv => {
                let srv = root.interface();
                messages.push(srv.with_subtype(SubType::Request));
                messages.push(srv.with_subtype(SubType::Response));
                if root.split_subtype().1 == SubType::None && !services.contains(&srv) {
                    services.push(srv);
                }
            }
            InterfaceKind::Action => {
                let act = root.interface();
                if root.split_subtype().1 == SubType::None {
                    actions.push(act);
                } else {
                    messages.push(root.clone());
                }
            }
        }
    }
    // every type used, in dependency order (a header includes its dependencies)
    let mut all: Vec<TypeName> = Vec::new();
    let mut todo: Vec<TypeName> = messages.clone();
    for a in &actions {
        for sub in [SubType::Goal, SubType::Result, SubType::Feedback] {
            todo.push(a.with_subtype(sub));
        }
    }
    while let Some(t) = todo.pop() {
        if all.contains(&t) || standard(&t).is_some() {
            continue;
        }
        let def = registry.resolve(t.as_str()).map_err(def_err(&t))?;
        for d in def.dependencies() {
            todo.push(d.clone());
        }
        all.push(t);
    }
    for t in &all {
        if t.kind() == InterfaceKind::Action
            && actions.contains(&t.interface())
            && matches!(
                t.split_subtype().1,
                SubType::Goal | SubType::Result | SubType::Feedback
            )
        {
            continue; // in the action's own header
        }
        let def = registry.resolve(t.as_str()).map_err(def_err(t))?;
        let (path, text) = message_header(registry, def)?;
        out.insert(path, text);
    }
    for a in &actions {
        let (path, text) = action_header(registry, a)?;
        out.insert(path, text);
    }
    for srv in &services {
        let (path, text) = service_header(srv)?;
        out.insert(path, text);
    }
    Ok(out.into_iter().collect())
}

/// The header of a ROS 2 message type that is one of Nerve's own exactly (a row of
/// `nerve_ros2_map`'s table that loses nothing: `geometry_msgs/msg/Twist` is
/// `nerve_msgs/Twist`): an alias of the plain Nerve struct, which a `nerve::Publisher`
/// publishes zero-copy and the ROS 2 bridge converts to and from the ROS 2 type.
fn nerve_form(t: &TypeName) -> Result<Option<String>, Ros2CodegenError> {
    let Some(row) = nerve_ros2_map::of_ros(t.as_str(), &[]) else {
        return Ok(None);
    };
    let nerve = row.nerve_name();
    let cpp = super::names::cpp_name(&nerve, super::Lang::Cpp).map_err(|e| {
        Ros2CodegenError::Unsupported {
            type_name: t.to_string(),
            what: format!("its Nerve form {nerve}"),
            reason: e.to_string(),
        }
    })?;
    let mut h = format!(
        "// generated by `nerve types gen-cpp` from ROS 2 type {t}; do not edit.\n#pragma once\n\n#include <{}>\n\n",
        cpp.path(super::Lang::Cpp).to_string_lossy().replace('\\', "/")
    );
    let _ = writeln!(h, "namespace {}::{} {{\n", t.package(), t.kind().as_str());
    let _ = writeln!(
        h,
        "/// ROS 2 `{t}` is Nerve's `{nerve}` field for field: a plain struct that\n/// nerve::Publisher publishes as it is; the ROS 2 bridge converts it to and from `{t}`."
    );
    let _ = writeln!(h, "using {} = {};\n", t.name(), cpp.qualified());
    let _ = writeln!(h, "}}  // namespace {}::{}", t.package(), t.kind().as_str());
    Ok(Some(h))
}

/// The header path of a message or action (`pkg/msg/basic_types.hpp`).
fn header_path(t: &TypeName) -> PathBuf {
    let base = match t.kind() {
        InterfaceKind::Action => t.split_subtype().0.to_string(),
        _ => t.name().to_string(),
    };
    PathBuf::from(t.package())
        .join(t.kind().as_str())
        .join(format!("{}.hpp", snake_case(&base)))
}

fn include_of(t: &TypeName) -> String {
    match standard(t) {
        Some((_, h)) => h.to_string(),
        None => header_path(t).to_string_lossy().replace('\\', "/"),
    }
}

/// The C++ name of a message type (qualified).
fn cpp_type(t: &TypeName) -> String {
    match standard(t) {
        Some((cpp, _)) => cpp.to_string(),
        None => format!("::{}::{}::{}", t.package(), t.kind().as_str(), t.name()),
    }
}

fn prim_cpp(p: PrimitiveType) -> &'static str {
    match p {
        PrimitiveType::Bool => "bool",
        PrimitiveType::Byte | PrimitiveType::Char | PrimitiveType::UInt8 => "std::uint8_t",
        PrimitiveType::Int8 => "std::int8_t",
        PrimitiveType::Int16 => "std::int16_t",
        PrimitiveType::UInt16 => "std::uint16_t",
        PrimitiveType::Int32 => "std::int32_t",
        PrimitiveType::UInt32 => "std::uint32_t",
        PrimitiveType::Int64 => "std::int64_t",
        PrimitiveType::UInt64 => "std::uint64_t",
        PrimitiveType::Float32 => "float",
        PrimitiveType::Float64 => "double",
    }
}

fn base_cpp(b: &BaseType) -> String {
    match b {
        BaseType::Primitive(p) => prim_cpp(*p).to_string(),
        BaseType::String { .. } => "std::string".into(),
        BaseType::WString { .. } => "std::u16string".into(),
        BaseType::Nested(t) => cpp_type(t),
    }
}

fn field_cpp(ty: &FieldType) -> String {
    let base = base_cpp(&ty.base);
    match ty.container {
        Container::Single => base,
        Container::Array(n) => format!("std::array<{base}, {n}>"),
        Container::BoundedSequence(_) | Container::Sequence => format!("std::vector<{base}>"),
    }
}

/// A C++ string literal of UTF-8 text (octal escapes outside printable ASCII), split after
/// each newline.
fn c_string(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n\"\n    \""),
            b'?' => out.push_str("\\?"), // no trigraphs
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out.replace("\n    \"\"", "")
}

/// A C++ UTF-16 string literal.
fn u16_string(s: &str) -> String {
    let mut out = String::from("u\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '?' => out.push_str("\\?"),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

fn int_lit(v: i128, ty: &str) -> String {
    let lit = match ty {
        "std::int64_t" if v == i128::from(i64::MIN) => "(-9223372036854775807LL - 1)".to_string(),
        "std::int32_t" if v == i128::from(i32::MIN) => "(-2147483647 - 1)".to_string(),
        "std::uint64_t" => format!("{v}ULL"),
        "std::uint32_t" => format!("{v}U"),
        "std::int64_t" => format!("{v}LL"),
        _ => format!("{v}"),
    };
    format!("static_cast<{ty}>({lit})")
}

fn float_lit(v: f64, single: bool) -> String {
    let ty = if single { "float" } else { "double" };
    if v.is_nan() {
        return format!("std::numeric_limits<{ty}>::quiet_NaN()");
    }
    if v.is_infinite() {
        let sign = if v < 0.0 { "-" } else { "" };
        return format!("{sign}std::numeric_limits<{ty}>::infinity()");
    }
    let mut s = if single {
        format!("{:?}", v as f32)
    } else {
        format!("{v:?}")
    };
    if !s.contains(['.', 'e', 'E']) {
        s.push_str(".0");
    }
    if single {
        s.push('f');
    }
    s
}

/// The C++ expression of a scalar value of base type `b`.
fn scalar_lit(v: &Value, b: &BaseType) -> Option<String> {
    let ty = base_cpp(b);
    Some(match v {
        Value::Bool(x) => x.to_string(),
        Value::Int8(x) => int_lit((*x).into(), &ty),
        Value::UInt8(x) => int_lit((*x).into(), &ty),
        Value::Int16(x) => int_lit((*x).into(), &ty),
        Value::UInt16(x) => int_lit((*x).into(), &ty),
        Value::Int32(x) => int_lit((*x).into(), &ty),
        Value::UInt32(x) => int_lit((*x).into(), &ty),
        Value::Int64(x) => int_lit((*x).into(), &ty),
        Value::UInt64(x) => int_lit((*x).into(), &ty),
        Value::Float32(x) => float_lit(f64::from(*x), ty == "float"),
        Value::Float64(x) => float_lit(*x, ty == "float"),
        Value::String(s) => c_string(s),
        Value::WString(s) => u16_string(s),
        _ => return None,
    })
}

/// The C++ initializer of a field's default value.
fn default_lit(v: &Value, ty: &FieldType) -> Option<String> {
    match (v, ty.container) {
        (Value::Array(a), Container::Array(_))
        | (Value::Array(a), Container::Sequence | Container::BoundedSequence(_)) => {
            let items = (0..a.len())
                .map(|i| a.get(i).and_then(|e| scalar_lit(&e, &ty.base)))
                .collect::<Option<Vec<_>>>()?;
            Some(format!("{{{}}}", items.join(", ")))
        }
        (v, Container::Single) => scalar_lit(v, &ty.base).map(|s| format!("{{{s}}}")),
        _ => None,
    }
}

fn bound_of(b: &BaseType) -> String {
    match b {
        BaseType::String { bound: Some(n) } | BaseType::WString { bound: Some(n) } => {
            format!("{n}U")
        }
        _ => "::nerve::cdr::unbounded".into(),
    }
}

/// The smallest CDR size of an element (for the length check of a sequence read).
fn min_size(b: &BaseType) -> usize {
    match b {
        BaseType::Primitive(p) => p.size(),
        BaseType::String { .. } | BaseType::WString { .. } => 4,
        BaseType::Nested(_) => 1,
    }
}

fn write_elem(b: &BaseType, e: &str, field: &str) -> String {
    match b {
        BaseType::Primitive(PrimitiveType::Bool) => format!("w.prim(static_cast<bool>({e}));"),
        BaseType::Primitive(_) => format!("w.prim({e});"),
        BaseType::String { .. } => format!("w.string({e}, {}, \"{field}\");", bound_of(b)),
        BaseType::WString { .. } => format!("w.wstring({e}, {}, \"{field}\");", bound_of(b)),
        BaseType::Nested(_) => format!("cdr_write(w, {e}, \"{field}\");"),
    }
}

fn read_elem(b: &BaseType, e: &str, field: &str) -> String {
    match b {
        BaseType::Primitive(_) => format!("r.prim({e}, \"{field}\");"),
        BaseType::String { .. } => format!("r.string({e}, {}, \"{field}\");", bound_of(b)),
        BaseType::WString { .. } => format!("r.wstring({e}, {}, \"{field}\");", bound_of(b)),
        BaseType::Nested(_) => format!("cdr_read(r, {e}, \"{field}\");"),
    }
}

struct Emitted {
    body: String,
    includes: Vec<String>,
}

/// The struct, its CDR functions and (for a type with a hash) its traits.
fn emit_message(def: &MessageDefinition) -> Result<Emitted, Ros2CodegenError> {
    let tn = &def.name;
    let name = tn.name();
    let bad = |what: &'static str, n: &str, reason: String| Ros2CodegenError::BadName {
        type_name: tn.to_string(),
        what,
        name: n.to_string(),
        reason,
    };
    check_identifier(name).map_err(|r| bad("type name", name, r))?;
    let mut includes = Vec::new();
    let mut b = String::new();
    let _ = writeln!(b, "/// ROS 2 message `{tn}`, carried in Nerve as CDR.");
    let _ = writeln!(b, "struct {name} {{");
    for c in &def.constants {
        check_identifier(&c.name).map_err(|r| bad("constant", &c.name, r))?;
        let ty = match &c.ty {
            BaseType::String { .. } => "std::string_view".to_string(),
            BaseType::WString { .. } => "std::u16string_view".to_string(),
            other => base_cpp(other),
        };
        let lit = scalar_lit(&c.value, &c.ty).ok_or_else(|| Ros2CodegenError::Unsupported {
            type_name: tn.to_string(),
            what: format!("constant {}", c.name),
            reason: "a value with no C++ literal".into(),
        })?;
        let _ = writeln!(b, "  static constexpr {ty} {} = {lit};", c.name);
    }
    for f in &def.fields {
        check_identifier(&f.name).map_err(|r| bad("field", &f.name, r))?;
        if let Some(n) = f.ty.nested() {
            let inc = include_of(n);
            if !includes.contains(&inc) {
                includes.push(inc);
            }
        }
        let init = match &f.default {
            Some(v) => default_lit(v, &f.ty).ok_or_else(|| Ros2CodegenError::Unsupported {
                type_name: tn.to_string(),
                what: format!("field {}", f.name),
                reason: format!("a default value with no C++ form: {v:?}"),
            })?,
            None => "{}".into(),
        };
        let _ = writeln!(b, "  /// `{}`", f.ty);
        let _ = writeln!(b, "  {} {}{init};", field_cpp(&f.ty), f.name);
    }
    let _ = writeln!(
        b,
        "\n  /// Field by field equality (a NaN is unequal to itself, as in rosidl)."
    );
    let _ = writeln!(b, "  bool operator==(const {name}& o) const {{");
    let _ = write!(b, "    return true");
    for f in &def.fields {
        let _ = write!(b, " &&\n           ::nerve::cdr::equal({0}, o.{0})", f.name);
    }
    let _ = writeln!(b, ";\n  }}");
    let _ = writeln!(b, "  /// Not ==.");
    let _ = writeln!(
        b,
        "  bool operator!=(const {name}& o) const {{ return !(*this == o); }}"
    );
    let _ = writeln!(b, "}};\n");
    // CDR
    let _ = writeln!(
        b,
        "/// Writes `m` as CDR (`field`: where it is, for errors)."
    );
    let _ = writeln!(
        b,
        "inline void cdr_write(::nerve::cdr::Writer& w, const {name}& m, const char* field = \"{name}\") {{"
    );
    let _ = writeln!(b, "  (void)w;\n  (void)m;\n  (void)field;");
    for f in &def.fields {
        let fname = &*f.name;
        let m = format!("m.{fname}");
        match f.ty.container {
            Container::Single => {
                let _ = writeln!(b, "  {}", write_elem(&f.ty.base, &m, fname));
            }
            Container::Array(_) => {
                let _ = writeln!(
                    b,
                    "  for (const auto& e : {m}) {}",
                    write_elem(&f.ty.base, "e", fname)
                );
            }
            Container::Sequence | Container::BoundedSequence(_) => {
                let bound = match f.ty.container {
                    Container::BoundedSequence(n) => format!("{n}U"),
                    _ => "::nerve::cdr::unbounded".into(),
                };
                let _ = writeln!(b, "  w.length({m}.size(), {bound}, \"{fname}\");");
                let _ = writeln!(
                    b,
                    "  for (const auto& e : {m}) {}",
                    write_elem(&f.ty.base, "e", fname)
                );
            }
        }
    }
    let _ = writeln!(b, "}}\n");
    let _ = writeln!(
        b,
        "/// Reads `m` from CDR (`field`: where it is, for errors)."
    );
    let _ = writeln!(
        b,
        "inline void cdr_read(::nerve::cdr::Reader& r, {name}& m, const char* field = \"{name}\") {{"
    );
    let _ = writeln!(b, "  (void)r;\n  (void)m;\n  (void)field;");
    for f in &def.fields {
        let fname = &*f.name;
        let m = format!("m.{fname}");
        match f.ty.container {
            Container::Single => {
                let _ = writeln!(b, "  {}", read_elem(&f.ty.base, &m, fname));
            }
            Container::Array(_) => {
                let _ = writeln!(
                    b,
                    "  for (auto& e : {m}) {}",
                    read_elem(&f.ty.base, "e", fname)
                );
            }
            Container::Sequence | Container::BoundedSequence(_) => {
                let bound = match f.ty.container {
                    Container::BoundedSequence(n) => format!("{n}U"),
                    _ => "::nerve::cdr::unbounded".into(),
                };
                let _ = writeln!(b, "  {{");
                let _ = writeln!(
                    b,
                    "    const std::size_t n = r.length({bound}, {}, \"{fname}\");",
                    min_size(&f.ty.base)
                );
                let _ = writeln!(b, "    {m}.resize(n);");
                let elem = if f.ty.base == BaseType::Primitive(PrimitiveType::Bool) {
                    format!("{{ bool v = false; r.prim(v, \"{fname}\"); {m}[i] = v; }}")
                } else {
                    read_elem(&f.ty.base, &format!("{m}[i]"), fname)
                };
                let _ = writeln!(b, "    for (std::size_t i = 0; i < n; ++i) {elem}");
                let _ = writeln!(b, "  }}");
            }
        }
    }
    let _ = writeln!(b, "}}\n");
    Ok(Emitted { body: b, includes })
}

fn traits_of(registry: &Registry, tn: &TypeName, cpp: &str) -> Result<String, Ros2CodegenError> {
    let err = |source| Ros2CodegenError::Definition {
        name: tn.to_string(),
        source,
    };
    let hash = registry.type_hash(tn.as_str()).map_err(err)?;
    let text = registry.ros2msg_text(tn.as_str()).map_err(err)?;
    let mut b = String::new();
    let _ = writeln!(b, "template <>\nstruct message_traits<{cpp}> {{");
    let _ = writeln!(b, "  /// The ROS 2 type name.");
    let _ = writeln!(
        b,
        "  static constexpr std::string_view type_name = \"{tn}\";"
    );
    let _ = writeln!(b, "  /// Its RIHS01 hash.");
    let _ = writeln!(
        b,
        "  static constexpr std::string_view type_hash = \"{hash}\";"
    );
    let _ = writeln!(
        b,
        "  /// Its `ros2msg` definition with every type it uses (the topic's schema)."
    );
    let _ = writeln!(
        b,
        "  static constexpr std::string_view definition =\n    {};",
        c_string(&text)
    );
    let _ = writeln!(b, "  /// Writes `m` as CDR.");
    let _ = writeln!(
        b,
        "  static void write(Writer& w, const {cpp}& m) {{ cdr_write(w, m); }}"
    );
    let _ = writeln!(b, "  /// Reads `m` from CDR.");
    let _ = writeln!(
        b,
        "  static void read(Reader& r, {cpp}& m) {{ cdr_read(r, m); }}"
    );
    let _ = writeln!(b, "}};\n");
    Ok(b)
}

const PRELUDE: &str = "#pragma once\n\n#include <array>\n#include <cstddef>\n#include <cstdint>\n#include <limits>\n#include <string>\n#include <string_view>\n#include <vector>\n\n#include <nerve/cdr.hpp>\n#include <nerve/ros2.hpp>\n";

/// `nerve::<class><cpp>` as the `nerve::ros2` class of that name (explicit
/// specializations: `nerve::Publisher<pkg::msg::Name>` publishes the ROS 2 type).
fn doors(cpp: &str, classes: &[&str]) -> String {
    let mut b = String::new();
    for class in classes {
        let _ = writeln!(
            b,
            "/// nerve::{class} of a ROS 2 type is nerve::ros2::{class} (nerve/ros2.hpp).\ntemplate <>\nclass {class}<{cpp}> : public ros2::{class}<{cpp}> {{\n public:\n  using ros2::{class}<{cpp}>::{class};\n}};\n"
        );
    }
    b
}

fn message_header(
    registry: &Registry,
    def: &MessageDefinition,
) -> Result<(PathBuf, String), Ros2CodegenError> {
    let tn = &def.name;
    let e = emit_message(def)?;
    let mut h = format!(
        "// generated by `nerve types gen-cpp` from ROS 2 type {tn}; do not edit.\n{PRELUDE}"
    );
    for inc in &e.includes {
        let _ = writeln!(h, "#include <{inc}>");
    }
    let _ = writeln!(
        h,
        "\nnamespace {}::{} {{\n",
        tn.package(),
        tn.kind().as_str()
    );
    h.push_str(&e.body);
    let _ = writeln!(
        h,
        "}}  // namespace {}::{}\n",
        tn.package(),
        tn.kind().as_str()
    );
    let _ = writeln!(h, "namespace nerve::cdr {{\n");
    h.push_str(&traits_of(registry, tn, &cpp_type(tn))?);
    let _ = writeln!(h, "}}  // namespace nerve::cdr\n");
    let _ = writeln!(h, "namespace nerve {{\n");
    h.push_str(&doors(&cpp_type(tn), &["Publisher", "Subscriber"]));
    let _ = writeln!(h, "}}  // namespace nerve");
    Ok((header_path(tn), h))
}

fn action_header(
    registry: &Registry,
    act: &TypeName,
) -> Result<(PathBuf, String), Ros2CodegenError> {
    let err = |source| Ros2CodegenError::Definition {
        name: act.to_string(),
        source,
    };
    let name = act.name();
    check_identifier(name).map_err(|reason| Ros2CodegenError::BadName {
        type_name: act.to_string(),
        what: "type name",
        name: name.to_string(),
        reason,
    })?;
    let mut includes: Vec<String> = Vec::new();
    let mut bodies = String::new();
    let mut traits = String::new();
    for sub in [SubType::Goal, SubType::Result, SubType::Feedback] {
        let t = act.with_subtype(sub);
        let def = registry.resolve(t.as_str()).map_err(err)?;
        debug_assert_eq!(def.role, DefinitionRole::Message);
        let e = emit_message(def)?;
        for inc in e.includes {
            if !includes.contains(&inc) {
                includes.push(inc);
            }
        }
        bodies.push_str(&e.body);
        traits.push_str(&traits_of(registry, &t, &cpp_type(&t))?);
    }
    let hash = registry.type_hash(act.as_str()).map_err(err)?;
    let text = registry.ros2msg_text(act.as_str()).map_err(err)?;
    let mut h = format!(
        "// generated by `nerve types gen-cpp` from ROS 2 action type {act}; do not edit.\n{PRELUDE}"
    );
    for inc in &includes {
        let _ = writeln!(h, "#include <{inc}>");
    }
    let _ = writeln!(h, "\nnamespace {}::action {{\n", act.package());
    h.push_str(&bodies);
    let _ = writeln!(
        h,
        "/// ROS 2 action `{act}`: its goal, result and feedback messages."
    );
    let _ = writeln!(h, "struct {name} {{");
    let _ = writeln!(h, "  /// The goal.\n  using Goal = {name}_Goal;");
    let _ = writeln!(h, "  /// The result.\n  using Result = {name}_Result;");
    let _ = writeln!(h, "  /// Feedback.\n  using Feedback = {name}_Feedback;");
    let _ = writeln!(h, "}};\n");
    let _ = writeln!(h, "}}  // namespace {}::action\n", act.package());
    let _ = writeln!(h, "namespace nerve::cdr {{\n");
    h.push_str(&traits);
    let cpp = cpp_type(act);
    let _ = writeln!(h, "template <>\nstruct action_traits<{cpp}> {{");
    let _ = writeln!(
        h,
        "  /// The ROS 2 action type name.\n  static constexpr std::string_view type_name = \"{act}\";"
    );
    let _ = writeln!(
        h,
        "  /// Its RIHS01 hash.\n  static constexpr std::string_view type_hash = \"{hash}\";"
    );
    let _ = writeln!(
        h,
        "  /// Its `ros2msg` definition with every type it uses.\n  static constexpr std::string_view definition =\n    {};",
        c_string(&text)
    );
    let _ = writeln!(h, "  /// The goal.\n  using Goal = {cpp}_Goal;");
    let _ = writeln!(h, "  /// The result.\n  using Result = {cpp}_Result;");
    let _ = writeln!(h, "  /// Feedback.\n  using Feedback = {cpp}_Feedback;");
    let _ = writeln!(h, "}};\n");
    let _ = writeln!(h, "}}  // namespace nerve::cdr\n");
    let _ = writeln!(h, "namespace nerve {{\n");
    for sub in ["_Goal", "_Result", "_Feedback"] {
        h.push_str(&doors(&format!("{cpp}{sub}"), &["Publisher", "Subscriber"]));
    }
    h.push_str(&doors(&cpp, &["ActionServer", "ActionClient"]));
    let _ = writeln!(h, "}}  // namespace nerve");
    Ok((header_path(act), h))
}

/// The header of a service `pkg/srv/Name` (`pkg/srv/<snake>.hpp`): the tag `struct Name`
/// (`Request`, `Response`), `nerve::cdr::service_traits<Name>` and `nerve::Client`/`Server`
/// of it as the `nerve::ros2` classes.
fn service_header(srv: &TypeName) -> Result<(PathBuf, String), Ros2CodegenError> {
    let name = srv.name();
    check_identifier(name).map_err(|reason| Ros2CodegenError::BadName {
        type_name: srv.to_string(),
        what: "type name",
        name: name.to_string(),
        reason,
    })?;
    let req = srv.with_subtype(SubType::Request);
    let resp = srv.with_subtype(SubType::Response);
    let mut h = format!(
        "// generated by `nerve types gen-cpp` from ROS 2 service type {srv}; do not edit.\n{PRELUDE}"
    );
    let _ = writeln!(h, "#include <{}>", include_of(&req));
    let _ = writeln!(h, "#include <{}>", include_of(&resp));
    let _ = writeln!(h, "\nnamespace {}::srv {{\n", srv.package());
    let _ = writeln!(
        h,
        "/// ROS 2 service `{srv}`: its request and response messages.\nstruct {name} {{\n  /// The request.\n  using Request = {name}_Request;\n  /// The response.\n  using Response = {name}_Response;\n}};\n"
    );
    let _ = writeln!(h, "}}  // namespace {}::srv\n", srv.package());
    let cpp = cpp_type(srv);
    let _ = writeln!(h, "namespace nerve::cdr {{\n");
    let _ = writeln!(
        h,
        "template <>\nstruct service_traits<{cpp}> {{\n  /// The ROS 2 service type name (the Nerve service's type).\n  static constexpr std::string_view type_name = \"{srv}\";\n  /// The request.\n  using Request = {};\n  /// The response.\n  using Response = {};\n}};\n",
        cpp_type(&req),
        cpp_type(&resp)
    );
    let _ = writeln!(h, "}}  // namespace nerve::cdr\n");
    let _ = writeln!(h, "namespace nerve {{\n");
    h.push_str(&doors(&cpp, &["Client", "Server"]));
    let _ = writeln!(h, "}}  // namespace nerve");
    let path = PathBuf::from(srv.package())
        .join("srv")
        .join(format!("{}.hpp", snake_case(name)));
    Ok((path, h))
}
