//! The text of the generated C headers.

use super::emit::{is_fixed_str, literal, literal_lines};
use super::names::{self, CppName};
use super::{ActionDef, CodegenError, Lang, ServiceDef};
use nerve::message::schema::{Prim, Schema, Shape, StructShape};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The longest string literal C11 requires a compiler to take (`-Woverlength-strings`,
/// part of `-pedantic`, warns beyond it).
const C11_LITERAL_LIMIT: usize = 4095;

/// A generated C header and the names it defines.
pub(super) struct CFile {
    /// The header's text.
    pub text: String,
    /// The types it defines (`nerve_msgs_Imu`, `nerve_msgs_PointCloud_elem`).
    pub types: Vec<String>,
    /// The macros it defines.
    pub macros: Vec<String>,
    /// The fields of its structs, each with what it is a field of (for errors).
    pub fields: Vec<(String, String)>,
}

/// A header being written.
#[derive(Default)]
struct CHeader {
    /// Generated headers it depends on (`nerve/msgs/time.h`).
    deps: BTreeSet<String>,
    /// Its definitions.
    body: String,
    /// The types it defines.
    types: Vec<String>,
    /// The macros it defines.
    macros: Vec<String>,
    /// The fields of its structs, with their context.
    fields: Vec<(String, String)>,
}

/// A C declarator's parts: `align` (0: none) and `base` before the name, `dims` after.
struct CType {
    /// The element type (`double`, `nerve_msgs_Time`, `char`).
    base: String,
    /// Array lengths, outermost first.
    dims: Vec<usize>,
    /// An `_Alignas` the declaration needs (0: none).
    align: usize,
    /// What a reader should know (a fixed string, an opaque type).
    note: Option<String>,
}

impl CType {
    /// `base name[d0][d1]`, with `_Alignas(align)` first where `align` is over 1.
    fn declare(&self, name: &str, align: usize) -> String {
        let mut out = String::new();
        if align > 1 {
            let _ = write!(out, "_Alignas({align}) ");
        }
        let _ = write!(out, "{} {name}", self.base);
        for d in &self.dims {
            let _ = write!(out, "[{d}]");
        }
        out
    }
}

impl CHeader {
    /// The whole file: `comment` first.
    fn finish(mut self, cpp: &CppName, comment: &str) -> CFile {
        let own = include_path(cpp);
        self.deps.remove(&own);
        let mut out = String::new();
        let _ = writeln!(out, "/* {} */", comment_text(comment));
        out.push_str("#pragma once\n\n#include <stddef.h>\n#include <stdint.h>\n");
        if !self.deps.is_empty() {
            out.push('\n');
        }
        for d in &self.deps {
            let _ = writeln!(out, "#include <{d}>");
        }
        out.push('\n');
        out.push_str(self.body.trim_end());
        out.push('\n');
        CFile {
            text: out,
            types: self.types,
            macros: self.macros,
            fields: self.fields,
        }
    }

    /// Writes `#define name value` (`value` may span lines, each ending in `\`).
    fn define(&mut self, name: String, value: &str) {
        let _ = writeln!(self.body, "#define {name} {value}");
        self.macros.push(name);
    }

    /// The C type of `shape` as a member of a struct in `cpp`'s namespace, noting the
    /// headers it needs.
    fn c_type(
        &mut self,
        shape: &Shape,
        cpp: &CppName,
        context: &dyn Fn() -> String,
    ) -> Result<CType, CodegenError> {
        let unrepresentable = |reason: String| CodegenError::Unrepresentable {
            context: context(),
            reason,
            lang: Lang::C,
        };
        let plain = |base: &str| CType {
            base: base.to_string(),
            dims: Vec::new(),
            align: 0,
            note: None,
        };
        Ok(match shape {
            Shape::Prim(p) => {
                plain(prim_type(*p).ok_or_else(|| {
                    unrepresentable(format!("{} has no portable C type", p.name()))
                })?)
            }
            Shape::Array { elem, len } => {
                if *len == 0 {
                    return Err(unrepresentable(
                        "a zero-length array is not standard C".into(),
                    ));
                }
                let mut inner = self.c_type(elem, cpp, context)?;
                inner.dims.insert(0, *len);
                inner
            }
            Shape::Struct(s) => {
                if s.size == 0 {
                    return Err(unrepresentable(format!(
                        "the empty struct {} is not standard C",
                        s.name
                    )));
                }
                let nested = super::names::nested_name(cpp, s);
                self.deps.insert(include_path(&nested));
                plain(&nested.c_name())
            }
            Shape::Opaque { size, align, hash } => {
                if *size == 0 {
                    return Err(unrepresentable(
                        "an empty plain-data type is not standard C".into(),
                    ));
                }
                if *align == 1 && is_fixed_str(*size, *hash) {
                    CType {
                        base: "char".into(),
                        dims: vec![*size],
                        align: 0,
                        note: Some(format!("FixedStr<{size}>: UTF-8 text, NUL-padded")),
                    }
                } else if size % align != 0 {
                    return Err(unrepresentable(format!(
                        "an opaque type of {size} bytes aligned to {align}: an array of it \
                         would be padded"
                    )));
                } else {
                    CType {
                        base: "uint8_t".into(),
                        dims: vec![*size],
                        align: *align,
                        note: Some(format!(
                            "a hand-written plain-data type (layout hash {hash:016x})"
                        )),
                    }
                }
            }
        })
    }

    /// The typedef of struct `cpp` (its fields, their `_Static_assert`s), as Rust
    /// `shape` lays it out.
    fn struct_def(
        &mut self,
        cpp: &CppName,
        shape: &StructShape,
        origin: &str,
    ) -> Result<(), CodegenError> {
        let name = cpp.c_name();
        let mut fields = Vec::with_capacity(shape.fields.len());
        for f in &shape.fields {
            let context = || format!("field {}::{} (in {origin})", shape.name, f.name);
            let field = names::c_field_name(&f.name).map_err(|reason| CodegenError::BadName {
                name: f.name.clone(),
                context: format!("field of struct {} (in {origin})", shape.name),
                reason,
                lang: Lang::C,
            })?;
            let ty = self.c_type(&f.shape, cpp, &context)?;
            self.fields.push((
                field.clone(),
                format!("field of struct {} (in {origin})", shape.name),
            ));
            fields.push((field, ty, f));
        }
        let natural = shape
            .fields
            .iter()
            .map(|f| f.shape.align())
            .max()
            .unwrap_or(1);
        let b = &mut self.body;
        let _ = writeln!(
            b,
            "/* Rust `{}`: {} bytes, aligned to {}. */",
            shape.name, shape.size, shape.align
        );
        let _ = writeln!(b, "typedef struct {name} {{");
        for (i, (field, ty, _)) in fields.iter().enumerate() {
            // the struct's alignment, where it is stronger than its fields', goes on the
            // first member
            let mut align = ty.align;
            if i == 0 && shape.align > natural {
                align = align.max(shape.align);
            }
            let _ = write!(b, "  {};", ty.declare(field, align));
            if let Some(note) = &ty.note {
                let _ = write!(b, " /* {} */", comment_text(note));
            }
            b.push('\n');
        }
        let _ = writeln!(b, "}} {name};\n");
        let _ = writeln!(
            b,
            "_Static_assert(sizeof({name}) == {}, \"{name}: {}\");",
            shape.size,
            bytes(shape.size)
        );
        let _ = writeln!(
            b,
            "_Static_assert(_Alignof({name}) == {0}, \"{name}: aligned to {0}\");",
            shape.align
        );
        for (field, _, f) in &fields {
            let _ = writeln!(
                b,
                "_Static_assert(offsetof({name}, {field}) == {0}, \"{name}.{field}: at {0}\");",
                f.offset
            );
        }
        b.push('\n');
        self.types.push(name);
        Ok(())
    }
}

/// The header of a struct nested in the messages `users`.
pub(super) fn nested_struct(
    cpp: &CppName,
    shape: &StructShape,
    users: &BTreeSet<&str>,
) -> Result<CFile, CodegenError> {
    let users: Vec<&str> = users.iter().copied().collect();
    let mut h = CHeader::default();
    h.struct_def(cpp, shape, &users.join(", "))?;
    let comment = format!(
        "generated by `nerve types gen-c` from the schema of {} (struct {}); do not edit.",
        users.join(", "),
        shape.name
    );
    Ok(h.finish(cpp, &comment))
}

/// The header of a message type: its struct and its macros.
pub(super) fn message(cpp: &CppName, schema: &Schema) -> Result<CFile, CodegenError> {
    let mut h = CHeader::default();
    let name = cpp.c_name();
    let unrepresentable = |reason: String| CodegenError::Unrepresentable {
        context: schema.name.clone(),
        reason,
        lang: Lang::C,
    };
    match &schema.head {
        Shape::Struct(s) if s.size == 0 && s.fields.is_empty() => {
            let _ = writeln!(
                h.body,
                "/* Rust `{}`: 0 bytes. C has no empty struct: no type is defined, and a \
                 message of\n * {} is zero bytes of head. */\n",
                s.name, schema.name
            );
        }
        Shape::Struct(s) => h.struct_def(cpp, s, &schema.name)?,
        Shape::Opaque { size, align, hash } => {
            if *size == 0 || size % align != 0 {
                return Err(unrepresentable(format!(
                    "an opaque head of {size} bytes aligned to {align}"
                )));
            }
            let storage = CType {
                base: "uint8_t".into(),
                dims: vec![*size],
                align: 0,
                note: None,
            };
            let _ = write!(
                h.body,
                "/* A hand-written plain-data type (layout hash {hash:016x}): only its size \
                 and alignment\n * are known. */\ntypedef struct {name} {{\n  {};\n}} {name};\n\n\
                 _Static_assert(sizeof({name}) == {size}, \"{name}: {}\");\n\
                 _Static_assert(_Alignof({name}) == {align}, \"{name}: aligned to {align}\");\n\n",
                storage.declare("bytes", *align),
                bytes(*size)
            );
            h.types.push(name.clone());
        }
        Shape::Prim(_) | Shape::Array { .. } => {
            return Err(unrepresentable("the head is not a struct".into()))
        }
    }
    let head_size = schema.head.size();
    let prefix = cpp.macro_prefix();
    let text = schema.encode();
    let _ = writeln!(
        h.body,
        "/* The message type {}: its name, layout hash and schema text (for\n * \
         nerve_publisher_create and nerve_subscriber_create), the size of its head and \
         where\n * the elements of its slice start. */",
        comment_text(&schema.name)
    );
    h.define(format!("{prefix}_TYPE_NAME"), &literal(&schema.name));
    h.define(
        format!("{prefix}_LAYOUT_HASH"),
        &format!("UINT64_C(0x{:016x})", schema.layout_hash),
    );
    let elems_offset = match &schema.elem {
        None => head_size,
        Some(e) => head_size.div_ceil(e.align()) * e.align(),
    };
    h.define(format!("{prefix}_HEAD_SIZE"), &head_size.to_string());
    h.define(format!("{prefix}_ELEMS_OFFSET"), &elems_offset.to_string());
    if text.len() > C11_LITERAL_LIMIT {
        let _ = writeln!(
            h.body,
            "/* {} characters: longer than the {C11_LITERAL_LIMIT} C11 requires compilers to \
             take\n * (GCC and Clang take it; -pedantic warns: -Wno-overlength-strings). */",
            text.len()
        );
    }
    let lines = literal_lines(&text, "  ").replace('\n', " \\\n");
    h.define(format!("{prefix}_SCHEMA"), &format!("\\\n{lines}"));
    if let Some(e) = &schema.elem {
        let context = || format!("slice element of {}", schema.name);
        let ty = h.c_type(e, cpp, &context)?;
        let elem = format!("{name}_elem");
        let _ = writeln!(
            h.body,
            "\n/* The elements of its slice, from {prefix}_ELEMS_OFFSET on: {} each,\n * \
             aligned to {}. */",
            bytes(e.size()),
            e.align()
        );
        if ty.align > 1 {
            // no _Alignas in a typedef: a comment says what the element is
            let _ = writeln!(
                h.body,
                "/* An element is {}. */",
                comment_text(ty.note.as_deref().unwrap_or("opaque"))
            );
        } else {
            let _ = write!(h.body, "typedef {};", ty.declare(&elem, 0));
            if let Some(note) = &ty.note {
                let _ = write!(h.body, " /* {} */", comment_text(note));
            }
            let _ = writeln!(
                h.body,
                "\n_Static_assert(sizeof({elem}) == {}, \"{elem}: {}\");",
                e.size(),
                bytes(e.size())
            );
            h.types.push(elem);
        }
        h.define(format!("{prefix}_ELEM_SIZE"), &e.size().to_string());
    }
    let mut comment = format!(
        "generated by `nerve types gen-c` from schema {} (layout {:016x}); do not edit.",
        schema.name, schema.layout_hash
    );
    if let Some(f) = &schema.foreign {
        let _ = write!(
            comment,
            "\n * Carries {} type {} ({}) in its slice.",
            f.kind.name(),
            schema.name,
            f.type_hash
        );
    }
    Ok(h.finish(cpp, &comment))
}

/// The header of a service type: its name and an initializer of `nerve_service_type_t`
/// from its messages' macros.
pub(super) fn service(cpp: &CppName, s: &ServiceDef, messages: &BTreeMap<&str, CppName>) -> CFile {
    let mut h = CHeader::default();
    let prefix = cpp.macro_prefix();
    let request = &messages[s.request.as_str()];
    let response = &messages[s.response.as_str()];
    h.deps.insert(include_path(request));
    h.deps.insert(include_path(response));
    let _ = writeln!(
        h.body,
        "/* The service type {} (request {}, response {}). */",
        comment_text(&s.name),
        comment_text(&s.request),
        comment_text(&s.response)
    );
    h.define(format!("{prefix}_TYPE_NAME"), &literal(&s.name));
    let (req, resp) = (request.macro_prefix(), response.macro_prefix());
    let _ = writeln!(
        h.body,
        "\n/* An initializer of nerve.h's nerve_service_type_t for it (layout hashes checked,\n \
         * the default largest payload):\n *   nerve_service_type_t ty = \
         {prefix}_SERVICE_TYPE_INIT;\n *   nerve_client_create(node, \"/add\", &ty, &client); */"
    );
    h.define(
        format!("{prefix}_SERVICE_TYPE_INIT"),
        &format!(
            "\\\n  {{ \\\n    .type_name = {prefix}_TYPE_NAME, \\\n    \
             .request_schema = {req}_SCHEMA, \\\n    .request_hash = {req}_LAYOUT_HASH, \\\n    \
             .response_schema = {resp}_SCHEMA, \\\n    \
             .response_hash = {resp}_LAYOUT_HASH, \\\n    .max_payload = 0, \\\n  }}"
        ),
    );
    let comment = format!(
        "generated by `nerve types gen-c` from service {}; do not edit.",
        s.name
    );
    h.finish(cpp, &comment)
}

/// The header of an action type: its name and its messages' headers (the C API takes
/// an action by its type name).
pub(super) fn action(cpp: &CppName, a: &ActionDef, messages: &BTreeMap<&str, CppName>) -> CFile {
    let mut h = CHeader::default();
    let prefix = cpp.macro_prefix();
    let mut roles = Vec::new();
    for (role, msg) in [
        ("goal", &a.goal),
        ("feedback", &a.feedback),
        ("result", &a.result),
    ] {
        let m = &messages[msg.as_str()];
        h.deps.insert(include_path(m));
        roles.push(format!(
            " *   {role:<9}{} ({}_*)\n",
            comment_text(msg),
            m.macro_prefix()
        ));
    }
    let _ = writeln!(
        h.body,
        "/* The action type {}:\n{} * nerve_action_client_create and \
         nerve_action_server_create take it by its type name\n * (built-in types); goals, \
         feedback and results are those messages' bytes. */",
        comment_text(&a.name),
        roles.concat()
    );
    h.define(format!("{prefix}_TYPE_NAME"), &literal(&a.name));
    let comment = format!(
        "generated by `nerve types gen-c` from action {}; do not edit.",
        a.name
    );
    h.finish(cpp, &comment)
}

/// The `#include` path of a type's C header (always with `/`).
fn include_path(cpp: &CppName) -> String {
    let mut p = cpp.ns.join("/");
    let _ = write!(p, "/{}.h", names::snake_case(&cpp.name));
    p
}

/// `n` bytes, in words (`1 byte`, `8 bytes`).
fn bytes(n: usize) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{n} bytes")
    }
}

/// `s` safe inside a `/* */` comment.
fn comment_text(s: &str) -> String {
    s.replace("*/", "* /")
}

/// The C type of a primitive (none for 128-bit integers, which C has only as compiler
/// extensions).
fn prim_type(p: Prim) -> Option<&'static str> {
    Some(match p {
        Prim::U8 => "uint8_t",
        Prim::U16 => "uint16_t",
        Prim::U32 => "uint32_t",
        Prim::U64 => "uint64_t",
        Prim::I8 => "int8_t",
        Prim::I16 => "int16_t",
        Prim::I32 => "int32_t",
        Prim::I64 => "int64_t",
        Prim::F32 => "float",
        Prim::F64 => "double",
        Prim::U128 | Prim::I128 => return None,
    })
}
