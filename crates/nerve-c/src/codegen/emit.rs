//! The text of the generated headers.

use super::names::{self, CppName};
use super::{ActionDef, CodegenError, Lang, ServiceDef};
use nerve::message::schema::{Prim, Schema, Shape, StructShape};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Tag XOR-ed into the layout hash of `nerve_msgs::FixedStr<N>` (a hand-written `Pod`):
/// an opaque shape of alignment 1 with this hash is a NUL-padded string (as nerve-py
/// recognises it).
const FIXED_STR_TAG: u64 = 0x5354_5221;

/// Longest piece of a string literal on one line.
const LITERAL_PIECE: usize = 72;

/// A header being written: what it includes, its namespace's part and the traits.
#[derive(Default)]
struct Header {
    /// Standard headers.
    std: BTreeSet<&'static str>,
    /// Generated headers it depends on (`nerve/msgs/time.hpp`).
    deps: BTreeSet<String>,
    /// Definitions in the type's namespace.
    body: String,
    /// Specialisations in namespace `nerve`.
    traits: String,
}

impl Header {
    /// The whole file: `comment` first.
    fn finish(mut self, cpp: &CppName, comment: &str) -> String {
        self.std.extend(["cstddef", "cstdint", "string_view"]);
        let own = include_path(cpp);
        self.deps.remove(&own);
        let mut out = String::new();
        let _ = writeln!(out, "// {comment}");
        out.push_str("#pragma once\n\n");
        for h in &self.std {
            let _ = writeln!(out, "#include <{h}>");
        }
        out.push('\n');
        out.push_str("#include <nerve/traits.hpp>\n");
        for d in &self.deps {
            let _ = writeln!(out, "#include <{d}>");
        }
        let ns = cpp.namespace();
        let _ = write!(
            out,
            "\nnamespace {ns} {{\n\n{}}}  // namespace {ns}\n",
            self.body
        );
        let _ = write!(
            out,
            "\nnamespace nerve {{\n\n{}}}  // namespace nerve\n",
            self.traits
        );
        out
    }

    /// Writes the C++ type of `shape`, as a member of a struct in `cpp`'s namespace
    /// (`qualified`: as written anywhere else), noting the headers it needs.
    fn cpp_type(
        &mut self,
        shape: &Shape,
        cpp: &CppName,
        qualified: bool,
        context: &dyn Fn() -> String,
    ) -> Result<String, CodegenError> {
        let unrepresentable = |reason: String| CodegenError::Unrepresentable {
            context: context(),
            reason,
            lang: Lang::Cpp,
        };
        Ok(match shape {
            Shape::Prim(p) => prim_type(*p)
                .ok_or_else(|| unrepresentable(format!("{} has no portable C++ type", p.name())))?,
            Shape::Array { elem, len } => {
                if *len == 0 {
                    return Err(unrepresentable(
                        "a zero-length array takes bytes in C++".into(),
                    ));
                }
                self.std.insert("array");
                let elem = self.cpp_type(elem, cpp, qualified, context)?;
                format!("std::array<{elem}, {len}>")
            }
            Shape::Struct(s) => {
                if s.size == 0 {
                    return Err(unrepresentable(format!(
                        "the empty struct {} takes a byte in C++",
                        s.name
                    )));
                }
                let nested = super::names::nested_name(cpp, s);
                self.deps.insert(include_path(&nested));
                if qualified || nested.ns != cpp.ns {
                    nested.qualified()
                } else {
                    s.name.clone()
                }
            }
            Shape::Opaque { size, align, hash } => {
                if *size == 0 {
                    return Err(unrepresentable(
                        "an empty plain-data type takes a byte in C++".into(),
                    ));
                }
                if *align == 1 && is_fixed_str(*size, *hash) {
                    format!("::nerve::FixedStr<{size}>")
                } else if size % align != 0 {
                    return Err(unrepresentable(format!(
                        "an opaque type of {size} bytes aligned to {align}: C++ rounds its \
                         size up to its alignment"
                    )));
                } else {
                    format!("::nerve::Opaque<{size}, {align}, 0x{hash:016x}ULL>")
                }
            }
        })
    }

    /// The definition of struct `cpp` (its fields, their static_asserts) and its
    /// `struct_traits` under the Rust name in `shape`.
    fn struct_def(
        &mut self,
        cpp: &CppName,
        shape: &StructShape,
        origin: &str,
    ) -> Result<(), CodegenError> {
        let name = &cpp.name;
        let mut fields = Vec::with_capacity(shape.fields.len());
        // the types its fields name: a field of the same name would change their meaning
        let mut type_names = BTreeSet::from([name.as_str()]);
        for f in &shape.fields {
            let mut structs = Vec::new();
            super::collect_structs(&f.shape, &mut structs);
            type_names.extend(structs.iter().map(|s| s.name.as_str()));
        }
        for f in &shape.fields {
            let context = || format!("field {}::{} (in {origin})", shape.name, f.name);
            let field = names::field_name(&f.name)
                .and_then(|n| {
                    if type_names.contains(n.as_str()) {
                        Err("the name of a type in the same struct".into())
                    } else {
                        Ok(n)
                    }
                })
                .map_err(|reason| CodegenError::BadName {
                    name: f.name.clone(),
                    context: format!("field of struct {} (in {origin})", shape.name),
                    reason,
                    lang: Lang::Cpp,
                })?;
            let member = self.cpp_type(&f.shape, cpp, false, &context)?;
            let traits = self.cpp_type(&f.shape, cpp, true, &context)?;
            fields.push((field, member, traits, f));
        }
        let natural = shape
            .fields
            .iter()
            .map(|f| f.shape.align())
            .max()
            .unwrap_or(1);
        let alignas = if shape.align > natural {
            format!("alignas({}) ", shape.align)
        } else {
            String::new()
        };
        let b = &mut self.body;
        let _ = writeln!(
            b,
            "/// Rust `{}`: {} bytes, aligned to {}.",
            shape.name, shape.size, shape.align
        );
        let _ = writeln!(b, "struct {alignas}{name} {{");
        for (field, member, _, _) in &fields {
            let _ = writeln!(b, "  {member} {field};");
        }
        b.push_str("};\n\n");
        if shape.size == 0 {
            // C++ gives an empty struct one byte; `message_traits::head_size` says 0
            let _ = writeln!(b, "static_assert(std::is_empty_v<{name}>);");
        } else {
            let _ = writeln!(b, "static_assert(sizeof({name}) == {});", shape.size);
        }
        let _ = writeln!(b, "static_assert(alignof({name}) == {});", shape.align);
        let _ = writeln!(b, "static_assert(std::is_standard_layout_v<{name}>);");
        let _ = writeln!(b, "static_assert(std::is_trivially_copyable_v<{name}>);");
        for (field, _, _, f) in &fields {
            let _ = writeln!(
                b,
                "static_assert(offsetof({name}, {field}) == {});",
                f.offset
            );
        }
        b.push('\n');
        self.std.insert("type_traits");
        if shape.size > 0 {
            let t = &mut self.traits;
            let _ = writeln!(
                t,
                "template <>\nstruct struct_traits<{}> {{",
                cpp.qualified()
            );
            let _ = writeln!(
                t,
                "  static constexpr std::string_view name = {};",
                literal(&shape.name)
            );
            t.push_str("  template <class V>\n  static void visit(V& v) {\n");
            for (field, _, traits, f) in &fields {
                let _ = writeln!(
                    t,
                    "    v(::nerve::type_tag<{traits}>{{}}, {}, {});",
                    literal(field),
                    f.offset
                );
            }
            t.push_str("  }\n};\n\n");
        }
        Ok(())
    }
}

/// The header of a struct nested in the messages `users`.
pub(super) fn nested_struct(
    cpp: &CppName,
    shape: &StructShape,
    users: &BTreeSet<&str>,
) -> Result<String, CodegenError> {
    let users: Vec<&str> = users.iter().copied().collect();
    let mut h = Header::default();
    h.struct_def(cpp, shape, &users.join(", "))?;
    let comment = format!(
        "generated by `nerve types gen-cpp` from the schema of {} (struct {}); do not edit.",
        users.join(", "),
        shape.name
    );
    Ok(h.finish(cpp, &comment))
}

/// The header of a message type: its struct and its `message_traits`.
pub(super) fn message(cpp: &CppName, schema: &Schema) -> Result<String, CodegenError> {
    let mut h = Header::default();
    let name = &cpp.name;
    match &schema.head {
        Shape::Struct(s) => h.struct_def(cpp, s, &schema.name)?,
        Shape::Opaque { size, align, hash } => {
            if *size == 0 || size % align != 0 {
                return Err(CodegenError::Unrepresentable {
                    context: schema.name.clone(),
                    reason: format!("an opaque head of {size} bytes aligned to {align}"),
                    lang: Lang::Cpp,
                });
            }
            h.std.insert("array");
            h.std.insert("type_traits");
            let _ = write!(
                h.body,
                "/// A hand-written plain-data type (layout hash {hash:016x}): only its size \
                 and alignment are known.\nstruct alignas({align}) {name} {{\n  \
                 std::array<std::uint8_t, {size}> bytes;\n}};\n\n\
                 static_assert(sizeof({name}) == {size});\n\
                 static_assert(alignof({name}) == {align});\n\
                 static_assert(std::is_standard_layout_v<{name}>);\n\n"
            );
        }
        Shape::Prim(_) | Shape::Array { .. } => {
            return Err(CodegenError::Unrepresentable {
                context: schema.name.clone(),
                reason: "the head is not a struct".into(),
                lang: Lang::Cpp,
            })
        }
    }
    let head_size = schema.head.size();
    let (elem_type, elems_offset) = match &schema.elem {
        None => ("::nerve::no_elem".to_string(), head_size),
        Some(e) => {
            let context = || format!("slice element of {}", schema.name);
            let t = h.cpp_type(e, cpp, true, &context)?;
            (t, head_size.div_ceil(e.align()) * e.align())
        }
    };
    let t = &mut h.traits;
    let _ = writeln!(
        t,
        "template <>\nstruct message_traits<{}> {{",
        cpp.qualified()
    );
    let _ = writeln!(t, "  using elem_type = {elem_type};");
    let _ = writeln!(
        t,
        "  static constexpr std::string_view type_name = {};",
        literal(&schema.name)
    );
    let _ = writeln!(
        t,
        "  static constexpr std::uint64_t layout_hash = 0x{:016x}ULL;",
        schema.layout_hash
    );
    t.push_str("  static constexpr bool sealed = true;\n");
    let _ = writeln!(t, "  static constexpr std::size_t head_size = {head_size};");
    let _ = writeln!(
        t,
        "  static constexpr std::size_t elems_offset = {elems_offset};"
    );
    let _ = writeln!(
        t,
        "  static constexpr std::string_view schema_text =\n{};",
        literal_lines(&schema.encode(), "      ")
    );
    t.push_str("};\n\n");
    let mut comment = format!(
        "generated by `nerve types gen-cpp` from schema {} (layout {:016x}); do not edit.",
        schema.name, schema.layout_hash
    );
    if let Some(f) = &schema.foreign {
        let _ = write!(
            comment,
            "\n// Carries {} type {} ({}) in its slice.",
            f.kind.name(),
            schema.name,
            f.type_hash
        );
    }
    Ok(h.finish(cpp, &comment))
}

/// The header of a service type: a tag struct and its `service_traits`.
pub(super) fn service(cpp: &CppName, s: &ServiceDef, messages: &BTreeMap<&str, CppName>) -> String {
    let roles = [("request", &s.request), ("response", &s.response)];
    tag_header(cpp, "service", &s.name, &roles, messages)
}

/// The header of an action type: a tag struct and its `action_traits`.
pub(super) fn action(cpp: &CppName, a: &ActionDef, messages: &BTreeMap<&str, CppName>) -> String {
    let roles = [
        ("goal", &a.goal),
        ("feedback", &a.feedback),
        ("result", &a.result),
    ];
    tag_header(cpp, "action", &a.name, &roles, messages)
}

/// A tag struct for service or action `type_name` and its traits naming the message
/// types of its `roles` (all in `messages`: the catalog checked them).
fn tag_header(
    cpp: &CppName,
    kind: &str,
    type_name: &str,
    roles: &[(&str, &String)],
    messages: &BTreeMap<&str, CppName>,
) -> String {
    let mut h = Header::default();
    let name = &cpp.name;
    let described: Vec<String> = roles.iter().map(|(r, m)| format!("{r} {m}")).collect();
    let _ = write!(
        h.body,
        "/// The {kind} type {type_name} ({}): a tag for `nerve::{kind}_traits`.\n\
         struct {name} {{}};\n\n",
        described.join(", ")
    );
    let t = &mut h.traits;
    let _ = writeln!(
        t,
        "template <>\nstruct {kind}_traits<{}> {{",
        cpp.qualified()
    );
    let _ = writeln!(
        t,
        "  static constexpr std::string_view type_name = {};",
        literal(type_name)
    );
    for (role, msg) in roles {
        if let Some(m) = messages.get(msg.as_str()) {
            h.deps.insert(include_path(m));
            let _ = writeln!(t, "  using {role} = {};", m.qualified());
        }
    }
    t.push_str("};\n\n");
    let comment =
        format!("generated by `nerve types gen-cpp` from {kind} {type_name}; do not edit.");
    h.finish(cpp, &comment)
}

/// The `#include` path of a type's header (always with `/`).
fn include_path(cpp: &CppName) -> String {
    let mut p = cpp.ns.join("/");
    let _ = write!(p, "/{}.hpp", names::snake_case(&cpp.name));
    p
}

/// The C++ type of a primitive (none for 128-bit integers, which C++ has only as
/// compiler extensions).
fn prim_type(p: Prim) -> Option<String> {
    let t = match p {
        Prim::U8 => "std::uint8_t",
        Prim::U16 => "std::uint16_t",
        Prim::U32 => "std::uint32_t",
        Prim::U64 => "std::uint64_t",
        Prim::I8 => "std::int8_t",
        Prim::I16 => "std::int16_t",
        Prim::I32 => "std::int32_t",
        Prim::I64 => "std::int64_t",
        Prim::F32 => "float",
        Prim::F64 => "double",
        Prim::U128 | Prim::I128 => return None,
    };
    Some(t.to_string())
}

/// Whether an opaque shape is a `nerve_msgs::FixedStr<size>`.
pub(super) fn is_fixed_str(size: usize, hash: u64) -> bool {
    let bytes = Shape::Array {
        elem: Box::new(Shape::Prim(Prim::U8)),
        len: size,
    };
    hash == bytes.layout_hash() ^ FIXED_STR_TAG
}

/// `s` as one C++ string literal.
pub(super) fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        escape_into(c, &mut out);
    }
    out.push('"');
    out
}

/// A schema text as adjacent C++ string literals, one a line, each indented by
/// `indent`: the fields before the structs on the first line, then one struct a line
/// (`|struct …`), a long line broken before a space or a `|`, anything still longer than
/// [`LITERAL_PIECE`] characters (a foreign definition) cut anywhere.
pub(super) fn literal_lines(s: &str, indent: &str) -> String {
    let mut pieces: Vec<&str> = Vec::new();
    let mut rest = s;
    while let Some((at, _)) = rest.match_indices("|struct ").find(|(i, _)| *i > 0) {
        let (piece, tail) = rest.split_at(at);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    let mut lines = Vec::new();
    for piece in pieces {
        for part in wrap(piece) {
            let mut line = format!("{indent}\"");
            for c in part.chars() {
                escape_into(c, &mut line);
            }
            line.push('"');
            lines.push(line);
        }
    }
    lines.join("\n")
}

/// `s` in parts of at most [`LITERAL_PIECE`] characters, broken before a space or a `|`
/// where it can be.
fn wrap(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s;
    while rest.chars().count() > LITERAL_PIECE {
        let limit = rest
            .char_indices()
            .nth(LITERAL_PIECE)
            .map_or(rest.len(), |(i, _)| i);
        let cut = match rest[..limit].rfind([' ', '|']) {
            Some(i) if i > 0 => i,
            _ => limit,
        };
        let (part, tail) = rest.split_at(cut);
        parts.push(part);
        rest = tail;
    }
    parts.push(rest);
    parts
}

/// Appends `c` escaped for a C++ string literal: quotes, backslashes and `?` (no
/// trigraphs) escaped, anything but printable ASCII as octal escapes of its UTF-8 bytes
/// (octal escapes end after three digits, unlike `\x`).
fn escape_into(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '?' => out.push_str("\\?"),
        ' '..='~' => out.push(c),
        _ => {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_what_cpp_would_misread() {
        assert_eq!(literal(r#"a"b\c??=d"#), r#""a\"b\\c\?\?=d""#);
        assert_eq!(literal("é\n1"), r#""\303\251\0121""#);
        let long = "x".repeat(LITERAL_PIECE + 1);
        assert_eq!(
            literal_lines(&long, "  "),
            format!("  \"{}\"\n  \"x\"", "x".repeat(LITERAL_PIECE))
        );
        assert_eq!(literal_lines("", ""), "\"\"");
        let text = format!("a|b|struct A 1 1|struct B {}", "w ".repeat(LITERAL_PIECE));
        let lines = literal_lines(&text, "");
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(lines[..2], ["\"a|b\"", "\"|struct A 1 1\""]);
        assert!(lines[2].starts_with("\"|struct B w w"), "{lines:?}");
        assert!(
            lines[3].starts_with("\" w"),
            "broken before a space: {lines:?}"
        );
        let joined: String = lines.iter().map(|l| &l[1..l.len() - 1]).collect();
        assert_eq!(joined, text);
    }

    #[test]
    fn fixed_strings_are_recognised() {
        use nerve::Pod;
        let Shape::Opaque { size, hash, .. } = nerve_msgs::FixedStr::<24>::shape() else {
            panic!("FixedStr is opaque");
        };
        assert!(is_fixed_str(size, hash));
        assert!(!is_fixed_str(size + 1, hash));
    }
}
