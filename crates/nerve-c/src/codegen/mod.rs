//! C++ and C message headers generated from Nerve schemas (`nerve types gen-cpp`,
//! `nerve types gen-c`).
//!
//! Every message, service and action type becomes one header; every struct nested in a
//! message (a `Header`, a `Vector3`) becomes a header of its own in the message's
//! namespace, included where it is used, so messages that share it define it once. Both
//! languages share the catalog of types (and its checks) and the names below; the C
//! headers (`.h`, beside the `.hpp`) are described under [C headers](#c-headers).
//!
//! # Names and paths
//! A type name `pkg/Name` maps to namespace `pkg` and header `pkg/<snake_name>.hpp`;
//! `nerve_msgs` maps to namespace `nerve::msgs` and directory `nerve/msgs`, and a type
//! name with more segments (`std_msgs/msg/String`) to nested namespaces and directories.
//! A nested struct keeps its Rust name (`Header`) in its message's namespace. File names
//! are the type names in snake case by ROS 2's rule (see [`snake_case`]: `Imu` → `imu`,
//! `PointCloud` → `point_cloud`, `Pose2D` → `pose2_d`). Field names stay as they are (a
//! tuple struct's field `0` becomes `_0`); a name that cannot be a C++ name (a keyword, a
//! reserved name) is a [`CodegenError::BadName`], and two types that would land in one
//! header, or one C++ name given two layouts, are errors rather than silent overwrites.
//!
//! # What a header holds
//! The struct, standard-layout with the Rust field names in memory order; primitives as
//! `std::uint8_t` … `double` (Nerve has no `bool` primitive: flags are `std::uint8_t`, as
//! in Rust), fixed arrays as `std::array<T, N>`, `FixedStr<N>` as `nerve::FixedStr<N>`,
//! other hand-written plain-data types as `nerve::Opaque<Size, Align, Hash>` (all three
//! in `nerve/traits.hpp`). Then a `static_assert` of its size, alignment, standard layout,
//! trivial copyability and of every field's offset, so a compiler that lays it out
//! otherwise refuses it. For a message type, `nerve::message_traits<T>` (type name, layout
//! hash, schema text, slice element type, head size, `sealed = true`); for a service or an
//! action, an empty tag struct and `nerve::service_traits` / `nerve::action_traits`; for
//! every non-empty struct, `nerve::struct_traits<T>` (its Rust name and fields), with
//! which `NERVE_MESSAGE` (`nerve/message.hpp`) describes hand-written C++ messages that
//! embed generated types.
//!
//! The output is deterministic: sorted by path, every set in a stable order.
//!
//! # C headers
//! The same types, paths with `.h` (`nerve/msgs/imu.h`), in C11. A type's C name is its
//! namespace's segments and its name joined by `_` (`nerve_msgs_Imu`, a nested struct
//! `nerve_msgs_Header`); its macros start with the C name in upper snake case
//! (`NERVE_MSGS_POINT_CLOUD_`). A header holds `typedef struct nerve_msgs_Imu {…}
//! nerve_msgs_Imu;` with the same members (fixed arrays as C arrays, `FixedStr<N>` as
//! `char[N]`, other hand-written plain-data types as `_Alignas(A) uint8_t[N]`), a
//! `_Static_assert` of its size, alignment and every field's offset, and for a message
//! the macros `_TYPE_NAME`, `_LAYOUT_HASH`, `_SCHEMA` (the sealed schema text, for
//! `nerve_publisher_create`), `_HEAD_SIZE`, `_ELEMS_OFFSET` and, with a slice, `_ELEM_SIZE`
//! and the element's typedef `<C name>_elem`. A message whose head is empty (C has no
//! empty struct) gets the macros only. A service gets `_TYPE_NAME` and
//! `_SERVICE_TYPE_INIT`, an initializer of `nerve_service_type_t`; an action gets
//! `_TYPE_NAME` and includes its messages' headers. Names follow the C++ rules above and
//! C's keywords are refused too; two types of one C name, or a macro defined twice, are
//! [`CodegenError::Conflict`]s.

mod emit;
mod emit_c;
mod names;
pub mod ros2;

use nerve::message::schema::{Schema, SchemaError, Shape, StructShape};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

pub use names::snake_case;
use names::CppName;

/// A service type to generate: its name and the type names of its messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceDef {
    /// Service type name, e.g. `nerve_msgs/AddTwoInts`.
    pub name: String,
    /// Request message type name.
    pub request: String,
    /// Response message type name.
    pub response: String,
}

/// An action type to generate: its name and the type names of its messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionDef {
    /// Action type name, e.g. `nerve_msgs/Fibonacci`.
    pub name: String,
    /// Goal message type name.
    pub goal: String,
    /// Feedback message type name.
    pub feedback: String,
    /// Result message type name.
    pub result: String,
}

/// The language headers are generated in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// C11: `.h` headers of structs and macros.
    C,
    /// C++17: `.hpp` headers of structs and traits.
    Cpp,
}

impl Lang {
    /// The extension of its header files (`h`, `hpp`).
    pub fn extension(self) -> &'static str {
        match self {
            Lang::C => "h",
            Lang::Cpp => "hpp",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lang::C => "C",
            Lang::Cpp => "C++",
        })
    }
}

/// Why headers cannot be generated.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// A schema that does not hold together (its layout or its hash).
    #[error("schema of {name} is invalid: {source}")]
    InvalidSchema {
        /// The message type name.
        name: String,
        /// What is wrong.
        #[source]
        source: SchemaError,
    },
    /// One message type given twice, with different schemas.
    #[error("message type {name} is given twice with different schemas")]
    DuplicateType {
        /// The message type name.
        name: String,
    },
    /// A service or action refers to a message type that is not among the schemas.
    #[error("{referenced_by} refers to message type {name}, which is not among the schemas")]
    UnknownType {
        /// The service or action.
        referenced_by: String,
        /// The missing message type.
        name: String,
    },
    /// A name that cannot be a C++ (or C) name (not an identifier, a keyword, reserved).
    #[error("{context} {name:?} cannot be a {lang} name: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// What it names and where.
        context: String,
        /// Why not.
        reason: String,
        /// The language generated.
        lang: Lang,
    },
    /// One generated name with two different definitions (two different structs of one
    /// Rust name in one namespace, a service named as a message; in C, two types of one
    /// C name or one macro defined twice).
    #[error("{name} would be defined twice, differently: by {first} and by {second}")]
    Conflict {
        /// The C++ type (or C type or macro).
        name: String,
        /// What defines it first.
        first: String,
        /// What defines it again.
        second: String,
    },
    /// Two types whose header files would have the same path.
    #[error("{first} and {second} would both be written to {}", path.display())]
    PathCollision {
        /// The header path.
        path: PathBuf,
        /// One type.
        first: String,
        /// The other.
        second: String,
    },
    /// A layout C++ (or C) cannot express with the same bytes.
    #[error("{context}: cannot be expressed in {lang}: {reason}")]
    Unrepresentable {
        /// The type (and field) concerned.
        context: String,
        /// Why not.
        reason: String,
        /// The language generated.
        lang: Lang,
    },
}

/// The marker hash of an unsealed schema text: what `NERVE_MESSAGE` writes where it
/// cannot compute the layout hash (see [`seal`]).
pub const UNSEALED_HASH: &str = "0000000000000000";

/// Seals a schema text: decodes it like [`Schema::decode`], except that a text whose hash
/// is the unsealed marker ([`UNSEALED_HASH`], as `NERVE_MESSAGE` in `nerve/message.hpp`
/// writes it) gets the layout hash its layout computes to ([`Schema::computed_hash`]).
/// A text with any other hash must match its layout, as always; every layout rule is
/// checked either way. The sealed text is the returned schema's [`Schema::encode`].
pub fn seal(text: &str) -> Result<Schema, SchemaError> {
    match Schema::decode(text) {
        Err(SchemaError::HashMismatch {
            claimed: 0,
            computed,
            ..
        }) => {
            let marker = format!("|hash={UNSEALED_HASH}|");
            Schema::decode(&text.replacen(&marker, &format!("|hash={computed:016x}|"), 1))
        }
        other => other,
    }
}

/// Generates the C++ headers of `schemas` (message types) and of the `services` and
/// `actions` over them: `(relative path, content)` pairs sorted by path. Every type a
/// service or action names must be among `schemas`.
pub fn cpp_headers(
    schemas: &[Schema],
    services: &[ServiceDef],
    actions: &[ActionDef],
) -> Result<Vec<(PathBuf, String)>, CodegenError> {
    headers(Lang::Cpp, schemas, services, actions)
}

/// Generates the C headers of `schemas` (message types) and of the `services` and
/// `actions` over them, as [`cpp_headers`] does the C++ ones (see [C headers](#c-headers)).
pub fn c_headers(
    schemas: &[Schema],
    services: &[ServiceDef],
    actions: &[ActionDef],
) -> Result<Vec<(PathBuf, String)>, CodegenError> {
    headers(Lang::C, schemas, services, actions)
}

/// Generates the headers of `schemas`, `services` and `actions` in `lang`
/// ([`cpp_headers`] or [`c_headers`]).
pub fn headers(
    lang: Lang,
    schemas: &[Schema],
    services: &[ServiceDef],
    actions: &[ActionDef],
) -> Result<Vec<(PathBuf, String)>, CodegenError> {
    let catalog = Catalog::build(lang, schemas, services, actions)?;
    match lang {
        Lang::Cpp => catalog.emit(),
        Lang::C => catalog.emit_c(),
    }
}

/// The C++ headers of every built-in type of `nerve_msgs`: its messages, services and
/// actions.
pub fn builtin_headers() -> Result<Vec<(PathBuf, String)>, CodegenError> {
    builtin_headers_in(Lang::Cpp)
}

/// The C headers of every built-in type of `nerve_msgs`, as [`builtin_headers`].
pub fn builtin_c_headers() -> Result<Vec<(PathBuf, String)>, CodegenError> {
    builtin_headers_in(Lang::C)
}

/// The headers in `lang` of every built-in type of `nerve_msgs`.
pub fn builtin_headers_in(lang: Lang) -> Result<Vec<(PathBuf, String)>, CodegenError> {
    let services: Vec<ServiceDef> = nerve_msgs::srv::services()
        .into_iter()
        .map(|s| ServiceDef {
            name: s.name.into(),
            request: s.request.into(),
            response: s.response.into(),
        })
        .collect();
    let actions: Vec<ActionDef> = nerve_msgs::action::actions()
        .into_iter()
        .map(|a| ActionDef {
            name: a.name.into(),
            goal: a.goal.into(),
            feedback: a.feedback.into(),
            result: a.result.into(),
        })
        .collect();
    headers(lang, &nerve_msgs::schemas(), &services, &actions)
}

/// What one header defines.
enum Item<'a> {
    /// A struct nested in messages, under its Rust name; `users` name those messages.
    Struct {
        shape: &'a StructShape,
        users: BTreeSet<&'a str>,
    },
    /// A message type.
    Message(&'a Schema),
    /// A service type.
    Service(&'a ServiceDef),
    /// An action type.
    Action(&'a ActionDef),
}

impl Item<'_> {
    /// What defines it, for error messages.
    fn origin(&self) -> String {
        match self {
            Item::Struct { shape, users } => format!(
                "struct {} nested in {}",
                shape.name,
                users.iter().copied().collect::<Vec<_>>().join(", ")
            ),
            Item::Message(s) => format!("message {}", s.name),
            Item::Service(s) => format!("service {}", s.name),
            Item::Action(a) => format!("action {}", a.name),
        }
    }
}

/// Every type to generate, by C++ name, with the message types by Nerve name.
struct Catalog<'a> {
    lang: Lang,
    items: BTreeMap<CppName, Item<'a>>,
    messages: BTreeMap<&'a str, CppName>,
}

impl<'a> Catalog<'a> {
    fn build(
        lang: Lang,
        schemas: &'a [Schema],
        services: &'a [ServiceDef],
        actions: &'a [ActionDef],
    ) -> Result<Catalog<'a>, CodegenError> {
        let mut catalog = Catalog {
            lang,
            items: BTreeMap::new(),
            messages: BTreeMap::new(),
        };
        let mut by_name: BTreeMap<&str, &Schema> = BTreeMap::new();
        for schema in schemas {
            match by_name.get(schema.name.as_str()) {
                Some(seen) if *seen == schema => continue,
                Some(_) => {
                    return Err(CodegenError::DuplicateType {
                        name: schema.name.clone(),
                    })
                }
                None => {}
            }
            check_schema(schema)?;
            by_name.insert(&schema.name, schema);
            let cpp = names::cpp_name(&schema.name, lang)?;
            catalog.messages.insert(&schema.name, cpp.clone());
            // type names map to C++ names one to one: no two messages meet here
            catalog.items.insert(cpp, Item::Message(schema));
        }
        for schema in by_name.values() {
            let cpp = catalog.messages[schema.name.as_str()].clone();
            let mut nested = Vec::new();
            if let Shape::Struct(head) = &schema.head {
                for f in &head.fields {
                    collect_structs(&f.shape, &mut nested);
                }
            }
            if let Some(elem) = &schema.elem {
                collect_structs(elem, &mut nested);
            }
            for shape in nested {
                names::check_type_identifier(&shape.name).map_err(|reason| {
                    CodegenError::BadName {
                        name: shape.name.clone(),
                        context: format!("struct nested in {}", schema.name),
                        reason,
                        lang,
                    }
                })?;
                let nested = names::nested_name(&cpp, shape);
                if nested.ns != cpp.ns {
                    continue; // Nerve's own struct, in its installed header
                }
                catalog.add_struct(nested, shape, &schema.name)?;
            }
        }
        for s in services {
            for (role, msg) in [("request", &s.request), ("response", &s.response)] {
                catalog.require(&s.name, role, msg)?;
            }
            catalog.add(names::cpp_name(&s.name, lang)?, Item::Service(s))?;
        }
        for a in actions {
            for (role, msg) in [
                ("goal", &a.goal),
                ("feedback", &a.feedback),
                ("result", &a.result),
            ] {
                catalog.require(&a.name, role, msg)?;
            }
            catalog.add(names::cpp_name(&a.name, lang)?, Item::Action(a))?;
        }
        catalog.check_paths()?;
        Ok(catalog)
    }

    /// Fails unless message type `name` is in the catalog.
    fn require(&self, user: &str, role: &str, name: &str) -> Result<(), CodegenError> {
        if self.messages.contains_key(name) {
            return Ok(());
        }
        Err(CodegenError::UnknownType {
            referenced_by: format!("{user} (its {role})"),
            name: name.to_string(),
        })
    }

    /// Adds a nested struct, once: a struct of that name must be the same struct, a
    /// message of that name must have it as its head.
    fn add_struct(
        &mut self,
        cpp: CppName,
        shape: &'a StructShape,
        user: &'a str,
    ) -> Result<(), CodegenError> {
        match self.items.get_mut(&cpp) {
            None => {
                self.items.insert(
                    cpp,
                    Item::Struct {
                        shape,
                        users: BTreeSet::from([user]),
                    },
                );
                Ok(())
            }
            Some(Item::Struct { shape: s, users }) if *s == shape => {
                users.insert(user);
                Ok(())
            }
            Some(Item::Message(m)) if matches!(&m.head, Shape::Struct(h) if h == shape) => Ok(()),
            Some(other) => Err(CodegenError::Conflict {
                name: cpp.in_lang(self.lang),
                first: other.origin(),
                second: format!("struct {} nested in {user}", shape.name),
            }),
        }
    }

    /// Adds a service or an action, whose name no other type may have.
    fn add(&mut self, cpp: CppName, item: Item<'a>) -> Result<(), CodegenError> {
        if let Some(other) = self.items.get(&cpp) {
            return Err(CodegenError::Conflict {
                name: cpp.in_lang(self.lang),
                first: other.origin(),
                second: item.origin(),
            });
        }
        self.items.insert(cpp, item);
        Ok(())
    }

    /// Fails where two types would share a header file (names that differ only in case
    /// or underscores).
    fn check_paths(&self) -> Result<(), CodegenError> {
        let mut paths: BTreeMap<String, &CppName> = BTreeMap::new();
        for cpp in self.items.keys() {
            // compared in lower case: case-insensitive file systems would collide too
            let path = cpp.path(self.lang);
            let key = path.to_string_lossy().to_lowercase();
            if let Some(first) = paths.insert(key, cpp) {
                return Err(CodegenError::PathCollision {
                    path,
                    first: first.in_lang(self.lang),
                    second: cpp.in_lang(self.lang),
                });
            }
        }
        Ok(())
    }

    fn emit(&self) -> Result<Vec<(PathBuf, String)>, CodegenError> {
        let mut out = Vec::with_capacity(self.items.len());
        for (cpp, item) in &self.items {
            let text = match item {
                Item::Struct { shape, users } => emit::nested_struct(cpp, shape, users)?,
                Item::Message(schema) => emit::message(cpp, schema)?,
                Item::Service(s) => emit::service(cpp, s, &self.messages),
                Item::Action(a) => emit::action(cpp, a, &self.messages),
            };
            out.push((cpp.path(Lang::Cpp), text));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The C headers, after checking that no two of them define one name (two types of
    /// one C name, a macro of one type that is another's) and that no field is named as
    /// a macro (which would replace it).
    fn emit_c(&self) -> Result<Vec<(PathBuf, String)>, CodegenError> {
        let mut out = Vec::with_capacity(self.items.len());
        let mut defined: BTreeMap<String, String> = BTreeMap::new();
        let mut macros = BTreeSet::new();
        let mut fields = Vec::new();
        for (cpp, item) in &self.items {
            let file = match item {
                Item::Struct { shape, users } => emit_c::nested_struct(cpp, shape, users)?,
                Item::Message(schema) => emit_c::message(cpp, schema)?,
                Item::Service(s) => emit_c::service(cpp, s, &self.messages),
                Item::Action(a) => emit_c::action(cpp, a, &self.messages),
            };
            for name in file.types.into_iter().chain(file.macros.iter().cloned()) {
                if let Some(first) = defined.insert(name.clone(), item.origin()) {
                    return Err(CodegenError::Conflict {
                        name,
                        first,
                        second: item.origin(),
                    });
                }
            }
            macros.extend(file.macros);
            fields.extend(file.fields);
            out.push((cpp.path(Lang::C), file.text));
        }
        for (field, context) in fields {
            if macros.contains(&field) {
                return Err(CodegenError::BadName {
                    name: field,
                    context,
                    reason: "the name of a macro the headers define".into(),
                    lang: Lang::C,
                });
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// Checks that a schema holds together as a decoded one would: every layout rule, and a
/// layout hash that is the one its layout computes to.
fn check_schema(schema: &Schema) -> Result<(), CodegenError> {
    let invalid = |source| CodegenError::InvalidSchema {
        name: schema.name.clone(),
        source,
    };
    let decoded = Schema::decode(&schema.encode()).map_err(invalid)?;
    if decoded != *schema {
        return Err(invalid(SchemaError::Malformed(
            "it does not survive encoding (a name with a separator in it?)".into(),
        )));
    }
    Ok(())
}

/// The structs within `shape` (itself included), innermost first.
fn collect_structs<'a>(shape: &'a Shape, out: &mut Vec<&'a StructShape>) {
    match shape {
        Shape::Struct(s) => {
            for f in &s.fields {
                collect_structs(&f.shape, out);
            }
            out.push(s);
        }
        Shape::Array { elem, .. } => collect_structs(elem, out),
        Shape::Prim(_) | Shape::Opaque { .. } => {}
    }
}
